// Package kv is the range layer of a node: the meta range of range descriptors, routing of requests to
// the local leader replica or forwarding them to the node that leads, the request API (the data and
// range RPCs of pb.ShoalServer), splits (by size, and on request), merges, replication changes (learner
// → voter, removal) and the repair of the meta range.
//
// It sees other nodes only through Cluster (the node's directory) and reports the requests it serves
// through Observer. It must never write the engine directly for replicated data: every change goes
// through a range's raft group (package replica). Node identity, heartbeats, background work, read
// hints and the autopilot belong to package node.
package kv

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/shoaldb/shoal/admission"
	"github.com/shoaldb/shoal/kv/rangefeed"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
	"github.com/shoaldb/shoal/stopper"
)

// Defaults of Config.
const (
	// DefaultMaxKeyBytes bounds a key's size.
	DefaultMaxKeyBytes = 4 << 10
	// DefaultMaxValueBytes bounds a value's size.
	DefaultMaxValueBytes = 8 << 20
	// DefaultRangeMaxBytes is the size at which a range splits.
	DefaultRangeMaxBytes int64 = 64 << 20
	// DefaultQueueInterval is how often the range queues run.
	DefaultQueueInterval = 2 * time.Second
	// DefaultMergeAbortAfter is how long a range may stay frozen for a merge before it is aborted.
	DefaultMergeAbortAfter = 30 * time.Second
)

// Config configures the range layer. Zero values take the defaults above.
type Config struct {
	// MaxKeyBytes and MaxValueBytes bound request sizes.
	MaxKeyBytes   int `json:"max_key_bytes"`
	MaxValueBytes int `json:"max_value_bytes"`
	// RangeMaxBytes triggers an automatic split.
	RangeMaxBytes int64 `json:"range_max_bytes"`
	// QueueInterval is how often the queues run: meta repair, size splits, garbage collection of
	// replicas the cluster removed, and stuck merges.
	QueueInterval time.Duration `json:"queue_interval"`
	// MergeAbortAfter is how long a range may stay frozen for a merge before its leader aborts the
	// merge.
	MergeAbortAfter time.Duration `json:"merge_abort_after"`
	// ChangeStreams bounds the changes each replica keeps for RangeFeed readers.
	ChangeStreams rangefeed.Config `json:"change_streams"`
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if c.MaxKeyBytes == 0 {
		c.MaxKeyBytes = DefaultMaxKeyBytes
	}
	if c.MaxValueBytes == 0 {
		c.MaxValueBytes = DefaultMaxValueBytes
	}
	if c.RangeMaxBytes == 0 {
		c.RangeMaxBytes = DefaultRangeMaxBytes
	}
	if c.QueueInterval == 0 {
		c.QueueInterval = DefaultQueueInterval
	}
	if c.MergeAbortAfter == 0 {
		c.MergeAbortAfter = DefaultMergeAbortAfter
	}
	c.ChangeStreams = c.ChangeStreams.WithDefaults()
	return c
}

