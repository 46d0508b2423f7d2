// Package node owns one node's life: it opens the engine, creates the replica store, the raft
// transport, the range layer (kv), the node directory and heartbeats, background work, read hints and
// the autopilot host, starts them in order (bootstrapping or joining a cluster when the store is new)
// and stops them in reverse. It serves the cluster's node-level RPCs (Join, Heartbeat, Nodes, admin
// requests) and, through the range layer it embeds, the request API.
//
// `shoal start` (package server, which adds the listeners), `shoal demo`, the integration tests and the
// benchmarks all create nodes with New. The package never listens on a network itself except in
// StartServing, the in-process shortcut tests and benchmarks use.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/shoaldb/shoal/admission"
	"github.com/shoaldb/shoal/autopilot"
	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/bgtask"
	"github.com/shoaldb/shoal/hints"
	"github.com/shoaldb/shoal/kv"
	"github.com/shoaldb/shoal/node/accessstats"
	"github.com/shoaldb/shoal/node/autopilothost"
	"github.com/shoaldb/shoal/node/background"
	"github.com/shoaldb/shoal/node/catchup"
	"github.com/shoaldb/shoal/node/directory"
	"github.com/shoaldb/shoal/node/expiry"
	"github.com/shoaldb/shoal/node/history"
	"github.com/shoaldb/shoal/node/jobs"
	"github.com/shoaldb/shoal/node/readhints"
	"github.com/shoaldb/shoal/node/silence"
	"github.com/shoaldb/shoal/node/streamhost"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
	"github.com/shoaldb/shoal/stopper"
	"github.com/shoaldb/shoal/storage"
	"github.com/shoaldb/shoal/transport"
)

// DefaultHeartbeatInterval is the default time between a node's heartbeats.
const DefaultHeartbeatInterval = time.Second

// Config configures a node. Each layer's part is that layer's own Config, with its own defaults; zero
// values take them.
type Config struct {
	// DataDir is the engine's directory (required).
	DataDir string
	// Storage configures the engine. CreateIfMissing is set when Bootstrap or Join is.
	Storage storage.Options
	// Addr is the advertised gRPC address (clients and peers dial it; required by Start). A caller
	// that learns it only once it listens sets it with Advertise.
	Addr string
	// HTTPAddr and RESPAddr are advertised to clients through the node's descriptor.
	HTTPAddr, RESPAddr string
	// Locality is where the node runs, "region=r1,zone=z1": tiers key=value from the most general,
	// comma-separated. The autopilot spreads each range's replicas over the last tier's values.
	Locality string
	// Bootstrap creates a new cluster if the store has no identity yet.
	Bootstrap bool
	// Join lists gRPC addresses of existing nodes to join through if the store has no identity yet.
	Join []string
	// AuthToken is attached to node-to-node calls when the cluster requires one.
	AuthToken string `json:"-"`
	// DialOptions are used for node-to-node gRPC (default insecure).
	DialOptions []grpc.DialOption `json:"-"`
	// HeartbeatInterval between node heartbeats (default DefaultHeartbeatInterval).
	HeartbeatInterval time.Duration
	// DeadNodeTimeout: a node silent this long is dead, and the autopilot replaces its replicas
	// (default model.DefaultDeadAfter).
	DeadNodeTimeout time.Duration
	// Raft configures the replica store (tick, election, log truncation, lease reads); the node fills
	// in its identity, engine, transport and callbacks.
	Raft replica.Config
	// Transport configures raft message and snapshot streaming (snapshot rates); the node fills in its
	// identity, resolver and dial options.
	Transport transport.Config
	// KV configures the range layer: request size limits, range size, queues, merges.
	KV kv.Config
	// Hints configures read hints (on by default).
	Hints readhints.Config
	// Background configures heavy background work, periodic compactions and backups.
	Background background.Config
	// Expiry paces the removal of expired keys.
	Expiry expiry.Config
	// Jobs paces the scan jobs this node runs when it leads the meta range.
	Jobs jobs.Config
	// Admission bounds the client work the node holds.
	Admission admission.Config
	// Access tunes the per-range access statistics for the usage model (sampling, histogram window).
	Access accessstats.Config
	// Autopilot tunes the autopilot's policies; its replicate policy's dead-node timeout comes from
	// DeadNodeTimeout.
	Autopilot autopilot.Config
	// Reprofile, set by a supervisor that can restart the node in process (node/supervisor), starts
	// a change of the node's engine profile (the SetProfile RPC) and returns once it is under way.
	// Nil: SetProfile is refused.
	Reprofile func(profile string) error `json:"-"`
	Logger    *slog.Logger               `json:"-"`
}

