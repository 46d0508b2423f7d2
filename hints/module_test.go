package hints

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/shoaldb/shoal/hints/hint"
	"github.com/shoaldb/shoal/pb"
)

// testNode is one node's module served on a real gRPC server on loopback.
type testNode struct {
	id     uint64
	m      *Module
	reader *cacheModel
	addr   string
}

type testCluster struct {
	t     *testing.T
	nodes map[uint64]*testNode
	mu    sync.Mutex
	conns map[uint64]*grpc.ClientConn
}

func (c *testCluster) conn(id uint64) (grpc.ClientConnInterface, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cc, ok := c.conns[id]; ok {
		return cc, nil
	}
	n := c.nodes[id]
	if n == nil {
		return nil, fmt.Errorf("unknown node %d", id)
	}
	cc, err := grpc.NewClient(n.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	c.conns[id] = cc
	return cc, nil
}

func (c *testCluster) client(id uint64, clusterID string) *Client {
	cc, err := c.conn(id)
	if err != nil {
		c.t.Fatal(err)
	}
	return NewClient(cc, clusterID)
}

// newTestCluster starts nodes 1..n; every range is replicated on all of them. They ship over
// ShipStream (StreamSender, as nodes do).
func newTestCluster(t *testing.T, n int, cfg Config) *testCluster {
	return newTestClusterWith(t, n, cfg, true)
}

// newTestClusterWith is newTestCluster, shipping with unary Ship calls (GRPCSender) unless stream.
func newTestClusterWith(t *testing.T, n int, cfg Config, stream bool) *testCluster {
	c := &testCluster{t: t, nodes: map[uint64]*testNode{}, conns: map[uint64]*grpc.ClientConn{}}
	for id := uint64(1); id <= uint64(n); id++ {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		nc := cfg
		nc.NodeID = id
		self := id
		nc.Peers = func(uint64) []uint64 {
			var out []uint64
			for p := uint64(1); p <= uint64(n); p++ {
				if p != self {
					out = append(out, p)
				}
			}
			return out
		}
		reader := newCacheModel()
		var sender Sender = GRPCSender{Conn: c.conn}
		if stream {
			sender = NewStreamSender(c.conn)
		}
		m, err := New(nc, sender, reader)
		if err != nil {
			t.Fatal(err)
		}
		srv := grpc.NewServer()
		pb.RegisterHintsServer(srv, m.Service())
		go srv.Serve(lis)
		m.Start()
		c.nodes[id] = &testNode{id: id, m: m, reader: reader, addr: lis.Addr().String()}
		t.Cleanup(func() { m.Close(); srv.Stop() })
	}
	t.Cleanup(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, cc := range c.conns {
			cc.Close()
		}
	})
	return c
}

func TestModuleOverGRPC(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(map[bool]string{true: "ShipStream", false: "Ship"}[stream], func(t *testing.T) { testModuleOverGRPC(t, stream) })
	}
}

