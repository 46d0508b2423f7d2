package stream

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/pb"
)

// wedgedNode is one node leading the whole key space whose first Ingest call never answers (a
// handler stuck, a connection stalled); every later call applies its events.
type wedgedNode struct {
	pb.UnimplementedShoalServer
	pb.UnimplementedStreamsServer
	addr  string
	calls atomic.Int32
}

func (w *wedgedNode) RangeLookup(context.Context, *pb.RangeLookupRequest) (*pb.RangeLookupResponse, error) {
	return &pb.RangeLookupResponse{Range: &pb.RangeDescriptor{RangeId: 2}, LeaderNodeId: 1,
		Nodes: []*pb.NodeDescriptor{{NodeId: 1, Addr: w.addr}}}, nil
}

func (w *wedgedNode) Ingest(ctx context.Context, req *pb.IngestRequest) (*pb.IngestResponse, error) {
	if w.calls.Add(1) == 1 {
		<-ctx.Done() // answers only when the caller gives up
		return nil, ctx.Err()
	}
	resp := &pb.IngestResponse{}
	for range req.GetEvents() {
		resp.Results = append(resp.Results, &pb.IngestResult{Status: pb.IngestResult_APPLIED})
	}
	return resp, nil
}

// TestIngestCallTimeout: a call that never answers is abandoned after CallTimeout and its events
// are sent again, so the producer goes on instead of waiting for its context's end.
func TestIngestCallTimeout(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	node := &wedgedNode{addr: lis.Addr().String()}
	srv := grpc.NewServer()
	pb.RegisterShoalServer(srv, node)
	pb.RegisterStreamsServer(srv, node)
	go srv.Serve(lis)
	defer srv.Stop()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := client.New(ctx, client.Config{Addrs: []string{node.addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	in, err := NewIngester(IngesterConfig{Client: cl, CallTimeout: 300 * time.Millisecond}, "count")
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	acks, err := in.Send(ctx, [][]byte{[]byte("a"), []byte("b")})
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	for _, a := range acks {
		if a.Status != pb.IngestResult_APPLIED {
			t.Fatalf("event %s@%d: %v", a.Key, a.Position, a.Status)
		}
	}
	if n := node.calls.Load(); n != 2 {
		t.Fatalf("%d Ingest calls, want the wedged one and its resend", n)
	}
}
