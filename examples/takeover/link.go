package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/cutline/cutline/objstore"
)

// link is star-a's network path to one zone. It passes every request
// through until hold is called. From then on a PUT whose key hold matches
// gets no answer: the link keeps it, and its caller waits until the
// caller's context ends, which for star-a's writer is when star-a dies.
// land delivers the kept PUTs to the zone later, as a zombie's.
//
// A PUT the link passes on is not recalled when its caller gives up: like a
// request already sent, it completes (within the run's context), so whether
// a zone got a copy does not depend on how far it had come when star-a died.
//
// objstore/fault's Straggler would answer a kept PUT with an error at once,
// like a request that timed out. The writer would then retry, and every
// retry would be one more kept PUT, as many as the backoff timers allowed
// before star-a died: the count would change from run to run. A PUT that
// gets no answer is never retried, so the link keeps exactly one PUT per
// zone and slot it holds, and the counts do not depend on timing.
type link struct {
	objstore.Bucket // the zone as star-a reaches it
	// run bounds the PUTs passed on in place of their callers' contexts:
	// the network's lifetime, not star-a's.
	run context.Context

	mu       sync.Mutex
	holds    func(key string) bool // nil until hold
	kept     []keptPut             // in the order they were sent
	keptKeys map[string]bool
	changed  chan struct{} // closed and replaced when a PUT is kept
}

type keptPut struct {
	key  string
	data []byte
}

var _ objstore.Bucket = (*link)(nil)

func newLink(run context.Context, zone objstore.Bucket) *link {
	return &link{Bucket: zone, run: run, keptKeys: make(map[string]bool), changed: make(chan struct{})}
}

// hold makes the link keep every later PUT whose key match accepts.
func (l *link) hold(match func(key string) bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.holds = match
}

// Create implements objstore.Bucket. A PUT the link holds returns only when
// ctx ends, with ctx's error; the zone has not seen it then. A PUT it passes
// on runs to its end whatever ctx does.
func (l *link) Create(ctx context.Context, key string, data []byte) error {
	l.mu.Lock()
	if l.holds == nil || !l.holds(key) {
		l.mu.Unlock()
		return l.Bucket.Create(l.run, key, data)
	}
	l.kept = append(l.kept, keptPut{key: key, data: bytes.Clone(data)})
	l.keptKeys[key] = true
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
	<-ctx.Done()
	return &objstore.OpError{Op: "create", Bucket: l.Name(), Key: key, Err: ctx.Err()}
}

// keptCount is the number of PUTs the link keeps.
func (l *link) keptCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.kept)
}

// waitKept blocks until the link keeps a PUT of every key, or ctx ends.
func (l *link) waitKept(ctx context.Context, keys []string) error {
	done := 0 // keys[:done] are kept; a kept PUT stays kept until land
	for {
		l.mu.Lock()
		for done < len(keys) && l.keptKeys[keys[done]] {
			done++
		}
		ch := l.changed
		l.mu.Unlock()
		if done == len(keys) {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("%s: %d PUTs not sent yet", l.Name(), len(keys)-done), ctx.Err())
		}
	}
}

// land sends the kept PUTs to the zone, in the order they were sent, and
// returns how many created their object; the others found their key taken
// (objstore.ErrExists). Any other failure ends it with the error.
func (l *link) land(ctx context.Context) (int, error) {
	l.mu.Lock()
	kept := l.kept
	l.kept, l.keptKeys = nil, make(map[string]bool)
	l.mu.Unlock()
	created := 0
	for _, p := range kept {
		switch err := l.Bucket.Create(ctx, p.key, p.data); {
		case err == nil:
			created++
		case !errors.Is(err, objstore.ErrExists):
			return created, fmt.Errorf("land a held-up PUT: %w", err)
		}
	}
	return created, nil
}
