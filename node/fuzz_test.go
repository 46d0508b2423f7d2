package node

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/storage"
)

// The gRPC server serves before Node.Start returns (a joining node must answer its peers), so every
// pb.ShoalServer method can be called on a node that has no identity and no replica store yet. Such a
// node must answer every request with a typed error, never panic.

// fuzzMethods are the pb.ShoalServer methods, in the order FuzzRequestValidation's method byte picks
// them (method % len): the new request message and the call.
var fuzzMethods = []struct {
	name string
	req  func() proto.Message
	call func(n *Node, ctx context.Context, m proto.Message) (proto.Message, error)
}{
	{"Get", func() proto.Message { return &pb.GetRequest{} }, func(n *Node, ctx context.Context, m proto.Message) (proto.Message, error) {
		return n.Get(ctx, m.(*pb.GetRequest))
	}},
	{"Put", func() proto.Message { return &pb.PutRequest{} }, func(n *Node, ctx context.Context, m proto.Message) (proto.Message, error) {
		return n.Put(ctx, m.(*pb.PutRequest))
	}},
	{"Delete", func() proto.Message { return &pb.DeleteRequest{} }, func(n *Node, ctx context.Context, m proto.Message) (proto.Message, error) {
		return n.Delete(ctx, m.(*pb.DeleteRequest))
	}},
	{"CompareAndSwap", func() proto.Message { return &pb.CompareAndSwapRequest{} }, func(n *Node, ctx context.Context, m proto.Message) (proto.Message, error) {
		return n.CompareAndSwap(ctx, m.(*pb.CompareAndSwapRequest))
	}},
	{"BatchWrite", func() proto.Message { return &pb.BatchWriteRequest{} }, func(n *Node, ctx context.Context, m proto.Message) (proto.Message, error) {
		return n.BatchWrite(ctx, m.(*pb.BatchWriteRequest))
	}},
	{"Scan", func() proto.Message { return &pb.ScanRequest{} }, func(n *Node, ctx context.Context, m proto.Message) (proto.Message, error) {
		return n.Scan(ctx, m.(*pb.ScanRequest))
	}},
	{"RangeLookup", func() proto.Message { return &pb.RangeLookupRequest{} }, func(n *Node, ctx context.Context, m proto.Message) (proto.Message, error) {
		return n.RangeLookup(ctx, m.(*pb.RangeLookupRequest))
	}},
	{"Nodes", func() proto.Message { return &pb.NodesRequest{} }, func(n *Node, ctx context.Context, m proto.Message) (proto.Message, error) {
		return n.Nodes(ctx, m.(*pb.NodesRequest))
	}},
	{"Ranges", func() proto.Message { return &pb.RangesRequest{} }, func(n *Node, ctx context.Context, m proto.Message) (proto.Message, error) {
		return n.Ranges(ctx, m.(*pb.RangesRequest))
	}},
	{"Split", func() proto.Message { return &pb.SplitRequest{} }, func(n *Node, ctx context.Context, m proto.Message) (proto.Message, error) {
		return n.Split(ctx, m.(*pb.SplitRequest))
	}},
	{"TransferLeader", func() proto.Message { return &pb.TransferLeaderRequest{} }, func(n *Node, ctx context.Context, m proto.Message) (proto.Message, error) {
		return n.TransferLeader(ctx, m.(*pb.TransferLeaderRequest))
	}},
	{"RelocateReplica", func() proto.Message { return &pb.RelocateReplicaRequest{} }, func(n *Node, ctx context.Context, m proto.Message) (proto.Message, error) {
		return n.RelocateReplica(ctx, m.(*pb.RelocateReplicaRequest))
	}},
	{"Join", func() proto.Message { return &pb.JoinRequest{} }, func(n *Node, ctx context.Context, m proto.Message) (proto.Message, error) {
		return n.Join(ctx, m.(*pb.JoinRequest))
	}},
	{"Heartbeat", func() proto.Message { return &pb.HeartbeatRequest{} }, func(n *Node, ctx context.Context, m proto.Message) (proto.Message, error) {
		return n.Heartbeat(ctx, m.(*pb.HeartbeatRequest))
	}},
	{"MetaCommand", func() proto.Message { return &pb.MetaCommandRequest{} }, func(n *Node, ctx context.Context, m proto.Message) (proto.Message, error) {
		return n.MetaCommand(ctx, m.(*pb.MetaCommandRequest))
	}},
}

// fuzzMethod returns the method byte that selects name.
func fuzzMethod(name string) uint8 {
	for i, m := range fuzzMethods {
		if m.name == name {
			return uint8(i)
		}
	}
	panic("unknown method " + name)
}

