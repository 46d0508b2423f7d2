package client

import (
	"context"
	"testing"

	"github.com/shoaldb/shoal/pb"
)

// TestWatchPositions: two changes of one key at one index (an EXPIRE then a PUT) are both
// delivered, and the same changes read again after a reconnect are dropped by their position.
func TestWatchPositions(t *testing.T) {
	var got []string
	w := &watch{ctx: context.Background(), feeds: map[uint64]*feed{}, fn: func(ev WatchEvent) error {
		got = append(got, ev.Kind.String()+" "+string(ev.Key))
		return nil
	}}
	f := &feed{id: 7, pos: 5, complete: true, opened: true}
	w.feeds[7] = f
	evs := []*pb.RangeFeedEvent{
		{Kind: pb.RangeFeedEvent_EXPIRE, RangeId: 7, Index: 6, Seq: 0, Key: []byte("k")},
		{Kind: pb.RangeFeedEvent_PUT, RangeId: 7, Index: 6, Seq: 1, Key: []byte("k")},
	}
	for _, ev := range evs {
		if err := w.handle(f, ev); err != nil {
			t.Fatal(err)
		}
	}
	// A reconnect from index 5 sends index 6 again, then one more change of it and index 7.
	again := append(evs, &pb.RangeFeedEvent{Kind: pb.RangeFeedEvent_DELETE, RangeId: 7, Index: 6, Seq: 2, Key: []byte("j")},
		&pb.RangeFeedEvent{Kind: pb.RangeFeedEvent_PUT, RangeId: 7, Index: 7, Seq: 0, Key: []byte("k")})
	for _, ev := range again {
		if err := w.handle(f, ev); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"EXPIRE k", "PUT k", "DELETE j", "PUT k"}
	if len(got) != len(want) {
		t.Fatalf("delivered %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("delivered %q, want %q", got, want)
		}
	}
}
