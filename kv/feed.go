package kv

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shoaldb/shoal/kv/rangefeed"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
	"github.com/shoaldb/shoal/storage/stored"
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
	var err error
	if req.InitialScan && req.FromIndex == 0 && req.AfterMergeOf == 0 {
		err = s.initialScan(req, stream)
	} else {
		err = s.feeds.ServePinned(stream.Context(), nil, req, &batcher{stream: stream})
	}
	var re *replica.Error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, rangefeed.ErrNoReplica):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, rangefeed.ErrNotHeld):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.As(err, &re):
		return status.Error(codes.Unavailable, err.Error())
	}
	return err
}

// initialScan sends the span's live keys as they are at the replica's applied index, then the
// changes after that index.
func (s *Service) initialScan(req *pb.RangeFeedRequest, stream pb.Shoal_RangeFeedServer) error {
	r := s.store.Replica(req.RangeId)
	if r == nil {
		return fmt.Errorf("range %d: %w", req.RangeId, rangefeed.ErrNoReplica)
	}
	// The stream's position is pinned where the snapshot is taken: what applies during a long scan
	// stays in the buffer for the stream that follows it.
	var pin *rangefeed.Pin
	snap, err := r.SnapshotSpan(req.StartKey, req.EndKey, func(index uint64) (err error) {
		pin, err = s.feeds.PinAt(req.RangeId, index)
		return err
	})
	if err != nil {
		return err
	}
	defer snap.Close()
	out := &batcher{stream: stream}
	err = snap.Each(func(key []byte, v stored.Value) error {
		return out.Send(&pb.RangeFeedEvent{Kind: pb.RangeFeedEvent_PUT, Initial: true, RangeId: req.RangeId, Index: snap.Index,
			Key: key, Value: v.Data, ExpireAtUnixMs: v.ExpireAtMs, Version: v.Version})
	})
	if err != nil {
		pin.Release()
		return err
	}
	next := &pb.RangeFeedRequest{RangeId: req.RangeId, StartKey: req.StartKey, EndKey: req.EndKey, FromIndex: snap.Index}
	return s.feeds.ServePinned(stream.Context(), pin, next, out)
}

// batcher sends a stream's events several a message (a message each costs more than the event).
type batcher struct {
	stream pb.Shoal_RangeFeedServer
	events []*pb.RangeFeedEvent
	bytes  int
}

// Send keeps ev, sending the batch once it is large.
func (b *batcher) Send(ev *pb.RangeFeedEvent) error {
	b.events = append(b.events, ev)
	b.bytes += len(ev.Key) + len(ev.Value)
	if len(b.events) >= 512 || b.bytes >= 1<<20 {
		return b.Flush()
	}
	return nil
}

// Flush sends what Send kept.
func (b *batcher) Flush() error {
	if len(b.events) == 0 {
		return nil
	}
	err := b.stream.Send(&pb.RangeFeedBatch{Events: b.events})
	b.events, b.bytes = nil, 0
	return err
}
