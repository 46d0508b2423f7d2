package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/shoaldb/shoal/pb"
)

// ---------- helpers ----------

// checkGoroutines fails the test if, after every later cleanup ran, more goroutines are alive than
// when it was called. Call it first in a test (cleanups run last-in first-out).
func checkGoroutines(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for {
			n := runtime.NumGoroutine()
			if n <= before {
				return
			}
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				t.Errorf("goroutine leak: %d before, %d after\n%s", before, n, buf)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// directory is a test Resolver whose addresses can change.
type directory struct {
	mu    sync.Mutex
	addrs map[uint64]string
}

func newDirectory() *directory { return &directory{addrs: map[uint64]string{}} }

func (d *directory) set(id uint64, addr string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.addrs[id] = addr
}

func (d *directory) resolve(id uint64) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	a, ok := d.addrs[id]
	return a, ok
}

type receivedSnapshot struct {
	header *pb.RaftMessage
	kvs    []*pb.KeyValue
}

// recorder is a Handler that records everything delivered to it.
type recorder struct {
	mu       sync.Mutex
	msgs     []*pb.RaftMessage
	batches  int
	snaps    []receivedSnapshot
	snapErr  error
	received chan struct{} // signalled (non-blocking) on every delivery
}

func newRecorder() *recorder { return &recorder{received: make(chan struct{}, 1)} }

func (r *recorder) HandleRaftMessages(msgs []*pb.RaftMessage) {
	r.mu.Lock()
	r.msgs = append(r.msgs, msgs...)
	r.batches++
	r.mu.Unlock()
	r.signal()
}

func (r *recorder) HandleSnapshot(header *pb.RaftMessage, kvs []*pb.KeyValue) error {
	r.mu.Lock()
	r.snaps = append(r.snaps, receivedSnapshot{header, kvs})
	err := r.snapErr
	r.mu.Unlock()
	r.signal()
	return err
}

func (r *recorder) signal() {
	select {
	case r.received <- struct{}{}:
	default:
	}
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.msgs)
}

func (r *recorder) messages() []*pb.RaftMessage {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*pb.RaftMessage(nil), r.msgs...)
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type testNode struct {
	id     uint64
	tr     *Transport
	rec    *recorder
	addr   string
	chunks atomic.Int64 // snapshot chunks received
}

// startNode starts a transport with a real gRPC server on 127.0.0.1:0 and registers its address.
func startNode(t *testing.T, dir *directory, cfg Config) *testNode {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &testNode{id: cfg.NodeID, rec: newRecorder(), addr: lis.Addr().String()}
	if cfg.Resolver == nil {
		cfg.Resolver = dir.resolve
	}
	n.tr = New(cfg, n.rec)
	opts := append(ServerOptions(), grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		if info.FullMethod == pb.RaftTransport_Snapshot_FullMethodName {
			ss = &countingStream{ServerStream: ss, n: &n.chunks}
		}
		return h(srv, ss)
	}))
	s := grpc.NewServer(opts...)
	n.tr.Register(s)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Serve(lis)
	}()
	t.Cleanup(func() {
		n.tr.Close()
		s.Stop()
		<-done
	})
	dir.set(cfg.NodeID, n.addr)
	return n
}

type countingStream struct {
	grpc.ServerStream
	n *atomic.Int64
}

func (c *countingStream) RecvMsg(m any) error {
	err := c.ServerStream.RecvMsg(m)
	if err == nil {
		c.n.Add(1)
	}
	return err
}

// deadAddr returns an address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

type sliceSource struct {
	kvs    []*pb.KeyValue
	i      int
	closed atomic.Bool
}

func (s *sliceSource) Next() (*pb.KeyValue, error) {
	if s.i == len(s.kvs) {
		return nil, io.EOF
	}
	s.i++
	return s.kvs[s.i-1], nil
}

func (s *sliceSource) Close() error { s.closed.Store(true); return nil }

