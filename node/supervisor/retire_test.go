package supervisor

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/shoaldb/shoal/pb"
)

// blocking is a service whose call waits until released, and records it was served.
type blocking struct {
	name    string
	started chan struct{}
	release chan struct{}
}

func (b *blocking) call() (any, error) {
	b.started <- struct{}{}
	<-b.release
	return b.name, nil
}

// A unary call the retiring node serves finishes before quiesce lets the node stop, and a call that
// arrives meanwhile waits and is served by the next node instead of failing.
func TestQuiesceLetsCallsFinishAndHoldsNewOnes(t *testing.T) {
	s := &Supervisor{log: slog.Default()}
	s.ctx = context.Background()
	desc := &grpc.ServiceDesc{ServiceName: "svc", HandlerType: (*any)(nil), Methods: []grpc.MethodDesc{{MethodName: "Call",
		Handler: func(srv any, _ context.Context, _ func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			return srv.(*blocking).call()
		}}}}
	call := s.forward(desc).Methods[0].Handler
	oldSvc := &blocking{name: "old", started: make(chan struct{}, 2), release: make(chan struct{})}
	old := &incarnation{impls: map[string]any{"svc": oldSvc}, retired: make(chan struct{})}
	s.cur.Store(old)

	type answer struct {
		v   any
		err error
	}
	first := make(chan answer, 1)
	go func() {
		v, err := call(nil, context.Background(), nil, nil)
		first <- answer{v, err}
	}()
	<-oldSvc.started
	quiesced := make(chan int64, 1)
	go func() { quiesced <- s.quiesce(old, 10*time.Second) }()

	// A call arriving now waits for the next node.
	second := make(chan answer, 1)
	time.Sleep(20 * time.Millisecond)
	go func() {
		v, err := call(nil, context.Background(), nil, nil)
		second <- answer{v, err}
	}()
	select {
	case k := <-quiesced:
		t.Fatalf("quiesce returned (%d left) while a call ran", k)
	case <-oldSvc.started:
		t.Fatal("a call reached the retiring node")
	case <-time.After(100 * time.Millisecond):
	}
	close(oldSvc.release)
	if a := <-first; a.err != nil || a.v != "old" {
		t.Fatalf("the running call: %v, %v", a.v, a.err)
	}
	select {
	case k := <-quiesced:
		if k != 0 {
			t.Fatalf("%d calls left", k)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("quiesce did not return after the call finished")
	}

	next := &blocking{name: "next", started: make(chan struct{}, 1), release: make(chan struct{})}
	close(next.release)
	s.cur.Store(&incarnation{impls: map[string]any{"svc": next}, retired: make(chan struct{})})
	if a := <-second; a.err != nil || a.v != "next" {
		t.Fatalf("the call that arrived during the retirement: %v, %v; want served by the next node", a.v, a.err)
	}
}

// A call that does not finish does not hold the retirement beyond its bound.
func TestQuiesceIsBounded(t *testing.T) {
	s := &Supervisor{log: slog.Default()}
	s.ctx = context.Background()
	inc := &incarnation{impls: map[string]any{"svc": struct{}{}}, retired: make(chan struct{})}
	s.cur.Store(inc)
	if got, _ := s.enter("svc", true); got != inc {
		t.Fatal("enter did not count the call")
	}
	start := time.Now()
	if k := s.quiesce(inc, 50*time.Millisecond); k != 1 || time.Since(start) > time.Second {
		t.Fatalf("quiesce: %d left after %s, want 1 after about 50ms", k, time.Since(start))
	}
	if got, _ := s.enter("svc", true); got != nil {
		t.Fatal("a retiring node took a call")
	}
}

// kvLike is a service whose responses carry an Error, as Shoal's do.
type kvLike struct{}

func (kvLike) Put(context.Context, *pb.PutRequest) (*pb.PutResponse, error) {
	return &pb.PutResponse{}, nil
}

// A call whose response carries an Error, arriving while no node runs, is answered within
// AnswerWait with UNAVAILABLE in its response — which the client retries as a request not served —
// rather than held until its client's attempt times out (which the client reports ambiguous).
func TestRestartingAnswerInTheResponse(t *testing.T) {
	s := &Supervisor{log: slog.Default(), first: map[string]any{"kv": kvLike{}}}
	s.ctx = context.Background()
	desc := &grpc.ServiceDesc{ServiceName: "kv", HandlerType: (*any)(nil), Methods: []grpc.MethodDesc{{MethodName: "Put",
		Handler: func(srv any, ctx context.Context, _ func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			return srv.(kvLike).Put(ctx, &pb.PutRequest{})
		}}}}
	start := time.Now()
	v, err := s.forward(desc).Methods[0].Handler(nil, context.Background(), nil, nil)
	took := time.Since(start)
	resp, ok := v.(*pb.PutResponse)
	if err != nil || !ok || resp.GetError().GetCode() != pb.ErrorCode_UNAVAILABLE {
		t.Fatalf("no node running: %v, %v; want a PutResponse with UNAVAILABLE", v, err)
	}
	if took < AnswerWait || took > AnswerWait+time.Second {
		t.Fatalf("answered after %s, want after about %s", took, AnswerWait)
	}
	if restartingAnswer(kvLike{}, "Get") != nil || restartingAnswer(&blocking{}, "call") != nil {
		t.Fatal("an answer for a method the service lacks or whose response has no Error")
	}
}
