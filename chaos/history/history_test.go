package history

import (
	"errors"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/shoaldb/shoal/client"
)

// TestModel guards the model itself: a stale read after an acknowledged write must be rejected, and a
// pending write may take effect or not.
func TestModel(t *testing.T) {
	put := func(cid int, v string, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: cid, Input: Input{Kind: Put, Key: "a", Value: v}, Call: call, Output: Output{}, Return: ret}
	}
	get := func(cid int, found bool, v string, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: cid, Input: Input{Kind: Get, Key: "a"}, Call: call, Output: Output{Found: found, Value: v}, Return: ret}
	}
	pending := func(cid int, v string, call int64) porcupine.Operation {
		return porcupine.Operation{ClientId: cid, Input: Input{Kind: Put, Key: "a", Value: v}, Call: call, Output: Output{Unknown: true}, Return: 100}
	}
	cas := func(cid int, exp, v string, swapped bool, cur string, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: cid, Input: Input{Kind: CAS, Key: "a", Expected: exp, Value: v}, Call: call,
			Output: Output{Swapped: swapped, Found: cur != "", Value: cur}, Return: ret}
	}
	del := func(cid int, found bool, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: cid, Input: Input{Kind: Delete, Key: "a"}, Call: call, Output: Output{Found: found}, Return: ret}
	}
	cases := []struct {
		name string
		ops  []porcupine.Operation
		want bool
	}{
		{"read own write", []porcupine.Operation{put(0, "x", 0, 1), get(0, true, "x", 2, 3)}, true},
		{"stale read", []porcupine.Operation{put(0, "x", 0, 1), put(0, "y", 2, 3), get(1, true, "x", 4, 5)}, false},
		{"read of absent after write", []porcupine.Operation{put(0, "x", 0, 1), get(1, false, "", 2, 3)}, false},
		{"concurrent reads may see either", []porcupine.Operation{put(0, "x", 0, 10), get(1, true, "x", 2, 3), get(2, true, "x", 4, 5)}, true},
		{"concurrent read flips back", []porcupine.Operation{put(0, "x", 0, 10), get(1, true, "x", 2, 3), get(1, false, "", 4, 5)}, false},
		{"pending write seen", []porcupine.Operation{pending(0, "x", 0), get(1, true, "x", 2, 3)}, true},
		{"pending write not seen", []porcupine.Operation{pending(0, "x", 0), get(1, false, "", 2, 3)}, true},
		{"pending write seen then lost", []porcupine.Operation{pending(0, "x", 0), get(1, true, "x", 2, 3), get(1, false, "", 4, 5)}, false},
		{"cas swaps", []porcupine.Operation{put(0, "x", 0, 1), cas(0, "x", "y", true, "", 2, 3), get(0, true, "y", 4, 5)}, true},
		{"cas wrong current", []porcupine.Operation{put(0, "x", 0, 1), cas(0, "z", "y", false, "q", 2, 3)}, false},
		{"cas swapped on mismatch", []porcupine.Operation{put(0, "x", 0, 1), cas(0, "z", "y", true, "", 2, 3)}, false},
		{"delete of existing", []porcupine.Operation{put(0, "x", 0, 1), del(0, true, 2, 3), get(1, false, "", 4, 5)}, true},
		{"delete reports absent wrongly", []porcupine.Operation{put(0, "x", 0, 1), del(0, false, 2, 3)}, false},
	}
	for _, tc := range cases {
		if got := porcupine.CheckOperations(Model, tc.ops); got != tc.want {
			t.Errorf("%s: linearizable = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestHistoryPendingWrites checks that a write with an unknown outcome is kept with a return after
// everything else, that definite failures are left out, and that Check finds a violation.
func TestHistoryPendingWrites(t *testing.T) {
	h := New(2)
	in := Input{Kind: Put, Key: "k", Value: "v1"}
	if pending, err := h.Add(0, in, Output{}, 1, 2, client.ErrAmbiguous); !pending || err != nil {
		t.Fatalf("ambiguous put: pending=%v err=%v, want pending", pending, err)
	}
	if pending, err := h.Add(1, Input{Kind: Put, Key: "k", Value: "v2"}, Output{}, 3, 4, client.ErrUnavailable); pending || err != nil {
		t.Fatalf("unavailable put: pending=%v err=%v, want neither", pending, err)
	}
	if _, err := h.Add(1, Input{Kind: Get, Key: "k"}, Output{}, 5, 6, client.ErrInvalidArgument); err == nil {
		t.Fatalf("invalid-argument get was accepted")
	}
	h.Add(1, Input{Kind: Get, Key: "k"}, Output{Found: true, Value: "v1"}, 7, 8, nil)
	ops := h.Finish()
	if len(ops) != 2 {
		t.Fatalf("history has %d operations, want 2 (the pending put and the get): %+v", len(ops), ops)
	}
	if ops[0].Return <= 8 {
		t.Errorf("pending put returns at %d, want after the last event (8)", ops[0].Return)
	}
	if res, _, err := Check(ops, 10*time.Second, t.TempDir(), t.Name()); res != porcupine.Ok || err != nil {
		t.Errorf("check = %v (%v), want ok", res, err)
	}
	// A read of a value nobody wrote is a violation, and Check writes a visualization of it.
	bad := append(ops, porcupine.Operation{ClientId: 1, Input: Input{Kind: Get, Key: "k"}, Output: Output{Found: true, Value: "v2"}, Call: 20, Return: 21})
	res, path, err := Check(bad, 10*time.Second, t.TempDir(), t.Name())
	if res != porcupine.Illegal || err != nil || path == "" {
		t.Errorf("check of a read of an unwritten value = %v, %q, %v; want illegal with a visualization", res, path, err)
	}
	if got := h.Counts(); got["put unknown"] != 1 || got["put failed (definite)"] != 1 || got["get ok"] != 1 {
		t.Errorf("counts = %v", got)
	}
	if Classify(errors.New("connection reset")) != OutUnknown {
		t.Errorf("an unforeseen error must be an unknown outcome")
	}
}
