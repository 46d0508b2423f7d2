package hint

import (
	"bytes"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
)

// EncodeRange writes what proto.Marshal writes for RangeToProto, for every field's zero and
// non-zero values.
func TestEncodeRangeMatchesProto(t *testing.T) {
	now := time.Now()
	for _, r := range []RangeHints{
		{},
		{RangeID: 1},
		{RangeID: 1 << 40, CapturedAt: now.Add(-1500 * time.Microsecond)},
		{RangeID: 3, CapturedAt: now.Add(time.Second)}, // from the future: age 0
		{RangeID: 9, Hints: []Hint{
			{Descriptor: Point([]byte("a"))},
			{Descriptor: Point([]byte("usertable/user6284781860667377211")), Count: 300},
			{Descriptor: Point(nil), Count: 1},
			{Descriptor: ScanOf([]byte("a"), []byte("zz"), 7, true), Count: ^uint32(0)},
			{Descriptor: ScanOf([]byte("b"), nil, 0, false), Count: 2},
			{Descriptor: ScanOf(nil, []byte("c"), 1<<31, false)},
		}},
	} {
		got := EncodeRange(r, now)
		want, err := proto.MarshalOptions{Deterministic: true}.Marshal(RangeToProto(r, now))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("range %d: encoded %x, proto.Marshal %x", r.RangeID, got, want)
		}
		if cap(got) != len(got) {
			t.Errorf("range %d: %d bytes in a buffer of %d (the size pass is off)", r.RangeID, len(got), cap(got))
		}
	}
}