// Validate reports every inconsistent setting at once (zero values are fine: they take defaults).
func (c Config) Validate() error {
	var errs []error
	if c.MaxKeyBytes < 0 {
		errs = append(errs, fmt.Errorf("max key bytes must not be negative (got %d)", c.MaxKeyBytes))
	}
	if c.MaxValueBytes < 0 {
		errs = append(errs, fmt.Errorf("max value bytes must not be negative (got %d)", c.MaxValueBytes))
	}
	if c.MaxValueBytes > 1<<30 {
		errs = append(errs, fmt.Errorf("max value bytes must be at most 1 GiB (got %d)", c.MaxValueBytes))
	}
	if c.RangeMaxBytes < 0 {
		errs = append(errs, fmt.Errorf("range max bytes must not be negative (got %d)", c.RangeMaxBytes))
	}
	if c.QueueInterval < 0 || c.MergeAbortAfter < 0 {
		errs = append(errs, errors.New("queue interval and merge abort timeout must not be negative"))
	}
	if err := c.ChangeStreams.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Cluster is what the range layer knows of other nodes. The node implements it from its directory.
type Cluster interface {
	// Resolve returns a node's gRPC address.
	Resolve(node uint64) (addr string, ok bool)
	// Get returns a node's descriptor, nil when unknown.
	Get(node uint64) *pb.NodeDescriptor
	// Client returns a client of the node at addr (pooled; the cluster's credentials apply).
	Client(addr string) (pb.ShoalClient, error)
	// ProbeNodes lists the nodes heard from recently, to probe when no leader is known.
	ProbeNodes() []uint64
	// LeaderOf is the node believed to lead rangeID from heartbeats (0: unknown); MetaLeader the
	// meta range's leader as last reported; MetaDesc its newest descriptor (nil: none).
	LeaderOf(rangeID uint64) uint64
	MetaLeader() uint64
	MetaDesc() *pb.RangeDescriptor
	// SetLeader records a leader learned without a term (a hint, a split or merge made here);
	// MovedLeader one this node moved the leadership to.
	SetLeader(rangeID, node uint64)
	MovedLeader(rangeID, node uint64)
}

// Observer is told of the requests this node's replicas serve. Its methods run on the request path:
// they must be cheap and must not block.
type Observer interface {
	// Request notes a request for key on rangeID (the sample load-based splitting uses).
	Request(rangeID uint64, key []byte)
	// Read and Scan note a linearizable point read or scan a leader served (read hints replay them).
	Read(rangeID uint64, key []byte)
	Scan(rangeID uint64, start, end []byte, limit int, reverse bool)
	// Served notes how long a request on rangeID took, from its arrival (admission wait included) to
	// its answer, for the range's latency in the autopilot's decision log. Requests answered with a
	// routing error (not the leader, no replica) are not reported: they were not served here.
	Served(rangeID uint64, took time.Duration)
}

// Deps are the node's parts the range layer uses.
type Deps struct {
	Cluster Cluster
	// Observer may be nil (nothing observes).
	Observer Observer
	// Requests is the admission gate of client requests (nil: no limit).
	Requests *admission.Gate
	Logger   *slog.Logger
}

// Service serves the range layer of one node. Requests that arrive before Start get UNAVAILABLE.
type Service struct {
	pb.UnimplementedShoalServer

	cfg     Config
	cluster Cluster
	obs     Observer
	gate    *admission.Gate
	log     *slog.Logger

	// nodeID and store are set once by Start, before ready closes.
	nodeID uint64
	store  *replica.Store

	// feeds holds the replicas' change streams (the store's replica.ChangeSink).
	feeds *rangefeed.Registry

	frozenMu    sync.Mutex
	frozenSince map[uint64]time.Time // ranges this node leads that are frozen for a merge, since when

	ready    chan struct{}
	loops    *stopper.Stopper // the queues; Stop also ends every wait for a leader
	inflight requestCount     // admitted client requests still running (Drain)
}

// New prepares the range layer; it serves once Start gives it the node's identity and replicas.
func New(cfg Config, deps Deps) *Service {
	if deps.Observer == nil {
		deps.Observer = noObserver{}
	}
	if deps.Requests == nil {
		deps.Requests = admission.NewGate("requests", admission.Limits{})
	}
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	cfg = cfg.WithDefaults()
	return &Service{cfg: cfg, cluster: deps.Cluster, obs: deps.Observer, gate: deps.Requests, feeds: rangefeed.New(cfg.ChangeStreams),
		log: deps.Logger, frozenSince: map[uint64]time.Time{}, ready: make(chan struct{}), loops: stopper.New()}
}

// Start serves requests from store's replicas as node nodeID and starts the range queues.
func (s *Service) Start(nodeID uint64, store *replica.Store) {
	s.nodeID, s.store = nodeID, store
	close(s.ready)
	s.loops.Every(s.cfg.QueueInterval, s.runQueues)
}

// Stop ends the queues and makes requests waiting for a leader give up.
func (s *Service) Stop() { s.loops.Stop() }

// Config is the effective configuration (defaults applied).
func (s *Service) Config() Config { return s.cfg }

type noObserver struct{}

func (noObserver) Request(uint64, []byte)                 {}
func (noObserver) Read(uint64, []byte)                    {}
func (noObserver) Scan(uint64, []byte, []byte, int, bool) {}
func (noObserver) Served(uint64, time.Duration)           {}
