package supervisor

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/grpc"
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
