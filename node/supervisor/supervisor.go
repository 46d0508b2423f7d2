// Package supervisor runs one node in process and restarts it in process with new engine options:
// the change of a node's engine profile (docs/design/profiles.md). Pebble fixes a store's block
// cache, memtable size and block size when it opens, so a node changes profile by closing its
// engine and opening it again on the same data; the supervisor makes that a rolling restart that
// clients and peers see as a short absence of one follower:
//
//  1. the node sheds its leaderships, each to the voter of its range leading the least load once
//     that voter is warm for it (its read hints flowing and, where measurable, its replays hitting
//     the cache; at most WarmWait; then DrainLeaderships for any left), so no range loses its
//     leader, no peer takes them all, and none takes one cold;
//  2. the supervisor retires the node: new calls wait for the next node (at most AnswerWait, then
//     answered UNAVAILABLE "node is restarting" in their response, which the client retries
//     elsewhere; a call whose response has no error field at most AwaitTimeout), the unary calls it serves finish while it still runs (at most DrainTimeout: a
//     write it proposed before it shed the range is answered, not failed as ambiguous), then its
//     streams end, the node stops and its engine closes;
//  3. a new node opens the same data directory with the profile, behind the same gRPC server and
//     listener (the supervisor forwards the server's calls to whichever node runs), warms its cache
//     from its peers' read hints as every restarted node does, and serves;
//  4. when the profile's block size differs, it compacts its store, so that every table is written
//     with it (Pebble applies a block size to the tables it writes; the thesis runs a major
//     compaction after each reconfiguration) — as a follower, its leaderships still elsewhere, and
//     reported as a heavy manual_compaction task, so that no policy hands it one meanwhile;
//  5. it waits (at most ReturnWarmWait) until the shed ranges' live read hints reach it and, where
//     measurable, its replays hit its cache about as often as their leaders' reads hit theirs, then
//     takes back the leaderships it shed, but the meta range's: the autopilot runs on its leader,
//     and taking it back would move the autopilot (and its policies' memory) once more.
//
// The package owns the node's incarnations and the forwarding of gRPC calls to the current one. It
// must never read or write the node's data itself, and runs one restart at a time.
package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shoaldb/shoal/bgtask"
	"github.com/shoaldb/shoal/node"
	"github.com/shoaldb/shoal/node/catchup"
	"github.com/shoaldb/shoal/node/directory"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/plan/profileplan"
	"github.com/shoaldb/shoal/replica"
	"github.com/shoaldb/shoal/transport"
)

// Timeouts of a restart's phases.
const (
	// ShedTimeout bounds the wait for the node's leaderships to move away.
	ShedTimeout = 15 * time.Second
	// RetireTimeout bounds the wait for the calls the retired node was serving.
	RetireTimeout = 15 * time.Second
	// CompactTimeout bounds the full compaction that rewrites the store with a new block size.
	CompactTimeout = 5 * time.Minute
	// ReturnTimeout bounds the hand-back of each leadership.
	ReturnTimeout = 10 * time.Second
)

// errRestarting answers calls that arrive while no node runs.
var errRestarting = status.Error(codes.Unavailable, "node is restarting with a new engine profile")

// Supervisor runs a node and restarts it in process.
type Supervisor struct {
	srv *grpc.Server
	log *slog.Logger

	cur   atomic.Pointer[incarnation]
	first map[string]any // service name → the first node's implementation (the server's type check)

	mu  sync.Mutex  // serializes restarts; guards cfg
	cfg node.Config // as the caller gave it, with the profile of the running node

	ctx     context.Context // canceled by Stop: ends a restart under way
	cancel  context.CancelFunc
	wg      sync.WaitGroup // the restarts Reprofile started
	pending atomic.Bool    // a restart Reprofile started has not finished
	// Restarts counts the completed profile changes; LastError is the last failed one's ("" none).
	restarts atomic.Int64
	lastErr  atomic.Pointer[string]
	spansMu  sync.Mutex
	spans    []Span // the profile changes, from the ask to the leaderships back
	// unthrottled lifts the emulated disk's budget of the running node and of every node opened
	// while it is set (SetDeviceUnthrottled).
	unthrottled atomic.Bool

	peerMu   sync.Mutex
	peerPool *directory.Peers // connections to the other nodes (their warmth before a shed), dialled as the node dials
}