func makeKVs(n, valueLen int) []*pb.KeyValue {
	rng := rand.New(rand.NewSource(1))
	kvs := make([]*pb.KeyValue, n)
	for i := range kvs {
		v := make([]byte, valueLen)
		rng.Read(v)
		kvs[i] = &pb.KeyValue{Key: fmt.Appendf(nil, "key-%08d", i), Value: v}
	}
	return kvs
}

func msg(from, to, seq uint64) *pb.RaftMessage {
	return &pb.RaftMessage{RangeId: seq, FromNode: from, ToNode: to, Message: fmt.Appendf(nil, "m-%d-%d-%d", from, to, seq)}
}

// ---------- tests ----------

func TestExchangePreservesOrder(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes int
		msgs  int
	}{
		{"two nodes", 2, 2000},
		{"three nodes", 3, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkGoroutines(t)
			dir := newDirectory()
			var nodes []*testNode
			for i := 1; i <= tc.nodes; i++ {
				nodes = append(nodes, startNode(t, dir, Config{NodeID: uint64(i), ClusterID: "c1"}))
			}
			var wg sync.WaitGroup
			for _, from := range nodes {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for seq := 1; seq <= tc.msgs; seq++ {
						for _, to := range nodes {
							if to != from && !from.tr.Send(msg(from.id, to.id, uint64(seq))) {
								t.Errorf("send %d->%d #%d refused", from.id, to.id, seq)
							}
						}
					}
				}()
			}
			wg.Wait()
			want := (tc.nodes - 1) * tc.msgs
			for _, n := range nodes {
				waitFor(t, 5*time.Second, fmt.Sprintf("node %d to receive %d messages", n.id, want),
					func() bool { return n.rec.count() >= want })
				next := map[uint64]uint64{}
				for _, m := range n.rec.messages() {
					if m.ToNode != n.id {
						t.Fatalf("node %d got message for %d", n.id, m.ToNode)
					}
					if m.RangeId != next[m.FromNode]+1 {
						t.Fatalf("node %d: from %d got seq %d after %d", n.id, m.FromNode, m.RangeId, next[m.FromNode])
					}
					if want := fmt.Sprintf("m-%d-%d-%d", m.FromNode, m.ToNode, m.RangeId); string(m.Message) != want {
						t.Fatalf("payload %q, want %q", m.Message, want)
					}
					next[m.FromNode] = m.RangeId
				}
				if n.rec.count() != want {
					t.Fatalf("node %d got %d messages, want %d", n.id, n.rec.count(), want)
				}
			}
			for _, n := range nodes {
				st := n.tr.Stats()
				if st.MessagesSent != uint64(want) || st.MessagesDropped != 0 {
					t.Fatalf("node %d stats %+v", n.id, st)
				}
			}
		})
	}
}

func TestBatching(t *testing.T) {
	checkGoroutines(t)
	dir := newDirectory()
	a := startNode(t, dir, Config{NodeID: 1})
	b := startNode(t, dir, Config{NodeID: 2})
	const n = 3000
	for i := 1; i <= n; i++ {
		if !a.tr.Send(msg(1, 2, uint64(i))) {
			t.Fatalf("send %d refused", i)
		}
	}
	waitFor(t, 5*time.Second, "all messages", func() bool { return b.rec.count() == n })
	st := a.tr.Stats()
	b.rec.mu.Lock()
	handlerCalls := b.rec.batches
	b.rec.mu.Unlock()
	t.Logf("%d messages in %d batches", st.MessagesSent, st.BatchesSent)
	if st.MessagesSent != n || st.BatchesSent != uint64(handlerCalls) {
		t.Fatalf("stats %+v, receiver saw %d batches", st, handlerCalls)
	}
	if st.BatchesSent > n/4 {
		t.Fatalf("%d batches for %d messages: group batching did not happen", st.BatchesSent, n)
	}
	if min := uint64((n + maxBatchMessages - 1) / maxBatchMessages); st.BatchesSent < min {
		t.Fatalf("%d batches, fewer than the %d the batch limit allows", st.BatchesSent, min)
	}
}

