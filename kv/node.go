// Package kv owns ranges as a distributed whole: the meta range of range descriptors, node identity,
// bootstrap and join, the node directory and liveness (heartbeats), routing of requests to the local
// leader replica, splits and up-replication. It serves the public KV API (pb.ShoalServer).
//
// It must never write the engine directly for replicated data: every change goes through a range's
// raft group (package replica).
package kv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/shoaldb/shoal/admission"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/shoaldb/shoal/autopilot"
	"github.com/shoaldb/shoal/bgtask"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
	"github.com/shoaldb/shoal/storage"
	"github.com/shoaldb/shoal/transport"
)

// Config configures a Node. Zero values take the documented defaults.
type Config struct {
	Engine *storage.Engine
	// Addr is the advertised gRPC address (clients and peers dial it).
	Addr string
	// HTTPAddr and RESPAddr are advertised to clients through node descriptors.
	HTTPAddr, RESPAddr string
	// Bootstrap creates a new cluster if the store has no identity yet.
	Bootstrap bool
	// Join lists gRPC addresses of existing nodes to join through if the store has no identity yet.
	Join []string
	// TickInterval is the raft tick (default 100ms; election after 10–20 ticks).
	TickInterval time.Duration
	// MaxKeyBytes (default 4 KiB) and MaxValueBytes (default 8 MiB) bound request sizes.
	MaxKeyBytes, MaxValueBytes int
	// RangeMaxBytes triggers an automatic split (default 64 MiB).
	RangeMaxBytes int64
	// ReplicationFactor is the number of voters per range (default 3).
	ReplicationFactor int
	// DeadNodeTimeout: a node silent for this long is considered dead (default 60s).
	DeadNodeTimeout time.Duration
	// HeartbeatInterval between node heartbeats (default 1s).
	HeartbeatInterval time.Duration
	// QueueInterval is how often the split, replicate and meta-repair queues scan (default 2s).
	QueueInterval time.Duration
	// DialOptions are used for node-to-node gRPC (default insecure).
	DialOptions []grpc.DialOption
	// AuthToken is attached to node-to-node calls when the cluster requires one.
	AuthToken string
	// SnapshotRateBytesPerSec limits snapshot bytes sent by this node (default 32 MiB/s).
	SnapshotRateBytesPerSec int64
	// SnapshotRecvRateBytesPerSec limits snapshot bytes received by this node from all senders
	// together (default unlimited).
	SnapshotRecvRateBytesPerSec int64
	// MergeAbortAfter is how long a range may stay frozen for a merge before its leader aborts the
	// merge (default 30s).
	MergeAbortAfter time.Duration
	// DisableLeaseReads makes every linearizable read run a ReadIndex round instead of using the
	// leader lease (replica/lease.go).
	DisableLeaseReads bool
	// Background configures background work: what is heavy, how long a heavy task may wait for the
	// node's leaderships to move, periodic compactions and backups (background.go).
	Background BackgroundConfig
	// Autopilot tunes the autopilot's policies (zero values take the policies' defaults; the
	// replication factor and dead-node timeout always come from the fields above).
	Autopilot autopilot.Config
	// Hints configures read hints (hints.go; on by default).
	Hints HintsConfig
	// Admission bounds the client work the node holds (admission.go).
	Admission AdmissionConfig
	Logger    *slog.Logger
}

