package hints

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shoaldb/shoal/pb"
)

// MaxRemoteWait caps the wait a WaitWarm RPC may ask for.
const MaxRemoteWait = 30 * time.Second

// Service returns the module's pb.HintsServer, to register on the node's gRPC server next to the
// raft transport: pb.RegisterHintsServer(s, m.Service()).
func (m *Module) Service() pb.HintsServer { return &service{m: m} }

type service struct {
	pb.UnimplementedHintsServer
	m *Module
}

func (s *service) checkCluster(id string) error {
	if cluster := s.m.clusterID(); cluster != "" && id != "" && id != cluster {
		return status.Errorf(codes.FailedPrecondition, "hints: request from cluster %q, this node is in %q", id, cluster)
	}
	return nil
}

// Ship implements pb.HintsServer: it never blocks on replay.
func (s *service) Ship(_ context.Context, b *pb.HintBatch) (*pb.HintShipAck, error) {
	return s.m.Receive(b), nil
}

// HotKeys implements pb.HintsServer.
func (s *service) HotKeys(_ context.Context, req *pb.HintHotKeysRequest) (*pb.HintHotKeysResponse, error) {
	if err := s.checkCluster(req.GetClusterId()); err != nil {
		return nil, err
	}
	hs := s.m.HotKeys(req.GetRangeId(), int(req.GetLimit()))
	return &pb.HintHotKeysResponse{RangeId: req.GetRangeId(), Hints: HintsToProto(hs)}, nil
}

// WaitWarm implements pb.HintsServer.
func (s *service) WaitWarm(ctx context.Context, req *pb.HintWaitWarmRequest) (*pb.HintWaitWarmResponse, error) {
	if err := s.checkCluster(req.GetClusterId()); err != nil {
		return nil, err
	}
	wait := min(time.Duration(req.GetMaxWaitMillis())*time.Millisecond, MaxRemoteWait)
	w, err := s.m.WaitWarm(ctx, req.GetRangeId(), CriteriaFromProto(req.GetCriteria()), wait)
	switch {
	case err == nil:
		return &pb.HintWaitWarmResponse{Warm: true, Warmth: WarmthToProto(w)}, nil
	case errors.Is(err, ErrNotWarm):
		return &pb.HintWaitWarmResponse{Warm: false, Warmth: WarmthToProto(w)}, nil
	}
	return nil, status.FromContextError(err).Err()
}

// GRPCSender is a Sender over the node's gRPC connections to its peers (the Ship RPC).
type GRPCSender struct {
	// Conn returns a connection to node id (the node's pooled node-to-node connection).
	Conn func(nodeID uint64) (grpc.ClientConnInterface, error)
}

// Send implements Sender.
func (s GRPCSender) Send(ctx context.Context, to uint64, b *pb.HintBatch) error {
	cc, err := s.Conn(to)
	if err != nil {
		return fmt.Errorf("hints to node %d: %w", to, err)
	}
	if _, err := pb.NewHintsClient(cc).Ship(ctx, b); err != nil {
		return fmt.Errorf("hints to node %d: %w", to, err)
	}
	return nil
}

// Client calls a peer's Hints service: the transfer initiator asks the target to wait until warm;
// a restarted node asks a peer for its hot keys.
type Client struct {
	c         pb.HintsClient
	clusterID string
}

// NewClient wraps a connection to a peer node.
func NewClient(cc grpc.ClientConnInterface, clusterID string) *Client {
	return &Client{c: pb.NewHintsClient(cc), clusterID: clusterID}
}

// WaitWarm asks the peer to wait up to maxWait (capped at MaxRemoteWait) for rangeID to meet crit.
// warm=false with a nil error means the wait ended first; w is the last warmth the peer saw. The
// call's own deadline is maxWait plus a margin for the round trip.
func (c *Client) WaitWarm(ctx context.Context, rangeID uint64, crit WarmCriteria, maxWait time.Duration) (w Warmth, warm bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, maxWait+2*time.Second)
	defer cancel()
	resp, err := c.c.WaitWarm(ctx, &pb.HintWaitWarmRequest{RangeId: rangeID, Criteria: CriteriaToProto(crit),
		MaxWaitMillis: durMillis(maxWait), ClusterId: c.clusterID})
	if err != nil {
		return Warmth{RangeID: rangeID}, false, fmt.Errorf("range %d: ask warmth: %w", rangeID, err)
	}
	return WarmthFromProto(resp.GetWarmth()), resp.GetWarm(), nil
}

// HotKeys fetches up to limit (0: the peer's default) of the peer's hottest reads of rangeID.
func (c *Client) HotKeys(ctx context.Context, rangeID uint64, limit int) ([]Hint, error) {
	resp, err := c.c.HotKeys(ctx, &pb.HintHotKeysRequest{RangeId: rangeID, Limit: uint32(max(limit, 0)), ClusterId: c.clusterID})
	if err != nil {
		return nil, fmt.Errorf("range %d: hot keys: %w", rangeID, err)
	}
	return HintsFromProto(resp.GetHints()), nil
}