func testModuleOverGRPC(t *testing.T, stream bool) {
	c := newTestClusterWith(t, 3, Config{ClusterID: "c1", Shipper: ShipperConfig{FlushInterval: time.Hour},
		Applier: ApplierConfig{WarmthWindow: 2}}, stream)
	leader, f2, f3 := c.nodes[1].m, c.nodes[2].m, c.nodes[3].m
	hot := manyKeys("user", 30)
	for round := 0; round < 3; round++ {
		for _, k := range hot {
			leader.Record(7, []byte(k))
			leader.Record(7, []byte(k))
		}
		leader.RecordScan(7, []byte("user000000"), []byte("user000010"), 10, false)
		leader.Flush()
		for _, f := range []*Module{f2, f3} {
			eventually(t, 10*time.Second, "followers apply the round", func() bool {
				return f.Metrics().Applied == uint64(31*(round+1))
			})
		}
		if round == 0 {
			// One cold round: the followers are not warm yet, and the remote check says so.
			w, warm, err := c.client(2, "c1").WaitWarm(context.Background(), 7, WarmCriteria{MinHitRatio: 0.9, MinReplays: 20}, 100*time.Millisecond)
			if err != nil || warm || !w.Known || w.HitRatio != 0 {
				t.Fatalf("after one round: warm=%v %+v %v", warm, w, err)
			}
		}
	}
	w, warm, err := c.client(2, "c1").WaitWarm(context.Background(), 7, WarmCriteria{MinHitRatio: 0.9, MinReplays: 20, MaxApplyLag: time.Second}, 5*time.Second)
	if err != nil || !warm || w.HitRatio < 0.9 || w.HintsApplied != 93 {
		t.Fatalf("after three rounds: warm=%v %+v %v", warm, w, err)
	}
	// The leader counts a send once the RPC returned, which may be after the follower applied it.
	eventually(t, 5*time.Second, "leader's send counters", func() bool {
		return leader.Metrics().ShippedBatches == 6
	})
	lm, fm, fm3 := leader.Metrics(), f2.Metrics(), f3.Metrics()
	if lm.Recorded != 3*61 || lm.Summarized != 3*30 || lm.Shipped != 2*3*31 {
		t.Fatalf("leader metrics %+v", lm)
	}
	if fm.Received != 3*31 || fm.ReceivedBatches != 3 || fm.BytesReceived == 0 || fm.BytesReceived+fm3.BytesReceived != lm.BytesSent {
		t.Fatalf("follower metrics %+v (leader sent %d bytes, n3 received %d)", fm, lm.BytesSent, fm3.BytesReceived)
	}

	// Hot keys: the leader knows them from its captures, a follower from the hints it received.
	for _, id := range []uint64{1, 2} {
		hs, err := c.client(id, "c1").HotKeys(context.Background(), 7, 5)
		if err != nil || len(hs) != 5 {
			t.Fatalf("hot keys from n%d: %v %v", id, hs, err)
		}
		for _, h := range hs {
			if h.Scan || h.Count != 6 {
				t.Fatalf("hot keys from n%d: %+v (each hot key was read 6 times)", id, hs)
			}
		}
	}

	// Another cluster is refused.
	if _, err := c.client(2, "other").HotKeys(context.Background(), 7, 5); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("hot keys from another cluster: %v", err)
	}
	cc, _ := c.conn(2)
	ack, err := pb.NewHintsClient(cc).Ship(context.Background(), hint.BatchToProto(9, "other", []hint.RangeHints{rangeOf(7, "x")}, time.Now()))
	if err != nil || ack.DroppedRanges != 1 || f2.Metrics().Dropped[DropWrongCluster] != 1 {
		t.Fatalf("batch from another cluster: %+v %v", ack, err)
	}
	// Accounting: every hint received was applied or dropped for one reason; every read recorded on
	// the leader was shipped as a hint or summarized into one.
	if m := f2.Metrics(); m.Received != m.Applied+m.DroppedTotal() {
		t.Fatalf("follower: received %d != applied %d + dropped %d", m.Received, m.Applied, m.DroppedTotal())
	}
	if m := leader.Metrics(); m.Shipped+m.DroppedTotal() != 2*(m.Recorded-m.Summarized) {
		t.Fatalf("leader: shipped %d + dropped %d != 2 peers × (recorded %d - summarized %d)", m.Shipped, m.DroppedTotal(), m.Recorded, m.Summarized)
	}
}

// Warm after restart: a node with an empty cache asks a peer for the range's hot keys and replays them.
func TestWarmFromPeer(t *testing.T) {
	c := newTestCluster(t, 2, Config{Shipper: ShipperConfig{FlushInterval: time.Hour}})
	leader := c.nodes[1].m
	hot := manyKeys("hot", 20)
	for i := 0; i < 10; i++ {
		for _, k := range hot {
			leader.Record(3, []byte(k))
		}
		leader.Record(3, []byte(fmt.Sprintf("rare%d", i)))
	}
	leader.Flush()

	restarted := newCacheModel()
	m, err := New(Config{NodeID: 9, Peers: func(uint64) []uint64 { return nil }}, GRPCSender{Conn: c.conn}, restarted)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	n, st, err := m.WarmFromPeer(context.Background(), c.client(1, ""), 3, len(hot))
	if err != nil || n != 20 || st.CacheMiss != 20 {
		t.Fatalf("WarmFromPeer: %d hints, %+v, %v", n, st, err)
	}
	var got []string
	for k := range restarted.callSet() {
		got = append(got, k)
	}
	sort.Strings(got)
	if fmt.Sprint(got) != fmt.Sprint(hot) {
		t.Fatalf("replayed %v, want the hot set %v", got, hot)
	}
	if w := m.Warmth(3); !w.Known || w.HintsApplied != 20 {
		t.Fatalf("warmth after warm-up %+v", w)
	}
}