// WithDefaults returns c with every zero field of the node's own and of each layer's part set to its
// default: what the node runs with, and what `shoal start --print-config` prints.
func (c Config) WithDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if len(c.DialOptions) == 0 {
		c.DialOptions = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if c.DeadNodeTimeout == 0 {
		c.DeadNodeTimeout = model.DefaultDeadAfter
	}
	c.Transport = c.Transport.WithDefaults()
	c.KV = c.KV.WithDefaults()
	c.Hints = c.Hints.WithDefaults()
	c.Background = c.Background.WithDefaults()
	c.Expiry = c.Expiry.WithDefaults()
	c.Jobs = c.Jobs.WithDefaults()
	c.Admission = c.Admission.WithDefaults()
	c.Storage = c.Storage.WithDefaults()
	c.Raft = c.Raft.WithDefaults()
	c.Autopilot.Policies.Replicate.DeadAfter = c.DeadNodeTimeout
	c.Autopilot = c.Autopilot.WithDefaults()
	return c
}

// Validate reports every inconsistent setting at once.
func (c Config) Validate() error {
	var errs []error
	if c.DataDir == "" {
		errs = append(errs, errors.New("missing data directory: set --data-dir"))
	}
	if c.HeartbeatInterval < 0 || c.DeadNodeTimeout < 0 {
		errs = append(errs, errors.New("heartbeat interval and dead node timeout must not be negative"))
	}
	if c.Locality != "" {
		for _, tier := range strings.Split(c.Locality, ",") {
			if k, v, ok := strings.Cut(tier, "="); !ok || k == "" || v == "" {
				errs = append(errs, fmt.Errorf("locality %q: want tiers key=value separated by commas, e.g. region=eu,zone=eu-1a", c.Locality))
				break
			}
		}
	}
	for _, err := range []error{c.Storage.Validate(), c.Raft.Validate(), c.Transport.Validate(), c.KV.Validate(), c.Hints.Validate(),
		c.Background.Validate(), c.Autopilot.Validate(), c.Jobs.Validate()} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Node is one Shoal node.
type Node struct {
	*kv.Service // the request API and the range RPCs

	cfg   Config
	eng   *storage.Engine
	log   *slog.Logger
	ident identity

	store     atomic.Pointer[replica.Store]
	reqGate   *admission.Gate
	transport *transport.Transport
	dir       *directory.Directory
	peers     *directory.Peers
	hints     *readhints.Service // nil when read hints are off on this node
	bg        *background.Service
	ap        *autopilothost.Host
	hist      *history.Recorder // the last hour of this node's stats (/api/history)
	sweeper   *expiry.Sweeper
	scanJobs  *jobs.Service
	streams   *streamhost.Host // stream tasks next to the data (package stream)
	streamsCl func()           // closes the streams host's client of the cluster

	draining atomic.Bool
	catchUp  *catchup.Tracker // catching up after the start, until the replicas reach their peers
	hbKick   chan struct{}
	initGate *initGate // `shoal init` reaching a node that waits to join (init.go)

	loadMu   sync.Mutex
	loadPrev map[uint64]loadMark  // last counter readings per range, for QPS
	latency  rangeLatency         // per-range request latency, for the decision log's p99
	access   *accessstats.Tracker // per-range access statistics for the usage model (access.go)
	// indexFilter measures the cache's bytes of index and filter blocks for the usage model, off the
	// heartbeat (access.go); indexFilterBytes is its last measure.
	indexFilter      accessstats.IndexFilter
	indexFilterBytes atomic.Uint64

	srv *grpc.Server // set by StartServing only

	ready   chan struct{}
	loops   *stopper.Stopper // the node's own loops: heartbeats, directory refresh, autopilot watch, history
	stopOne sync.Once
}

// New opens the node's engine and prepares the node; nothing runs until Start. The gRPC server must
// have the node's services (RegisterServices) and serve before Start: a joining node's peers and the
// first elections need it.
func New(cfg Config) (*Node, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid configuration: %w", err)
	}
	so := cfg.Storage
	so.CreateIfMissing = so.CreateIfMissing || cfg.Bootstrap || len(cfg.Join) > 0
	if so.CreateIfMissing {
		if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
			return nil, fmt.Errorf("create data directory: %w", err)
		}
	}
	eng, err := storage.Open(cfg.DataDir, so)
	if err != nil {
		return nil, err // storage's errors say what to do (--bootstrap/--join, directory in use, corrupt)
	}
	n, err := newNode(cfg, eng)
	if err != nil {
		eng.Close()
		return nil, err
	}
	return n, nil
}

