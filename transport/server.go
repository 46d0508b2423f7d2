package transport

import (
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shoaldb/shoal/pb"
)

// maxSnapshotBytes bounds the kv bytes (keys plus values) a receiver accumulates for one snapshot.
// A variable so tests can lower it.
var maxSnapshotBytes int64 = 1 << 30

// server implements pb.RaftTransportServer for a Transport.
type server struct {
	pb.UnimplementedRaftTransportServer
	t *Transport
}

// checkCluster accepts an incoming cluster id if either side's is empty or they match.
func (t *Transport) checkCluster(incoming string) error {
	if t.clusterID() == "" || incoming == "" || incoming == t.clusterID() {
		return nil
	}
	return status.Errorf(codes.FailedPrecondition,
		"transport: node %d: cluster id mismatch: got %q, want %q", t.nodeID(), incoming, t.clusterID())
}

// RaftStream receives batches from one sending node and hands them to the Handler.
func (s *server) RaftStream(stream pb.RaftTransport_RaftStreamServer) error {
	t := s.t
	for {
		b, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if t.ctx.Err() != nil {
			return status.Errorf(codes.Unavailable, "transport: node %d: closed", t.nodeID())
		}
		if err := t.checkCluster(b.ClusterId); err != nil {
			return err
		}
		if t.nodeID() != 0 {
			for _, m := range b.Messages {
				if m.ToNode != t.nodeID() {
					return status.Errorf(codes.FailedPrecondition,
						"transport: node %d: misrouted message for node %d from node %d", t.nodeID(), m.ToNode, b.FromNode)
				}
			}
		}
		if len(b.Messages) > 0 {
			t.h.HandleRaftMessages(b.Messages)
		}
	}
}

// Snapshot receives one snapshot, verifies every chunk's CRC, and hands the whole snapshot to the Handler.
func (s *server) Snapshot(stream pb.RaftTransport_SnapshotServer) error {
	t := s.t
	var (
		header *pb.RaftMessage
		kvs    []*pb.KeyValue
		total  int64
	)
	for i := 0; ; i++ {
		c, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return status.Errorf(codes.InvalidArgument,
					"transport: node %d: snapshot stream ended after %d chunks without a final chunk", t.nodeID(), i)
			}
			return err
		}
		if t.ctx.Err() != nil {
			return status.Errorf(codes.Unavailable, "transport: node %d: closed", t.nodeID())
		}
		if i == 0 {
			if err := t.checkCluster(c.ClusterId); err != nil {
				return err
			}
			if c.Header == nil {
				return status.Errorf(codes.InvalidArgument, "transport: node %d: first snapshot chunk has no header", t.nodeID())
			}
			header = c.Header
			defer t.stats.startReceiving()()
		}
		if err := verifyChunk(c); err != nil {
			return stream.SendAndClose(&pb.SnapshotResponse{Error: &pb.Error{
				Code:    pb.ErrorCode_INTERNAL,
				Message: fmt.Sprintf("transport: node %d: snapshot from node %d, chunk %d: %v", t.nodeID(), header.FromNode, i, err),
			}})
		}
		var n int64
		for _, kv := range c.Kvs {
			n += int64(len(kv.Key) + len(kv.Value))
		}
		total += n
		if t.recvLim != nil {
			// Reading slower makes gRPC's flow control slow the sender down too.
			if err := t.recvLim.wait(stream.Context(), int(n)); err != nil {
				return status.Errorf(codes.Canceled, "transport: node %d: snapshot receive: %v", t.nodeID(), err)
			}
		}
		if total > maxSnapshotBytes {
			return status.Errorf(codes.ResourceExhausted,
				"transport: node %d: snapshot from node %d exceeds %d bytes", t.nodeID(), header.FromNode, maxSnapshotBytes)
		}
		kvs = append(kvs, c.Kvs...)
		if c.Final {
			break
		}
	}
	t.stats.snapshotsReceived.Add(1)
	resp := &pb.SnapshotResponse{}
	if err := t.h.HandleSnapshot(header, kvs); err != nil {
		resp.Error = &pb.Error{
			Code:    pb.ErrorCode_INTERNAL,
			Message: fmt.Sprintf("transport: node %d: applying snapshot from node %d: %v", t.nodeID(), header.FromNode, err),
		}
	}
	return stream.SendAndClose(resp)
}
