package hints

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/shoaldb/shoal/hints/hint"
	"github.com/shoaldb/shoal/pb"
)

// Sender delivers one batch of hints to a peer node (the node's implementation: StreamSender, one
// ShipStream per peer over its node-to-node connections). Send is called from one goroutine per peer, with a deadline; it may be
// slow or fail — the shipper drops and counts, it never retries. It must not modify batch.
type Sender interface {
	Send(ctx context.Context, to uint64, batch *pb.HintBatch) error
}

// PeersFunc lists the nodes holding the other replicas of a range (never this node). With
// TargetOne only the first is used, so the node should list its preferred successor first (e.g. the
// most caught-up voter, or the autopilot's likely transfer target). It is called once per range per
// flush from the shipper's goroutine and must be cheap.
type PeersFunc func(rangeID uint64) []uint64

// Target selects which replicas receive a range's hints (the paper's dissemination degree).
type Target int

const (
	// TargetAll ships to every other replica: any of them can take over warm.
	TargetAll Target = iota
	// TargetOne ships to the first listed peer only: half the cost with three replicas, one warm
	// successor.
	TargetOne
	// TargetRegionOne ships to the peers listed, which the node chooses as one replica in each
	// other region (the journal paper's region-one: a warm successor wherever a region fails over).
	TargetRegionOne
)

// String names the target.
func (t Target) String() string {
	switch t {
	case TargetOne:
		return "one"
	case TargetRegionOne:
		return "region-one"
	}
	return "all"
}

// ShipperConfig configures a Shipper. Zero values take the documented defaults.
type ShipperConfig struct {
	// NodeID and ClusterID are stamped on every batch.
	NodeID    uint64 `json:"-"`
	ClusterID string `json:"-"`
	// Peers lists each range's other replicas (required).
	Peers PeersFunc
	// Target: all other replicas (default) or one.
	Target Target
	// FlushInterval is the longest a hint waits in the buffer (default 90 ms, the paper's).
	FlushInterval time.Duration
	// SaturatedInterval replaces FlushInterval while the leader is saturated, that is while its
	// buffer samples its reads (BufferConfig.SampleAt): default 500 ms, negative for never. Each batch
	// costs the sender a fixed amount (a drain, one call per peer): on a saturated serving node,
	// 90-ms batches cost 3.8 % of its throughput and 1-s batches 0.3 % (docs/design/read-hints.md).
	// 500 ms is chosen to keep a receiver's apply lag under the 1 s that warm-before-transfer allows
	// (DefaultWarmCriteria): drained by the autopilot, a saturated leader's targets were warm at the
	// first check with an apply lag of 0.55 s, as warm as with 90-ms batches. A full buffer still
	// ships at once.
	SaturatedInterval time.Duration
	// PeerQueueLen is the number of batches queued per peer before new ones are dropped (default 8,
	// about 0.7 s of hints at the default interval).
	PeerQueueLen int
	// SendTimeout bounds one Send (default 2 s).
	SendTimeout time.Duration
}

// DefaultSaturatedInterval is ShipperConfig.SaturatedInterval's default.
const DefaultSaturatedInterval = 500 * time.Millisecond

func (c ShipperConfig) withDefaults() ShipperConfig {
	if c.FlushInterval <= 0 {
		c.FlushInterval = 90 * time.Millisecond
	}
	if c.SaturatedInterval == 0 {
		c.SaturatedInterval = DefaultSaturatedInterval
	}
	if c.PeerQueueLen <= 0 {
		c.PeerQueueLen = 8
	}
	if c.SendTimeout <= 0 {
		c.SendTimeout = 2 * time.Second
	}
	return c
}

// Validate reports a configuration that cannot work.
func (c ShipperConfig) Validate() error {
	if c.Peers == nil {
		return fmt.Errorf("hints shipper: Peers is required (the node lists each range's other replicas)")
	}
	if c.Target != TargetAll && c.Target != TargetOne && c.Target != TargetRegionOne {
		return fmt.Errorf("hints shipper: unknown Target %d (TargetAll, TargetOne or TargetRegionOne)", c.Target)
	}
	return nil
}