func newNode(cfg Config, eng *storage.Engine) (*Node, error) {
	n := &Node{cfg: cfg, eng: eng, log: cfg.Logger, ready: make(chan struct{}), loops: stopper.New(),
		hbKick: make(chan struct{}, 1), initGate: newInitGate()}
	n.catchUp = catchup.New(catchup.Deps{Self: n.NodeID, Replicas: func() []catchup.Replica { return catchup.FromStore(n.Store(), n.NodeID()) },
		Ask: catchup.OverRPC(n.peerClient), CaughtUp: n.kickHeartbeat, Logger: cfg.Logger})
	n.dir = directory.New()
	n.sweeper = expiry.New(cfg.Expiry, eng, n.Store, cfg.Logger)
	n.peers = directory.NewPeers(cfg.DialOptions, cfg.AuthToken)
	n.reqGate = admission.NewGate("requests", cfg.Admission.RequestLimits())
	if err := n.loadIdentity(); err != nil {
		return nil, err
	}
	tc := cfg.Transport
	tc.NodeID, tc.ClusterID, tc.Resolver = n.ident.NodeID, n.ident.ClusterID, n.dir.Resolve
	tc.DialOptions = directory.WithToken(cfg.DialOptions, cfg.AuthToken)
	tc.OnUnreachable = func(nodeID uint64) {
		if st := n.store.Load(); st != nil {
			st.ReportUnreachable(nodeID)
		}
	}
	n.transport = transport.New(tc, (*raftHandler)(n))
	// The observer reads n.hints and n.ap at each request, so the range layer may come first.
	n.Service = kv.New(cfg.KV, kv.Deps{Cluster: clusterView{n}, Observer: observer{n}, Requests: n.reqGate, Logger: n.log})
	remote, closeRemote := streamhost.SelfClient(func() string { return n.cfg.Addr }, cfg.AuthToken, cfg.DialOptions)
	n.streams, n.streamsCl = streamhost.New(streamhost.Deps{Local: n.Service, Store: n.Store, NodeID: n.NodeID,
		Resolve: n.dir.Resolve, Remote: remote, Logger: n.log}), closeRemote
	n.scanJobs = jobs.New(cfg.Jobs, jobs.Deps{Ranges: n.Service, Store: n.Store, Logger: n.log, Cluster: n.jobLoads})
	var err error
	n.hints, err = readhints.New(cfg.Hints, readhints.Deps{Engine: eng, Store: n.Store, Conn: n.peerConn, Meta: n.Service, Region: n.regionOf, Logger: n.log})
	if err != nil {
		return nil, err
	}
	n.ap = autopilothost.New(cfg.Autopilot, autopilothost.Deps{Ranges: n.Service, Dir: n.dir, Store: n.Store, LiveWindow: n.liveWindow,
		Hints: n.hints, Conn: n.peerConn, ClusterID: n.ClusterID, Logger: n.log})
	n.bg = background.New(cfg.Background, background.Deps{Engine: eng, Store: n.Store, Ranges: n.Service, Dir: n.dir,
		Peer: n.peerClient, LiveWindow: n.liveWindow, Kick: n.kickHeartbeat, DrainLeaderships: n.DrainLeaderships, Logger: n.log})
	n.hist = history.New(history.Config{}, history.Deps{
		Load:     func() *pb.NodeStats { st, _ := n.dir.StatsOf(n.ident.NodeID); return st },
		DiskBusy: eng.DiskUtilization, DataDir: cfg.DataDir,
		Replicas: func() ([]history.Replica, int) { return history.StoreReplicas(n.Store()) },
		Self:     n.NodeID, Live: func() []uint64 { return n.dir.LiveNodes(n.liveWindow()) },
		Nodes: func() int { return len(n.dir.All()) }, Factor: cfg.Autopilot.Policies.Replicate.Factor,
	})
	return n, nil
}

