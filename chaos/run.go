// Package chaos is Shoal's chaos suite: it runs a cluster of real `shoal start` processes on
// separate hosts — network namespaces joined by veth links when the driver may create them, loopback
// ports behind a partitioning proxy otherwise (package netfault) — lets a nemesis kill -9, pause,
// restart and partition the nodes and force splits, merges and leadership transfers at random, while
// concurrent clients record every operation. Then it heals everything, reads every key back, checks the history for
// linearizability with porcupine (chaos/history) and verifies that no acknowledged write was lost.
//
// A run is determined by its seed as far as the driver's choices go (keys, operations, which fault
// when); the cluster's timing is not, so a replayed seed repeats the same schedule of faults, not
// necessarily the same interleaving.
//
// The package never changes the cluster's code paths: it only drives the binary through its flags,
// signals, the network and the public client. Every process it starts is stopped and every
// namespace it creates is deleted before Run returns.
package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/shoaldb/shoal/chaos/history"
	"github.com/shoaldb/shoal/chaos/netfault"
	"github.com/shoaldb/shoal/client"
)

// metaRangeID is the id of the meta range (its span is not part of the user key space).
const metaRangeID = 1

// Config configures one run. Zero fields take the defaults noted.
type Config struct {
	// Seed drives every random choice of the driver. Required (0 is a valid seed but not a default).
	Seed uint64
	// Bin is the shoal binary the nodes run (make test's is built with -race, make chaos's with
	// CGO_ENABLED=0). Required.
	Bin string
	// Dir holds the nodes' data directories and logs. Required; the caller removes it.
	Dir string
	// Mode is "netns", "loopback" or "auto" (default): netns if this process may create network
	// namespaces, else loopback.
	Mode string
	// Nodes is the cluster size. Default 3.
	Nodes int
	// Workers is the number of concurrent clients. Default 6.
	Workers int
	// Duration is how long the workload runs under the nemesis. Default 30 s.
	Duration time.Duration
	// MinAcked is how many acknowledged writes of unique keys the run must see: one with fewer at
	// Duration (a starved host, a long outage) goes on under the nemesis until it has them, by at most
	// Duration again, as it does for an action kind not yet covered. 0: no floor.
	MinAcked int
	// MinInterval and MaxInterval bound the pause between two nemesis actions. Default 0.4–1.6 s.
	MinInterval, MaxInterval time.Duration
	// Epoch is how long the contended keys keep their names (see workload.go). Default 5 s.
	Epoch time.Duration
	// Actions are the enabled nemesis actions and their weights. Default AllActions.
	Actions map[string]int
	// StartTimeout bounds the start of one node. Default 30 s.
	StartTimeout time.Duration
	// RecoverTimeout bounds the wait for a healthy cluster after everything is healed. Default 90 s.
	RecoverTimeout time.Duration
	// CheckTimeout bounds porcupine. Default 120 s.
	CheckTimeout time.Duration
	// Artifacts is where the visualization of a non-linearizable history goes (default: Dir).
	Artifacts string
	// Log receives the run's progress lines (default: discarded).
	Log io.Writer
	// NodeArgs are more `shoal start` flags for every node.
	NodeArgs []string
	// Alongside, when set, is a second workload run beside the driver's under the same nemesis (a
	// stream producer, say): it starts with the workload, reaching the nodes at addrs; healed is
	// closed once every fault is healed and the cluster has recovered, when it should stop, check
	// what it did and return. Its error is one of the run's problems.
	Alongside func(ctx context.Context, addrs []string, healed <-chan struct{}) error

	// net, when set, is the network to use instead of the one Mode picks (the overload benchmark's
	// plain loopback).
	net netfault.Network
}

