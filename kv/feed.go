package kv

import (
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shoaldb/shoal/kv/rangefeed"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
)

// Changes is the sink the node's replica store reports applied changes to, nil when change streams
// are off.
func (s *Service) Changes() replica.ChangeSink {
	if s.cfg.ChangeStreams.Off {
		return nil
	}
	return s.feeds
}

// RangeFeed streams a range's applied changes from this node's replica (any replica serves: a
// follower sends what it has applied). Errors carry gRPC codes: NOT_FOUND (no replica here),
// FAILED_PRECONDITION (the position is not held here), UNAVAILABLE (the node is not serving yet).
func (s *Service) RangeFeed(req *pb.RangeFeedRequest, stream pb.Shoal_RangeFeedServer) error {
	select {
	case <-s.ready:
	default:
		return status.Error(codes.Unavailable, "node is starting")
	}
	err := s.feeds.Serve(stream.Context(), req, stream.Send)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, rangefeed.ErrNoReplica):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, rangefeed.ErrNotHeld):
		return status.Error(codes.FailedPrecondition, err.Error())
	}
	return err
}
