package hints

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/shoaldb/shoal/pb"
)

func newTestShipper(t *testing.T, sender Sender, cfg ShipperConfig, bcfg BufferConfig) (*Buffer, *Shipper) {
	t.Helper()
	b, err := NewBuffer(bcfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewShipper(b, sender, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return b, s
}

// peersOf serves a fixed replica map (node ids of the other replicas per range).
func peersOf(m map[uint64][]uint64) PeersFunc {
	return func(id uint64) []uint64 { return m[id] }
}

func batchSummary(bs []*pb.HintBatch) []string {
	var out []string
	for _, b := range bs {
		for _, r := range b.Ranges {
			for _, h := range r.Hints {
				out = append(out, fmt.Sprintf("from n%d r%d %s x%d", b.FromNode, r.RangeId, h.Key, h.Count))
			}
		}
	}
	sort.Strings(out)
	return out
}

func TestShipperTargets(t *testing.T) {
	replicas := map[uint64][]uint64{1: {2, 3}, 2: {3, 4}, 3: nil}
	for _, tc := range []struct {
		name   string
		target Target
		want   map[uint64][]string
	}{
		{name: "all", target: TargetAll, want: map[uint64][]string{
			2: {"from n1 r1 a x2"},
			3: {"from n1 r1 a x2", "from n1 r2 b x1"},
			4: {"from n1 r2 b x1"},
		}},
		{name: "one", target: TargetOne, want: map[uint64][]string{
			2: {"from n1 r1 a x2"},
			3: {"from n1 r2 b x1"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snd := newRecordingSender()
			b, s := newTestShipper(t, snd, ShipperConfig{NodeID: 1, ClusterID: "c1", Peers: peersOf(replicas), Target: tc.target},
				BufferConfig{FlushEntries: 64})
			b.Record(1, []byte("a"))
			b.Record(1, []byte("a"))
			b.Record(2, []byte("b"))
			b.Record(3, []byte("c")) // no other replica
			s.Flush()
			var shipped uint64
			for peer, want := range tc.want {
				eventually(t, 5*time.Second, fmt.Sprintf("a batch to n%d", peer), func() bool { return len(snd.batches(peer)) == 1 })
				bs := snd.batches(peer)
				if got := batchSummary(bs); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("n%d got %q, want %q", peer, got, want)
				}
				if bs[0].ClusterId != "c1" {
					t.Fatalf("cluster id %q", bs[0].ClusterId)
				}
				shipped += uint64(len(want))
			}
			eventually(t, 5*time.Second, "shipped counters", func() bool { return s.c.shipped.Load() == shipped })
			for _, peer := range []uint64{1, 2, 3, 4, 5} {
				if _, ok := tc.want[peer]; !ok && len(snd.batches(peer)) != 0 {
					t.Fatalf("unexpected batch to n%d", peer)
				}
			}
			m := b.Metrics()
			if m.Dropped[DropNoPeers] != 1 || m.ShippedBatches != uint64(len(tc.want)) || m.BytesSent == 0 {
				t.Fatalf("metrics %+v", m)
			}
		})
	}
}

// A slow peer fills its own queue and loses hints; the other peer is unaffected and Flush never waits.
func TestShipperPeerQueueDrops(t *testing.T) {
	snd := newRecordingSender()
	snd.block[2] = true
	const queueLen, flushes = 2, 10
	b, s := newTestShipper(t, snd, ShipperConfig{NodeID: 1, Peers: peersOf(map[uint64][]uint64{1: {2, 3}}), PeerQueueLen: queueLen},
		BufferConfig{FlushEntries: 64})
	b.Record(1, []byte("k0"))
	s.Flush()
	// Wait until n2's sender holds the first batch, so the queue state below is exact.
	for to := range snd.entered {
		if to == 2 {
			break
		}
	}
	for i := 1; i < flushes; i++ {
		b.Record(1, []byte(fmt.Sprintf("k%d", i)))
		b.Record(1, []byte(fmt.Sprintf("k%d'", i)))
		start := time.Now()
		s.Flush()
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Fatalf("flush took %v with a blocked peer", d)
		}
		// n3 is healthy: it receives every batch (waited for, so its own queue never fills).
		eventually(t, 5*time.Second, "n3 receives the batch", func() bool { return len(snd.batches(3)) == i+1 })
	}
	// n2: one batch in Send, queueLen queued, the rest dropped (2 hints each).
	m := b.Metrics()
	if want := uint64(2 * (flushes - 1 - queueLen)); m.Dropped[DropPeerQueueFull] != want {
		t.Fatalf("peer_queue_full %d, want %d", m.Dropped[DropPeerQueueFull], want)
	}
	close(snd.gate) // n2 recovers: the in-flight and queued batches go through
	eventually(t, 5*time.Second, "n2 drains its queue", func() bool { return len(snd.batches(2)) == 1+queueLen })
	got := batchSummary(snd.batches(2))
	want := []string{"from n1 r1 k0 x1", "from n1 r1 k1 x1", "from n1 r1 k1' x1", "from n1 r1 k2 x1", "from n1 r1 k2' x1"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("n2 got %q, want the oldest batches %q", got, want)
	}
	// Every hint × peer is shipped or dropped.
	eventually(t, 5*time.Second, "accounting", func() bool {
		m := b.Metrics()
		return m.Shipped+m.Dropped[DropPeerQueueFull] == 2*uint64(1+2*(flushes-1))
	})
}

func TestShipperSendErrorsAreCounted(t *testing.T) {
	snd := newRecordingSender()
	snd.fail[2] = true
	b, s := newTestShipper(t, snd, ShipperConfig{Peers: peersOf(map[uint64][]uint64{1: {2}})}, BufferConfig{FlushEntries: 64})
	b.Record(1, []byte("a"))
	b.Record(1, []byte("b"))
	s.Flush()
	eventually(t, 5*time.Second, "send_error", func() bool { return b.Metrics().Dropped[DropSendError] == 2 })
	if m := b.Metrics(); m.Shipped != 0 || m.ShippedBatches != 0 {
		t.Fatalf("failed sends counted as shipped: %+v", m)
	}
}

func TestShipperLoopFlushTriggers(t *testing.T) {
	t.Run("interval", func(t *testing.T) {
		snd := newRecordingSender()
		b, s := newTestShipper(t, snd, ShipperConfig{Peers: peersOf(map[uint64][]uint64{1: {2}}), FlushInterval: 20 * time.Millisecond},
			BufferConfig{FlushEntries: 1000})
		s.Start()
		b.Record(1, []byte("a"))
		eventually(t, 5*time.Second, "a flush on the interval", func() bool { return len(snd.batches(2)) == 1 })
	})
	t.Run("full", func(t *testing.T) {
		snd := newRecordingSender()
		b, s := newTestShipper(t, snd, ShipperConfig{Peers: peersOf(map[uint64][]uint64{1: {2}}), FlushInterval: time.Hour},
			BufferConfig{FlushEntries: 4, Capacity: 8})
		s.Start()
		for i := 0; i < 4; i++ {
			b.Record(1, []byte{byte('a' + i)})
		}
		eventually(t, 5*time.Second, "a flush at FlushEntries", func() bool { return len(snd.batches(2)) == 1 })
		if got := len(snd.batches(2)[0].Ranges[0].Hints); got != 4 {
			t.Fatalf("flushed %d hints, want 4", got)
		}
	})
}

// TestShipperSaturatedInterval: while the buffer samples its reads (the leader is saturated), batches
// go out every SaturatedInterval instead of every FlushInterval; otherwise every FlushInterval. The
// bounds hold however slowly the host runs the test: a stall only delays batches, so the idle case
// asks for many batches within one SaturatedInterval, and the saturated case caps them by the time
// that actually passed.
func TestShipperSaturatedInterval(t *testing.T) {
	start := func(t *testing.T, load float64, saturatedInterval time.Duration) (*recordingSender, *Buffer, *Shipper) {
		snd := newRecordingSender()
		b, s := newTestShipper(t, snd, ShipperConfig{Peers: peersOf(map[uint64][]uint64{1: {2}}),
			FlushInterval: 10 * time.Millisecond, SaturatedInterval: saturatedInterval},
			BufferConfig{FlushEntries: 1 << 20, Load: func() float64 { return load }, SampleFraction: 0.999})
		b.Drain() // samples the load, as the shipper's drains do
		s.Start()
		return snd, b, s
	}
	// record feeds reads until done or the deadline passes.
	record := func(b *Buffer, deadline time.Time, done func() bool) {
		for i := 0; time.Now().Before(deadline) && !done(); i++ {
			b.Record(1, []byte(fmt.Sprintf("k%d", i%50)))
			time.Sleep(time.Millisecond)
		}
	}
	t.Run("idle", func(t *testing.T) {
		const want = 8
		snd, b, s := start(t, 0, 5*time.Second)
		began := time.Now()
		record(b, began.Add(5*time.Second), func() bool { return len(snd.batches(2)) >= want })
		s.Close()
		if n := len(snd.batches(2)); n < want {
			t.Fatalf("%d batches in %v at a 10-ms FlushInterval, want %d before one 5-s SaturatedInterval",
				n, time.Since(began).Round(time.Millisecond), want)
		}
	})
	t.Run("saturated", func(t *testing.T) {
		const interval = 200 * time.Millisecond
		snd, b, s := start(t, 0.95, interval)
		began := time.Now()
		record(b, began.Add(600*time.Millisecond), func() bool { return false })
		record(b, began.Add(10*time.Second), func() bool { return len(snd.batches(2)) >= 1 })
		s.Close()
		elapsed := time.Since(began)
		n := len(snd.batches(2))
		if limit := int(elapsed/interval) + 1; n < 1 || n > limit {
			t.Fatalf("%d batches in %v at a %v SaturatedInterval, want 1-%d", n, elapsed.Round(time.Millisecond), interval, limit)
		}
	})
}

func TestShipperCloseDropsQueued(t *testing.T) {
	snd := newRecordingSender()
	snd.block[2] = true
	b, s := newTestShipper(t, snd, ShipperConfig{Peers: peersOf(map[uint64][]uint64{1: {2}}), PeerQueueLen: 4,
		SendTimeout: 50 * time.Millisecond}, BufferConfig{FlushEntries: 64})
	for i := 0; i < 3; i++ {
		b.Record(1, []byte{byte('a' + i)})
		s.Flush()
	}
	s.Close()
	m := b.Metrics()
	if m.Dropped[DropClosed]+m.Dropped[DropSendError] != 3 {
		t.Fatalf("after close: %v", m.Dropped)
	}
	b.Record(1, []byte("z"))
	s.Flush() // after Close: dropped, no goroutine started
	if got := b.Metrics().Dropped[DropClosed] + b.Metrics().Dropped[DropSendError]; got != 4 {
		t.Fatalf("flush after close: dropped %d", got)
	}
}

func TestShipperConfig(t *testing.T) {
	b, _ := NewBuffer(BufferConfig{})
	if _, err := NewShipper(b, newRecordingSender(), ShipperConfig{}); err == nil {
		t.Fatal("missing Peers accepted")
	}
	if _, err := NewShipper(b, nil, ShipperConfig{Peers: peersOf(nil)}); err == nil {
		t.Fatal("missing Sender accepted")
	}
	s, err := NewShipper(b, newRecordingSender(), ShipperConfig{Peers: peersOf(nil)})
	if err != nil {
		t.Fatal(err)
	}
	if s.cfg.FlushInterval != 90*time.Millisecond || s.cfg.PeerQueueLen != 8 || s.cfg.Target != TargetAll {
		t.Fatalf("defaults %+v", s.cfg)
	}
}

// wireRecordingSender is a recordingSender that takes encoded batches (wireSender): it decodes each
// and records the decoded batch.
type wireRecordingSender struct {
	*recordingSender
	mu        sync.Mutex
	wires     int
	wireBytes int
	errs      []error
}

func (s *wireRecordingSender) sendWire(ctx context.Context, to uint64, w wireBatch) error {
	var got pb.HintBatch
	err := proto.Unmarshal(w, &got)
	s.mu.Lock()
	s.wires++
	s.wireBytes += len(w)
	if err != nil {
		s.errs = append(s.errs, fmt.Errorf("n%d: %w", to, err))
	}
	s.mu.Unlock()
	return s.recordingSender.Send(ctx, to, &got)
}

// With a wireSender the shipper encodes each range once and lays it out per peer: every peer's
// encoding decodes to what a plain sender gets for the same reads (per-send fields included), and
// the bytes counted are the encodings'.
func TestShipperEncodesBatchesOnce(t *testing.T) {
	replicas := map[uint64][]uint64{1: {2, 3}, 2: {3, 4}, 3: {2}}
	ship := func(snd Sender) *Buffer {
		b, s := newTestShipper(t, snd, ShipperConfig{NodeID: 7, ClusterID: "c1", Peers: peersOf(replicas)},
			BufferConfig{FlushEntries: 64})
		for i := 0; i < 40; i++ {
			id := uint64(1 + i%3)
			key := fmt.Sprintf("k%02d", i%17)
			b.Record(id, []byte(key))
			if i%9 == 0 {
				b.RecordScan(id, []byte(key), []byte("z"), i, i%2 == 0)
			}
		}
		b.Record(1, nil) // an empty key: a field proto3 leaves out
		s.Flush()
		return b
	}
	plain := newRecordingSender()
	ship(plain)
	wire := &wireRecordingSender{recordingSender: newRecordingSender()}
	b := ship(wire)
	for peer := uint64(2); peer <= 4; peer++ {
		for _, snd := range []*recordingSender{plain, wire.recordingSender} {
			eventually(t, 5*time.Second, fmt.Sprintf("a batch to n%d", peer), func() bool { return len(snd.batches(peer)) == 1 })
		}
		got, want := wire.batches(peer)[0], plain.batches(peer)[0]
		if got.FromNode != 7 || got.ClusterId != "c1" {
			t.Fatalf("n%d: batch from n%d of %q", peer, got.FromNode, got.ClusterId)
		}
		// The ages and queueing delays are measured at each flush: compare the rest.
		for _, m := range []*pb.HintBatch{got, want} {
			m.QueuedMicros = 0
			for _, r := range m.Ranges {
				r.AgeMicros = 0
			}
		}
		if !proto.Equal(got, want) {
			t.Fatalf("n%d: encoded batch decodes to %v, a plain sender got %v", peer, got, want)
		}
	}
	for peer, want := range map[uint64]int{2: 2, 3: 2, 4: 1} {
		if n := len(wire.batches(peer)[0].Ranges); n != want {
			t.Fatalf("n%d got %d ranges, want %d", peer, n, want)
		}
	}
	eventually(t, 5*time.Second, "shipped counters", func() bool { return b.Metrics().ShippedBatches == 3 })
	wire.mu.Lock()
	defer wire.mu.Unlock()
	if len(wire.errs) > 0 || wire.wires != 3 {
		t.Fatalf("%d encoded sends (want 3), decode errors %v", wire.wires, wire.errs)
	}
	if m := b.Metrics(); m.BytesSent != uint64(wire.wireBytes) {
		t.Fatalf("bytes sent %d, encodings %d", m.BytesSent, wire.wireBytes)
	}
}