func TestSendRefused(t *testing.T) {
	checkGoroutines(t)
	dir := newDirectory()
	dir.set(2, deadAddr(t))
	a := startNode(t, dir, Config{NodeID: 1, QueueLen: 4})
	for _, tc := range []struct {
		name string
		msg  *pb.RaftMessage
	}{
		{"nil", nil},
		{"no destination", &pb.RaftMessage{FromNode: 1}},
		{"unresolvable", msg(1, 99, 1)},
	} {
		if a.tr.Send(tc.msg) {
			t.Errorf("%s: Send accepted", tc.name)
		}
	}
	// A full queue refuses without blocking.
	refused := 0
	for i := 0; i < 1000; i++ {
		if !a.tr.Send(msg(1, 2, uint64(i))) {
			refused++
		}
	}
	if refused == 0 {
		t.Fatal("queue of 4 accepted 1000 messages to a dead node")
	}
	a.tr.Close()
	if a.tr.Send(msg(1, 2, 1)) {
		t.Fatal("Send accepted after Close")
	}
	if st := a.tr.Stats(); st.MessagesDropped < uint64(refused+4) {
		t.Fatalf("dropped %d, want >= %d", st.MessagesDropped, refused+4)
	}
}

func TestReconnectAfterDestinationComesUp(t *testing.T) {
	checkGoroutines(t)
	dir := newDirectory()
	unreachable := make(chan uint64, 100)
	a := startNode(t, dir, Config{NodeID: 1, OnUnreachable: func(id uint64) {
		select {
		case unreachable <- id:
		default:
		}
	}})
	dir.set(2, deadAddr(t)) // node 2 is down
	if !a.tr.Send(msg(1, 2, 0)) {
		t.Fatal("send refused")
	}
	select {
	case id := <-unreachable:
		if id != 2 {
			t.Fatalf("unreachable %d, want 2", id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("OnUnreachable not called")
	}
	if st := a.tr.Stats(); st.MessagesDropped == 0 {
		t.Fatalf("message to a down node not counted as dropped: %+v", st)
	}

	// Node 2 comes up at a new address; the sender re-resolves on reconnect.
	b := startNode(t, dir, Config{NodeID: 2})
	seq := uint64(1)
	waitFor(t, 5*time.Second, "messages after reconnect", func() bool {
		a.tr.Send(msg(1, 2, seq))
		seq++
		return b.rec.count() > 0
	})
	// The stream is up: later messages arrive in order.
	first := b.rec.messages()[0].RangeId
	for i := 0; i < 100; i++ {
		if !a.tr.Send(msg(1, 2, seq)) {
			t.Fatal("send refused")
		}
		seq++
	}
	waitFor(t, 5*time.Second, "in-order delivery", func() bool {
		ms := b.rec.messages()
		return ms[len(ms)-1].RangeId == seq-1
	})
	prev := first - 1
	for _, m := range b.rec.messages() {
		if m.RangeId <= prev {
			t.Fatalf("out of order: %d after %d", m.RangeId, prev)
		}
		prev = m.RangeId
	}
}

func TestSnapshot(t *testing.T) {
	checkGoroutines(t)
	dir := newDirectory()
	a := startNode(t, dir, Config{NodeID: 1, ClusterID: "c1"})
	b := startNode(t, dir, Config{NodeID: 2, ClusterID: "c1"})
	kvs := makeKVs(5*1024, 1024) // ~5 MiB
	src := &sliceSource{kvs: kvs}
	header := &pb.RaftMessage{RangeId: 7, FromNode: 1, ToNode: 2, Message: []byte("msgsnap")}
	if err := a.tr.SendSnapshot(context.Background(), header, src); err != nil {
		t.Fatal(err)
	}
	if !src.closed.Load() {
		t.Fatal("source not closed")
	}
	b.rec.mu.Lock()
	snaps := b.rec.snaps
	b.rec.mu.Unlock()
	if len(snaps) != 1 {
		t.Fatalf("%d snapshots received", len(snaps))
	}
	got := snaps[0]
	if got.header.RangeId != 7 || got.header.ToNode != 2 || string(got.header.Message) != "msgsnap" {
		t.Fatalf("header %+v", got.header)
	}
	if len(got.kvs) != len(kvs) {
		t.Fatalf("%d kvs, want %d", len(got.kvs), len(kvs))
	}
	for i := range kvs {
		if !bytes.Equal(got.kvs[i].Key, kvs[i].Key) || !bytes.Equal(got.kvs[i].Value, kvs[i].Value) {
			t.Fatalf("kv %d differs", i)
		}
	}
	if c := b.chunks.Load(); c < 5 {
		t.Fatalf("%d chunks, want >= 5", c)
	}
	if st := a.tr.Stats(); st.SnapshotsSent != 1 || st.SnapshotBytesSent < 5<<20 {
		t.Fatalf("sender stats %+v", st)
	}
	if st := b.tr.Stats(); st.SnapshotsReceived != 1 {
		t.Fatalf("receiver stats %+v", st)
	}

	// An empty snapshot is a single final chunk carrying the header.
	if err := a.tr.SendSnapshot(context.Background(), header, &sliceSource{}); err != nil {
		t.Fatal(err)
	}

	// The receiver's handler error comes back to the sender.
	b.rec.mu.Lock()
	b.rec.snapErr = errors.New("disk on fire")
	b.rec.mu.Unlock()
	err := a.tr.SendSnapshot(context.Background(), header, &sliceSource{kvs: kvs[:10]})
	if err == nil || !strings.Contains(err.Error(), "disk on fire") || !strings.Contains(err.Error(), "node 2") {
		t.Fatalf("handler error not returned: %v", err)
	}

	// Unresolvable destination.
	if err := a.tr.SendSnapshot(context.Background(), &pb.RaftMessage{ToNode: 42}, &sliceSource{}); err == nil {
		t.Fatal("snapshot to unknown node succeeded")
	}
}

func TestVerifyChunkCRC(t *testing.T) {
	kvs := makeKVs(20, 100)
	good := chunkCRC(kvs)
	clone := func(kvs []*pb.KeyValue) []*pb.KeyValue {
		out := make([]*pb.KeyValue, len(kvs))
		for i, kv := range kvs {
			out[i] = &pb.KeyValue{Key: bytes.Clone(kv.Key), Value: bytes.Clone(kv.Value)}
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		mutate func(kvs []*pb.KeyValue) []*pb.KeyValue
		crc    uint32
		ok     bool
	}{
		{"intact", func(k []*pb.KeyValue) []*pb.KeyValue { return k }, good, true},
		{"empty chunk", func([]*pb.KeyValue) []*pb.KeyValue { return nil }, 0, true},
		{"flipped value bit", func(k []*pb.KeyValue) []*pb.KeyValue { k[3].Value[5] ^= 1; return k }, good, false},
		{"changed key", func(k []*pb.KeyValue) []*pb.KeyValue { k[0].Key[0]++; return k }, good, false},
		{"reordered", func(k []*pb.KeyValue) []*pb.KeyValue { k[1], k[2] = k[2], k[1]; return k }, good, false},
		{"dropped pair", func(k []*pb.KeyValue) []*pb.KeyValue { return k[1:] }, good, false},
		// Moving a byte from the key to the value keeps the concatenation but not the length prefixes.
		{"shifted boundary", func(k []*pb.KeyValue) []*pb.KeyValue {
			k[0].Value = append([]byte{k[0].Key[len(k[0].Key)-1]}, k[0].Value...)
			k[0].Key = k[0].Key[:len(k[0].Key)-1]
			return k
		}, good, false},
		{"wrong crc", func(k []*pb.KeyValue) []*pb.KeyValue { return k }, good + 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := verifyChunk(&pb.SnapshotChunk{Kvs: tc.mutate(clone(kvs)), Crc32C: tc.crc})
			if (err == nil) != tc.ok {
				t.Fatalf("verifyChunk = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

func TestCorruptSnapshotRejected(t *testing.T) {
	checkGoroutines(t)
	dir := newDirectory()
	b := startNode(t, dir, Config{NodeID: 2})
	conn, err := grpc.NewClient(b.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stream, err := pb.NewRaftTransportClient(conn).Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	kvs := makeKVs(10, 50)
	crc := chunkCRC(kvs)
	kvs[4].Value[0] ^= 0xff // corrupted in flight
	if err := stream.Send(&pb.SnapshotChunk{Header: msg(1, 2, 0), Kvs: kvs, Crc32C: crc, Final: true}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetError().GetCode() != pb.ErrorCode_INTERNAL || !strings.Contains(resp.GetError().GetMessage(), "crc32c") {
		t.Fatalf("response %v, want INTERNAL crc error", resp)
	}
	b.rec.mu.Lock()
	defer b.rec.mu.Unlock()
	if len(b.rec.snaps) != 0 {
		t.Fatal("corrupt snapshot delivered to the handler")
	}
}

func TestClusterID(t *testing.T) {
	for _, tc := range []struct {
		sender, receiver string
		ok               bool
	}{
		{"c1", "c1", true},
		{"c1", "c2", false},
		{"", "c2", true}, // bootstrap: a node without a cluster id yet
		{"c1", "", true}, // receiver accepts any
	} {
		t.Run(fmt.Sprintf("%q->%q", tc.sender, tc.receiver), func(t *testing.T) {
			checkGoroutines(t)
			dir := newDirectory()
			var unreachable atomic.Int64
			a := startNode(t, dir, Config{NodeID: 1, ClusterID: tc.sender, OnUnreachable: func(uint64) { unreachable.Add(1) }})
			b := startNode(t, dir, Config{NodeID: 2, ClusterID: tc.receiver})

			err := a.tr.SendSnapshot(context.Background(), msg(1, 2, 0), &sliceSource{kvs: makeKVs(3, 10)})
			if (err == nil) != tc.ok {
				t.Fatalf("snapshot: err=%v, want ok=%v", err, tc.ok)
			}
			if !tc.ok && !strings.Contains(err.Error(), "cluster id mismatch") {
				t.Fatalf("snapshot error %v does not name the cause", err)
			}

			a.tr.Send(msg(1, 2, 1))
			if tc.ok {
				waitFor(t, 5*time.Second, "delivery", func() bool { return b.rec.count() == 1 })
				return
			}
			waitFor(t, 5*time.Second, "OnUnreachable", func() bool { return unreachable.Load() > 0 })
			if b.rec.count() != 0 {
				t.Fatal("batch from a foreign cluster delivered")
			}
		})
	}
}

func TestMisroutedBatchRejected(t *testing.T) {
	checkGoroutines(t)
	dir := newDirectory()
	var unreachable atomic.Int64
	a := startNode(t, dir, Config{NodeID: 1, OnUnreachable: func(uint64) { unreachable.Add(1) }})
	b := startNode(t, dir, Config{NodeID: 2})
	dir.set(3, b.addr) // stale address: node 3's messages land on node 2
	a.tr.Send(msg(1, 3, 1))
	waitFor(t, 5*time.Second, "OnUnreachable", func() bool { return unreachable.Load() > 0 })
	if b.rec.count() != 0 {
		t.Fatal("misrouted message delivered")
	}
}

func TestSnapshotTooLarge(t *testing.T) {
	checkGoroutines(t)
	old := maxSnapshotBytes
	maxSnapshotBytes = 1 << 20
	t.Cleanup(func() { maxSnapshotBytes = old })
	dir := newDirectory()
	a := startNode(t, dir, Config{NodeID: 1, SnapshotChunkBytes: 256 << 10})
	b := startNode(t, dir, Config{NodeID: 2})
	err := a.tr.SendSnapshot(context.Background(), msg(1, 2, 0), &sliceSource{kvs: makeKVs(2048, 1024)})
	if err == nil || !strings.Contains(err.Error(), "exceeds") {
		t.Fatalf("oversized snapshot: err=%v", err)
	}
	if b.tr.Stats().SnapshotsReceived != 0 {
		t.Fatal("oversized snapshot received")
	}
}

func TestSnapshotRateLimit(t *testing.T) {
	checkGoroutines(t)
	dir := newDirectory()
	const rate = 1 << 20 // 1 MiB/s; bucket holds max(rate/8, chunk) = 128 KiB
	a := startNode(t, dir, Config{NodeID: 1, SnapshotRateBytesPerSec: rate, SnapshotChunkBytes: 64 << 10})
	startNode(t, dir, Config{NodeID: 2})
	kvs := makeKVs(1280, 1024) // 1.25 MiB: ~1.1 s of refills beyond the initial burst
	start := time.Now()
	if err := a.tr.SendSnapshot(context.Background(), msg(1, 2, 0), &sliceSource{kvs: kvs}); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("1.25 MiB at 1 MiB/s took %v", took)
	if took < time.Second {
		t.Fatalf("snapshot took %v, rate limit not respected", took)
	}
	if took > 10*time.Second {
		t.Fatalf("snapshot took %v, limiter far too slow", took)
	}
}

// TestSnapshotRecvRateLimit: a receiver's limit holds back a sender that may go much faster.
func TestSnapshotRecvRateLimit(t *testing.T) {
	checkGoroutines(t)
	dir := newDirectory()
	a := startNode(t, dir, Config{NodeID: 1, SnapshotRateBytesPerSec: 64 << 20, SnapshotChunkBytes: 64 << 10})
	startNode(t, dir, Config{NodeID: 2, SnapshotRecvRateBytesPerSec: 1 << 20, SnapshotChunkBytes: 64 << 10})
	kvs := makeKVs(1280, 1024) // 1.25 MiB at 1 MiB/s received: over a second beyond the burst
	start := time.Now()
	if err := a.tr.SendSnapshot(context.Background(), msg(1, 2, 0), &sliceSource{kvs: kvs}); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("1.25 MiB received at 1 MiB/s took %v", took)
	if took < time.Second {
		t.Fatalf("snapshot took %v, receive limit not respected", took)
	}
	if took > 10*time.Second {
		t.Fatalf("snapshot took %v, receive limiter far too slow", took)
	}
}

func TestTokenBucket(t *testing.T) {
	b := newTokenBucket(1000, 100)
	ctx := context.Background()
	start := time.Now()
	if err := b.wait(ctx, 100); err != nil { // the initial burst is free
		t.Fatal(err)
	}
	if err := b.wait(ctx, 200); err != nil { // 200 tokens at 1000/s
		t.Fatal(err)
	}
	if took := time.Since(start); took < 180*time.Millisecond {
		t.Fatalf("took %v, want >= ~200ms", took)
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	start = time.Now()
	if err := b.wait(cctx, 1_000_000); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait = %v, want deadline exceeded", err)
	}
	// A wait for its tokens would take 1 000 s: far longer than any stall of the host.
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("canceled wait took %v", took)
	}
	// The canceled reservation was returned: a small request right after is served promptly (a kept
	// one would make it wait 1 000 s).
	sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
	defer scancel()
	start = time.Now()
	if err := b.wait(sctx, 10); err != nil {
		t.Fatalf("small wait after a canceled one: %v after %v", err, time.Since(start))
	}
}

func TestCloseStopsGoroutines(t *testing.T) {
	checkGoroutines(t)
	dir := newDirectory()
	dir.set(9, deadAddr(t))
	a := startNode(t, dir, Config{NodeID: 1, SnapshotRateBytesPerSec: 64 << 10, SnapshotChunkBytes: 16 << 10})
	b := startNode(t, dir, Config{NodeID: 2})
	c := startNode(t, dir, Config{NodeID: 3})
	for i := 1; i <= 100; i++ {
		a.tr.Send(msg(1, 2, uint64(i)))
		a.tr.Send(msg(1, 3, uint64(i)))
		a.tr.Send(msg(1, 9, uint64(i))) // a sender stuck in reconnect backoff
		b.tr.Send(msg(2, 1, uint64(i)))
	}
	waitFor(t, 5*time.Second, "delivery", func() bool { return b.rec.count() == 100 && c.rec.count() == 100 })

	// A snapshot stalled by the rate limiter is canceled by Close.
	snapErr := make(chan error, 1)
	go func() {
		snapErr <- a.tr.SendSnapshot(context.Background(), msg(1, 2, 0), &sliceSource{kvs: makeKVs(1024, 1024)})
	}()
	time.Sleep(50 * time.Millisecond)
	closed := make(chan struct{})
	go func() {
		a.tr.Close()
		a.tr.Close() // idempotent
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close hung")
	}
	select {
	case err := <-snapErr:
		if err == nil {
			t.Fatal("snapshot succeeded despite Close")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("SendSnapshot not canceled by Close")
	}
	if err := a.tr.SendSnapshot(context.Background(), msg(1, 2, 0), &sliceSource{}); err == nil {
		t.Fatal("SendSnapshot after Close succeeded")
	}
	// checkGoroutines verifies the rest after the servers and other transports stop.
}

// The bytes queued for one destination are bounded: large messages to a dead node are refused once
// the bound is reached, even though the queue has room for more of them, and a message larger than
// the bound on its own is still taken when nothing else is queued.
func TestSendBoundedBytes(t *testing.T) {
	checkGoroutines(t)
	dir := newDirectory()
	dir.set(2, deadAddr(t))
	a := startNode(t, dir, Config{NodeID: 1, QueueLen: 1000, QueueBytes: 64 << 10})
	big := func(i uint64) *pb.RaftMessage {
		m := msg(1, 2, i)
		m.Message = make([]byte, 16<<10)
		return m
	}
	accepted := 0
	for i := 0; i < 100; i++ {
		if a.tr.Send(big(uint64(i))) {
			accepted++
		}
	}
	// The sender goroutine takes one message at a time off the queue while it tries to connect, so a
	// few more than 64 KiB / 16 KiB may pass; never anywhere near the 100 the queue length allows.
	// Each failed connection discards the queue, and then room is made for more: a host that stalls
	// this loop for the sender's backoffs lets more pass, as many as the sender discarded.
	discarded := int(a.tr.Stats().MessagesDropped) - (100 - accepted)
	if accepted < 3 || accepted > 10+discarded {
		t.Errorf("accepted %d messages of 16 KiB with a 64 KiB bound (%d discarded by the sender)", accepted, discarded)
	}
	a.tr.Close()
}

// TestSnapshotsReceivingCountsStreamsAtOnce: the receiver counts the snapshot streams it is receiving
// and remembers the most at once (what an incremental join's one-sender-at-a-time invariant is
// checked against).
func TestSnapshotsReceivingCountsStreamsAtOnce(t *testing.T) {
	checkGoroutines(t)
	dir := newDirectory()
	a := startNode(t, dir, Config{NodeID: 1, SnapshotChunkBytes: 64 << 10})
	b := startNode(t, dir, Config{NodeID: 2, SnapshotRecvRateBytesPerSec: 2 << 20, SnapshotChunkBytes: 64 << 10})
	c := startNode(t, dir, Config{NodeID: 3, SnapshotChunkBytes: 64 << 10})
	kvs := makeKVs(1024, 1024) // 1 MiB at 2 MiB/s: ~0.5 s per stream beyond the burst
	for i := 0; i < 2; i++ {
		if err := a.tr.SendSnapshot(context.Background(), msg(1, 2, 0), &sliceSource{kvs: kvs}); err != nil {
			t.Fatal(err)
		}
	}
	if st := b.tr.Stats(); st.SnapshotsReceiving != 0 || st.SnapshotsReceivingMax != 1 {
		t.Fatalf("after two snapshots one after the other: receiving %d, most at once %d; want 0, 1",
			st.SnapshotsReceiving, st.SnapshotsReceivingMax)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, from := range []*testNode{a, c} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- from.tr.SendSnapshot(context.Background(), msg(from.id, 2, 0), &sliceSource{kvs: kvs})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if st := b.tr.Stats(); st.SnapshotsReceiving != 0 || st.SnapshotsReceivingMax != 2 {
		t.Fatalf("after two snapshots at once: receiving %d, most at once %d; want 0, 2",
			st.SnapshotsReceiving, st.SnapshotsReceivingMax)
	}
}
