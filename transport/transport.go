// Package transport owns node-to-node raft traffic: it batches raft messages onto one long-lived gRPC
// stream per destination node and streams snapshots with a per-node rate limit. It never interprets raft
// messages beyond routing them by node id, and it never touches storage.
package transport

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/shoaldb/shoal/pb"
)

// Handler receives what the transport delivers on the receiving node.
type Handler interface {
	// HandleRaftMessages is called on the receiving node for each batch received; it must not block for long.
	// The transport does not touch msgs after the call returns.
	HandleRaftMessages(msgs []*pb.RaftMessage)
	// HandleSnapshot is called once a whole snapshot has been received and every chunk's CRC verified.
	// header is the first chunk's header (it wraps a raftpb MsgSnap); kvs are all pairs in order.
	HandleSnapshot(header *pb.RaftMessage, kvs []*pb.KeyValue) error
}

// Resolver maps a node id to its gRPC address; ok=false if unknown yet.
// It is called on every Send and at every (re)connect, from many goroutines: it must be cheap and
// safe for concurrent use.
type Resolver func(nodeID uint64) (addr string, ok bool)

// Config configures a Transport. Zero values take the documented defaults.
type Config struct {
	// NodeID is this node's id; it is stamped on outgoing batches. When non-zero, incoming batches
	// carrying messages addressed to another node are rejected (the sender resolved a stale address).
	NodeID uint64 `json:"-"`
	// ClusterID is stamped on outgoing traffic and checked on incoming traffic. Empty accepts any
	// cluster; an empty incoming cluster id is accepted too (bootstrap).
	ClusterID string `json:"-"`
	// Resolver maps node ids to gRPC addresses.
	Resolver Resolver `json:"-"`
	// DialOptions are used for every outgoing connection, e.g. TLS credentials. Default: insecure.
	DialOptions []grpc.DialOption `json:"-"`
	// SnapshotRateBytesPerSec limits snapshot bytes sent by this node (all destinations together)
	// with a token bucket. Default 32 MiB/s.
	SnapshotRateBytesPerSec int64
	// SnapshotRecvRateBytesPerSec limits snapshot bytes received by this node (all senders together);
	// 0: unlimited. With it, a node joining from many senders at once takes its data no faster than
	// from one (incremental_join's comparison of strategies, docs/design/incremental-join.md).
	SnapshotRecvRateBytesPerSec int64
	// SnapshotChunkBytes is the kv payload carried per snapshot chunk. Default 1 MiB.
	SnapshotChunkBytes int
	// QueueLen is the per-destination outbound queue length. Default 4096.
	QueueLen int
	// QueueBytes bounds the bytes queued for one destination (default 64 MiB): 4096 raft appends of up
	// to 1 MiB each would otherwise be 4 GiB behind a slow peer. Beyond it messages are dropped, which
	// raft repairs by resending.
	QueueBytes int64
	// OnUnreachable is called (from a transport goroutine) when sending to a node fails. It must not
	// block for long: it runs on that destination's sender goroutine.
	OnUnreachable func(nodeID uint64) `json:"-"`
}

// Defaults applied by New for zero Config fields.
const (
	DefaultSnapshotRateBytesPerSec = 32 << 20
	DefaultSnapshotChunkBytes      = 1 << 20
	DefaultQueueLen                = 4096
	DefaultQueueBytes              = 64 << 20
)

const (
	maxBatchMessages = 256
	maxBatchBytes    = 2 << 20 // stays below gRPC's default 4 MiB receive limit for typical messages
	minBackoff       = 50 * time.Millisecond
	maxBackoff       = time.Second
	// healthySession is how long a stream must have lived for the reconnect backoff to reset.
	healthySession    = time.Second
	minConnectTimeout = 5 * time.Second
	// MaxRecvMessageBytes is the gRPC receive limit recommended for servers carrying raft traffic
	// (see ServerOptions).
	MaxRecvMessageBytes = 64 << 20
)

// Stats are the transport's counters, read with Transport.Stats.
type Stats struct {
	MessagesSent      uint64 // raft messages written to a stream
	MessagesDropped   uint64 // refused by Send (queue full, unresolvable, closed) or discarded on stream failure
	BatchesSent       uint64 // RaftMessageBatch sends (one per stream write)
	SnapshotsSent     uint64 // snapshots the receiver accepted
	SnapshotBytesSent uint64 // encoded snapshot chunk bytes written
	SnapshotsReceived uint64 // snapshots fully received and CRC-verified (before the handler runs)
	// SnapshotsReceiving is the number of snapshot streams being received now (until their handler
	// returns); SnapshotsReceivingMax the most at once since the transport started (a join that
	// streams from one sender at a time never has more than one).
	SnapshotsReceiving, SnapshotsReceivingMax int64
}