// raftHandler forwards transport callbacks to the store once it exists.
type raftHandler Node

func (h *raftHandler) HandleRaftMessages(msgs []*pb.RaftMessage) {
	if st := (*Node)(h).store.Load(); st != nil {
		st.HandleRaftMessages(msgs)
	}
}

func (h *raftHandler) HandleSnapshot(header *pb.RaftMessage, kvs []*pb.KeyValue) error {
	if st := (*Node)(h).store.Load(); st != nil {
		return st.HandleSnapshot(header, kvs)
	}
	return errors.New("node not started yet")
}

// RegisterServices registers the public Shoal API, the raft transport and (unless off) the read-hints
// service on s (a gRPC server, or a supervisor that forwards a server's calls to the node it runs).
func (n *Node) RegisterServices(s grpc.ServiceRegistrar) {
	pb.RegisterShoalServer(s, n)
	n.transport.Register(s)
	n.hints.Register(s)
	n.streams.Register(s)
}

// Config is the node's effective configuration (defaults applied).
func (n *Node) Config() Config { return n.cfg }

// NodeID is the node's id (0 before Start on a new store).
func (n *Node) NodeID() uint64 { return n.ident.NodeID }

// ClusterID is the cluster's id.
func (n *Node) ClusterID() string { return n.ident.ClusterID }

// Engine is the node's storage engine.
func (n *Node) Engine() *storage.Engine { return n.eng }

// Store is the node's replica store (nil before Start).
func (n *Node) Store() *replica.Store { return n.store.Load() }

// StreamStats are the node's stream-task counters: events applied, state accesses served here and
// at other nodes.
func (n *Node) StreamStats() streamhost.Stats { return n.streams.Stats() }

// ExpiryStats is the expiry sweeper's work so far.
func (n *Node) ExpiryStats() expiry.Stats { return n.sweeper.Stats() }

// TransportStats reads the node's transport counters (cheap: no engine or store walk, unlike Metrics).
func (n *Node) TransportStats() transport.Stats { return n.transport.Stats() }

// Hints is the node's read-hints module, nil when read hints are off on this node.
func (n *Node) Hints() *hints.Module { return n.hints.Module() }

// HintsOn reports whether this node captures reads now: read hints are on here and the cluster's
// read_hints switch is on.
func (n *Node) HintsOn() bool { return n.hints.On() }

// History is the node's recent stats, one point every few seconds for the last hour (the dashboard's
// charts, and the range-health gauges of /metrics).
func (n *Node) History() *history.Recorder { return n.hist }

// Background is the node's background-task tracker (status pages and tests).
func (n *Node) Background() *bgtask.Tracker { return n.bg.Tracker() }

// CatchingUp reports whether the node's replicas are still catching up after its start (package
// catchup): readiness is false and the node takes no leadership.
func (n *Node) CatchingUp() bool { return n.catchUp.CatchingUp() }

// WaitCaughtUp waits until the node's replicas have caught up after its start or ctx ends; it
// reports whether they have.
func (n *Node) WaitCaughtUp(ctx context.Context) bool { return n.catchUp.Wait(ctx) }

// Stopping reports whether the node is on its way out: it is draining its leaderships for a stop
// (SIGTERM), or an orchestrator announced the stop (background.PreStopTask). Readiness turns false.
func (n *Node) Stopping() bool { return n.draining.Load() || n.bg.PreStopped() }

// Admission reads the node's two gates: client requests and user writes in raft.
func (n *Node) Admission() (requests, proposals admission.Stats) {
	requests = n.reqGate.Stats()
	if st := n.store.Load(); st != nil {
		proposals = st.ProposalAdmission()
	}
	return requests, proposals
}

// Ready is closed once the node serves requests.
func (n *Node) Ready() <-chan struct{} { return n.ready }

// Advertise sets the addresses the node puts in its descriptor (gRPC, and HTTP and RESP when served;
// "" for none). Call it before Start: a listener on port 0 knows its port only once it listens.
func (n *Node) Advertise(grpcAddr, httpAddr, respAddr string) {
	n.cfg.Addr, n.cfg.HTTPAddr, n.cfg.RESPAddr = grpcAddr, httpAddr, respAddr
}

