package server

import (
	"errors"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/pb"
)

// watchService serves pb.Watcher: each stream runs a client.Watch through this node's own gRPC
// listener, so a client in any language gets a span's changes without following ranges itself.
type watchService struct {
	pb.UnimplementedWatcherServer

	newClient func() (*client.Client, error)

	mu     sync.Mutex
	c      *client.Client // made at the first watch: the listener's address is known only once it listens
	closed bool
}

func (w *watchService) client() (*client.Client, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil, errors.New("node stopping")
	}
	if w.c == nil {
		c, err := w.newClient()
		if err != nil {
			return nil, err
		}
		w.c = c
	}
	return w.c, nil
}

func (w *watchService) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	if w.c != nil {
		_ = w.c.Close()
	}
}

// Watch implements pb.WatcherServer.
func (w *watchService) Watch(req *pb.WatchRequest, stream grpc.ServerStreamingServer[pb.WatchResponse]) error {
	c, err := w.client()
	if err != nil {
		return status.Error(codes.Unavailable, err.Error())
	}
	var opts []client.WatchOption
	if req.InitialScan {
		opts = append(opts, client.WithInitialScan())
	}
	err = c.Watch(stream.Context(), req.StartKey, req.EndKey, req.Cursor, func(ev client.WatchEvent) error {
		return stream.Send(&pb.WatchResponse{Cursor: ev.Cursor, Event: &pb.RangeFeedEvent{Kind: ev.Kind, RangeId: ev.RangeID, Index: ev.Index,
			Seq: ev.Seq, Key: ev.Key, Value: ev.Value, ExpireAtUnixMs: ev.ExpireAtUnixMs, Version: ev.Version, Initial: ev.Initial}})
	}, opts...)
	var ce *client.Error
	switch {
	case err == nil || stream.Context().Err() != nil:
		return nil
	case errors.Is(err, client.ErrWatchLost):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.As(err, &ce) && ce.Code == pb.ErrorCode_INVALID_ARGUMENT:
		return status.Error(codes.InvalidArgument, err.Error())
	}
	return status.Error(codes.Unavailable, err.Error())
}
