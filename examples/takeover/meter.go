package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cutline/cutline/objstore"
)

// meter wraps a bucket to count one party's object requests and the time
// they took, and to let the demonstration wait until given keys were
// created through it. It is part of the demonstration, not of the library:
// a host would export such numbers as metrics.
type meter struct {
	inner objstore.Bucket

	mu      sync.Mutex
	counts  opCounts
	created map[string]bool // keys whose Create succeeded
	changed chan struct{}   // closed and replaced after every create
}

// opCounts is a party's request count and total request time per
// operation.
type opCounts struct {
	creates, reads, deletes, lists int
	timeCreate, timeRead           time.Duration
	timeDelete, timeList           time.Duration
}

func (c *opCounts) add(o opCounts) {
	c.creates += o.creates
	c.reads += o.reads
	c.deletes += o.deletes
	c.lists += o.lists
	c.timeCreate += o.timeCreate
	c.timeRead += o.timeRead
	c.timeDelete += o.timeDelete
	c.timeList += o.timeList
}

var _ objstore.Bucket = (*meter)(nil)

func newMeter(b objstore.Bucket) *meter {
	return &meter{inner: b, created: make(map[string]bool), changed: make(chan struct{})}
}

func (m *meter) Name() string { return m.inner.Name() }

func (m *meter) Create(ctx context.Context, key string, data []byte) error {
	start := time.Now()
	err := m.inner.Create(ctx, key, data)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.counts.creates++
	m.counts.timeCreate += time.Since(start)
	if err == nil {
		m.created[key] = true
	}
	close(m.changed)
	m.changed = make(chan struct{})
	return err
}

func (m *meter) Get(ctx context.Context, key string) ([]byte, error) {
	start := time.Now()
	b, err := m.inner.Get(ctx, key)
	m.read(start)
	return b, err
}

func (m *meter) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	start := time.Now()
	b, err := m.inner.GetRange(ctx, key, offset, length)
	m.read(start)
	return b, err
}

func (m *meter) read(start time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.counts.reads++
	m.counts.timeRead += time.Since(start)
}

func (m *meter) Delete(ctx context.Context, key string) error {
	start := time.Now()
	err := m.inner.Delete(ctx, key)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.counts.deletes++
	m.counts.timeDelete += time.Since(start)
	return err
}

func (m *meter) List(ctx context.Context, prefix, startAfter string, limit int) ([]objstore.ObjectInfo, error) {
	start := time.Now()
	infos, err := m.inner.List(ctx, prefix, startAfter, limit)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.counts.lists++
	m.counts.timeList += time.Since(start)
	return infos, err
}

func (m *meter) snapshot() opCounts {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.counts
}

// wait blocks until a Create of every key succeeded through this meter, or
// ctx ends.
func (m *meter) wait(ctx context.Context, keys []string) error {
	done := 0 // keys[:done] are created; a created key stays created
	for {
		m.mu.Lock()
		for done < len(keys) && m.created[keys[done]] {
			done++
		}
		ch := m.changed
		m.mu.Unlock()
		if done == len(keys) {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("%s: %d creates still outstanding", m.Name(), len(keys)-done), ctx.Err())
		}
	}
}