func TestCollectors(t *testing.T) {
	m, err := New(Config{Peers: func(uint64) []uint64 { return []uint64{2} }, Buffer: BufferConfig{MaxKeyBytes: 4}},
		newRecordingSender(), newCacheModel())
	if err != nil {
		t.Fatal(err)
	}
	m.Record(1, []byte("a"))
	m.Record(1, []byte("a"))
	m.Record(1, []byte("too long"))
	m.Flush()
	reg := prometheus.NewRegistry()
	for _, col := range m.Collectors() {
		reg.MustRegister(col)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	vals := map[string]float64{}
	for _, mf := range mfs {
		for _, mt := range mf.Metric {
			name := mf.GetName()
			for _, l := range mt.Label {
				name += "{" + l.GetValue() + "}"
			}
			switch {
			case mt.Counter != nil:
				vals[name] = mt.Counter.GetValue()
			case mt.Gauge != nil:
				vals[name] = mt.Gauge.GetValue()
			}
		}
	}
	for name, want := range map[string]float64{
		"shoal_hints_recorded_total":                2,
		"shoal_hints_summarized_total":              1,
		"shoal_hints_dropped_total{too_large}":      1,
		"shoal_hints_dropped_total{buffer_full}":    0,
		"shoal_hints_apply_fraction":                1,
		"shoal_hints_paused":                        0,
		"shoal_hints_replay_cache_bytes_total{hit}": 0,
	} {
		if got, ok := vals[name]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", name, got, ok, want)
		}
	}
	if len(vals) != len(metricHelp)-2+int(numDropReasons)+2 {
		t.Errorf("%d series exported", len(vals))
	}
}

func TestWarmthWireRoundTrip(t *testing.T) {
	crit := WarmCriteria{MaxApplyLag: time.Second, MinHitRatio: 0.8, MinReplays: 5, MaxIdle: 3 * time.Second}
	if got := CriteriaFromProto(CriteriaToProto(crit)); got != crit {
		t.Fatalf("criteria %+v", got)
	}
	w := Warmth{RangeID: 2, Known: true, ApplyLag: time.Millisecond, Idle: time.Second, HitRatio: 0.5, Replays: 9, HintsApplied: 11}
	if got := WarmthFromProto(WarmthToProto(w)); got != w {
		t.Fatalf("warmth %+v", got)
	}
}

func TestModuleConfig(t *testing.T) {
	if _, err := New(Config{}, newRecordingSender(), newCacheModel()); err == nil {
		t.Fatal("a module without Peers accepted")
	}
	if err := (Config{Peers: peersOf(nil), Applier: ApplierConfig{StartAt: 0.95}}).Validate(); err == nil {
		t.Fatal("StartAt above the default StopAt accepted")
	}
	if err := (Config{Peers: peersOf(nil)}).Validate(); err != nil {
		t.Fatal(err)
	}
}