func (c Config) withDefaults() (Config, error) {
	if c.Bin == "" || c.Dir == "" {
		return c, errors.New("chaos: Config.Bin and Config.Dir are required")
	}
	if c.Mode == "" {
		c.Mode = "auto"
	}
	if c.Mode != "auto" && c.Mode != "netns" && c.Mode != "loopback" {
		return c, fmt.Errorf("chaos: mode %q: want auto, netns or loopback", c.Mode)
	}
	if c.Nodes == 0 {
		c.Nodes = 3
	}
	if c.Nodes < 3 {
		return c, fmt.Errorf("chaos: %d nodes: at least 3 (ranges have three replicas)", c.Nodes)
	}
	if c.Workers == 0 {
		c.Workers = 6
	}
	if c.Duration == 0 {
		c.Duration = 30 * time.Second
	}
	if c.MinAcked < 0 {
		return c, fmt.Errorf("chaos: at least %d acknowledged writes: want 0 or more", c.MinAcked)
	}
	if c.MinInterval == 0 {
		c.MinInterval = 400 * time.Millisecond
	}
	if c.MaxInterval == 0 {
		c.MaxInterval = 1600 * time.Millisecond
	}
	if c.MaxInterval < c.MinInterval {
		return c, fmt.Errorf("chaos: nemesis interval %v–%v is inverted", c.MinInterval, c.MaxInterval)
	}
	if c.Epoch == 0 {
		c.Epoch = 5 * time.Second
	}
	if c.Actions == nil {
		c.Actions = AllActions
	}
	for a := range c.Actions {
		if _, ok := AllActions[a]; !ok {
			return c, fmt.Errorf("chaos: unknown nemesis action %q", a)
		}
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = 30 * time.Second
	}
	if c.RecoverTimeout == 0 {
		c.RecoverTimeout = 90 * time.Second
	}
	if c.CheckTimeout == 0 {
		c.CheckTimeout = 120 * time.Second
	}
	if c.Artifacts == "" {
		c.Artifacts = c.Dir
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	return c, nil
}

// Report is the outcome of one run.
type Report struct {
	Seed     uint64
	Mode     string
	Nodes    int
	Duration time.Duration // of the workload under the nemesis
	Wall     time.Duration // of the whole run

	Ops        map[string]int // the workload's counters ("put ok", "cas unknown", …)
	HistoryOps int            // operations porcupine checked
	// Linearizable is porcupine's verdict: "ok", "illegal" or "unknown" (timed out); empty if the
	// run did not get that far.
	Linearizable  string
	Visualization string // porcupine's HTML of a history that is not "ok"

	AckedWrites   int      // acknowledged writes of unique keys, all read back at the end
	UnknownWrites int      // unique writes with an unknown outcome
	Lost          []string // acknowledged writes missing at the end
	Phantom       []string // writes that definitely failed but are present
	Corrupt       []string // unique keys holding a value nobody wrote to them
	ScanMissed    []string // keys the final scan missed but a get found

	Actions  map[string]int // nemesis actions done (and "<action> refused")
	Problems []string       // anything else that makes the run fail: crashes, no recovery, failed restarts
	Recovery time.Duration  // from the final heal to a healthy cluster
	// MaxGap is the longest time during the workload in which no operation succeeded (GapAt: when it
	// began, on the clock of the run's log): faults make the cluster unavailable for a while, a hang
	// shows here.
	MaxGap, GapAt time.Duration
}

// Violations counts what makes the run fail.
func (r *Report) Violations() int {
	v := len(r.Lost) + len(r.Phantom) + len(r.Corrupt) + len(r.ScanMissed) + len(r.Problems)
	if r.Linearizable != "ok" {
		v++
	}
	return v
}

// OK reports whether the run found nothing wrong.
func (r *Report) OK() bool { return r.Violations() == 0 }

// Summary is a one-line account of the run.
func (r *Report) Summary() string {
	acts := 0
	for k, v := range r.Actions {
		if !strings.HasSuffix(k, " refused") {
			acts += v
		}
	}
	verdict := "PASS"
	if !r.OK() {
		verdict = "FAIL"
	}
	return fmt.Sprintf("%s seed=%d mode=%s nodes=%d ops=%d linearizable=%s acked=%d lost=%d phantom=%d corrupt=%d problems=%d actions=%d max-gap=%.1fs recovery=%.1fs wall=%.1fs",
		verdict, r.Seed, r.Mode, r.Nodes, r.HistoryOps, r.Linearizable, r.AckedWrites, len(r.Lost), len(r.Phantom), len(r.Corrupt),
		len(r.Problems), acts, r.MaxGap.Seconds(), r.Recovery.Seconds(), r.Wall.Seconds())
}

// run is the state of one run.
type run struct {
	cfg    Config
	net    netfault.Network
	nodes  []*node
	admin  *client.Client // status and final reads: short attempts, retried
	ops    *client.Client // the nemesis's splits, merges and transfers: attempts long enough for a merge
	t0     time.Time
	report *Report

	logMu sync.Mutex
}

func (r *run) logf(format string, args ...any) {
	r.logMu.Lock()
	defer r.logMu.Unlock()
	fmt.Fprintf(r.cfg.Log, "%7.2fs %s\n", time.Since(r.t0).Seconds(), fmt.Sprintf(format, args...))
}

// problem records something that fails the run.
func (r *run) problem(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.logf("PROBLEM: %s", msg)
	r.logMu.Lock()
	r.report.Problems = append(r.report.Problems, msg)
	r.logMu.Unlock()
}

// indexOf returns the index of the node with cluster id id, or -1.
func (r *run) indexOf(id uint64) int {
	for i, n := range r.nodes {
		if n.nodeID() == id {
			return i
		}
	}
	return -1
}

// checkCrashes records and restarts nodes that exited without the nemesis asking.
func (r *run) checkCrashes() {
	for _, n := range r.nodes {
		if n.exitedUnexpectedly() {
			r.problem("%s exited on its own; last lines of %s:\n%s", n.name(), n.log, n.tail(15))
			if err := n.start(r.cfg.StartTimeout); err != nil {
				r.problem("restart after crash: %v", err)
			}
		}
	}
}

// checkRaces records a problem for each node whose log holds a race detector's report: with a
// binary built with -race (make test builds the suite's so), a data race in a node fails the run as
// a lost write does, though no operation showed it. It reads the logs once the nodes have stopped,
// so that a race in their shutdown counts too.
func (r *run) checkRaces() {
	for _, n := range r.nodes {
		if first, count := n.firstRace(40); count > 0 {
			r.problem("%s: the race detector reported %d data race(s) (%s); the first:\n%s", n.name(), count, n.log, first)
		}
	}
}

// Run runs the chaos suite once. The error reports a run that could not be carried out (no
// cluster, no network); what the run found is in the Report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &run{cfg: cfg, t0: time.Now(), report: &Report{Seed: cfg.Seed, Nodes: cfg.Nodes, Ops: map[string]int{}, Actions: map[string]int{}}}
	r.logf("chaos run: seed %d", cfg.Seed) // first: a failure can always be replayed
	defer func() { r.report.Wall = time.Since(r.t0) }()

	rngNet := rand.New(rand.NewPCG(cfg.Seed, 1))
	switch cfg.Mode {
	case "netns":
		r.net, err = netfault.NewNetns(cfg.Nodes, rngNet, r.logf)
	case "loopback":
		r.net, err = netfault.NewLoopback(cfg.Nodes, r.logf)
	default:
		if perr := netfault.NetnsAvailable(); perr != nil {
			r.logf("network namespaces unavailable (%v): loopback mode", perr)
			r.net, err = netfault.NewLoopback(cfg.Nodes, r.logf)
		} else if r.net, err = netfault.NewNetns(cfg.Nodes, rngNet, r.logf); err != nil {
			r.logf("netns mode failed (%v): loopback mode", err)
			r.net, err = netfault.NewLoopback(cfg.Nodes, r.logf)
		}
	}
	if err != nil {
		return r.report, err
	}
	r.report.Mode = r.net.Mode()
	r.logf("mode %s, %d nodes, %d workers, %v of nemesis", r.net.Mode(), cfg.Nodes, cfg.Workers, cfg.Duration)
	defer func() {
		r.stopAll()
		r.checkRaces()
		if err := r.net.Close(); err != nil {
			r.problem("network cleanup: %v", err)
		}
	}()

	if err := r.startCluster(ctx); err != nil {
		return r.report, err
	}
	err = r.exercise(ctx)
	return r.report, err
}

