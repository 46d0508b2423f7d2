package hint

import (
	"testing"
	"time"

	"github.com/shoaldb/shoal/pb"
)

func TestBatchRoundTrip(t *testing.T) {
	now := time.Now()
	in := []RangeHints{{RangeID: 4, CapturedAt: now.Add(-250 * time.Millisecond), Hints: []Hint{
		{Descriptor: Point([]byte("k")), Count: 3},
		{Descriptor: ScanOf([]byte("a"), []byte("b"), 7, true), Count: 1},
	}}}
	b := BatchToProto(1, "c", in, now)
	b.QueuedMicros = 50000
	later := now.Add(10 * time.Second) // the receiver's clock is unrelated
	out := BatchFromProto(b, later)
	if len(out) != 1 || out[0].RangeID != 4 || len(out[0].Hints) != 2 {
		t.Fatalf("round trip %+v", out)
	}
	for i := range in[0].Hints {
		if !out[0].Hints[i].Equal(in[0].Hints[i].Descriptor) || out[0].Hints[i].Count != in[0].Hints[i].Count {
			t.Fatalf("hint %d: %+v, want %+v", i, out[0].Hints[i], in[0].Hints[i])
		}
	}
	if age := later.Sub(out[0].CapturedAt); age != 300*time.Millisecond {
		t.Fatalf("age on the receiver %v, want 250ms + 50ms queued", age)
	}
	if h := HintFromProto(&pb.ReadHint{Key: []byte("x"), End: []byte("y")}); h.End != nil || h.Count != 1 {
		t.Fatalf("a point hint with an end / a zero count: %+v", h)
	}
}
