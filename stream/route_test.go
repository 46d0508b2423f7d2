package stream

import "testing"

func TestRouteCache(t *testing.T) {
	var rc routeCache
	rc.insert(&routeEntry{start: []byte("a"), end: []byte("m"), leader: "n1"})
	rc.insert(&routeEntry{start: []byte("m"), leader: "n2"}) // to the end of the key space
	for key, want := range map[string]string{"a": "n1", "l": "n1", "m": "n2", "zzz": "n2"} {
		if e := rc.get([]byte(key)); e == nil || e.leader != want {
			t.Fatalf("get(%q) = %+v, want leader %s", key, e, want)
		}
	}
	if e := rc.get([]byte("0")); e != nil {
		t.Fatalf("a key before every range: %+v", e)
	}
	// A split's right side replaces the part of the older entry it overlaps.
	rc.insert(&routeEntry{start: []byte("f"), end: []byte("m"), leader: "n3"})
	if e := rc.get([]byte("b")); e != nil {
		t.Fatalf("the overlapped older entry stayed: %+v", e)
	}
	if e := rc.get([]byte("g")); e == nil || e.leader != "n3" {
		t.Fatalf("get(g) = %+v", e)
	}
	rc.setLeader([]byte("g"), "n1")
	if e := rc.get([]byte("h")); e.leader != "n1" {
		t.Fatalf("leader hint not applied: %+v", e)
	}
	rc.evict([]byte("h"))
	if e := rc.get([]byte("h")); e != nil {
		t.Fatalf("evicted entry still found: %+v", e)
	}
	if e := rc.get([]byte("x")); e == nil || e.leader != "n2" {
		t.Fatalf("an unrelated entry went: %+v", e)
	}
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
