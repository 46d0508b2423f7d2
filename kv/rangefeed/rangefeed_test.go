package rangefeed

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shoaldb/shoal/pb"
)

func put(idx uint64, key string) *pb.RangeFeedEvent {
	return &pb.RangeFeedEvent{Kind: pb.RangeFeedEvent_PUT, RangeId: 7, Index: idx, Key: []byte(key), Value: []byte("v")}
}

var desc = &pb.RangeDescriptor{RangeId: 7}

// serveUntil runs Serve and collects what it sends until it returns or n events arrived.
func serveUntil(t *testing.T, g *Registry, req *pb.RangeFeedRequest, n int) ([]*pb.RangeFeedEvent, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var got []*pb.RangeFeedEvent
	first := true
	err := g.Serve(ctx, req, func(ev *pb.RangeFeedEvent) error {
		if first { // the starting position
			first = false
			return nil
		}
		got = append(got, ev)
		if len(got) == n {
			cancel()
		}
		return nil
	})
	return got, err
}

func TestServeFromPosition(t *testing.T) {
	g := New(Config{CheckpointInterval: time.Hour})
	g.Reset(7, desc, 10, 10)
	g.Applied(7, []*pb.RangeFeedEvent{put(11, "a"), put(12, "b"), put(12, "c"), put(13, "z")}, 13)
	for _, tc := range []struct {
		name       string
		from       uint64
		start, end string
		want       []string
	}{
		{"all from the start", 10, "", "", []string{"a", "b", "c", "z"}},
		{"after a position", 11, "", "", []string{"b", "c", "z"}},
		{"a span", 10, "b", "d", []string{"b", "c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := serveUntil(t, g, &pb.RangeFeedRequest{RangeId: 7, FromIndex: tc.from, StartKey: []byte(tc.start), EndKey: []byte(tc.end)}, len(tc.want))
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Serve: %v", err)
			}
			var keys []string
			for _, ev := range got {
				keys = append(keys, string(ev.Key))
			}
			if len(keys) != len(tc.want) {
				t.Fatalf("got %q, want %q", keys, tc.want)
			}
			for i := range keys {
				if keys[i] != tc.want[i] {
					t.Fatalf("got %q, want %q", keys, tc.want)
				}
			}
		})
	}
}

func TestEvictionDropsWholeIndexes(t *testing.T) {
	// Room for about three events: the oldest index goes with both its events.
	g := New(Config{RangeBufferBytes: 3 * (eventOverhead + 2), CheckpointInterval: time.Hour})
	g.Reset(7, desc, 10, 10)
	g.Applied(7, []*pb.RangeFeedEvent{put(11, "a"), put(11, "b")}, 11)
	g.Applied(7, []*pb.RangeFeedEvent{put(12, "c"), put(13, "d")}, 13)
	if _, err := serveUntil(t, g, &pb.RangeFeedRequest{RangeId: 7, FromIndex: 10}, 1); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("from an evicted index: %v, want ErrNotHeld", err)
	}
	got, err := serveUntil(t, g, &pb.RangeFeedRequest{RangeId: 7, FromIndex: 11}, 2)
	if !errors.Is(err, context.Canceled) || len(got) != 2 || string(got[0].Key) != "c" {
		t.Fatalf("from the first held index: %v %v", got, err)
	}
	if st := g.Stats(); st.Events != 2 || st.Bytes != 2*(eventOverhead+2) {
		t.Fatalf("stats %+v", st)
	}
}

func TestSplitEndsTheStreamAndRemovedReplicaDrains(t *testing.T) {
	g := New(Config{CheckpointInterval: time.Hour})
	g.Reset(7, desc, 10, 10)
	left, right := &pb.RangeDescriptor{RangeId: 7, EndKey: []byte("m")}, &pb.RangeDescriptor{RangeId: 8, StartKey: []byte("m")}
	g.Applied(7, []*pb.RangeFeedEvent{put(11, "a"), {Kind: pb.RangeFeedEvent_SPLIT, RangeId: 7, Index: 12, Desc: left, Right: right}, put(13, "b")}, 13)
	got, err := serveUntil(t, g, &pb.RangeFeedRequest{RangeId: 7, FromIndex: 10}, 10)
	if err != nil || len(got) != 2 || got[1].Kind != pb.RangeFeedEvent_SPLIT {
		t.Fatalf("split: %v %v", got, err)
	}
	// A replica created by the split holds its whole history; a removed one drains, then says so.
	g.Reset(8, right, 10, 0)
	g.Applied(8, []*pb.RangeFeedEvent{put(11, "n")}, 11)
	g.Removed(8, right)
	got, err = serveUntil(t, g, &pb.RangeFeedRequest{RangeId: 8, FromIndex: 1}, 10)
	if err != nil || len(got) != 2 || string(got[0].Key) != "n" || got[1].Kind != pb.RangeFeedEvent_REMOVED {
		t.Fatalf("removed: %v %v", got, err)
	}
	if _, err := serveUntil(t, g, &pb.RangeFeedRequest{RangeId: 9}, 1); !errors.Is(err, ErrNoReplica) {
		t.Fatalf("unknown range: %v", err)
	}
}