func mustMarshal(m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

// requestSeeds are valid and invalid requests of every method, for f.Add.
func requestSeeds() []struct {
	method string
	req    proto.Message
} {
	big := bytes.Repeat([]byte("k"), 4<<10+1)
	return []struct {
		method string
		req    proto.Message
	}{
		{"Get", &pb.GetRequest{Key: []byte("a")}},
		{"Get", &pb.GetRequest{}},
		{"Get", &pb.GetRequest{Key: big}},
		{"Get", &pb.GetRequest{Key: []byte("a"), Header: &pb.RequestHeader{RangeId: 2, FollowerRead: true}}},
		{"Put", &pb.PutRequest{Key: []byte("a"), Value: []byte("1")}},
		{"Put", &pb.PutRequest{Key: []byte("a"), Header: &pb.RequestHeader{RangeId: 1}}},
		{"Put", &pb.PutRequest{Value: []byte("1")}},
		{"Delete", &pb.DeleteRequest{Key: []byte("a")}},
		{"CompareAndSwap", &pb.CompareAndSwapRequest{Key: []byte("a"), Expected: []byte("0"), Value: []byte("1")}},
		{"CompareAndSwap", &pb.CompareAndSwapRequest{Key: []byte("a"), ExpectAbsent: true, Delete: true}},
		{"BatchWrite", &pb.BatchWriteRequest{}},
		{"BatchWrite", &pb.BatchWriteRequest{Mutations: []*pb.Mutation{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("b"), Delete: true}}}},
		{"BatchWrite", &pb.BatchWriteRequest{Mutations: []*pb.Mutation{{Key: []byte("a")}, {}}}},
		{"Scan", &pb.ScanRequest{Start: []byte("a"), End: []byte("z"), Limit: 10}},
		{"Scan", &pb.ScanRequest{Start: []byte("z"), End: []byte("a")}},
		{"Scan", &pb.ScanRequest{Limit: -1}},
		{"Scan", &pb.ScanRequest{Start: big}},
		{"RangeLookup", &pb.RangeLookupRequest{Key: []byte("a")}},
		{"RangeLookup", &pb.RangeLookupRequest{Meta: true}},
		{"Nodes", &pb.NodesRequest{}},
		{"Ranges", &pb.RangesRequest{}},
		{"Split", &pb.SplitRequest{}},
		{"RelocateReplica", &pb.RelocateReplicaRequest{}},
		{"RelocateReplica", &pb.RelocateReplicaRequest{RangeId: 2, AddNodeId: 9}},
		{"Join", &pb.JoinRequest{Node: &pb.NodeDescriptor{Addr: "10.0.0.9:26257"}}},
		{"Join", &pb.JoinRequest{}},
		{"Heartbeat", &pb.HeartbeatRequest{ClusterId: "c", Node: &pb.NodeDescriptor{NodeId: 2, Addr: "10.0.0.2:26257"},
			KnownNodes: []*pb.NodeDescriptor{{NodeId: 3, Addr: "10.0.0.3:26257"}}, Stats: &pb.NodeStats{DiskBytes: 1}}},
		{"Heartbeat", &pb.HeartbeatRequest{}},
		{"MetaCommand", &pb.MetaCommandRequest{}},
		{"MetaCommand", &pb.MetaCommandRequest{Command: &pb.Command{Split: &pb.SplitTrigger{}}}},
	}
}

// newUnstartedNode is a node on a fresh store that was never started: no identity, no replica store.
func newUnstartedNode(tb testing.TB, eng *storage.Engine) *Node {
	tb.Helper()
	n, err := newNode(Config{DataDir: eng.Dir(), Addr: "127.0.0.1:1", Join: []string{"127.0.0.1:2"},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}.WithDefaults(), eng)
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

// FuzzRequestValidation decodes arbitrary bytes as the request of the method picked by method and calls
// that handler on a node that is not started. Every call must return quickly, without a Go error (the
// API reports errors in the response) and with a typed pb.Error: such a node can serve nothing, so
// every method but Heartbeat must fail.
func FuzzRequestValidation(f *testing.F) {
	for _, s := range requestSeeds() {
		f.Add(fuzzMethod(s.method), mustMarshal(s.req))
	}
	eng, err := storage.Open(f.TempDir(), storage.Options{CreateIfMissing: true, CacheBytes: 1 << 20, MemTableBytes: 1 << 20})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { eng.Close() })

	f.Fuzz(func(t *testing.T, method uint8, data []byte) {
		m := fuzzMethods[int(method)%len(fuzzMethods)]
		req := m.req()
		if err := proto.Unmarshal(data, req); err != nil {
			return // gRPC refuses undecodable requests before any handler runs
		}
		// A fresh node for every input; Heartbeat persists the node directory, so forget it afterwards.
		n := newUnstartedNode(t, eng)
		defer func() {
			n.Stop()
			b := eng.NewBatch()
			defer b.Close()
			if err := b.Delete(directoryKey); err != nil {
				t.Fatal(err)
			}
			if err := b.Commit(false); err != nil {
				t.Fatal(err)
			}
		}()
		// At once: long before the context ends, which a call that waits for the node would reach.
		const deadline = 30 * time.Second
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		start := time.Now()
		resp, err := m.call(n, ctx, req)
		if took := time.Since(start); took > deadline/3 || ctx.Err() != nil {
			t.Errorf("%s on an unstarted node took %v; it should fail at once", m.name, took)
		}
		if err != nil {
			t.Fatalf("%s(%v) returned a Go error %v; the API reports errors in the response", m.name, req, err)
		}
		pe := resp.(interface{ GetError() *pb.Error }).GetError()
		if m.name == "Heartbeat" {
			return // a heartbeat is served by an unstarted node (it learns the cluster's nodes)
		}
		if pe == nil {
			t.Fatalf("%s(%v) succeeded on a node that was never started: %v", m.name, req, resp)
		}
		if _, known := pb.ErrorCode_name[int32(pe.Code)]; !known || pe.Code == pb.ErrorCode_OK {
			t.Fatalf("%s(%v): error with code %v: %v", m.name, req, pe.Code, pe)
		}
		if pe.Message == "" {
			t.Errorf("%s(%v): error %v without a message", m.name, req, pe.Code)
		}
	})
}