type stats struct {
	messagesSent, messagesDropped, batchesSent          atomic.Uint64
	snapshotsSent, snapshotBytesSent, snapshotsReceived atomic.Uint64
	receiving, receivingMax                             atomic.Int64
}

// startReceiving counts a snapshot stream in; the returned func counts it out.
func (s *stats) startReceiving() func() {
	n := s.receiving.Add(1)
	for {
		m := s.receivingMax.Load()
		if n <= m || s.receivingMax.CompareAndSwap(m, n) {
			break
		}
	}
	return func() { s.receiving.Add(-1) }
}

// Transport sends and receives raft messages and snapshots between nodes. It is safe for concurrent use.
type Transport struct {
	ident    atomic.Pointer[identity]
	cfg      Config
	h        Handler
	dialOpts []grpc.DialOption
	limiter  *tokenBucket
	recvLim  *tokenBucket // nil: unlimited

	ctx    context.Context // canceled by Close; parent of every stream the transport opens
	cancel context.CancelFunc

	mu     sync.RWMutex
	closed bool
	peers  map[uint64]*peer

	wg        sync.WaitGroup // sender goroutines
	closeOnce sync.Once
	stats     stats
}

// WithDefaults returns c with every zero setting at its default.
func (c Config) WithDefaults() Config {
	if c.SnapshotRateBytesPerSec <= 0 {
		c.SnapshotRateBytesPerSec = DefaultSnapshotRateBytesPerSec
	}
	if c.SnapshotChunkBytes <= 0 {
		c.SnapshotChunkBytes = DefaultSnapshotChunkBytes
	}
	if c.QueueLen <= 0 {
		c.QueueLen = DefaultQueueLen
	}
	if c.QueueBytes <= 0 {
		c.QueueBytes = DefaultQueueBytes
	}
	return c
}

// MinSnapshotRate is the lowest snapshot rate accepted: below it a range's snapshot would take hours.
const MinSnapshotRate = 64 << 10

// Validate reports inconsistent settings (zero values are fine: they take defaults).
func (c Config) Validate() error {
	var errs []error
	if c.SnapshotRateBytesPerSec < 0 || (c.SnapshotRateBytesPerSec > 0 && c.SnapshotRateBytesPerSec < MinSnapshotRate) {
		errs = append(errs, fmt.Errorf("snapshot rate must be at least 64KiB per second (got %d)", c.SnapshotRateBytesPerSec))
	}
	if c.SnapshotRecvRateBytesPerSec < 0 || (c.SnapshotRecvRateBytesPerSec > 0 && c.SnapshotRecvRateBytesPerSec < MinSnapshotRate) {
		errs = append(errs, fmt.Errorf("snapshot receive rate must be 0 (unlimited) or at least 64KiB per second (got %d)", c.SnapshotRecvRateBytesPerSec))
	}
	return errors.Join(errs...)
}

// New returns a Transport delivering to h. Call Register to serve incoming traffic and Close when done.
func New(cfg Config, h Handler) *Transport {
	cfg = cfg.WithDefaults()
	opts := []grpc.DialOption{
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{
				BaseDelay:  minBackoff,
				Multiplier: 1.6,
				Jitter:     0.2,
				MaxDelay:   maxBackoff,
			},
			MinConnectTimeout: minConnectTimeout,
		}),
	}
	if len(cfg.DialOptions) == 0 {
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	} else {
		opts = append(opts, cfg.DialOptions...)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &Transport{
		cfg:      cfg,
		h:        h,
		dialOpts: opts,
		limiter:  newTokenBucket(float64(cfg.SnapshotRateBytesPerSec), burstFor(cfg)),
		ctx:      ctx,
		cancel:   cancel,
		peers:    make(map[uint64]*peer),
	}
	if r := cfg.SnapshotRecvRateBytesPerSec; r > 0 {
		recv := cfg
		recv.SnapshotRateBytesPerSec = r
		t.recvLim = newTokenBucket(float64(r), burstFor(recv))
	}
	return t
}

// burstFor sizes the snapshot token bucket: an eighth of a second of traffic, but at least one chunk.
func burstFor(cfg Config) float64 {
	b := float64(cfg.SnapshotRateBytesPerSec) / 8
	if c := float64(cfg.SnapshotChunkBytes); b < c {
		b = c
	}
	return b
}

// ServerOptions returns gRPC server options recommended for a server that Registers a Transport:
// a receive limit large enough for big raft messages and snapshot chunks holding large values.
func ServerOptions() []grpc.ServerOption {
	// WaitForHandlers: Stop waits for running handlers, so a node's engine is never closed under one.
	return []grpc.ServerOption{grpc.MaxRecvMsgSize(MaxRecvMessageBytes), grpc.WaitForHandlers(true), StreamWorkers()}
}