func TestLiveEventsAndCheckpoints(t *testing.T) {
	g := New(Config{CheckpointInterval: 20 * time.Millisecond})
	g.Reset(7, desc, 10, 10)
	go func() {
		time.Sleep(30 * time.Millisecond)
		g.Applied(7, []*pb.RangeFeedEvent{put(11, "a")}, 11)
		time.Sleep(30 * time.Millisecond)
		g.Applied(7, nil, 15) // applied entries with no change in the span: a checkpoint tells
	}()
	got, err := serveUntil(t, g, &pb.RangeFeedRequest{RangeId: 7}, 2)
	if !errors.Is(err, context.Canceled) || len(got) != 2 {
		t.Fatalf("got %v, %v", got, err)
	}
	if got[0].Kind != pb.RangeFeedEvent_PUT || got[1].Kind != pb.RangeFeedEvent_CHECKPOINT || got[1].Index != 15 {
		t.Fatalf("got %v", got)
	}
}

func TestAfterMergeStartsAtTheMerge(t *testing.T) {
	g := New(Config{CheckpointInterval: time.Hour})
	g.Reset(7, desc, 10, 10)
	merged := &pb.RangeDescriptor{RangeId: 7, EndKey: []byte("z")}
	right := &pb.RangeDescriptor{RangeId: 8, StartKey: []byte("m")}
	g.Applied(7, []*pb.RangeFeedEvent{put(11, "a"), {Kind: pb.RangeFeedEvent_MERGE, RangeId: 7, Index: 12, Desc: merged, Right: right}, put(13, "n")}, 13)
	got, err := serveUntil(t, g, &pb.RangeFeedRequest{RangeId: 7, AfterMergeOf: 8, StartKey: []byte("m")}, 1)
	if !errors.Is(err, context.Canceled) || len(got) != 1 || string(got[0].Key) != "n" {
		t.Fatalf("after the merge of range 8: %v %v", got, err)
	}
	if _, err := serveUntil(t, g, &pb.RangeFeedRequest{RangeId: 7, AfterMergeOf: 9}, 1); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("after a merge the buffer does not hold: %v", err)
	}
}

func TestNodeBudgetAndRemovedBuffersAreBounded(t *testing.T) {
	g := New(Config{NodeBufferBytes: 4 * (eventOverhead + 1), RetainRemoved: time.Millisecond, CheckpointInterval: time.Hour})
	for id := uint64(1); id <= 3; id++ {
		g.Reset(id, desc, 10, 10)
		g.Applied(id, []*pb.RangeFeedEvent{put(11, "a"), put(12, "b")}, 12)
	}
	if st := g.Stats(); st.Bytes > 4*(eventOverhead+1) {
		t.Fatalf("node budget exceeded: %+v", st)
	}
	g.Removed(1, desc)
	time.Sleep(2 * time.Millisecond)
	g.swept = time.Time{}
	g.Applied(2, []*pb.RangeFeedEvent{put(13, "c")}, 13) // a later apply sweeps
	if st := g.Stats(); st.Buffers != 2 {
		t.Fatalf("the removed replica's buffer outlived its retention: %+v", st)
	}
}

func TestPinKeepsWhatAReaderNeedsUpToTheHardLimit(t *testing.T) {
	g := New(Config{RangeBufferBytes: 2 * (eventOverhead + 1), CheckpointInterval: time.Hour})
	g.Reset(7, desc, 10, 10)
	pin, err := g.PinAt(7, 10)
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(11); i <= 20; i++ { // five times the budget: kept for the pinned reader
		g.Applied(7, []*pb.RangeFeedEvent{put(i, "k")}, i)
	}
	got, err := serveUntilPinned(t, g, pin, &pb.RangeFeedRequest{RangeId: 7, FromIndex: 10}, 10)
	if !errors.Is(err, context.Canceled) || len(got) != 10 {
		t.Fatalf("a pinned reader lost changes: %d events, %v", len(got), err)
	}
	for i := uint64(21); i <= 40; i++ { // unpinned now: back to the budget
		g.Applied(7, []*pb.RangeFeedEvent{put(i, "k")}, i)
	}
	if st := g.Stats(); st.Events > 2 {
		t.Fatalf("after the reader left, the buffer holds %d events", st.Events)
	}
	pin, _ = g.PinAt(7, 38)
	for i := uint64(41); i <= 80; i++ { // past 8× the budget: the pin gives way
		g.Applied(7, []*pb.RangeFeedEvent{put(i, "k")}, i)
	}
	if _, err := serveUntilPinned(t, g, pin, &pb.RangeFeedRequest{RangeId: 7, FromIndex: 38}, 1); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("a reader beyond the hard limit: %v, want ErrNotHeld", err)
	}
}

func serveUntilPinned(t *testing.T, g *Registry, pin *Pin, req *pb.RangeFeedRequest, n int) ([]*pb.RangeFeedEvent, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var got []*pb.RangeFeedEvent
	err := g.ServePinned(ctx, pin, req, SendFunc(func(ev *pb.RangeFeedEvent) error {
		if ev.Kind == pb.RangeFeedEvent_CHECKPOINT {
			return nil
		}
		got = append(got, ev)
		if len(got) == n {
			cancel()
		}
		return nil
	}))
	return got, err
}