// startCluster starts the nodes (the first bootstraps, the others join it) and waits until every
// range has its voters.
func (r *run) startCluster(ctx context.Context) error {
	first := r.net.Addrs(0).Advertise
	var addrs []string
	for i := 0; i < r.cfg.Nodes; i++ {
		n := &node{idx: i, dir: nodeDir(r.cfg.Dir, i), bin: r.cfg.Bin, net: r.net, args: r.cfg.NodeArgs}
		n.log = n.dir + ".log"
		if i > 0 {
			n.join = first
		}
		r.nodes = append(r.nodes, n)
		addrs = append(addrs, r.net.Addrs(i).Advertise)
	}
	for _, n := range r.nodes {
		if err := n.start(r.cfg.StartTimeout); err != nil {
			return fmt.Errorf("start cluster: %v\n%s", err, n.tail(20))
		}
		r.logf("%s ready: node id %d at %s", n.name(), n.nodeID(), r.net.Addrs(n.idx).Advertise)
	}
	var err error
	r.admin, err = client.New(ctx, client.Config{Addrs: addrs, RequestTimeout: 2 * time.Second, MaxAttempts: 10})
	if err != nil {
		return err
	}
	r.ops, err = client.New(ctx, client.Config{Addrs: addrs, RequestTimeout: 8 * time.Second, MaxAttempts: 10})
	if err != nil {
		return err
	}
	if err := r.waitHealthy(ctx, 60*time.Second); err != nil {
		return fmt.Errorf("start cluster: %w", err)
	}
	// A few user ranges from the start, so that merges have neighbours and leaders spread.
	for _, key := range []string{"40", "80", "c0"} {
		sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		_, _, err := r.ops.Split(sctx, []byte(key))
		cancel()
		if err != nil {
			return fmt.Errorf("start cluster: split at %q: %w", key, err)
		}
	}
	if err := r.waitHealthy(ctx, 60*time.Second); err != nil {
		return fmt.Errorf("start cluster: %w", err)
	}
	r.logf("cluster healthy, user ranges split at 40, 80, c0")
	return nil
}