// peers is the supervisor's pool of connections to the other nodes, with n's dial options.
func (s *Supervisor) peers(n *node.Node) *directory.Peers {
	s.peerMu.Lock()
	defer s.peerMu.Unlock()
	if s.peerPool == nil {
		s.peerPool = directory.NewPeers(n.Config().DialOptions, n.Config().AuthToken)
	}
	return s.peerPool
}

// incarnation is one node and the calls it serves.
type incarnation struct {
	n        *node.Node
	impls    map[string]any
	inflight atomic.Int64 // calls and streams forwarded to it
	calls    atomic.Int64 // of them, unary calls: what retire lets finish before the node stops
	retiring atomic.Bool
	retired  chan struct{} // closed when the node is retired: ends the streams forwarded to it
}

// AwaitTimeout bounds how long a call that arrives between two nodes waits for the next one.
const AwaitTimeout = 10 * time.Second

// AnswerWait bounds that wait for a unary call whose response carries an Error: then it is answered
// UNAVAILABLE "node is restarting" in its response, which a client retries elsewhere as a request
// not served. Held for AwaitTimeout, a write outlived its client's attempt (5 s) while a node
// closed and reopened its engine on a slow disk (15 s at 150 operations a second), and the
// client, which cannot tell an unanswered write from one applied, reported it ambiguous.
const AnswerWait = time.Second

