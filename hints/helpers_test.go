package hints

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/shoaldb/shoal/hints/hint"
	"github.com/shoaldb/shoal/pb"
)

// cacheModel is a Reader over an unbounded model cache: a read hits when its key was read before.
// It records every call, can block calls on a gate, and can fail or refuse chosen keys/ranges.
type cacheModel struct {
	mu      sync.Mutex
	cached  map[string]bool
	calls   []string
	started chan struct{} // receives once per call when non-nil (non-blocking)
	gate    chan struct{} // when non-nil, each call waits for a token (or ctx)
	fail    map[string]bool
	noRange map[uint64]bool
}

func newCacheModel() *cacheModel {
	return &cacheModel{cached: map[string]bool{}, fail: map[string]bool{}, noRange: map[uint64]bool{}}
}

func (m *cacheModel) read(ctx context.Context, rangeID uint64, key string) (ReplayStats, error) {
	if m.started != nil {
		select {
		case m.started <- struct{}{}:
		default:
		}
	}
	if m.gate != nil {
		select {
		case <-m.gate:
		case <-ctx.Done():
			return ReplayStats{}, ctx.Err()
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, key)
	if m.noRange[rangeID] {
		return ReplayStats{}, ErrNoReplica
	}
	if m.fail[key] {
		return ReplayStats{}, errors.New("injected failure")
	}
	if m.cached[key] {
		return ReplayStats{CacheHit: 1}, nil
	}
	m.cached[key] = true
	return ReplayStats{CacheMiss: 1}, nil
}

func (m *cacheModel) Get(ctx context.Context, rangeID uint64, key []byte) (ReplayStats, error) {
	return m.read(ctx, rangeID, string(key))
}

func (m *cacheModel) Scan(ctx context.Context, rangeID uint64, start, end []byte, limit int, reverse bool) (ReplayStats, error) {
	return m.read(ctx, rangeID, fmt.Sprintf("scan %s-%s/%d/%v", start, end, limit, reverse))
}

func (m *cacheModel) callSet() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]int{}
	for _, c := range m.calls {
		out[c]++
	}
	return out
}

// recordingSender records batches per peer; peers in block wait on gate before returning; peers in
// fail get an error.
type recordingSender struct {
	mu      sync.Mutex
	got     map[uint64][]*pb.HintBatch
	block   map[uint64]bool
	fail    map[uint64]bool
	gate    chan struct{}
	entered chan uint64
	deliver func(to uint64, b *pb.HintBatch) // when set, called for every successful send
}

func newRecordingSender() *recordingSender {
	return &recordingSender{got: map[uint64][]*pb.HintBatch{}, block: map[uint64]bool{}, fail: map[uint64]bool{},
		gate: make(chan struct{}), entered: make(chan uint64, 1024)}
}

func (s *recordingSender) Send(ctx context.Context, to uint64, b *pb.HintBatch) error {
	s.entered <- to
	s.mu.Lock()
	block, fail := s.block[to], s.fail[to]
	s.mu.Unlock()
	if block {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if fail {
		return errors.New("injected send failure")
	}
	s.mu.Lock()
	s.got[to] = append(s.got[to], b)
	d := s.deliver
	s.mu.Unlock()
	if d != nil {
		d(to, b)
	}
	return nil
}

func (s *recordingSender) batches(to uint64) []*pb.HintBatch {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*pb.HintBatch(nil), s.got[to]...)
}

// eventually polls cond until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func pointHints(keys ...string) []hint.Hint {
	out := make([]hint.Hint, len(keys))
	for i, k := range keys {
		out[i] = hint.Hint{Descriptor: hint.Point([]byte(k)), Count: 1}
	}
	return out
}