// healthy reports whether every node is live and every range has a leader and min(3, nodes) voters,
// no learner and no merge in progress; if not, why.
func (r *run) healthy(ctx context.Context) (bool, string) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	ns, err := r.admin.Nodes(ctx)
	if err != nil {
		return false, "nodes: " + err.Error()
	}
	live := 0
	for _, n := range ns {
		if n.GetLive() {
			live++
		}
	}
	if live < r.cfg.Nodes {
		return false, fmt.Sprintf("%d of %d nodes live", live, r.cfg.Nodes)
	}
	rs, err := r.admin.Ranges(ctx)
	if err != nil {
		return false, "ranges: " + err.Error()
	}
	want := min(3, r.cfg.Nodes)
	for _, rg := range rs {
		d := rg.GetDesc()
		voters := 0
		for _, rep := range d.GetReplicas() {
			if rep.GetLearner() {
				return false, fmt.Sprintf("r%d has a learner", d.GetRangeId())
			}
			voters++
		}
		switch {
		case voters != want:
			return false, fmt.Sprintf("r%d has %d voters", d.GetRangeId(), voters)
		case rg.GetLeaderNodeId() == 0:
			return false, fmt.Sprintf("r%d has no leader", d.GetRangeId())
		case d.GetMergingInto() != 0:
			return false, fmt.Sprintf("r%d is frozen for a merge into r%d", d.GetRangeId(), d.GetMergingInto())
		}
	}
	return true, ""
}