// Shipper drains a Buffer every FlushInterval (or when it fills), builds one batch per peer with the
// hints of every range that peer replicates, and sends them asynchronously through bounded per-peer
// queues. Nothing it does blocks a reader.
type Shipper struct {
	cfg    ShipperConfig
	buf    *Buffer
	sender Sender
	c      *counters
	// onDrain, if set, sees every drained range's hints, one range a call (the module's hot-key summary).
	onDrain func([]hint.RangeHints)

	// ident is the node and cluster stamped on batches (cfg's until SetIdentity).
	ident atomic.Pointer[identity]

	mu     sync.Mutex
	peers  map[uint64]*peerQueue
	closed bool

	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

type queuedBatch struct {
	// batch is the batch, or nil if wire holds it (for a wireSender): its ranges encoded as HintBatch
	// entries, the per-send fields appended when sent.
	batch     *pb.HintBatch
	wire      []byte
	from      uint64
	clusterID string
	hints     uint64
	enqueued  time.Time
}

type peerQueue struct {
	id uint64
	q  chan queuedBatch
}

// NewShipper returns a shipper for buf; Start runs it.
func NewShipper(buf *Buffer, sender Sender, cfg ShipperConfig) (*Shipper, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if sender == nil {
		return nil, fmt.Errorf("hints shipper: a Sender is required")
	}
	s := &Shipper{cfg: cfg.withDefaults(), buf: buf, sender: sender, c: buf.c,
		peers: map[uint64]*peerQueue{}, stop: make(chan struct{})}
	s.ident.Store(&identity{nodeID: cfg.NodeID, clusterID: cfg.ClusterID})
	return s, nil
}

// identity is a node's id and cluster, which a new node learns only when it joins.
type identity struct {
	nodeID    uint64
	clusterID string
}

// SetIdentity changes the node and cluster stamped on the batches shipped from now on (a node that
// joins a cluster learns its id after its module was built).
func (s *Shipper) SetIdentity(nodeID uint64, clusterID string) {
	s.ident.Store(&identity{nodeID: nodeID, clusterID: clusterID})
}

// Start runs the flush loop until Close.
func (s *Shipper) Start() {
	s.wg.Add(1)
	go s.loop()
}

func (s *Shipper) loop() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.FlushInterval)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			if s.saturated() && time.Since(last) < s.cfg.SaturatedInterval {
				continue
			}
		case <-s.buf.Full():
		}
		last = time.Now()
		s.Flush()
	}
}

// saturated reports whether the leader sheds capture work now (its buffer samples its reads, as of
// the last drain), so that batches go out every SaturatedInterval instead.
func (s *Shipper) saturated() bool {
	return s.cfg.SaturatedInterval > 0 && s.buf.sampling()
}