// StreamWorkers is the server option every node's gRPC server uses: a pool of goroutines that serve
// incoming streams one after another, instead of a new goroutine per request. A new goroutine starts
// with a small stack and a read through Pebble grows it several times: a profile of a saturated node
// serving point reads put 17 % of its CPU in runtime.copystack. A worker keeps its grown stack (until
// a GC finds it idle and halves it). gRPC hands a stream to an idle worker or, when none is idle,
// serves it on a new goroutine as before, so the pool bounds nothing; it is sized for the client
// concurrency a node sees (hundreds of streams), not its cores: with 8 workers a node saturated by
// 64 clients still spent 14 % of its CPU growing stacks. An idle worker costs its stack.
func StreamWorkers() grpc.ServerOption { return grpc.NumStreamWorkers(streamWorkers) }

const streamWorkers = 256

// Register registers the transport's pb.RaftTransportServer on s. The caller owns s and must stop it;
// Close does not interrupt server-side streams, but after Close incoming traffic is refused.
func (t *Transport) Register(s grpc.ServiceRegistrar) {
	pb.RegisterRaftTransportServer(s, &server{t: t})
}

// Send enqueues msg for msg.ToNode without blocking; returns false (and drops) if the queue is full or the
// node is unresolvable. The transport owns msg after the call.
func (t *Transport) Send(msg *pb.RaftMessage) bool {
	if msg == nil || msg.ToNode == 0 || t.cfg.Resolver == nil {
		t.stats.messagesDropped.Add(1)
		return false
	}
	if _, ok := t.cfg.Resolver(msg.ToNode); !ok {
		t.stats.messagesDropped.Add(1)
		return false
	}
	p := t.peerFor(msg.ToNode)
	if p == nil { // closed
		t.stats.messagesDropped.Add(1)
		return false
	}
	size := int64(msgSize(msg))
	if q := p.queued.Add(size); q > t.cfg.QueueBytes && q > size {
		p.queued.Add(-size)
		t.stats.messagesDropped.Add(1)
		return false
	}
	select {
	case p.q <- msg:
		return true
	default:
		p.queued.Add(-size)
		t.stats.messagesDropped.Add(1)
		return false
	}
}

// peerFor returns the sender for node id, starting it on first use; nil after Close.
func (t *Transport) peerFor(id uint64) *peer {
	t.mu.RLock()
	p, closed := t.peers[id], t.closed
	t.mu.RUnlock()
	if closed {
		return nil
	}
	if p != nil {
		return p
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	if p = t.peers[id]; p == nil {
		p = &peer{t: t, id: id, q: make(chan *pb.RaftMessage, t.cfg.QueueLen)}
		t.peers[id] = p
		t.wg.Add(1)
		go p.run()
	}
	return p
}

// Stats returns a snapshot of the transport's counters.
func (t *Transport) Stats() Stats {
	return Stats{
		MessagesSent:      t.stats.messagesSent.Load(),
		MessagesDropped:   t.stats.messagesDropped.Load(),
		BatchesSent:       t.stats.batchesSent.Load(),
		SnapshotsSent:     t.stats.snapshotsSent.Load(),
		SnapshotBytesSent: t.stats.snapshotBytesSent.Load(),
		SnapshotsReceived: t.stats.snapshotsReceived.Load(),

		SnapshotsReceiving:    t.stats.receiving.Load(),
		SnapshotsReceivingMax: t.stats.receivingMax.Load(),
	}
}

// Close stops all sender goroutines, closes their connections and cancels in-flight SendSnapshot calls.
// Messages still queued are dropped. It is idempotent; concurrent callers all return once shutdown is done.
func (t *Transport) Close() {
	t.closeOnce.Do(func() {
		t.mu.Lock()
		t.closed = true
		t.mu.Unlock()
		t.cancel()
		t.wg.Wait()
	})
}

func (t *Transport) isClosed() bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.closed
}

func (t *Transport) unreachable(nodeID uint64) {
	if t.cfg.OnUnreachable != nil && t.ctx.Err() == nil {
		t.cfg.OnUnreachable(nodeID)
	}
}

// sleepCtx waits for d or until ctx is done; it reports whether the full duration elapsed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}

type identity struct {
	nodeID    uint64
	clusterID string
}

// SetIdentity sets the node and cluster id once they are known (a joining node learns them after the
// transport is registered on its gRPC server).
func (t *Transport) SetIdentity(nodeID uint64, clusterID string) {
	t.ident.Store(&identity{nodeID: nodeID, clusterID: clusterID})
}

func (t *Transport) nodeID() uint64 {
	if id := t.ident.Load(); id != nil {
		return id.nodeID
	}
	return t.cfg.NodeID
}

func (t *Transport) clusterID() string {
	if id := t.ident.Load(); id != nil {
		return id.clusterID
	}
	return t.cfg.ClusterID
}
