package client

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/shoaldb/shoal/pb"
)

func TestErrorSentinels(t *testing.T) {
	sentinels := map[pb.ErrorCode]error{
		pb.ErrorCode_NOT_LEADER:       ErrNotLeader,
		pb.ErrorCode_RANGE_MOVED:      ErrRangeMoved,
		pb.ErrorCode_UNAVAILABLE:      ErrUnavailable,
		pb.ErrorCode_OVERLOADED:       ErrOverloaded,
		pb.ErrorCode_INVALID_ARGUMENT: ErrInvalidArgument,
		pb.ErrorCode_TIMEOUT:          ErrTimeout,
		pb.ErrorCode_AMBIGUOUS:        ErrAmbiguous,
		pb.ErrorCode_UNAUTHENTICATED:  ErrUnauthenticated,
		pb.ErrorCode_INTERNAL:         ErrInternal,
	}
	for code, sentinel := range sentinels {
		err := fmt.Errorf("wrapped: %w", fromPB(&pb.Error{Code: code, Message: "m", LeaderAddr: "x:1"}))
		for other, s := range sentinels {
			if got, want := errors.Is(err, s), other == code; got != want {
				t.Errorf("errors.Is(%v, %v) = %v, want %v", code, other, got, want)
			}
		}
		var ce *Error
		if !errors.As(err, &ce) || ce.Code != code || ce.LeaderAddr != "x:1" {
			t.Errorf("errors.As(%v) = %+v", code, ce)
		}
		if errors.Is(sentinel, errors.New("other")) {
			t.Errorf("%v matches a plain error", sentinel)
		}
	}
	if fromPB(nil) != nil || fromPB(&pb.Error{}) != nil {
		t.Error("fromPB of nil/OK is not nil")
	}
}

func TestErrorText(t *testing.T) {
	cases := []struct {
		err  *Error
		want string
	}{
		{&Error{Code: pb.ErrorCode_INVALID_ARGUMENT, Message: "key is empty"}, "invalid argument: key is empty"},
		{&Error{Code: pb.ErrorCode_NOT_LEADER}, "not leader"},
		{&Error{Code: pb.ErrorCode_RANGE_MOVED, Message: "range moved: r3"}, "range moved: r3"},
	}
	for _, tc := range cases {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
	e := ctxError(opKind{name: "get"}, context.DeadlineExceeded, nil)
	if !errors.Is(e, ErrTimeout) || !errors.Is(e, context.DeadlineExceeded) {
		t.Errorf("ctxError(deadline) = %v", e)
	}
	e = ctxError(opKind{name: "get"}, context.Canceled, nil)
	if errors.Is(e, ErrTimeout) || !errors.Is(e, context.Canceled) {
		t.Errorf("ctxError(canceled) = %v", e)
	}
}

func desc(id uint64, start, end string, gen uint64) *pb.RangeDescriptor {
	return &pb.RangeDescriptor{RangeId: id, StartKey: []byte(start), EndKey: []byte(end), Generation: gen}
}

func TestRangeCache(t *testing.T) {
	rc := newRangeCache()
	rc.insert(desc(1, "", "", 1), 1, []*pb.NodeDescriptor{{NodeId: 1, Addr: "n1"}})
	if e, ok := rc.get([]byte("k")); !ok || e.desc.GetRangeId() != 1 || rc.leaderAddrOf(e) != "n1" {
		t.Fatalf("get = %+v %v", e, ok)
	}
	// A split: the right half replaces part of range 1; range 1's newer generation replaces the old.
	rc.insert(desc(2, "m", "", 2), 0, nil)
	if _, ok := rc.get([]byte("a")); ok {
		t.Fatal("range 1 [-inf,+inf) should have been evicted by the overlapping right half")
	}
	rc.insert(desc(1, "", "m", 2), 0, nil)
	// A stale generation of range 1 must not replace the newer one.
	rc.insert(desc(1, "", "", 1), 0, nil)
	for _, tc := range []struct {
		key string
		id  uint64
	}{{"", 1}, {"a", 1}, {"l\xff", 1}, {"m", 2}, {"zzz", 2}} {
		e, ok := rc.get([]byte(tc.key))
		if !ok || e.desc.GetRangeId() != tc.id {
			t.Errorf("get(%q) = r%d %v, want r%d", tc.key, e.desc.GetRangeId(), ok, tc.id)
		}
	}
	for _, tc := range []struct {
		end string
		id  uint64
		ok  bool
	}{{"", 2, true}, {"m", 1, true}, {"n", 2, true}, {"b", 1, true}} {
		e, ok := rc.getBefore([]byte(tc.end))
		if ok != tc.ok || (ok && e.desc.GetRangeId() != tc.id) {
			t.Errorf("getBefore(%q) = r%d %v, want r%d %v", tc.end, e.desc.GetRangeId(), ok, tc.id, tc.ok)
		}
	}
	rc.setLeader(2, 3, "n3")
	if e, _ := rc.get([]byte("x")); rc.leaderAddrOf(e) != "n3" {
		t.Errorf("leader of r2 = %q", rc.leaderAddrOf(e))
	}
	e, _ := rc.get([]byte("x"))
	rc.evict(desc(2, "m", "", 2)) // a different pointer: not evicted
	if _, ok := rc.get([]byte("x")); !ok {
		t.Error("evict with a different descriptor removed the entry")
	}
	rc.evict(e.desc)
	if _, ok := rc.get([]byte("x")); ok {
		t.Error("evict did not remove the entry")
	}
	if _, ok := rc.getBefore(nil); ok {
		t.Error("getBefore(+inf) found a range after the last one was evicted")
	}
}