func (c *Config) setDefaults() {
	if c.TickInterval == 0 {
		c.TickInterval = 100 * time.Millisecond
	}
	if c.MaxKeyBytes == 0 {
		c.MaxKeyBytes = 4 << 10
	}
	if c.MaxValueBytes == 0 {
		c.MaxValueBytes = 8 << 20
	}
	if c.RangeMaxBytes == 0 {
		c.RangeMaxBytes = 64 << 20
	}
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = 3
	}
	if c.MergeAbortAfter == 0 {
		c.MergeAbortAfter = 30 * time.Second
	}
	if c.DeadNodeTimeout == 0 {
		c.DeadNodeTimeout = 60 * time.Second
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = time.Second
	}
	if c.QueueInterval == 0 {
		c.QueueInterval = 2 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if len(c.DialOptions) == 0 {
		c.DialOptions = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	c.Hints.setDefaults()
	c.Admission.SetDefaults()
}

// identity is the node's persisted identity.
type identity struct {
	ClusterID string `json:"cluster_id"`
	NodeID    uint64 `json:"node_id"`
}

var identityKey = storage.LocalKey("identity")
var directoryKey = storage.LocalKey("directory")

// Node is one Shoal node: its store of replicas, its transport and its view of the cluster.
type Node struct {
	pb.UnimplementedShoalServer

	cfg   Config
	eng   *storage.Engine
	log   *slog.Logger
	ident identity

	store     *replica.Store
	storeRef  atomic.Pointer[replica.Store] // store, for read-hint replays that may run before Start returns
	reqGate   *admission.Gate               // client requests being served (admission.go)
	hints     *nodeHints                    // nil when read hints are off on this node
	transport *transport.Transport
	peers     *peerConns
	dir       *directory

	draining atomic.Bool
	ap       *autopilotHost

	bg        *bgtask.Tracker
	hbKick    chan struct{}
	ledNow    atomic.Pointer[[]uint64] // ranges led at the last stats reading (for bg's hooks)
	annMu     sync.Mutex
	announced map[string]*bgtask.Handle // running maintenance announcements by task name

	loadMu   sync.Mutex
	loadPrev map[uint64]loadMark // last counter readings per range, for QPS

	frozenMu    sync.Mutex
	frozenSince map[uint64]time.Time // ranges this node leads that are frozen for a merge, since when

	ready   chan struct{}
	stopper chan struct{}
	wg      sync.WaitGroup
	stopOne sync.Once
}

// NewNode prepares a node; nothing runs until Start.
func NewNode(cfg Config) (*Node, error) {
	if cfg.Engine == nil {
		return nil, errors.New("kv: Config.Engine is required")
	}
	if cfg.Addr == "" {
		return nil, errors.New("kv: Config.Addr (advertised gRPC address) is required")
	}
	cfg.setDefaults()
	n := &Node{cfg: cfg, eng: cfg.Engine, log: cfg.Logger, ready: make(chan struct{}), stopper: make(chan struct{}), frozenSince: map[uint64]time.Time{}}
	n.peers = newPeerConns(cfg.DialOptions, cfg.AuthToken)
	n.reqGate = admission.NewGate("requests", cfg.Admission.requestLimits())
	n.ap = newAutopilotHost(n)
	n.dir = newDirectory()
	n.announced = map[string]*bgtask.Handle{}
	n.initBackground()
	if v, ok, err := n.eng.Get(identityKey); err != nil {
		return nil, err
	} else if ok {
		if err := json.Unmarshal(v, &n.ident); err != nil {
			return nil, fmt.Errorf("store identity is corrupt: %w", err)
		}
	}
	if v, ok, err := n.eng.Get(directoryKey); err != nil {
		return nil, err
	} else if ok {
		var nodes []*pb.NodeDescriptor
		if err := json.Unmarshal(v, &nodes); err == nil {
			for _, d := range nodes {
				n.dir.upsert(d)
			}
		}
	}
	n.transport = transport.New(transport.Config{
		NodeID:                      n.ident.NodeID,
		ClusterID:                   n.ident.ClusterID,
		Resolver:                    n.dir.resolve,
		DialOptions:                 withToken(cfg.DialOptions, cfg.AuthToken),
		SnapshotRateBytesPerSec:     cfg.SnapshotRateBytesPerSec,
		SnapshotRecvRateBytesPerSec: cfg.SnapshotRecvRateBytesPerSec,
		OnUnreachable: func(nodeID uint64) {
			if n.store != nil {
				n.store.ReportUnreachable(nodeID)
			}
		},
	}, (*raftHandler)(n))
	if err := n.initHints(); err != nil {
		return nil, err
	}
	return n, nil
}

// raftHandler forwards transport callbacks to the store once it exists.
type raftHandler Node

func (h *raftHandler) HandleRaftMessages(msgs []*pb.RaftMessage) {
	n := (*Node)(h)
	select {
	case <-n.ready:
		n.store.HandleRaftMessages(msgs)
	default:
	}
}

func (h *raftHandler) HandleSnapshot(header *pb.RaftMessage, kvs []*pb.KeyValue) error {
	n := (*Node)(h)
	select {
	case <-n.ready:
		return n.store.HandleSnapshot(header, kvs)
	default:
		return errors.New("node not started yet")
	}
}

// RegisterServices registers the public Shoal API, the raft transport and (unless off) the read-hints
// service on s.
func (n *Node) RegisterServices(s *grpc.Server) {
	pb.RegisterShoalServer(s, n)
	n.transport.Register(s)
	if n.hints != nil {
		pb.RegisterHintsServer(s, n.hints.m.Service())
	}
}

// NodeID is the node's id (0 before Start on a new store).
func (n *Node) NodeID() uint64 { return n.ident.NodeID }

// ClusterID is the cluster's id.
func (n *Node) ClusterID() string { return n.ident.ClusterID }

// Store exposes the node's replica store (for status pages and tests).
func (n *Node) Store() *replica.Store { return n.store }

// TransportStats reads the node's transport counters (cheap: no engine or store walk, unlike Metrics).
func (n *Node) TransportStats() transport.Stats { return n.transport.Stats() }

// Ready is closed once the node serves requests.
func (n *Node) Ready() <-chan struct{} { return n.ready }

// Start bootstraps or joins the cluster if the store is new, then starts raft, heartbeats and the
// background queues. It returns once the node has an identity and serves requests.
func (n *Node) Start(ctx context.Context) error {
	if n.ident.NodeID == 0 {
		switch {
		case n.cfg.Bootstrap:
			if err := n.bootstrap(); err != nil {
				return fmt.Errorf("bootstrap: %w", err)
			}
		case len(n.cfg.Join) > 0:
			if err := n.join(ctx); err != nil {
				return fmt.Errorf("join: %w", err)
			}
		default:
			return errors.New("store has no identity: start with --bootstrap (new cluster) or --join (existing cluster)")
		}
	}
	n.transport.SetIdentity(n.ident.NodeID, n.ident.ClusterID)
	n.removeStaleCheckpoints()
	self := n.selfDesc()
	n.dir.upsert(self)
	n.dir.heard(self.NodeId, time.Now())
	n.store = replica.NewStore(replica.Config{
		NodeID:            n.ident.NodeID,
		Engine:            n.eng,
		Transport:         n.transport,
		TickInterval:      n.cfg.TickInterval,
		DisableLeaseReads: n.cfg.DisableLeaseReads,
		ProposalLimits:    n.cfg.Admission.proposalLimits(),
		OnReplicaRemoved:  n.hintsForget,
		Logger:            n.log,
	})
	n.storeRef.Store(n.store)
	if err := n.store.Load(); err != nil {
		return fmt.Errorf("load replicas: %w", err)
	}
	n.warmAfterRestart(ctx)
	n.store.Start()
	close(n.ready)
	n.startHints()
	n.startBackground()
	n.log.Info("node started", "node", n.ident.NodeID, "cluster", n.ident.ClusterID, "addr", n.cfg.Addr, "replicas", len(n.store.Replicas()))
	return nil
}

func (n *Node) selfDesc() *pb.NodeDescriptor {
	return &pb.NodeDescriptor{NodeId: n.ident.NodeID, Addr: n.cfg.Addr, HttpAddr: n.cfg.HTTPAddr, RespAddr: n.cfg.RESPAddr}
}

func (n *Node) saveIdentity() error {
	v, _ := json.Marshal(n.ident)
	b := n.eng.NewBatch()
	defer b.Close()
	if err := b.Set(identityKey, v); err != nil {
		return err
	}
	return b.Commit(true)
}

func (n *Node) saveDirectory() {
	v, _ := json.Marshal(n.dir.all())
	b := n.eng.NewBatch()
	defer b.Close()
	_ = b.Set(directoryKey, v)
	if err := b.Commit(true); err != nil {
		n.log.Warn("persist node directory", "err", err)
	}
}

// bootstrap creates the first node of a new cluster: the meta range and one user range covering the
// whole key space, both with this node as their only voter.
func (n *Node) bootstrap() error {
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		return err
	}
	n.ident = identity{ClusterID: hex.EncodeToString(id), NodeID: 1}
	st := replica.NewStore(replica.Config{NodeID: 1, Engine: n.eng, Transport: n.transport})
	metaDesc := &pb.RangeDescriptor{RangeId: replica.MetaRangeID, Replicas: []*pb.ReplicaDescriptor{{NodeId: 1, ReplicaId: 1}}, NextReplicaId: 2, Generation: 1}
	userDesc := &pb.RangeDescriptor{RangeId: replica.FirstUserRangeID, Replicas: []*pb.ReplicaDescriptor{{NodeId: 1, ReplicaId: 1}}, NextReplicaId: 2, Generation: 1}
	userData, err := marshal(userDesc)
	if err != nil {
		return err
	}
	nodeData, err := marshal(n.selfDesc())
	if err != nil {
		return err
	}
	metaData := []*pb.KeyValue{
		{Key: replica.MetaDescKey(nil), Value: userData},
		{Key: replica.MetaNodeKey(1), Value: nodeData},
		{Key: replica.MetaCounterKey("range-id"), Value: u64(replica.FirstUserRangeID)},
		{Key: replica.MetaCounterKey("node-id"), Value: u64(1)},
	}
	if err := st.Bootstrap(metaDesc, metaData); err != nil {
		return err
	}
	if err := st.Bootstrap(userDesc, nil); err != nil {
		return err
	}
	return n.saveIdentity()
}

