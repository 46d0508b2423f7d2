package server_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/node"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/server"
)

// TestWatcherService watches a span through the Watcher gRPC service, as a client in another
// language would: the initial scan, the checkpoint that says the watch is established, a change,
// and a resumed watch from the last cursor that sees a later change. A stopping node ends the
// stream instead of hanging its stop.
func TestWatcherService(t *testing.T) {
	n := startNode(t, server.Config{Listen: "127.0.0.1:0", HTTP: "off", Node: node.Config{DataDir: filepath.Join(t.TempDir(), "n1"), Bootstrap: true}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.New(ctx, client.Config{Addrs: []string{n.grpc}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Put(ctx, []byte("w/a"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(n.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	wc := pb.NewWatcherClient(cc)

	recv := func(s grpc.ServerStreamingClient[pb.WatchResponse]) *pb.WatchResponse {
		t.Helper()
		m, err := s.Recv()
		if err != nil {
			t.Fatalf("recv: %v", err)
		}
		return m
	}
	sctx, scancel := context.WithCancel(ctx)
	s, err := wc.Watch(sctx, &pb.WatchRequest{StartKey: []byte("w/"), EndKey: []byte("w0"), InitialScan: true})
	if err != nil {
		t.Fatal(err)
	}
	if m := recv(s); !m.Event.Initial || string(m.Event.Key) != "w/a" || string(m.Event.Value) != "1" {
		t.Fatalf("first message %v, want the initial w/a=1", m)
	}
	m := recv(s)
	if m.Event.Kind != pb.RangeFeedEvent_CHECKPOINT || m.Cursor == "" {
		t.Fatalf("second message %v, want the checkpoint", m)
	}
	if err := c.Put(ctx, []byte("w/b"), []byte("2")); err != nil {
		t.Fatal(err)
	}
	for {
		m := recv(s)
		if m.Event.Kind == pb.RangeFeedEvent_CHECKPOINT {
			continue
		}
		if m.Event.Kind != pb.RangeFeedEvent_PUT || string(m.Event.Key) != "w/b" || m.Event.Index == 0 {
			t.Fatalf("change %v, want the put of w/b", m)
		}
		break
	}
	scancel()
	// A watch from now hands out its cursor at once; a watch resumed from it sees what came after.
	s2, err := wc.Watch(ctx, &pb.WatchRequest{StartKey: []byte("w/"), EndKey: []byte("w0")})
	if err != nil {
		t.Fatal(err)
	}
	first := recv(s2)
	if first.Event.Kind != pb.RangeFeedEvent_CHECKPOINT {
		t.Fatalf("first message of a watch from now: %v", first)
	}
	cursor := first.Cursor
	if err := c.Put(ctx, []byte("w/c"), []byte("3")); err != nil {
		t.Fatal(err)
	}
	s3, err := wc.Watch(ctx, &pb.WatchRequest{StartKey: []byte("w/"), EndKey: []byte("w0"), Cursor: cursor})
	if err != nil {
		t.Fatal(err)
	}
	for {
		m := recv(s3)
		if m.Event.Kind == pb.RangeFeedEvent_CHECKPOINT {
			continue
		}
		if string(m.Event.Key) != "w/c" {
			t.Fatalf("resumed watch delivered %v, want w/c", m)
		}
		break
	}
	// A server stream's error comes with its first Recv.
	bad, err := wc.Watch(ctx, &pb.WatchRequest{StartKey: []byte("b"), EndKey: []byte("a")})
	if err == nil {
		_, err = bad.Recv()
	}
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("an empty span: %v, want INVALID_ARGUMENT", err)
	}
	stopped := make(chan struct{})
	go func() { n.stop(t); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(20 * time.Second):
		t.Fatal("the node did not stop with watch streams open")
	}
}