// Flush drains the buffer now and queues the batches (the loop calls it; tests and shutdown may). It
// works in slices, letting requests that arrive meanwhile run between them (pacer).
func (s *Shipper) Flush() {
	p := newPacer()
	ranges := s.buf.drain(p)
	if len(ranges) == 0 {
		return
	}
	if s.onDrain != nil {
		for i := range ranges {
			s.onDrain(ranges[i : i+1])
			p.pace()
		}
	}
	now := time.Now()
	// With a wireSender each range is encoded once for all its peers (wirebatch.go).
	_, encode := s.sender.(wireSender)
	perPeer := map[uint64]*peerBatch{}
	var order []uint64
	for _, r := range ranges {
		peers := s.cfg.Peers(r.RangeID)
		if len(peers) == 0 {
			s.c.drop(DropNoPeers, uint64(len(r.Hints)))
			continue
		}
		if s.cfg.Target == TargetOne {
			peers = peers[:1]
		}
		p.pace()
		var msg *pb.RangeHints
		var enc []byte
		if encode {
			enc = hint.EncodeRange(r, now)
		} else {
			msg = hint.RangeToProto(r, now)
		}
		for _, p := range peers {
			pbat := perPeer[p]
			if pbat == nil {
				pbat = &peerBatch{}
				perPeer[p] = pbat
				order = append(order, p)
			}
			if encode {
				pbat.encoded = append(pbat.encoded, enc)
			} else {
				pbat.ranges = append(pbat.ranges, msg)
			}
			pbat.hints += uint64(len(r.Hints))
		}
	}
	id := s.ident.Load()
	for _, p := range order {
		pbat := perPeer[p]
		qb := queuedBatch{hints: pbat.hints, enqueued: now, from: id.nodeID, clusterID: id.clusterID}
		if encode {
			qb.wire = pbat.wire(hint.BatchTrailerMax + len(id.clusterID))
		} else {
			qb.batch = &pb.HintBatch{FromNode: id.nodeID, ClusterId: id.clusterID, Ranges: pbat.ranges}
		}
		s.enqueue(p, qb)
	}
}

// peerBatch is what one flush ships to one peer: its ranges as messages, or (to a wireSender)
// encoded.
type peerBatch struct {
	ranges  []*pb.RangeHints
	encoded [][]byte
	hints   uint64
}

// wire lays out the encoded ranges as HintBatch entries, with room for trailer more bytes (the
// per-send fields, appended when sent).
func (b *peerBatch) wire(trailer int) []byte {
	n := trailer
	for _, e := range b.encoded {
		n += protowire.SizeTag(3) + protowire.SizeBytes(len(e))
	}
	w := make([]byte, 0, n)
	for _, e := range b.encoded {
		w = hint.AppendRangeEntry(w, e)
	}
	return w
}

func (s *Shipper) enqueue(peer uint64, qb queuedBatch) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.c.drop(DropClosed, qb.hints)
		return
	}
	pq := s.peers[peer]
	if pq == nil {
		pq = &peerQueue{id: peer, q: make(chan queuedBatch, s.cfg.PeerQueueLen)}
		s.peers[peer] = pq
		s.wg.Add(1)
		go s.sendLoop(pq)
	}
	s.mu.Unlock()
	select {
	case pq.q <- qb:
	default:
		s.c.drop(DropPeerQueueFull, qb.hints)
	}
}

func (s *Shipper) sendLoop(pq *peerQueue) {
	defer s.wg.Done()
	for {
		select {
		case <-s.stop:
			for {
				select {
				case qb := <-pq.q:
					s.c.drop(DropClosed, qb.hints)
				default:
					return
				}
			}
		case qb := <-pq.q:
			s.send(pq.id, qb)
		}
	}
}

func (s *Shipper) send(peer uint64, qb queuedBatch) {
	queued := uint64(time.Since(qb.enqueued).Microseconds())
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.SendTimeout)
	var size int
	var err error
	if qb.batch == nil {
		w := hint.AppendBatchTrailer(qb.wire, qb.from, qb.clusterID, queued)
		size = len(w)
		err = s.sender.(wireSender).sendWire(ctx, peer, w)
	} else {
		// The batch is this peer's own message (its ranges are shared, read-only): stamping the
		// queueing delay here is safe.
		qb.batch.QueuedMicros = queued
		size = proto.Size(qb.batch)
		err = s.sender.Send(ctx, peer, qb.batch)
	}
	cancel()
	if err != nil {
		s.c.drop(DropSendError, qb.hints)
		return
	}
	s.c.shipped.Add(qb.hints)
	s.c.shippedBatches.Add(1)
	s.c.bytesSent.Add(uint64(size))
}

// Close stops the loop and the peer senders (after the Send in progress, if any); queued batches are
// dropped (closed). Hints still in the buffer are not shipped.
func (s *Shipper) Close() {
	s.once.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		close(s.stop)
		s.wg.Wait()
	})
}