// join asks an existing node for a node id and records the cluster's identity.
func (n *Node) join(ctx context.Context) error {
	backoff := 200 * time.Millisecond
	for attempt := 0; ; attempt++ {
		for _, addr := range n.cfg.Join {
			c, err := n.peers.client(addr)
			if err != nil {
				continue
			}
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			resp, err := c.Join(rctx, &pb.JoinRequest{Node: n.selfDesc()})
			cancel()
			if err == nil && resp.Error == nil {
				n.ident = identity{ClusterID: resp.ClusterId, NodeID: resp.NodeId}
				for _, d := range resp.Nodes {
					n.dir.upsert(d)
				}
				if err := n.saveIdentity(); err != nil {
					return err
				}
				n.saveDirectory()
				return nil
			}
			if err == nil {
				err = errors.New(resp.Error.Message)
			}
			if attempt%10 == 0 {
				n.log.Warn("join attempt failed; retrying", "via", addr, "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("could not join through %v: %w", n.cfg.Join, ctx.Err())
		case <-time.After(backoff):
		}
		if backoff < 2*time.Second {
			backoff *= 2
		}
	}
}

// Stop stops every goroutine of the node; the engine stays open (the caller owns it).
func (n *Node) Stop() {
	n.stopOne.Do(func() {
		close(n.stopper)
		n.wg.Wait()
		n.stopHints()
		n.ap.stop()
		if n.store != nil {
			n.store.Stop()
		}
		n.transport.Close()
		n.peers.close()
	})
}

// sleep waits d or until the node stops; it reports false when stopping.
func (n *Node) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-n.stopper:
		return false
	case <-t.C:
		return true
	}
}

// stopContext is a context canceled when the node stops, for one of the node's goroutines; the
// caller must call cancel when that goroutine ends.
func (n *Node) stopContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-n.stopper:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// every runs f every d in a goroutine owned by the node until Stop.
func (n *Node) every(d time.Duration, f func(ctx context.Context)) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		ctx, cancel := n.stopContext()
		defer cancel()
		for n.sleep(d) {
			f(ctx)
		}
	}()
}

func (n *Node) startBackground() {
	n.heartbeatLoop()
	n.startPeriodicTasks()
	n.every(n.cfg.QueueInterval, n.runQueues)
	n.every(5*time.Second, n.refreshDirectory)
	n.every(time.Second, n.ap.watch)
}
