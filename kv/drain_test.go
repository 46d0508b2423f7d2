package kv

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoaldb/shoal/pb"
)

// TestDrainWaitsForRequestsInFlight: once Drain begins, a new request is refused with UNAVAILABLE
// (its client retries elsewhere), and Drain returns only when the request admitted before has
// answered, or with the count still running when its context ends first.
func TestDrainWaitsForRequestsInFlight(t *testing.T) {
	s := New(Config{}, Deps{})
	adm, refused := s.admit(&pb.PutRequest{Key: []byte("k")})
	if refused != nil {
		t.Fatalf("admit before Drain: %v", refused)
	}

	short, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if left := s.Drain(short); left != 1 {
		t.Fatalf("Drain with a request in flight and a short deadline: %d left, want 1", left)
	}
	if _, refused := s.admit(&pb.GetRequest{Key: []byte("k")}); refused.GetCode() != pb.ErrorCode_UNAVAILABLE {
		t.Fatalf("admit while draining: %v, want UNAVAILABLE", refused)
	}

	drained := make(chan int)
	go func() { drained <- s.Drain(context.Background()) }()
	select {
	case left := <-drained:
		t.Fatalf("Drain returned (%d left) while a request was in flight", left)
	case <-time.After(20 * time.Millisecond):
	}
	adm.done()
	select {
	case left := <-drained:
		if left != 0 {
			t.Fatalf("Drain after the last request answered: %d left, want 0", left)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Drain did not return after the last request answered")
	}
	if st := s.gate.Stats(); st.InFlight != 0 || st.Bytes != 0 {
		t.Fatalf("request gate holds %d requests, %d bytes after every request answered", st.InFlight, st.Bytes)
	}
}

// TestDrainUnderConcurrentRequests: with requests arriving from many goroutines, Drain returns only
// once none admitted is still running, and none is admitted once it returned.
func TestDrainUnderConcurrentRequests(t *testing.T) {
	s := New(Config{}, Deps{})
	var running, admittedAfter atomic.Int64
	var drained atomic.Bool
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				was := drained.Load()
				adm, refused := s.admit(&pb.GetRequest{Key: []byte("k")})
				if refused != nil {
					continue
				}
				if was {
					admittedAfter.Add(1)
				}
				running.Add(1)
				time.Sleep(50 * time.Microsecond)
				running.Add(-1)
				adm.done()
			}
		})
	}
	time.Sleep(20 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	left := s.Drain(ctx)
	drained.Store(true)
	if n := running.Load(); left != 0 || n != 0 {
		t.Errorf("Drain returned with %d counted and %d requests running, want 0 and 0", left, n)
	}
	time.Sleep(20 * time.Millisecond)
	close(stop)
	wg.Wait()
	if n := admittedAfter.Load(); n != 0 {
		t.Errorf("%d requests admitted after Drain returned", n)
	}
}
