package hints

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/shoaldb/shoal/hints/hint"
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

// ShipStream implements pb.HintsServer: a peer's stream of batches, each received as Ship receives
// one (never blocking on replay). It ends when the peer closes the stream, with the summed acks, or
// when the stream breaks.
func (s *service) ShipStream(stream pb.Hints_ShipStreamServer) error {
	// Headers at once: the sender waits for them to know that this node takes streams (an older one
	// answers Unimplemented) before it sends its first batch.
	if err := stream.SendHeader(nil); err != nil {
		return err
	}
	var total pb.HintShipAck
	for {
		b, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return stream.SendAndClose(&total)
		}
		if err != nil {
			return err
		}
		ack := s.m.Receive(b)
		total.QueuedRanges += ack.GetQueuedRanges()
		total.DroppedRanges += ack.GetDroppedRanges()
		total.Overloaded = ack.GetOverloaded()
	}
}

// HotKeys implements pb.HintsServer.
func (s *service) HotKeys(_ context.Context, req *pb.HintHotKeysRequest) (*pb.HintHotKeysResponse, error) {
	if err := s.checkCluster(req.GetClusterId()); err != nil {
		return nil, err
	}
	hs := s.m.HotKeys(req.GetRangeId(), int(req.GetLimit()))
	return &pb.HintHotKeysResponse{RangeId: req.GetRangeId(), Hints: hint.HintsToProto(hs)}, nil
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

// GRPCSender is a Sender over the node's gRPC connections to its peers: a unary Ship call per batch
// (StreamSender's fallback for peers without ShipStream).
type GRPCSender struct {
	// Conn returns a connection to node id (the node's pooled node-to-node connection).
	Conn func(nodeID uint64) (grpc.ClientConnInterface, error)
}

// Send implements Sender.
func (s GRPCSender) Send(ctx context.Context, to uint64, b *pb.HintBatch) error {
	return s.send(ctx, to, b)
}

// sendWire implements wireSender.
func (s GRPCSender) sendWire(ctx context.Context, to uint64, w wireBatch) error {
	return s.send(ctx, to, w)
}

var (
	_ wireSender = GRPCSender{}
	_ wireSender = (*StreamSender)(nil)
)

// send ships msg, a *pb.HintBatch or its wireBatch.
func (s GRPCSender) send(ctx context.Context, to uint64, msg any) error {
	cc, err := s.Conn(to)
	if err != nil {
		return fmt.Errorf("hints to node %d: %w", to, err)
	}
	if err := cc.Invoke(ctx, pb.Hints_Ship_FullMethodName, msg, new(pb.HintShipAck), rawCall); err != nil {
		return fmt.Errorf("hints to node %d: %w", to, err)
	}
	return nil
}

// StreamSender is a Sender that keeps one ShipStream open per peer and sends each batch as one message
// on it. A unary Ship costs both sides a call's setup, headers and trailers per batch, and at the
// journal's 90 ms (11 batches a second per peer) that cost the serving node more CPU than capturing
// its reads did (docs/design/read-hints.md). A stream that fails, or whose send outlives
// the send's context, is closed and reopened on the next batch; a peer that does not know ShipStream
// (an older node) gets unary Ship calls, and a stream again after unaryRetry (it may have been
// upgraded since). Close closes every stream.
type StreamSender struct {
	conn func(nodeID uint64) (grpc.ClientConnInterface, error)

	mu     sync.Mutex
	peers  map[uint64]*shipStream
	closed bool
}

// shipStream is one peer's stream. mu serializes its sends (the Shipper sends to a peer from one
// goroutine; the lock keeps other callers correct too).
type shipStream struct {
	mu     sync.Mutex
	cc     grpc.ClientConnInterface // the connection the stream was opened on
	stream pb.Hints_ShipStreamClient
	cancel context.CancelFunc
	// unaryUntil: the peer answered Unimplemented; Ship calls until then.
	unaryUntil time.Time
}

// unaryRetry is how long a peer that refused ShipStream gets unary calls before the next try.
const unaryRetry = time.Minute

// NewStreamSender returns a StreamSender over conn, which returns a connection to a node (the node's
// pooled node-to-node connection).
func NewStreamSender(conn func(nodeID uint64) (grpc.ClientConnInterface, error)) *StreamSender {
	return &StreamSender{conn: conn, peers: map[uint64]*shipStream{}}
}

// errSenderClosed: Send after Close.
var errSenderClosed = errors.New("hints sender closed")

// Send implements Sender: it returns once the batch is handed to the stream (flow control may hold it
// until ctx ends), not once the peer has received it — hints are best effort either way.
func (s *StreamSender) Send(ctx context.Context, to uint64, b *pb.HintBatch) error {
	return s.send(ctx, to, b)
}

// sendWire implements wireSender.
func (s *StreamSender) sendWire(ctx context.Context, to uint64, w wireBatch) error {
	return s.send(ctx, to, w)
}

// send is Send of msg, a *pb.HintBatch or its wireBatch.
func (s *StreamSender) send(ctx context.Context, to uint64, msg any) error {
	cc, err := s.conn(to)
	if err != nil {
		return fmt.Errorf("hints to node %d: %w", to, err)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return fmt.Errorf("hints to node %d: %w", to, errSenderClosed)
	}
	ps := s.peers[to]
	if ps == nil {
		ps = &shipStream{}
		s.peers[to] = ps
	}
	s.mu.Unlock()

	ps.mu.Lock()
	defer ps.mu.Unlock()
	if time.Now().Before(ps.unaryUntil) {
		return GRPCSender{Conn: s.conn}.send(ctx, to, msg)
	}
	if ps.stream != nil && ps.cc != cc {
		ps.close() // the node replaced its connection to the peer
	}
	if ps.stream == nil {
		err := ps.open(ctx, cc)
		if status.Code(err) == codes.Unimplemented {
			ps.unaryUntil = time.Now().Add(unaryRetry)
			return GRPCSender{Conn: s.conn}.send(ctx, to, msg)
		}
		if err != nil {
			return fmt.Errorf("hints to node %d: open stream: %w", to, err)
		}
		if s.isClosed() {
			// Close ran while the stream opened: it would outlive the sender.
			ps.close()
			return fmt.Errorf("hints to node %d: %w", to, errSenderClosed)
		}
	}
	// A send held by flow control past ctx ends with the stream (cancelled), not with a goroutine left waiting.
	stop := context.AfterFunc(ctx, ps.cancel)
	err = ps.stream.SendMsg(msg)
	if !stop() {
		ps.close()
		return fmt.Errorf("hints to node %d: %w", to, ctx.Err())
	}
	if err == nil {
		return nil
	}
	if errors.Is(err, io.EOF) {
		// The peer ended the stream: its status says why.
		_, err = ps.stream.CloseAndRecv()
	}
	ps.close()
	if status.Code(err) == codes.Unimplemented {
		ps.unaryUntil = time.Now().Add(unaryRetry)
		return GRPCSender{Conn: s.conn}.send(ctx, to, msg)
	}
	return fmt.Errorf("hints to node %d: %w", to, err)
}

func (s *StreamSender) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// errStreamEnded: the peer ended a new stream at once without an error.
var errStreamEnded = errors.New("stream ended at once")

// open opens the stream on cc and waits for the peer's headers (ShipStream sends them at once; a node
// without ShipStream answers Unimplemented instead, returned here), no longer than ctx.
func (ps *shipStream) open(ctx context.Context, cc grpc.ClientConnInterface) error {
	sctx, cancel := context.WithCancel(context.Background())
	stop := context.AfterFunc(ctx, cancel)
	stream, err := pb.NewHintsClient(cc).ShipStream(sctx, rawCall)
	if err == nil {
		var md metadata.MD
		if md, err = stream.Header(); err == nil && md == nil {
			// No headers: the stream ended at once, its status comes with the response.
			if _, err = stream.CloseAndRecv(); err == nil {
				err = errStreamEnded
			}
		}
	}
	if !stop() || err != nil {
		cancel()
		if err == nil {
			err = ctx.Err()
		}
		return err
	}
	ps.cc, ps.stream, ps.cancel = cc, stream, cancel
	return nil
}

// close ends the stream (the peer sees it cancelled; what it received stands).
func (ps *shipStream) close() {
	if ps.cancel != nil {
		ps.cancel()
	}
	ps.cc, ps.stream, ps.cancel = nil, nil, nil
}

// Close closes every peer's stream; later sends fail.
func (s *StreamSender) Close() {
	s.mu.Lock()
	s.closed = true
	peers := make([]*shipStream, 0, len(s.peers))
	for _, ps := range s.peers {
		peers = append(peers, ps)
	}
	s.mu.Unlock()
	for _, ps := range peers {
		ps.mu.Lock()
		ps.close()
		ps.mu.Unlock()
	}
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
func (c *Client) HotKeys(ctx context.Context, rangeID uint64, limit int) ([]hint.Hint, error) {
	resp, err := c.c.HotKeys(ctx, &pb.HintHotKeysRequest{RangeId: rangeID, Limit: uint32(max(limit, 0)), ClusterId: c.clusterID})
	if err != nil {
		return nil, fmt.Errorf("range %d: hot keys: %w", rangeID, err)
	}
	return hint.HintsFromProto(resp.GetHints()), nil
}