func (r *run) waitHealthy(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var why string
	for time.Now().Before(deadline) && ctx.Err() == nil {
		var ok bool
		if ok, why = r.healthy(ctx); ok {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("cluster not healthy after %v: %s", timeout, why)
}

// exercise runs the workload under the nemesis, heals, reads everything back and checks.
func (r *run) exercise(ctx context.Context) error {
	cfg := r.cfg
	var addrs []string
	for i := range r.nodes {
		addrs = append(addrs, r.net.Addrs(i).Advertise)
	}
	// A few clients shared by the workers: like applications, each with its own range cache.
	var clients []*client.Client
	for i := 0; i < min(cfg.Workers, 3); i++ {
		cl, err := client.New(ctx, client.Config{Addrs: addrs, RequestTimeout: 2 * time.Second, MaxAttempts: 40})
		if err != nil {
			return err
		}
		defer cl.Close()
		clients = append(clients, cl)
	}
	h := history.New(cfg.Workers)
	hOffset := time.Since(r.t0) // History.Now 0 on the run's clock (the log's time stamps)
	wl := &workload{
		h: h, clients: clients, epoch: cfg.Epoch, t0: time.Now(), uniques: map[string]*uniqueWrite{},
		rng: func(w int) *rand.Rand { return rand.New(rand.NewPCG(cfg.Seed, uint64(100+w))) },
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < cfg.Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wl.run(w, stop)
		}()
	}
	healed, alongside := make(chan struct{}), make(chan error, 1)
	if cfg.Alongside != nil {
		go func() { alongside <- cfg.Alongside(ctx, addrs, healed) }()
	}
	nm := newNemesis(r, rand.New(rand.NewPCG(cfg.Seed, 2)), cfg.Actions)
	r.logf("workload and nemesis start")
	wlStart := h.Now()
	nm.loop(ctx, time.Now().Add(cfg.Duration), func() (int, bool) {
		n := wl.ackedCount()
		return n, n >= cfg.MinAcked
	})
	close(stop)
	wg.Wait()
	r.report.Duration = time.Since(wl.t0)
	r.report.MaxGap, r.report.GapAt = wl.maxGap(wlStart, h.Now())
	r.report.GapAt += hOffset
	r.report.Actions = nm.counts
	r.logf("workload stopped; nemesis actions: %s", formatCounts(nm.counts))
	r.logf("longest time without a successful operation: %.1fs, from %.2fs", r.report.MaxGap.Seconds(), r.report.GapAt.Seconds())

	// Heal everything (the nemesis ended its own faults; this covers crashes too) and wait.
	healStart := time.Now()
	if err := r.net.Apply(netfault.LinkSet{}); err != nil {
		r.problem("heal: %v", err)
	}
	for _, n := range r.nodes {
		switch n.getState() {
		case nodePaused:
			if err := n.resume(); err != nil {
				r.problem("final SIGCONT: %v", err)
			}
		case nodeDown:
			if err := n.start(cfg.StartTimeout); err != nil {
				r.problem("final restart: %v", err)
			}
		}
	}
	r.checkCrashes()
	if err := r.waitHealthy(ctx, cfg.RecoverTimeout); err != nil {
		r.problem("no recovery after the nemesis: %v", err)
		r.logRanges(ctx)
	}
	r.report.Recovery = time.Since(healStart)
	r.logf("recovered in %.1fs", r.report.Recovery.Seconds())
	if cfg.Alongside != nil {
		close(healed)
		select {
		case err := <-alongside:
			if err != nil {
				r.problem("the workload alongside: %v", err)
			}
		case <-time.After(cfg.RecoverTimeout):
			r.problem("the workload alongside did not finish within %v of the recovery", cfg.RecoverTimeout)
		}
	}

	rctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	fc, err := wl.finalRead(rctx, r.admin)
	cancel()
	if err != nil {
		r.problem("final read: %v", err)
	}
	r.report.AckedWrites, r.report.UnknownWrites = fc.acked, fc.unknown
	r.report.Lost, r.report.Phantom, r.report.Corrupt, r.report.ScanMissed = fc.lost, fc.phantom, fc.corrupt, fc.scanMissed
	for _, s := range append(append(append(append([]string(nil), fc.lost...), fc.phantom...), fc.corrupt...), fc.scanMissed...) {
		r.logf("FINAL READ: %s", s)
	}
	for _, b := range wl.bad {
		r.problem("%s", b)
	}
	for _, s := range h.Internal() {
		r.logf("INTERNAL error (an unknown outcome): %s", s)
	}
	r.checkCrashes()

	ops := h.Finish()
	r.report.Ops = h.Counts()
	r.report.HistoryOps = len(ops)
	r.logf("final read: %d acknowledged unique writes (%d unknown, %d definitely failed), %d lost; checking %d operations",
		fc.acked, fc.unknown, fc.definite, len(fc.lost), len(ops))
	start := time.Now()
	res, path, err := history.Check(ops, cfg.CheckTimeout, cfg.Artifacts, fmt.Sprintf("chaos-seed-%d", cfg.Seed))
	r.report.Linearizable = map[porcupine.CheckResult]string{porcupine.Ok: "ok", porcupine.Illegal: "illegal", porcupine.Unknown: "unknown"}[res]
	r.report.Visualization = path
	if err != nil {
		r.logf("%v", err)
	}
	r.logf("porcupine: %s on %d operations in %.1fs %s", r.report.Linearizable, len(ops), time.Since(start).Seconds(), path)
	r.logf("operations: %s", formatCounts(r.report.Ops))
	if ok := fc.acked; ok < 20 {
		r.problem("only %d acknowledged unique writes: the cluster made too little progress to judge", ok)
	}
	return nil
}

// logRanges logs the cluster's ranges (when it did not recover).
func (r *run) logRanges(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rs, err := r.admin.Ranges(ctx)
	if err != nil {
		r.logf("ranges: %v", err)
		return
	}
	for _, rg := range rs {
		d := rg.GetDesc()
		r.logf("r%d [%q, %q) replicas %v leader %d merging-into %d", d.GetRangeId(), d.GetStartKey(), d.GetEndKey(), d.GetReplicas(), rg.GetLeaderNodeId(), d.GetMergingInto())
	}
}

// stopAll stops every node (SIGTERM, SIGKILL after a short grace period: the run is over, a slow
// drain is not worth waiting for).
func (r *run) stopAll() {
	for _, cl := range []*client.Client{r.admin, r.ops} {
		if cl != nil {
			cl.Close()
		}
	}
	var wg sync.WaitGroup
	for _, n := range r.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := n.stop(3 * time.Second); err != nil {
				r.logf("stop: %v", err)
			}
		}()
	}
	wg.Wait()
}

func formatCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, " ")
}

// KeepLogs copies the nodes' logs and any porcupine visualization of a run in dir to dst (for a
// failed run whose dir is removed).
func KeepLogs(dir, dst string) error {
	logs, _ := filepath.Glob(filepath.Join(dir, "n*.log"))
	html, _ := filepath.Glob(filepath.Join(dir, "*.html"))
	logs = append(logs, html...)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, filepath.Base(l)), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
