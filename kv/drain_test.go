package kv

import (
	"context"
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