// newLoneModule is a module with no peers over a cache model, closed at the test's end.
func newLoneModule(t *testing.T) *Module {
	t.Helper()
	m, err := New(Config{NodeID: 1, Peers: func(uint64) []uint64 { return nil }}, newRecordingSender(), newCacheModel())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// A deferred warm-up runs once, when a transfer first waits for the range's warmth or when its owner
// runs it, and never for a range that left the node, was cancelled or was not deferred.
func TestDeferredWarmUp(t *testing.T) {
	m := newLoneModule(t)
	var mu sync.Mutex
	var ran []uint64
	m.SetWarmUp(func(ctx context.Context, rangeID uint64) {
		mu.Lock()
		ran = append(ran, rangeID)
		mu.Unlock()
	})
	runs := func() string { mu.Lock(); defer mu.Unlock(); return fmt.Sprint(ran) }
	ctx := context.Background()
	crit := WarmCriteria{MinReplays: 1}
	m.DeferWarm(1)
	m.DeferWarm(1) // counted once
	m.DeferWarm(2)
	m.Forget(2)
	m.DeferWarm(3)
	m.CancelDeferred(3)
	for _, id := range []uint64{1, 1, 2, 3, 9} {
		if _, err := m.WaitWarm(ctx, id, crit, 10*time.Millisecond); !errors.Is(err, ErrNotWarm) {
			t.Fatalf("WaitWarm(r%d) on a node that replayed nothing: %v, want ErrNotWarm", id, err)
		}
	}
	if runs() != "[1]" {
		t.Fatalf("warm-ups run %v, want [1] once", runs())
	}
	// A wait of 0 only checks: it does not spend the deferred warm-up; the owner's RunDeferred does.
	m.DeferWarm(4)
	m.WaitWarm(ctx, 4, crit, 0)
	if fmt.Sprint(m.Deferred()) != "[4]" {
		t.Fatalf("deferred %v, want [4]", m.Deferred())
	}
	if !m.RunDeferred(ctx, 4, time.Second) || m.RunDeferred(ctx, 4, time.Second) || runs() != "[1 4]" {
		t.Fatalf("RunDeferred: warm-ups run %v, want [1 4], once", runs())
	}
	// A range already warm by its live hints skips the warm-up, and it is not kept for later.
	if _, err := m.Warm(ctx, 5, pointHints("a")); err != nil {
		t.Fatal(err)
	}
	m.DeferWarm(5)
	if _, err := m.WaitWarm(ctx, 5, WarmCriteria{}, 10*time.Millisecond); err != nil {
		t.Fatalf("WaitWarm(r5) after replays: %v", err)
	}
	if runs() != "[1 4]" || len(m.Deferred()) != 0 {
		t.Fatalf("warm-ups run %v, deferred %v: r5 was warm", runs(), m.Deferred())
	}
	// Two transfers asking at once run it once.
	m.DeferWarm(6)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); m.WaitWarm(ctx, 6, crit, 10*time.Millisecond) }()
	}
	wg.Wait()
	if runs() != "[1 4 6]" {
		t.Fatalf("warm-ups run %v, want [1 4 6]", runs())
	}
	if mt := m.Metrics(); mt.WarmsDeferred != 6 || mt.WarmsDeferredRun != 3 {
		t.Fatalf("WarmsDeferred %d, WarmsDeferredRun %d; want 6 and 3", mt.WarmsDeferred, mt.WarmsDeferredRun)
	}
}

// A put-off warm-up gets at most half of a transfer's wait, so that replays after it can show the
// replica warm. Its bound is read from its context's deadline, which a slow host cannot move.
func TestDeferredWarmUpBoundedByHalfTheWait(t *testing.T) {
	m := newLoneModule(t)
	var warmStart, deadline time.Time
	var warmErr error
	m.SetWarmUp(func(ctx context.Context, rangeID uint64) {
		warmStart = time.Now()
		deadline, _ = ctx.Deadline()
		<-ctx.Done() // a warm-up slower than any bound
		warmErr = ctx.Err()
	})
	m.DeferWarm(1)
	const wait = time.Second
	start := time.Now()
	_, err := m.WaitWarm(context.Background(), 1, WarmCriteria{MinReplays: 1}, wait)
	took := time.Since(start)
	if !errors.Is(err, ErrNotWarm) {
		t.Fatalf("WaitWarm: %v, want ErrNotWarm", err)
	}
	// The deadline was set between start and the warm-up's start, half the wait on.
	if !errors.Is(warmErr, context.DeadlineExceeded) || deadline.Sub(start) < wait/2 || deadline.Sub(warmStart) > wait/2 {
		t.Fatalf("the warm-up ended with %v at a deadline %v after the wait began, %v after it began itself; want half the wait (%v)",
			warmErr, deadline.Sub(start), deadline.Sub(warmStart), wait/2)
	}
	if took < wait-20*time.Millisecond || took > wait+10*time.Second {
		t.Fatalf("WaitWarm took %v, want about the whole wait (%v)", took, wait)
	}
}
