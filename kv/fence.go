package kv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
)

// fenceHoldMax bounds how long a write waits for a fence (pb.SpanFence) to lift before it is
// answered UNAVAILABLE (not applied: the client retries, and waits again).
const fenceHoldMax = 10 * time.Second

// Fence implements pb.ShoalServer: it sets, retires or lifts a span fence on the range holding
// req.Key, through that range's raft log.
func (s *Service) Fence(ctx context.Context, req *pb.FenceRequest) (*pb.FenceResponse, error) {
	start := time.Now()
	if pe := s.validateKey(req.Key); pe != nil {
		return &pb.FenceResponse{Error: pe}, nil
	}
	if req.Fence.GetId() == 0 {
		return &pb.FenceResponse{Error: InvalidArgument("a fence needs a non-zero id")}, nil
	}
	cmd := &pb.Command{SetFence: req.Fence}
	if req.Lift {
		cmd = &pb.Command{LiftFence: req.Fence.Id}
	}
	r, pe := s.replicaFor(nil, req.Key, true)
	if pe != nil {
		return &pb.FenceResponse{Error: pe}, nil
	}
	res, pe := s.propose(ctx, start, nil, req.Key, cmd)
	return &pb.FenceResponse{Error: pe, Index: res.Index, Range: r.Desc()}, nil
}

// holdWhileFenced waits while a fence of r holds a key cmd writes: until it lifts (nil: propose
// now), it retires (SPAN_RETIRED), ctx ends or fenceHoldMax passes (UNAVAILABLE, not applied).
func holdWhileFenced(ctx context.Context, r *replica.Replica, cmd *pb.Command) *pb.Error {
	if f, _ := r.WriteFence(cmd); f == nil {
		return nil // the common case: no fence, no timer
	}
	deadline := time.Now().Add(fenceHoldMax)
	if d, ok := ctx.Deadline(); ok && d.Add(-100*time.Millisecond).Before(deadline) {
		deadline = d.Add(-100 * time.Millisecond)
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		f, k := r.WriteFence(cmd)
		switch {
		case f == nil:
			return nil
		case f.Retired:
			return &pb.Error{Code: pb.ErrorCode_SPAN_RETIRED, Message: fmt.Sprintf("key %.64q: its span moved for good (fence %d): reload what maps to it", k, f.Id)}
		case time.Now().After(deadline):
			return &pb.Error{Code: pb.ErrorCode_UNAVAILABLE, Message: fmt.Sprintf("key %.64q: its span is still fenced (fence %d) after %s; not applied, try again", k, f.Id, fenceHoldMax)}
		}
		select {
		case <-ctx.Done():
			return &pb.Error{Code: pb.ErrorCode_UNAVAILABLE, Message: fmt.Sprintf("key %.64q: its span is fenced (fence %d); not applied: %v", k, f.Id, ctx.Err())}
		case <-tick.C:
		}
	}
}

// isFenced reports whether err is a write refused by a fence it applied after (not applied).
func isFenced(err error) bool {
	var re *replica.Error
	return errors.As(err, &re) && re.Code == pb.ErrorCode_FENCED
}

// retiredRead refuses a read of [start, end) (empty end: to the range's end) that overlaps a
// retired fence of r: the data there is the old copy of what moved, and a reader must follow it.
func retiredRead(r *replica.Replica, start, end []byte) *pb.Error {
	for _, f := range r.Fences() {
		if f.Retired && (len(end) == 0 || bytes.Compare(f.StartKey, end) < 0) && (len(f.EndKey) == 0 || bytes.Compare(start, f.EndKey) < 0) {
			return retiredErr(start, f)
		}
	}
	return nil
}

// retiredKey is retiredRead for one key.
func retiredKey(r *replica.Replica, key []byte) *pb.Error {
	fs := r.Fences()
	if len(fs) == 0 {
		return nil
	}
	if f := replica.FenceFor(&pb.RangeDescriptor{Fences: fs}, key); f != nil && f.Retired {
		return retiredErr(key, f)
	}
	return nil
}

func retiredErr(key []byte, f *pb.SpanFence) *pb.Error {
	return &pb.Error{Code: pb.ErrorCode_SPAN_RETIRED, Message: fmt.Sprintf("%.64q is in a span that moved for good (fence %d): reload what maps to it", key, f.Id)}
}
