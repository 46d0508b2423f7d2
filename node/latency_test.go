package node

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoaldb/shoal/pb"
)

// TestRangeLatencyWindows: each range's requests are taken once, in its own window; a range that left
// the node loses its recorder; a leader's window travels in its range load.
func TestRangeLatencyWindows(t *testing.T) {
	var l rangeLatency
	now := time.Unix(1000, 0)
	for i := 0; i < 99; i++ {
		l.record(2, time.Millisecond)
	}
	l.record(2, 50*time.Millisecond)
	l.record(3, 10*time.Microsecond)
	tests := []struct {
		rangeID uint64
		count   uint64
		p99     [2]time.Duration
	}{
		{2, 100, [2]time.Duration{960 * time.Microsecond, 1024 * time.Microsecond}},
		{3, 1, [2]time.Duration{10 * time.Microsecond, 11 * time.Microsecond}},
		{4, 0, [2]time.Duration{0, 0}},
	}
	for _, tc := range tests {
		h := l.take(tc.rangeID, now)
		if h.Count() != tc.count {
			t.Fatalf("r%d: %d requests, want %d", tc.rangeID, h.Count(), tc.count)
		}
		if p99 := h.Quantile(0.99); p99 < tc.p99[0] || p99 > tc.p99[1] {
			t.Errorf("r%d: p99 %v, want within %v", tc.rangeID, p99, tc.p99)
		}
		if again := l.take(tc.rangeID, now.Add(time.Second)); again != nil {
			t.Errorf("r%d: the next window has %d requests, want none", tc.rangeID, again.Count())
		}
	}

	l.record(2, time.Millisecond)
	rl := &pb.RangeLoad{RangeId: 2, Leader: true}
	fillLatency(rl, l.take(2, now))
	if len(rl.LatencyBuckets) != 1 || len(rl.LatencyCounts) != 1 || rl.LatencyCounts[0] != 1 || rl.LatencyAtUnixNanos != now.UnixNano() {
		t.Errorf("range load %v", rl)
	}

	l.retain(map[uint64]loadMark{2: {}})
	if _, ok := l.recorders.Load(uint64(3)); ok {
		t.Error("r3 left the node but keeps its recorder")
	}
	if _, ok := l.recorders.Load(uint64(2)); !ok {
		t.Error("r2 lost its recorder")
	}
}

// BenchmarkServedCost is what the latency measurement adds to a request on the node: reading the
// clock at arrival and at the answer, the Observer call, the recorder lookup and the atomic add.
// ns/op is the cost per request. The parallel variant has every goroutine on the same range (the
// worst case: they share the recorder's cache lines).
func BenchmarkServedCost(b *testing.B) {
	n := &Node{}
	o := observer{n}
	for id := uint64(1); id <= 64; id++ {
		n.latency.record(id, time.Millisecond) // a node with 64 ranges served
	}
	b.Run("serial", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			start := time.Now()
			o.Served(uint64(i%64)+1, time.Since(start))
		}
	})
	b.Run("parallel-one-range", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				start := time.Now()
				o.Served(7, time.Since(start))
			}
		})
	})
	var ranges atomic.Uint64
	b.Run("parallel-own-range", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			id := ranges.Add(1)%64 + 1
			for pb.Next() {
				start := time.Now()
				o.Served(id, time.Since(start))
			}
		})
	})
	b.Run("clock-only", func(b *testing.B) { // the part of the cost that is the two clock reads
		var sink time.Duration
		for b.Loop() {
			start := time.Now()
			sink += time.Since(start)
		}
		_ = sink
	})
}