// Start bootstraps or joins the cluster if the store is new (a node with --join waits until a node of
// the list admits it, or until `shoal init` makes it bootstrap), then starts raft, the range layer,
// heartbeats and the background loops. It returns once the node has an identity and serves requests.
func (n *Node) Start(ctx context.Context) error {
	if n.cfg.Addr == "" {
		return errors.New("node: no advertised gRPC address (Config.Addr or Advertise)")
	}
	if n.ident.NodeID == 0 {
		switch {
		case n.cfg.Bootstrap:
			if err := n.bootstrap(); err != nil {
				return fmt.Errorf("bootstrap: %w", err)
			}
		case len(n.cfg.Join) > 0:
			if err := n.join(ctx); err != nil { // or the bootstrap `shoal init` asks for
				return fmt.Errorf("join: %w", err)
			}
		default:
			return errors.New("store has no identity: start with --bootstrap (new cluster) or --join (an existing cluster, or a new one created with `shoal init`)")
		}
	}
	n.initGate.joined(n.ident.ClusterID, n.ident.NodeID)
	n.transport.SetIdentity(n.ident.NodeID, n.ident.ClusterID)
	self := n.selfDesc()
	n.dir.Upsert(self)
	n.dir.Heard(self.NodeId, time.Now())
	rc := n.cfg.Raft
	rc.NodeID, rc.Engine, rc.Transport, rc.Logger = n.ident.NodeID, n.eng, n.transport, n.log
	rc.ProposalLimits = n.cfg.Admission.ProposalLimits()
	rc.OnReplicaRemoved = n.hints.Forget
	rc.Changes = n.Service.Changes()
	n.access = accessstats.New(n.cfg.Access)
	rc.Access = n.access
	st := replica.NewStore(rc)
	n.store.Store(st)
	if err := st.Load(); err != nil {
		return fmt.Errorf("load replicas: %w", err)
	}
	n.hints.WarmAfterRestart(ctx, n.ident.NodeID, n.ident.ClusterID)
	st.Start()
	n.loops.Go(n.catchUp.Run)
	n.Service.Start(n.ident.NodeID, st)
	close(n.ready)
	n.hints.Start(n.ident.NodeID, n.ident.ClusterID)
	n.bg.Start(n.ident.NodeID, n.ident.ClusterID)
	n.sweeper.Start()
	n.scanJobs.Start()
	n.heartbeatLoop()
	n.loops.Every(n.cfg.Raft.TickInterval, silence.New(n.ident.NodeID, n.dir, st, n.cfg.HeartbeatInterval, n.cfg.Raft).Check)
	n.loops.Every(5*time.Second, n.refreshDirectory)
	n.loops.Every(time.Second, n.ap.Watch)
	n.loops.Every(indexFilterEvery, n.measureIndexFilter)
	n.hist.Record(time.Now())
	n.loops.Every(n.hist.Interval(), func(context.Context) { n.hist.Record(time.Now()) })
	n.log.Info("node started", "node", n.ident.NodeID, "cluster", n.ident.ClusterID, "addr", n.cfg.Addr, "replicas", len(st.Replicas()))
	return nil
}

// Stop stops every goroutine of the node; the engine stays open until Close, so that requests still
// running in the gRPC server never meet a closed engine.
func (n *Node) Stop() {
	n.stopOne.Do(func() {
		// The range layer first: whatever below still waits on the cluster (the autopilot's model, a
		// meta read of a switch, a leadership hunt after the meta range lost its quorum) gives up at
		// once instead of at its own deadline.
		n.Service.Stop()
		n.streams.Stop()
		n.streamsCl()
		n.loops.Stop()
		n.ap.Stop()
		n.bg.Stop()
		n.sweeper.Stop()
		n.scanJobs.Stop()
		n.hints.Stop()
		if st := n.store.Load(); st != nil {
			st.Stop()
		}
		n.transport.Close()
		n.peers.Close()
	})
}

// Close stops the node if it still runs and closes the engine; call it once the gRPC server stopped.
func (n *Node) Close() error {
	n.Stop()
	if err := n.eng.Close(); err != nil {
		return fmt.Errorf("close store in %s: %w", n.cfg.DataDir, err)
	}
	return nil
}

// notReady answers requests that reach a node before its store runs.
func (n *Node) notReady() *pb.Error {
	select {
	case <-n.ready:
		return nil
	default:
		return &pb.Error{Code: pb.ErrorCode_UNAVAILABLE, Message: "node is starting"}
	}
}
