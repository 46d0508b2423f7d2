// Package streamhost runs stream jobs' tasks on a node (package stream): it serves the Streams gRPC
// service, keeps one task per (job, range) the node has served events of, and gives each task's
// handler the node's state: the local replica when this node leads the key's range (a leaseholder
// read; a write proposed to raft here), the range's leader through the client otherwise. It counts
// both, so that the alignment of tasks with ranges is measured, not assumed.
//
// It never places tasks or moves ranges: an aligned event that reaches a node not leading its range
// is answered RETRY with NOT_LEADER or RANGE_MOVED, and the producer routes it again.
package streamhost

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
	"github.com/shoaldb/shoal/stream"
)

// Local is the node's request API (kv.Service), called in process.
type Local interface {
	Get(ctx context.Context, req *pb.GetRequest) (*pb.GetResponse, error)
	Txn(ctx context.Context, req *pb.TxnRequest) (*pb.TxnResponse, error)
}

// Deps is what the host needs of its node.
type Deps struct {
	Local  Local
	Store  func() *replica.Store // nil before the node starts
	NodeID func() uint64
	// Resolve returns a node's gRPC address (for a NOT_LEADER answer's hint).
	Resolve func(nodeID uint64) (string, bool)
	// Remote returns a client of the cluster, for state the node does not lead.
	Remote func(ctx context.Context) (*client.Client, error)
	Logger *slog.Logger
}

// Stats are the host's counters since it started.
type Stats struct {
	Applied, Duplicates, Retries, Failed uint64
	// LocalReads and LocalWrites were served by this node's replicas (it led the key's range);
	// RemoteReads and RemoteWrites went to another node.
	LocalReads, RemoteReads, LocalWrites, RemoteWrites uint64
}

// LocalShare is the share of state accesses served locally (1 when there were none).
func (s Stats) LocalShare() float64 {
	local, all := s.LocalReads+s.LocalWrites, s.LocalReads+s.LocalWrites+s.RemoteReads+s.RemoteWrites
	if all == 0 {
		return 1
	}
	return float64(local) / float64(all)
}

// maxParallel bounds the keys of one Ingest call applied at once.
const maxParallel = 32

// Host serves stream tasks on one node.
type Host struct {
	pb.UnimplementedStreamsServer
	deps Deps

	ctx    context.Context // ends at Stop: every task's work derives from it
	cancel context.CancelFunc

	applied, dups, retries, failed   atomic.Uint64
	localR, remoteR, localW, remoteW atomic.Uint64
	mu                               sync.Mutex
	tasks                            map[taskKey]*task
	// loads maps range id → *rangeLoad: the stream load the heartbeat reports (load.go).
	loads sync.Map
}

type taskKey struct {
	job     string
	rangeID uint64
}

// task is a job's work on one range at this node: its counters (the events it applied).
type task struct {
	events atomic.Uint64
	last   atomic.Int64
}

// New returns a host; it serves once registered on the node's gRPC server.
func New(deps Deps) *Host {
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Host{deps: deps, ctx: ctx, cancel: cancel, tasks: map[taskKey]*task{}}
}

// Register adds the Streams service to s.
func (h *Host) Register(s grpc.ServiceRegistrar) { pb.RegisterStreamsServer(s, h) }

// Stop ends the work in flight (its events are answered RETRY) and refuses new work.
func (h *Host) Stop() { h.cancel() }

// Stats reads the host's counters.
func (h *Host) Stats() Stats {
	return Stats{Applied: h.applied.Load(), Duplicates: h.dups.Load(), Retries: h.retries.Load(), Failed: h.failed.Load(),
		LocalReads: h.localR.Load(), RemoteReads: h.remoteR.Load(), LocalWrites: h.localW.Load(), RemoteWrites: h.remoteW.Load()}
}

// StreamStatus implements pb.StreamsServer.
func (h *Host) StreamStatus(context.Context, *pb.StreamStatusRequest) (*pb.StreamStatusResponse, error) {
	st := h.Stats()
	resp := &pb.StreamStatusResponse{NodeId: h.deps.NodeID(), Jobs: stream.Names(), Applied: st.Applied, Duplicates: st.Duplicates,
		Retries: st.Retries, Failed: st.Failed, LocalReads: st.LocalReads, RemoteReads: st.RemoteReads,
		LocalWrites: st.LocalWrites, RemoteWrites: st.RemoteWrites}
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, t := range h.tasks {
		resp.Tasks = append(resp.Tasks, &pb.StreamTaskStatus{Job: k.job, RangeId: k.rangeID, Events: t.events.Load(), LastUnixNanos: t.last.Load()})
	}
	return resp, nil
}

// SelfClient returns a Deps.Remote that makes, on first use, one client of the cluster reached
// through addr (the node's own address), and a func that closes it.
func SelfClient(addr func() string, authToken string, opts []grpc.DialOption) (remote func(context.Context) (*client.Client, error), closeFn func()) {
	var (
		mu sync.Mutex
		cl *client.Client
	)
	remote = func(ctx context.Context) (*client.Client, error) {
		mu.Lock()
		defer mu.Unlock()
		if cl == nil {
			c, err := client.New(ctx, client.Config{Addrs: []string{addr()}, AuthToken: authToken, DialOptions: opts})
			if err != nil {
				return nil, err
			}
			cl = c
		}
		return cl, nil
	}
	closeFn = func() {
		mu.Lock()
		defer mu.Unlock()
		if cl != nil {
			_ = cl.Close()
			cl = nil
		}
	}
	return remote, closeFn
}
