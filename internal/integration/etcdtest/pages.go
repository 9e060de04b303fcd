package etcdtest

import (
	"context"
	"fmt"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// PageHook sits in a client's KV so that a test can act in the middle of a
// paged range read, such as a List of metastore/etcd: between a page whose
// response says More and the request for the next page. Armed functions
// run on the goroutine of the read, before its Get returns.
type PageHook struct {
	clientv3.KV

	mu      sync.Mutex
	pending []func()
	every   func()
	fired   int
}

// HookPages puts a PageHook in cli's KV and returns it. Call it before cli
// is used.
func HookPages(cli *clientv3.Client) *PageHook {
	h := &PageHook{KV: cli.KV}
	cli.KV = h
	return h
}

// Once arranges that f runs once, after the next page that has more to
// come.
func (h *PageHook) Once(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pending = append(h.pending, f)
}

// Every makes f run after every page that has more to come, until stop is
// called.
func (h *PageHook) Every(f func()) (stop func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.every = f
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.every = nil
	}
}

// Fired returns how many armed functions have run.
func (h *PageHook) Fired() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.fired
}

// Get implements clientv3.KV.
func (h *PageHook) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	resp, err := h.KV.Get(ctx, key, opts...)
	if err != nil || !resp.More {
		return resp, err
	}
	h.mu.Lock()
	var fs []func()
	if len(h.pending) > 0 {
		fs = append(fs, h.pending[0])
		h.pending = h.pending[1:]
	}
	if h.every != nil {
		fs = append(fs, h.every)
	}
	h.fired += len(fs)
	h.mu.Unlock()
	for _, f := range fs {
		f()
	}
	return resp, err
}

// CompactKey is the key Compact writes; it lies outside every root the
// tests use.
const CompactKey = "/etcdtest/compact"

// Compact writes CompactKey and compacts the cluster's history up to that
// write, as etcd's scheduled compaction would: a read or a watch at any
// earlier revision fails with ErrCompacted. It returns the compaction
// revision.
func Compact(ctx context.Context, cli *clientv3.Client) (int64, error) {
	resp, err := cli.Put(ctx, CompactKey, "x")
	if err != nil {
		return 0, fmt.Errorf("etcdtest: compact: put %s: %w", CompactKey, err)
	}
	rev := resp.Header.Revision
	if _, err := cli.Compact(ctx, rev); err != nil {
		return 0, fmt.Errorf("etcdtest: compact at %d: %w", rev, err)
	}
	return rev, nil
}
