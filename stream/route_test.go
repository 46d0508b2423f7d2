package stream

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

func TestRouteCache(t *testing.T) {
	var rc routeCache
	rc.insert(&routeEntry{start: []byte("a"), end: []byte("m"), leader: "n1"})
	rc.insert(&routeEntry{start: []byte("m"), leader: "n2"}) // to the end of the key space
	for key, want := range map[string]string{"a": "n1", "l": "n1", "m": "n2", "zzz": "n2"} {
		if l := rc.leader([]byte(key)); l != want {
			t.Fatalf("leader(%q) = %q, want %s", key, l, want)
		}
	}
	if l := rc.leader([]byte("0")); l != "" {
		t.Fatalf("a key before every range: %q", l)
	}
	// A split's right side replaces the part of the older entry it overlaps.
	rc.insert(&routeEntry{start: []byte("f"), end: []byte("m"), leader: "n3"})
	if l := rc.leader([]byte("b")); l != "" {
		t.Fatalf("the overlapped older entry stayed: %q", l)
	}
	if l := rc.leader([]byte("g")); l != "n3" {
		t.Fatalf("leader(g) = %q", l)
	}
	rc.setLeader([]byte("g"), "n1")
	if l := rc.leader([]byte("h")); l != "n1" {
		t.Fatalf("leader hint not applied: %q", l)
	}
	rc.evict([]byte("h"))
	if l := rc.leader([]byte("h")); l != "" {
		t.Fatalf("evicted entry still found: %q", l)
	}
	if l := rc.leader([]byte("x")); l != "n2" {
		t.Fatalf("an unrelated entry went: %q", l)
	}
}

// TestRouteCacheConcurrent has senders read a range's leader while others apply NOT_LEADER hints
// to it, as an ingester's senders do while a range's leadership moves (the race detector checks
// that no reader sees an entry being written).
func TestRouteCacheConcurrent(t *testing.T) {
	var in Ingester
	in.routes.insert(&routeEntry{start: []byte("a"), leader: "n1"})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				if w%2 == 0 {
					in.routes.setLeader([]byte("k"), fmt.Sprintf("n%d", i%3+1))
				} else if l, err := in.leaderOf(context.Background(), []byte("k")); err != nil || l == "" {
					t.Errorf("the range's cached leader: %q, %v", l, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestValueEnvelope(t *testing.T) {
	pos, data, present, err := DecodeValue(EncodeValue(300, []byte("x")))
	if err != nil || pos != 300 || string(data) != "x" || !present {
		t.Fatalf("round trip: %d %q %v %v", pos, data, present, err)
	}
	if pos, _, present, err := DecodeValue(encodeAbsent(7)); err != nil || pos != 7 || present {
		t.Fatalf("absent: %d %v %v", pos, present, err)
	}
	if _, _, _, err := DecodeValue([]byte("plain")); err == nil {
		t.Fatal("a value without the envelope decoded")
	}
}
