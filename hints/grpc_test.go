package hints

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/shoaldb/shoal/pb"
)

// recvServer is a Hints service that records what reaches it, over Ship or ShipStream, and counts
// the ShipStream handlers running. With stall set its stream handler never reads (flow control
// then holds the sender); with unaryOnly it answers ShipStream Unimplemented, as an older node does.
type recvServer struct {
	pb.UnimplementedHintsServer
	stall     bool
	unaryOnly atomic.Bool

	mu       sync.Mutex
	unary    []uint64 // FromNode of each batch received by Ship
	streamed []uint64 // … by ShipStream
	streams  atomic.Int32
}

func (s *recvServer) Ship(_ context.Context, b *pb.HintBatch) (*pb.HintShipAck, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unary = append(s.unary, b.GetFromNode())
	return &pb.HintShipAck{QueuedRanges: uint32(len(b.GetRanges()))}, nil
}

func (s *recvServer) ShipStream(stream pb.Hints_ShipStreamServer) error {
	if s.unaryOnly.Load() {
		return s.UnimplementedHintsServer.ShipStream(stream)
	}
	if err := stream.SendHeader(nil); err != nil { // as service.ShipStream does
		return err
	}
	s.streams.Add(1)
	defer s.streams.Add(-1)
	if s.stall {
		<-stream.Context().Done()
		return stream.Context().Err()
	}
	for {
		b, err := stream.Recv()
		if err != nil {
			return err
		}
		s.mu.Lock()
		s.streamed = append(s.streamed, b.GetFromNode())
		s.mu.Unlock()
	}
}

func (s *recvServer) got() (unary, streamed []uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]uint64(nil), s.unary...), append([]uint64(nil), s.streamed...)
}

// serveHints serves srv on a loopback port until the test ends and returns a connection to it.
func serveHints(t *testing.T, srv pb.HintsServer) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	pb.RegisterHintsServer(gs, srv)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

func sendOne(s Sender, from uint64) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.Send(ctx, 2, &pb.HintBatch{FromNode: from})
}

// Batches travel on one stream, in order; a new connection to the peer gets a new stream; Close
// ends the stream on the peer too, and later sends fail.
func TestStreamSenderOneStreamPerPeer(t *testing.T) {
	srv := &recvServer{}
	cc := serveHints(t, srv)
	var conn atomic.Pointer[grpc.ClientConn]
	conn.Store(cc)
	s := NewStreamSender(func(uint64) (grpc.ClientConnInterface, error) { return conn.Load(), nil })
	for i := uint64(1); i <= 5; i++ {
		if err := sendOne(s, i); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	eventually(t, 5*time.Second, "five batches on the stream", func() bool { _, st := srv.got(); return len(st) == 5 })
	if u, st := srv.got(); len(u) != 0 || st[0] != 1 || st[4] != 5 || srv.streams.Load() != 1 {
		t.Fatalf("unary %v, streamed %v over %d streams: want 1..5 in order on one stream", u, st, srv.streams.Load())
	}

	// The node replaced its connection to the peer: the old stream ends, a new one carries on.
	cc2, err := grpc.NewClient(cc.Target(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc2.Close()
	conn.Store(cc2)
	if err := sendOne(s, 6); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the batch on the new connection's stream, the old stream gone", func() bool {
		_, st := srv.got()
		return len(st) == 6 && srv.streams.Load() == 1
	})

	s.Close()
	eventually(t, 5*time.Second, "the peer's handler to end", func() bool { return srv.streams.Load() == 0 })
	if err := sendOne(s, 7); !errors.Is(err, errSenderClosed) {
		t.Fatalf("send after Close: %v, want %v", err, errSenderClosed)
	}
}

// A stream that breaks (the connection closed under it) fails that send, and the next send opens a
// new one.
func TestStreamSenderReopensBrokenStream(t *testing.T) {
	srv := &recvServer{}
	cc := serveHints(t, srv)
	target := cc.Target()
	var conn atomic.Pointer[grpc.ClientConn]
	conn.Store(cc)
	s := NewStreamSender(func(uint64) (grpc.ClientConnInterface, error) { return conn.Load(), nil })
	defer s.Close()
	if err := sendOne(s, 1); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the first batch", func() bool { _, st := srv.got(); return len(st) == 1 })
	cc.Close()
	if err := sendOne(s, 2); err == nil {
		t.Fatal("send on a closed connection succeeded")
	}
	cc2, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc2.Close()
	conn.Store(cc2)
	if err := sendOne(s, 3); err != nil {
		t.Fatalf("send after reconnecting: %v", err)
	}
	eventually(t, 5*time.Second, "the batch on a new stream", func() bool {
		_, st := srv.got()
		return len(st) == 2 && st[1] == 3
	})
}

// A peer that does not know ShipStream gets unary Ship calls, from the first batch on, and a stream
// again once the retry time has passed (it was upgraded meanwhile).
func TestStreamSenderFallsBackToUnary(t *testing.T) {
	srv := &recvServer{}
	srv.unaryOnly.Store(true)
	cc := serveHints(t, srv)
	s := NewStreamSender(func(uint64) (grpc.ClientConnInterface, error) { return cc, nil })
	defer s.Close()
	for i := uint64(1); i <= 3; i++ {
		if err := sendOne(s, i); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	if u, st := srv.got(); len(u) != 3 || len(st) != 0 {
		t.Fatalf("unary %v streamed %v: want three unary calls", u, st)
	}
	srv.unaryOnly.Store(false)
	if err := sendOne(s, 4); err != nil {
		t.Fatal(err)
	}
	if u, _ := srv.got(); len(u) != 4 {
		t.Fatalf("within the retry time: %d unary calls, want 4", len(u))
	}
	s.mu.Lock()
	s.peers[2].unaryUntil = time.Time{} // the retry time has passed
	s.mu.Unlock()
	if err := sendOne(s, 5); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the batch on a stream", func() bool {
		u, st := srv.got()
		return len(u) == 4 && len(st) == 1 && st[0] == 5
	})
}

// A peer that does not read: flow control holds a send, which ends with its context (and the
// stream with it) instead of blocking the peer's queue for good.
func TestStreamSenderSendBoundedByContext(t *testing.T) {
	srv := &recvServer{stall: true}
	cc := serveHints(t, srv)
	s := NewStreamSender(func(uint64) (grpc.ClientConnInterface, error) { return cc, nil })
	defer s.Close()
	big := &pb.HintBatch{FromNode: 1, ClusterId: strings.Repeat("x", 256<<10)}
	start := time.Now()
	var err error
	for i := 0; i < 400 && err == nil; i++ { // at most 100 MiB: far beyond any flow-control window
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err = s.Send(ctx, 2, big)
		cancel()
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("sends to a peer that never reads: %v, want a deadline error", err)
	}
	if el := time.Since(start); el > 30*time.Second {
		t.Fatalf("the held send took %v to give up", el)
	}
	eventually(t, 5*time.Second, "the abandoned stream to end on the peer", func() bool { return srv.streams.Load() == 0 })
}