// await is enter, waiting (within ctx, at most AwaitTimeout) while no node runs: a call that meets
// the restart is served by the next node instead of failing. The client cannot tell a transport
// error after sending a write from a write that failed half-way, so it would report it ambiguous.
func (s *Supervisor) await(ctx context.Context, service string, unary bool, bound time.Duration) (*incarnation, any) {
	deadline := time.Now().Add(bound)
	for {
		if inc, impl := s.enter(service, unary); inc != nil || ctx.Err() != nil || time.Now().After(deadline) || s.ctx.Err() != nil {
			return inc, impl
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// enter counts a call to the current node (a unary one also among its calls) and returns it with
// the service's implementation, or nil while none runs. The counts go up before retiring is read,
// and retire sets retiring before it reads them: either it waits for this call or the call leaves.
func (s *Supervisor) enter(service string, unary bool) (*incarnation, any) {
	inc := s.cur.Load()
	if inc == nil {
		return nil, nil
	}
	inc.inflight.Add(1)
	if unary {
		inc.calls.Add(1)
	}
	if impl := inc.impls[service]; impl != nil && !inc.retiring.Load() {
		return inc, impl
	}
	inc.leave(unary) // retiring (and retire saw no call of ours), or no such service
	return nil, nil
}

// leave uncounts a call enter counted.
func (inc *incarnation) leave(unary bool) {
	if unary {
		inc.calls.Add(-1)
	}
	inc.inflight.Add(-1)
}

// capture records the services a node registers.
type capture struct {
	descs map[string]*grpc.ServiceDesc
	impls map[string]any
}

// RegisterService implements grpc.ServiceRegistrar.
func (c *capture) RegisterService(d *grpc.ServiceDesc, impl any) {
	c.descs[d.ServiceName], c.impls[d.ServiceName] = d, impl
}

// Start opens the node of cfg and serves it on lis (nil: a listener on cfg.Addr), as
// node.StartServing does, with the server's calls forwarded to the node the supervisor runs.
func Start(ctx context.Context, cfg node.Config, lis net.Listener) (*Supervisor, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Supervisor{cfg: cfg, log: cfg.Logger, srv: grpc.NewServer(transport.ServerOptions()...)}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	inc, descs, err := s.open(s.cfg)
	if err != nil {
		return nil, err
	}
	s.first = inc.impls
	for name, d := range descs {
		s.srv.RegisterService(s.forward(d), inc.impls[name])
	}
	if lis == nil {
		if lis, err = net.Listen("tcp", cfg.Addr); err != nil {
			inc.n.Close()
			return nil, fmt.Errorf("listen on %s: %w", cfg.Addr, err)
		}
	}
	s.cur.Store(inc)
	go s.srv.Serve(lis) // ends when Stop or Kill stops the server
	sctx, cancel := context.WithTimeout(ctx, node.DefaultStartTimeout)
	defer cancel()
	if err := inc.n.Start(sctx); err != nil {
		s.srv.Stop()
		inc.n.Close()
		return nil, err
	}
	return s, nil
}

// open opens a node of cfg with the supervisor's restart hook and captures its services.
func (s *Supervisor) open(cfg node.Config) (*incarnation, map[string]*grpc.ServiceDesc, error) {
	cfg.Reprofile = s.Reprofile
	n, err := node.New(cfg)
	if err != nil {
		return nil, nil, err
	}
	c := &capture{descs: map[string]*grpc.ServiceDesc{}, impls: map[string]any{}}
	n.RegisterServices(c)
	return &incarnation{n: n, impls: c.impls, retired: make(chan struct{})}, c.descs, nil
}

// forward is d with every handler calling the current node's implementation instead of the one
// registered.
func (s *Supervisor) forward(d *grpc.ServiceDesc) *grpc.ServiceDesc {
	fd := *d
	fd.Methods = make([]grpc.MethodDesc, len(d.Methods))
	for i, m := range d.Methods {
		h := m.Handler
		answer, bound := restartingAnswer(s.first[d.ServiceName], m.MethodName), AwaitTimeout
		if answer != nil {
			bound = AnswerWait
		}
		fd.Methods[i] = grpc.MethodDesc{MethodName: m.MethodName,
			Handler: func(_ any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
				inc, impl := s.await(ctx, d.ServiceName, true, bound)
				if inc == nil && answer != nil {
					return answer(), nil
				}
				if inc == nil {
					return nil, errRestarting
				}
				defer inc.leave(true)
				return h(impl, ctx, dec, ic)
			}}
	}
	fd.Streams = make([]grpc.StreamDesc, len(d.Streams))
	for i, sd := range d.Streams {
		h := sd.Handler
		fs := sd
		fs.Handler = func(_ any, stream grpc.ServerStream) error {
			inc, impl := s.await(stream.Context(), d.ServiceName, false, AwaitTimeout)
			if inc == nil {
				return errRestarting
			}
			// A stream may wait in Recv for as long as its peer is quiet: when the node retires, the
			// forwarded call returns, gRPC ends the stream, and the handler's Recv fails.
			done := make(chan error, 1)
			go func() {
				defer inc.leave(false)
				done <- h(impl, stream)
			}()
			select {
			case err := <-done:
				return err
			case <-inc.retired:
				return errRestarting
			}
		}
		fd.Streams[i] = fs
	}
	return &fd
}

// restartingAnswer returns, for a method of impl (a service implementation) whose response has an
// Error field (*pb.Error), a function making that response with UNAVAILABLE "node is restarting";
// nil for any other method. A gRPC status would not do: the client cannot tell UNAVAILABLE from the
// server from a connection that broke under a sent write.
func restartingAnswer(impl any, method string) func() any {
	if impl == nil {
		return nil
	}
	m, ok := reflect.TypeOf(impl).MethodByName(method)
	if !ok || m.Type.NumOut() != 2 {
		return nil
	}
	out := m.Type.Out(0)
	if out.Kind() != reflect.Pointer || out.Elem().Kind() != reflect.Struct {
		return nil
	}
	f, ok := out.Elem().FieldByName("Error")
	if !ok || f.Type != reflect.TypeOf((*pb.Error)(nil)) {
		return nil
	}
	return func() any {
		v := reflect.New(out.Elem())
		v.Elem().FieldByIndex(f.Index).Set(reflect.ValueOf(&pb.Error{Code: pb.ErrorCode_UNAVAILABLE,
			Message: "node is restarting with a new engine profile"}))
		return v.Interface()
	}
}

// Node is the node running now (nil while a restart has none running).
func (s *Supervisor) Node() *node.Node {
	if inc := s.cur.Load(); inc != nil {
		return inc.n
	}
	return nil
}

// SetDeviceUnthrottled lifts (true) or restores the budget of the emulated disk of the running node
// and of the nodes a restart opens until it is restored (storage.Engine.SetDeviceUnthrottled):
// a benchmark's own reconfigurations between measurements are set-up, not measurement.
func (s *Supervisor) SetDeviceUnthrottled(on bool) {
	s.unthrottled.Store(on)
	if n := s.Node(); n != nil {
		n.Engine().SetDeviceUnthrottled(on)
	}
}

// Server is the gRPC server the supervisor serves its nodes on.
func (s *Supervisor) Server() *grpc.Server { return s.srv }

// Span is one profile change: the profile, and from when it began (its shedding) to when it ended
// (its leaderships taken back, or the failure).
type Span struct {
	Profile    string
	Start, End time.Time
}

// Spans are the profile changes that ended, oldest first: whether two nodes' restarts overlapped.
func (s *Supervisor) Spans() []Span {
	s.spansMu.Lock()
	defer s.spansMu.Unlock()
	return slices.Clone(s.spans)
}

// Restarts is how many profile changes completed.
func (s *Supervisor) Restarts() int64 { return s.restarts.Load() }

// LastError is the last failed profile change's error ("" when none failed).
func (s *Supervisor) LastError() string {
	if p := s.lastErr.Load(); p != nil {
		return *p
	}
	return ""
}

// Restarting reports whether a profile change Reprofile started is still under way (shedding,
// reopening, compacting or taking its leaderships back).
func (s *Supervisor) Restarting() bool { return s.pending.Load() }

// Reprofile starts a change of the node's profile in the background (node.Config.Reprofile, what
// the SetProfile RPC calls); it refuses while another change is under way.
func (s *Supervisor) Reprofile(profile string) error {
	if !s.pending.CompareAndSwap(false, true) {
		return errors.New("a profile change is already under way")
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer s.pending.Store(false)
		if err := s.SetProfile(s.ctx, profile); err != nil {
			msg := err.Error()
			s.lastErr.Store(&msg)
			s.log.Error("profile change failed", "profile", profile, "err", err)
		}
	}()
	return nil
}

// SetProfile restarts the node with profile and returns when it serves again with its leaderships
// back (or when that failed: then the node runs with its previous options if they open).
func (s *Supervisor) SetProfile(ctx context.Context, profile string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.cur.Load()
	if old == nil {
		return errors.New("no node runs")
	}
	if old.n.Engine().Profile() == profile {
		return nil
	}
	start := time.Now()
	defer func() {
		s.spansMu.Lock()
		s.spans = append(s.spans, Span{Profile: profile, Start: start, End: time.Now()})
		s.spansMu.Unlock()
	}()
	id := old.n.NodeID()
	oldBlock := old.n.Config().Storage.BlockBytes
	led := old.n.LedRanges()
	// The nodes' loads and the leaders' served bytes before: where to shed, and the warm-up's reference.
	ref, err := clusterStats(ctx, old.n)
	known := err == nil
	if err != nil {
		s.log.Warn("shedding by load: no view of the nodes; draining instead", "node", id, "err", err)
	}
	sctx, cancel := context.WithTimeout(ctx, ShedTimeout)
	spread, warmShed := s.shed(sctx, old.n, ref)
	left := old.n.DrainLeaderships(sctx)
	cancel()
	shed := time.Since(start)
	s.retire(old)
	cfg := s.cfg
	cfg.Storage.Profile = profile
	inc, rewrite, err := s.restart(ctx, cfg, oldBlock)
	if err != nil {
		// Back with the options that opened before, so the node is not lost to a bad profile.
		prev, _, perr := s.restart(ctx, s.cfg, oldBlock)
		if perr != nil {
			return fmt.Errorf("n%d: profile %s: %w; reopening with the previous options: %v", id, profile, err, perr)
		}
		s.takeBack(ctx, prev.n, led)
		return fmt.Errorf("n%d: profile %s: %w (running with the previous options)", id, profile, err)
	}
	s.cfg = cfg
	reopened := time.Since(start)
	compacted, rewritten := time.Duration(0), "none"
	if rewrite != nil {
		spans := rewriteSpans(descsOf(inc.n.Store().Replicas()), ref, known, profile)
		compacted, rewritten = s.compact(ctx, inc.n, rewrite, spans), "store"
		if spans != nil {
			rewritten = fmt.Sprintf("%d scanned ranges", len(spans))
		}
	}
	wstart := time.Now()
	warm := s.warm(ctx, inc.n, led, ref)
	warmed := time.Since(wstart)
	back := s.takeBack(ctx, inc.n, led)
	s.restarts.Add(1)
	s.log.Info("engine profile changed", "node", id, "profile", profile, "took", time.Since(start).Round(time.Millisecond),
		"shed", shed.Round(time.Millisecond), "reopened", reopened.Round(time.Millisecond), "compaction", compacted.Round(time.Millisecond), "rewritten", rewritten,
		"warm", warmed.Round(time.Millisecond), "led", len(led), "spread", spread, "warm_targets", warmShed, "not_shed", left, "warm_ranges", warm, "taken_back", back)
	return nil
}

// compact rewrites spans of n's store (nil: all of it, rewriteSpans) with its block size, as a
// follower, and then ends task, the heavy task restart began before the node's first heartbeat:
// while it shows, no policy gives the node a leadership, and node_profiles waits for it before it
// samples, plans or restarts another node. It returns how long it took.
func (s *Supervisor) compact(ctx context.Context, n *node.Node, task *bgtask.Handle, spans []span) time.Duration {
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, CompactTimeout)
	defer cancel()
	err := compactSpans(cctx, n.Engine(), spans)
	task.End()
	if err != nil {
		s.log.Warn("compaction after a profile change", "node", n.NodeID(), "err", err) // the new tables get the block size anyway
	}
	return time.Since(start)
}

// retire stops old from taking calls, lets the unary calls it serves finish while it still runs
// (quiesce), then cuts its streams, stops it, waits (bounded) for the calls left and closes it.
func (s *Supervisor) retire(old *incarnation) {
	if k := s.quiesce(old, DrainTimeout); k > 0 {
		s.log.Warn("stopping the node with requests still running", "node", old.n.NodeID(), "calls", k)
	}
	close(old.retired)
	old.n.Stop()
	deadline := time.Now().Add(RetireTimeout)
	for old.inflight.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if k := old.inflight.Load(); k > 0 {
		s.log.Warn("closing the engine with calls still running", "node", old.n.NodeID(), "calls", k)
	}
	if err := old.n.Close(); err != nil {
		s.log.Warn("close before restart", "node", old.n.NodeID(), "err", err)
	}
}

// DrainTimeout bounds the wait for the unary calls a retiring node serves, before it stops.
const DrainTimeout = 5 * time.Second

// quiesce stops old from taking calls — new ones wait in await for the next node — and waits, at
// most timeout, for the unary calls it serves; it returns how many are left. The node still runs
// meanwhile: its raft streams stay open, so a write it proposed as leader before it shed the
// range, committed by the new leader, is applied here and answered. Stopping it first failed such
// a write "ambiguous: node stopping", an outcome the client cannot retry.
func (s *Supervisor) quiesce(old *incarnation, timeout time.Duration) int64 {
	old.retiring.Store(true)
	s.cur.CompareAndSwap(old, nil)
	deadline := time.Now().Add(timeout)
	for old.calls.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
	return old.calls.Load()
}

// restart opens and starts a node of cfg behind the server. When its store is to be rewritten with
// its data block size (rewrites, from oldBlock) it returns the heavy task of the compaction that will rewrite the store, begun before
// the node starts: begun after, a heartbeat between the start and the compaction showed the node
// back and idle with its new profile, and node_profiles restarted the next node while this one
// compacted.
func (s *Supervisor) restart(ctx context.Context, cfg node.Config, oldBlock int) (*incarnation, *bgtask.Handle, error) {
	inc, descs, err := s.open(cfg)
	if err != nil {
		return nil, nil, err
	}
	var rewrite *bgtask.Handle
	if rewrites(cfg.Storage.Profile, oldBlock, inc.n.Config().Storage.BlockBytes) {
		rewrite = inc.n.Background().Begin(bgtask.KindManualCompaction, profileplan.RewriteTaskName(cfg.Storage.Profile), 0)
	}
	for name := range descs {
		if s.first[name] == nil {
			s.log.Warn("a restarted node registers a service the first did not; its calls are not served", "service", name)
		}
	}
	inc.n.Advertise(cfg.Addr, cfg.HTTPAddr, cfg.RESPAddr)
	if s.unthrottled.Load() {
		inc.n.Engine().SetDeviceUnthrottled(true)
	}
	s.cur.Store(inc) // calls before Start are answered "node is starting" by the node itself
	sctx, cancel := context.WithTimeout(ctx, node.DefaultStartTimeout)
	defer cancel()
	if err := inc.n.Start(sctx); err != nil {
		s.retire(inc)
		return nil, nil, err
	}
	return inc, rewrite, nil
}

// rewrites reports whether a change to profile from data blocks of oldBlock bytes to newBlock ones
// rewrites the store (Pebble writes a block size into new tables only): when the blocks shrink —
// a point read then loads less — or grow for the scan profile, whose scans then seek less. Larger
// blocks serve no point read better, so the write profile's 64 KiB blocks come with the tables its
// flushes and compactions write anyway: the rewrite of a node's whole store took 57–79 s on a
// 150-IOPS disk, most of a reconfiguration's restart, for nothing its ranges read faster.
func rewrites(profile string, oldBlock, newBlock int) bool {
	switch {
	case newBlock == oldBlock:
		return false
	case newBlock < oldBlock:
		return true
	}
	return profile == "scan" // storage's scan profile
}

// takeBack moves the leaderships of ranges back to n, one at a time, and returns how many it leads
// again. A range whose voters no longer include n is skipped, and so is the meta range. It first
// waits for n to have caught up (at most catchup.Bound): until then n's heartbeats say it takes no
// leadership, and the autopilot moves away any it is given.
func (s *Supervisor) takeBack(ctx context.Context, n *node.Node, ranges []uint64) int {
	wctx, cancel := context.WithTimeout(ctx, catchup.Bound)
	n.WaitCaughtUp(wctx)
	cancel()
	back := 0
	for _, id := range ranges {
		if ctx.Err() != nil {
			break
		}
		if id == replica.MetaRangeID {
			continue
		}
		if slices.Contains(n.LedRanges(), id) {
			back++
			continue
		}
		if r := n.Store().Replica(id); r == nil || !isVoter(r.Desc(), n.NodeID()) {
			continue
		}
		tctx, cancel := context.WithTimeout(ctx, ReturnTimeout)
		resp, err := n.TransferLeader(tctx, &pb.TransferLeaderRequest{RangeId: id, NodeId: n.NodeID()})
		cancel()
		if err == nil && resp.GetError() == nil {
			back++
		}
	}
	return back
}

func isVoter(d *pb.RangeDescriptor, node uint64) bool {
	for _, rd := range d.GetReplicas() {
		if rd.NodeId == node && !rd.Learner {
			return true
		}
	}
	return false
}

// Stop ends a restart under way, stops the server and the node, and closes its engine.
func (s *Supervisor) Stop() {
	s.cancel()
	s.wg.Wait()
	s.srv.Stop()
	s.peerMu.Lock()
	if s.peerPool != nil {
		s.peerPool.Close()
	}
	s.peerMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if inc := s.cur.Swap(nil); inc != nil {
		inc.n.Stop()
		if err := inc.n.Close(); err != nil {
			s.log.Warn("close", "err", err)
		}
	}
}
