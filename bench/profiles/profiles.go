// Package profiles is the cluster experiment of workload-aware node profiles (Cruz's MeT, thesis
// chapter 3, §3.1 and §3.3.1): several YCSB tenants (A–F, each on its own key prefix, split into
// ranges; by default with the thesis's mixes, MixesThesis) run at once on in-process nodes with emulated disks, all through one run, while the
// cluster goes through the arms:
//
//  1. random-homogeneous: every node the readwrite profile (the thesis's 60/40 split of the same
//     memory, the nearest preset), each range led by a voter drawn at random;
//  2. homogeneous-PROFILE for each preset: every node that profile, the leaders spread by hand
//     (each range, busiest first, to its least loaded voter), as the thesis's Manual-Homogeneous;
//     the best of them is the "best homogeneous";
//  3. node_profiles: back to random-homogeneous, then the policy switched on; the 10-s bins from
//     the switch until it converged are checked against the level just before it (reconfiguration
//     cost), then the converged cluster is measured.
//
// Every node's store is compacted, with the disks' budgets lifted, before each arm's leaders are
// placed, so that no arm inherits the compaction debt of the ones before it (node_profiles'
// reconfiguration runs on the budgeted disks, and its window measures the debt it left). Nodes
// change profile by the in-process rolling restart (node/supervisor), in every arm. It owns nothing
// but its workload, orchestration and report: it acts through the client, the nodes' supervisors
// and the policy switches, and asserts nothing.
package profiles

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pingcap/go-ycsb/pkg/prop"
	"github.com/pingcap/go-ycsb/pkg/util"
	goycsb "github.com/pingcap/go-ycsb/pkg/ycsb"

	"github.com/shoaldb/shoal/autopilot/decisions"
	"github.com/shoaldb/shoal/autopilot/policy"
	"github.com/shoaldb/shoal/bench/benchutil"
	"github.com/shoaldb/shoal/bench/ycsb"
	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/node"
	"github.com/shoaldb/shoal/node/supervisor"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/plan/profileplan"
	"github.com/shoaldb/shoal/stopper"
	"github.com/shoaldb/shoal/storage"
	"github.com/shoaldb/shoal/storage/emudisk"
)

// Options shapes the experiment. Zero fields take the defaults of withDefaults.
type Options struct {
	Nodes int // default 5
	// Tenants is ycsb.ParseTenants's spec; default "a:hotspot,b:hotspot,c:hotspot,d:latest,e:hotspot,f:hotspot".
	Tenants string
	// Mixes are the tenants' operation mixes: MixesThesis (default) or MixesYCSB.
	Mixes string
	// Records per tenant (default 20000) of YCSB's ten 100-byte fields; SplitsPerTenant ranges each
	// (default 2).
	Records         int64
	SplitsPerTenant int
	// Threads per tenant (closed loop). Default 2: the nodes wait on their disks, and more threads
	// would only add CPU contention on a small machine.
	Threads int
	// MemoryBytes is each node's engine memory budget the profiles divide. Default 8 MiB: the data
	// a node leads is several times its block cache, as on the thesis's disk-bound RegionServers.
	MemoryBytes int64
	// Device is each node's emulated disk. Default Disk.
	Device *emudisk.Options
	// Homogeneous are the profiles of the homogeneous arms (default readwrite, read, write, scan);
	// NoNodeProfiles leaves out node_profiles' arms (a probe of the homogeneous ones).
	Homogeneous    []string
	NoNodeProfiles bool
	// Settle is the pause after a reconfiguration before an arm's window; Measure the window.
	// Defaults 10 s and 30 s.
	Settle, Measure time.Duration
	// Converge bounds the node_profiles arm's reconfiguration. Default 4 min. Warmup is the run of
	// the tenants before the first arm. Default 60 s.
	Converge, Warmup time.Duration
	Seed             uint64 // default 1
	// Progress, if set, gets a line now and then.
	Progress func(string) `json:"-"`
}

func (o Options) withDefaults() Options {
	if o.Nodes <= 0 {
		o.Nodes = 5
	}
	if o.Tenants == "" {
		o.Tenants = "a:hotspot,b:hotspot,c:hotspot,d:latest,e:hotspot,f:hotspot"
	}
	if o.Mixes == "" {
		o.Mixes = MixesThesis
	}
	if o.Records <= 0 {
		o.Records = 20000
	}
	if o.SplitsPerTenant <= 0 {
		o.SplitsPerTenant = 2
	}
	if o.Threads <= 0 {
		o.Threads = 2
	}
	if o.MemoryBytes <= 0 {
		o.MemoryBytes = 8 << 20
	}
	if o.Device == nil {
		d := Disk
		o.Device = &d
	}
	if len(o.Homogeneous) == 0 {
		o.Homogeneous = []string{"readwrite", "read", "write", "scan"}
	}
	if o.Settle <= 0 {
		o.Settle = 10 * time.Second
	}
	if o.Measure <= 0 {
		o.Measure = 30 * time.Second
	}
	if o.Converge <= 0 {
		o.Converge = 4 * time.Minute
	}
	if o.Warmup <= 0 {
		o.Warmup = time.Minute
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Progress == nil {
		o.Progress = func(string) {}
	}
	return o
}

// The tenants' operation mixes.
const (
	// MixesThesis are YCSB's workloads as the thesis ran them (§3.1.1): B 100 % updates, D 5 % reads
	// and 95 % inserts, on one thread (the thesis gave D a tenth of the threads and a rate cap, its
	// log growing fast), and every update a blind write of the whole record (writeallfields: an
	// HBase put), so that B and D are write ranges and A a read/write one at the store.
	MixesThesis = "thesis"
	// MixesYCSB are YCSB's core mixes with Shoal's partial updates: an update reads the record and
	// compare-and-swaps it (bench/ycsb), so the store sees A and F read-heavy, B and D read-only
	// but for a few writes, and no range write-heavy.
	MixesYCSB = "ycsb"
)

// applyMixes sets the tenants' mixes (MixesThesis or MixesYCSB).
func applyMixes(ts []ycsb.Tenant, mixes string) error {
	switch mixes {
	case MixesYCSB:
		return nil
	case MixesThesis:
	default:
		return fmt.Errorf("unknown mixes %q: use %s or %s", mixes, MixesThesis, MixesYCSB)
	}
	for i := range ts {
		c := &ts[i].Config
		c.Props[prop.WriteAllFields] = "true"
		switch strings.ToLower(c.Workload) {
		case "b":
			c.Props[prop.ReadProportion], c.Props[prop.UpdateProportion] = "0", "1"
		case "d":
			c.Props[prop.ReadProportion], c.Props[prop.InsertProportion] = "0.05", "0.95"
			c.Threads = max(1, c.Threads/2)
		}
		if _, err := c.Properties(); err != nil {
			return fmt.Errorf("tenant %s: %w", ts[i].Name, err)
		}
	}
	return nil
}

// Arm is one configuration's measured window.
type Arm struct {
	Name     string            `json:"name"`
	Profiles map[uint64]string `json:"profiles"` // node → profile during the window
	// Nodes are the nodes' engines as they run in the window (the sizes the profile applied), the
	// ranges each leads at its start, and the block cache's hit ratio over it.
	Nodes map[uint64]*NodeEngine `json:"nodes"`
	// Throughput is the operations per second of all tenants over the window; PerTenant each
	// tenant's; Errors the failed operations.
	Throughput float64            `json:"throughput_ops_s"`
	PerTenant  map[string]float64 `json:"per_tenant_ops_s"`
	Errors     int64              `json:"errors"`
	// CPUCores is the process's CPU over the window (nodes and clients all run in it) in cores of
	// the machine's NumCPU: near NumCPU the arms are CPU-bound, and an engine profile can move
	// throughput only by what it saves of CPU.
	CPUCores float64 `json:"cpu_cores"`
	// Unplaced are the leadership transfers of its placement that failed every try.
	Unplaced []string `json:"unplaced,omitempty"`
	From, To float64  `json:"-"`
}

// NodeEngine is one node in an arm's window: the engine it runs (its profile and the sizes that
// profile applied: block cache with the memtables' charge, one memtable, data block), the user
// ranges it leads at the window's start (tenant/index, by start key), and its block cache's hit
// ratio over the window (-1: the engine was replaced meanwhile or read nothing).
type NodeEngine struct {
	Profile     string   `json:"profile"`
	CacheMiB    float64  `json:"cache_mib"`
	MemTableMiB float64  `json:"memtable_mib"`
	BlockKiB    int      `json:"block_kib"`
	Leads       []string `json:"leads"`
	HitRatio    float64  `json:"hit_ratio"`
	// ReadOpsS and WriteOpsS are its emulated disk's operations a second over the window (writes
	// with syncs), WaitS the seconds its callers waited on the disk's budget a second (above 1: more
	// than one caller queued on average): how disk-bound the node was.
	ReadOpsS  float64 `json:"disk_read_ops_s"`
	WriteOpsS float64 `json:"disk_write_ops_s"`
	WaitS     float64 `json:"disk_wait_s"`
	// WriteStalls are the engine's write stalls in the window (Pebble held every write of the node:
	// too many L0 tables or memtables waiting to flush), a small memtable's cost under writes.
	WriteStalls int64 `json:"write_stalls"`
}

// Reconfiguration is the node_profiles arm's transition: the level before the switch, its 10-s bins
// until converged, the lowest bin's share of the level, and the failed operations.
type Reconfiguration struct {
	BeforeOpsS float64   `json:"before_ops_s"`
	BinsOpsS   []float64 `json:"bins_ops_s"`
	// TenantBinsOpsS are the same bins per tenant: which tenant a dip is.
	TenantBinsOpsS map[string][]float64 `json:"tenant_bins_ops_s"`
	MinShare       float64              `json:"min_share"`
	Errors         int64                `json:"errors"`
	TookS          float64              `json:"took_s"`
	Converged      bool                 `json:"converged"`
	// Operators counts node_profiles' operators by kind and outcome; Plans are its plans as the
	// decision log states them (class shares, groups, nodes).
	Operators map[string]int `json:"operators"`
	// OtherOperators counts the other policies' operators begun in it, "policy kind status": a
	// policy that moves back what node_profiles moves shows here.
	OtherOperators map[string]int `json:"other_operators"`
	// Unsuccessful are node_profiles' operators that ended otherwise than succeeded, as the decision
	// log has them: each step's time and error, and the executor's notes (at most 30).
	Unsuccessful []string `json:"unsuccessful,omitempty"`
	Plans        []string `json:"plans"`
	// Restarts are the nodes' profile changes in it (seconds from the switch, from the shedding to
	// the leaderships back), and Overlapping the pairs of them that overlapped in time: the policy
	// restarts one node at a time, so it must be 0.
	Restarts    []RestartSpan `json:"restarts"`
	Overlapping int           `json:"overlapping_restarts"`
	// LeaderMoves are the user ranges' leadership changes in it, "12s c/0 n4→n2" (seconds from the
	// switch, tenant/index, polled every second): which hand-over a bin's dip follows.
	LeaderMoves []string `json:"leader_moves"`
}

// RestartSpan is one node's profile change.
type RestartSpan struct {
	Node     int     `json:"node"`
	Profile  string  `json:"profile"`
	From, To float64 `json:"-"`
	FromS    float64 `json:"from_s"`
	ToS      float64 `json:"to_s"`
}

// Report is the experiment's result.
type Report struct {
	Options         Options         `json:"options"`
	Arms            []Arm           `json:"arms"`
	BestHomogeneous string          `json:"best_homogeneous"`
	Reconfiguration Reconfiguration `json:"reconfiguration"`
	// Gains are node_profiles' throughput over the best homogeneous arm's and the random-homogeneous
	// one's (1.35: +35 %), and the scan tenant's (E) over the best homogeneous.
	Gains map[string]float64 `json:"gains"`
	// Errors are each tenant's failed operations over the whole run, with one error's text;
	// Failed their sum.
	Errors map[string]string `json:"errors,omitempty"`
	Failed int64             `json:"failed"`
}

// Disk is the default emulated disk: no page cache, 500 operations and 16 MiB a second each way,
// 0.5 ms an operation. With 8 MiB engine budgets, a block cache miss costs a disk operation a
// closed-loop client waits for, so the cache share and block size of a profile move throughput.
var Disk = emudisk.Options{NoPageCache: true, ReadBytesPerSec: 16 << 20, WriteBytesPerSec: 16 << 20,
	IOPS: 500, Latency: 500 * time.Microsecond}

type experiment struct {
	o       Options
	sups    []*supervisor.Supervisor
	addrs   []string
	cl      *client.Client
	tenants []ycsb.Tenant
	rng     *rand.Rand
	// unplaced are the leadership transfers placeLeaders gave up on since the last arm's window.
	unplaced []string
}

// Run runs the experiment on a fresh cluster under dir.
func Run(ctx context.Context, dir string, o Options) (Report, error) {
	o = o.withDefaults()
	rep := Report{Options: o, Gains: map[string]float64{}}
	rep.Options.Progress = nil
	e := &experiment{o: o, rng: rand.New(rand.NewPCG(o.Seed, 0))}
	if err := e.start(ctx, dir); err != nil {
		return rep, err
	}
	defer e.stop()
	if err := e.load(ctx); err != nil {
		return rep, err
	}
	// The tenants run from here to the end; the arms are windows of their timelines.
	wctx, stopWork := context.WithCancel(ctx)
	var reports []*ycsb.Report
	var runErr error
	var wg sync.WaitGroup
	wg.Go(func() { reports, runErr = e.work(wctx) })
	arms, reconf, err := e.arms(ctx)
	stopWork()
	wg.Wait()
	if err != nil {
		return rep, err
	}
	if runErr != nil && !errors.Is(runErr, context.Canceled) {
		return rep, fmt.Errorf("workload: %w", runErr)
	}
	e.score(reports, arms, &reconf)
	for i, r := range reports {
		if r != nil && r.Errors > 0 {
			if rep.Errors == nil {
				rep.Errors = map[string]string{}
			}
			rep.Errors[e.tenants[i].Name] = fmt.Sprintf("%d: %s", r.Errors, r.ErrorSample)
			rep.Failed += r.Errors
		}
	}
	rep.Arms, rep.Reconfiguration = arms, reconf
	e.compare(&rep)
	return rep, nil
}

func (e *experiment) start(ctx context.Context, dir string) error {
	for i := range e.o.Nodes {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		cfg := node.Config{DataDir: filepath.Join(dir, fmt.Sprintf("n%d", i+1)), Addr: lis.Addr().String(), Bootstrap: i == 0}
		cfg.Storage = storage.Options{Profile: "readwrite", MemoryBytes: e.o.MemoryBytes, Device: e.o.Device}
		// Samples every 3 s (the thesis: 30 s), a class after 3: the run's load is steady.
		cfg.Autopilot.Policies.NodeProfiles.SampleEvery, cfg.Autopilot.Policies.NodeProfiles.Samples = 3*time.Second, 3
		if i > 0 {
			cfg.Join = []string{e.addrs[0]}
		}
		s, err := supervisor.Start(ctx, cfg, lis)
		if err != nil {
			return fmt.Errorf("start node %d: %w", i+1, err)
		}
		e.sups, e.addrs = append(e.sups, s), append(e.addrs, cfg.Addr)
	}
	var err error
	e.cl, err = client.New(ctx, client.Config{Addrs: e.addrs, RequestTimeout: 10 * time.Second, MaxAttempts: 40})
	return err
}

func (e *experiment) stop() {
	if e.cl != nil {
		e.cl.Close()
	}
	for _, s := range e.sups {
		s.Stop()
	}
}

// load creates the tenants' ranges (SplitsPerTenant a tenant) and inserts their records, with the
// emulated disks' budgets lifted: the load is set-up, and on a disk of a few hundred operations a
// second it would take most of the run.
func (e *experiment) load(ctx context.Context) error {
	e.unthrottle(true)
	defer e.unthrottle(false)
	base := ycsb.Config{Target: ycsb.TargetGRPC, Hosts: e.addrs, Records: e.o.Records, Threads: e.o.Threads,
		MaxDuration: 30 * time.Minute, AbortAfterFailures: -1}
	var err error
	if e.tenants, err = ycsb.ParseTenants(e.o.Tenants, base); err != nil {
		return err
	}
	if err := applyMixes(e.tenants, e.o.Mixes); err != nil {
		return err
	}
	if err := benchutil.WaitFor(ctx, 2*time.Minute, e.replicated); err != nil {
		return fmt.Errorf("cluster never fully replicated: %w", err)
	}
	for _, t := range e.tenants {
		keys, err := splitKeys(t, e.o.Records, e.o.SplitsPerTenant)
		if err != nil {
			return err
		}
		for _, k := range append([]string{""}, keys...) {
			key := t.Name + "/" + k
			if _, _, err := e.cl.Split(ctx, []byte(key)); err != nil {
				return fmt.Errorf("split at %s: %w", key, err)
			}
		}
	}
	if err := benchutil.WaitFor(ctx, 3*time.Minute, e.replicated); err != nil {
		return fmt.Errorf("ranges never fully replicated after the splits: %w", err)
	}
	// A split's ranges keep its parent's nodes: rebalance spreads the replicas over every node
	// before it is switched off, so that every arm has all the nodes to lead from.
	if err := benchutil.WaitFor(ctx, 3*time.Minute, e.spread); err != nil {
		return fmt.Errorf("replicas never spread over the nodes: %w", err)
	}
	if err := stopper.SleepContext(ctx, 5*time.Second); err != nil { // the last moves finish
		return err
	}
	for _, p := range []string{policy.NameRebalance, policy.NameMerge, policy.NameLoadSplit} {
		if err := e.cl.SetPolicy(ctx, p, false); err != nil {
			return err
		}
	}
	e.o.Progress(fmt.Sprintf("loading %d tenants × %d records", len(e.tenants), e.o.Records))
	loads := make([]ycsb.Tenant, len(e.tenants))
	for i, t := range e.tenants {
		loads[i] = t
		loads[i].Config.Load, loads[i].Config.Ops, loads[i].Config.Threads = true, 0, e.o.Threads
	}
	db, err := e.openDB()
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err = ycsb.RunTenants(ctx, loads, db); err != nil {
		return err
	}
	// The loaded LSM compacted, as the profile changes will leave it: no arm inherits the load's
	// compaction debt.
	return e.compact(ctx)
}

// compact compacts every node's store with the disks' budgets lifted (set-up, not measurement),
// after the load and before each arm's leaders are placed: the arms ran in one order on one
// cluster, and without it the same random placement measured 259 ops/s first and 149 ops/s 2.5 min
// later, its disks doing more operations a request (reads 1.8 → 2.9, writes 0.9 → 1.9): the
// restarts' and earlier arms' compaction debt, most likely, which each later arm inherited.
func (e *experiment) compact(ctx context.Context) error {
	e.o.Progress("compacting every node")
	e.unthrottle(true)
	defer e.unthrottle(false)
	for i, s := range e.sups {
		n := s.Node()
		if n == nil {
			continue // restarting: its reopen flushes anyway
		}
		if err := n.Engine().CompactAll(ctx); err != nil {
			return fmt.Errorf("compact node %d: %w", i+1, err)
		}
	}
	return nil
}

// splitKeys are the record keys that cut a tenant's records into splits ranges of as many records.
// go-ycsb names record n its key prefix and n, or (insertorder hashed, the default) the FNV hash of
// n: the hashes of the first twenty thousand all begin with a 6, so cutting on a first digit left
// every tenant's first range empty and its load on one range. Inserts (D, E) are hashed alike.
func splitKeys(t ycsb.Tenant, records int64, splits int) ([]string, error) {
	p, err := t.Config.Properties()
	if err != nil {
		return nil, fmt.Errorf("tenant %s: %w", t.Name, err)
	}
	hashed := p.GetString(prop.InsertOrder, prop.InsertOrderDefault) == "hashed"
	pad := p.GetInt64(prop.ZeroPadding, prop.ZeroPaddingDefault)
	prefix := p.GetString(prop.KeyPrefix, prop.KeyPrefixDefault)
	keys := make([]string, records)
	for n := range records {
		k := n
		if hashed {
			k = util.Hash64(n)
		}
		keys[n] = fmt.Sprintf("%s%0*d", prefix, pad, k)
	}
	slices.Sort(keys)
	var out []string
	for k := 1; k < splits; k++ {
		out = append(out, keys[int64(k)*records/int64(splits)])
	}
	return out, nil
}

// unthrottle lifts (true) or restores the budgets of the nodes' emulated disks, across restarts.
func (e *experiment) unthrottle(on bool) {
	for _, s := range e.sups {
		s.SetDeviceUnthrottled(on)
	}
}

// openDB is a go-ycsb database on the cluster (every tenant's properties are the same but for
// their table, which each operation names).
func (e *experiment) openDB() (goycsb.DB, error) {
	p, err := e.tenants[0].Config.Properties()
	if err != nil {
		return nil, err
	}
	return ycsb.Open(ycsb.TargetGRPC, e.addrs, "", p)
}

// work runs every tenant's run phase until ctx ends, with a timeline a second.
func (e *experiment) work(ctx context.Context) ([]*ycsb.Report, error) {
	runs := make([]ycsb.Tenant, len(e.tenants))
	for i, t := range e.tenants {
		runs[i] = t
		runs[i].Config.Ops, runs[i].Config.MaxDuration = 1<<40, 2*time.Hour
		runs[i].Config.Timeline, runs[i].Config.TimelineInterval = true, time.Second
	}
	db, err := e.openDB()
	if err != nil {
		return nil, err
	}
	defer db.Close()
	return ycsb.RunTenants(ctx, runs, db)
}

// arms runs the arms' reconfigurations and returns their windows (times only) and the
// node_profiles transition's window.
func (e *experiment) arms(ctx context.Context) ([]Arm, Reconfiguration, error) {
	var arms []Arm
	var reconf Reconfiguration
	window := func(name string, place map[uint64]uint64) error {
		a, err := e.window(ctx, name, place)
		if err == nil {
			arms = append(arms, a)
		}
		return err
	}
	if err := stopper.SleepContext(ctx, e.o.Warmup); err != nil { // the tenants' first seconds: caches fill
		return nil, reconf, err
	}
	random, err := e.randomLeaders(ctx)
	if err != nil {
		return nil, reconf, err
	}
	if err := window("random-homogeneous", random); err != nil {
		return nil, reconf, err
	}
	balanced, err := e.balanceLeaders(ctx)
	if err != nil {
		return nil, reconf, err
	}
	for _, p := range e.o.Homogeneous {
		if err := e.setAll(ctx, p); err != nil {
			return nil, reconf, err
		}
		if err := window("homogeneous-"+p, balanced); err != nil {
			return nil, reconf, err
		}
	}
	if e.o.NoNodeProfiles {
		return arms, reconf, nil
	}
	// Back to random-homogeneous, then node_profiles.
	if err := e.setAll(ctx, "readwrite"); err != nil {
		return nil, reconf, err
	}
	if err := window("before-node_profiles", random); err != nil {
		return nil, reconf, err
	}
	reconf, start, err := e.reconfigure(ctx)
	if err != nil {
		return nil, reconf, err
	}
	arms = append(arms, Arm{Name: "reconfiguring", From: start, To: now()})
	err = window("node_profiles", nil)
	reconf.Restarts, reconf.Overlapping = e.restartsSince(start)
	reconf.Plans = e.plans(ctx)
	return arms, reconf, err
}

// window measures an arm. With a placement (every arm but node_profiles' own) it first compacts
// every node and then places the arm's leaders: compacted after they were placed, leaderships
// moved (n3 led nothing in the four windows before the switch, n1 five ranges of a random
// placement that gives none more than three). node_profiles' window is measured as its
// reconfiguration left the cluster, its compaction debt its own.
func (e *experiment) window(ctx context.Context, name string, place map[uint64]uint64) (Arm, error) {
	if place != nil {
		if err := e.compact(ctx); err != nil {
			return Arm{}, err
		}
		if err := e.placeLeaders(ctx, place); err != nil {
			return Arm{}, err
		}
	}
	if err := stopper.SleepContext(ctx, e.o.Settle); err != nil {
		return Arm{}, err
	}
	a := Arm{Name: name, Profiles: e.profiles(), Nodes: e.engines(ctx), Unplaced: e.unplaced, From: now()}
	e.unplaced = nil
	before, cpu := e.cacheCounts(), cpuSeconds()
	e.o.Progress("measuring " + name)
	if err := stopper.SleepContext(ctx, e.o.Measure); err != nil {
		return Arm{}, err
	}
	a.To = now()
	a.CPUCores = math.Round((cpuSeconds()-cpu)/(a.To-a.From)*100) / 100
	hitRatios(a.Nodes, before, e.cacheCounts())
	return a, nil
}

// reconfigure turns node_profiles on and waits for it to converge (or for its bound), watching the
// leaderships it moves; start is when it was turned on.
func (e *experiment) reconfigure(ctx context.Context) (reconf Reconfiguration, start float64, err error) {
	e.o.Progress("node_profiles on")
	if err := e.cl.SetPolicy(ctx, policy.NameNodeProfiles, true); err != nil {
		return reconf, 0, err
	}
	start = now()
	wctx, stopWatch := context.WithCancel(ctx)
	var moves []string
	var watch sync.WaitGroup
	watch.Go(func() { moves = e.watchLeaders(wctx, start) })
	reconf.Converged, reconf.Operators, reconf.OtherOperators = e.converge(ctx, start)
	reconf.Unsuccessful = e.unsuccessful(ctx)
	// Not converged: a restart under way ends before the window (at most its bound), which would
	// otherwise measure a node without its leaderships.
	_ = benchutil.WaitFor(ctx, time.Minute, func() bool { return !e.restarting() })
	reconf.TookS = now() - start
	stopWatch()
	watch.Wait()
	reconf.LeaderMoves = moves
	return reconf, start, nil
}

// watchLeaders polls the user ranges' leaders every second until ctx ends and returns their
// changes, with the seconds since start.
func (e *experiment) watchLeaders(ctx context.Context, start float64) []string {
	var out []string
	last := map[string]uint64{}
	for ctx.Err() == nil {
		if rs, err := e.userRanges(ctx); err == nil {
			for name, leader := range rangeNames(rs) {
				if was, ok := last[name]; ok && was != leader {
					out = append(out, fmt.Sprintf("%.0fs %s n%d→n%d", now()-start, name, was, leader))
				}
				last[name] = leader
			}
		}
		if stopper.SleepContext(ctx, time.Second) != nil {
			break
		}
	}
	return out
}

// rangeNames are the user ranges' leaders by name, tenant/index by start key.
func rangeNames(rs []*pb.RangeStatus) map[string]uint64 {
	slices.SortFunc(rs, func(a, b *pb.RangeStatus) int { return bytes.Compare(a.Desc.StartKey, b.Desc.StartKey) })
	out := map[string]uint64{}
	ordinal := map[string]int{}
	for _, r := range rs {
		tenant, _, _ := strings.Cut(string(r.Desc.StartKey), "/")
		out[fmt.Sprintf("%s/%d", tenant, ordinal[tenant])] = r.LeaderNodeId
		ordinal[tenant]++
	}
	return out
}

// plans are node_profiles' plans, profile changes and waits as its decision log states them.
func (e *experiment) plans(ctx context.Context) []string {
	var out []string
	if ds, _, err := e.cl.Decisions(ctx); err == nil {
		for _, d := range ds {
			if d.Policy == policy.NameNodeProfiles && (d.Operator == "plan" || strings.HasPrefix(d.Operator, "set-profile") || d.Status == "back") {
				out = append(out, d.Operator+": "+d.Reason)
			}
		}
	}
	return out
}

// quietFor is how long node_profiles must propose nothing, run nothing and restart no node to have
// converged: longer than its pause between two restarts (a node back, its Settle, the next sample),
// 34 s in a run at 682e2b6, where 20 s of quiet ended the reconfiguration one restart early and
// that restart fell in node_profiles' window.
const quietFor = 45 * time.Second

// converge waits until node_profiles has changed at least one profile and then stayed quiet for
// quietFor with no operator of its running and no node restarting (at most Converge), and counts
// its operators and the other policies' begun since start. A SetProfile operator ends when the node runs the profile; its compaction and the
// return of its leaderships follow, and the policy waits for them (and 10 s more) before it asks
// for the next change.
func (e *experiment) converge(ctx context.Context, start float64) (bool, map[string]int, map[string]int) {
	deadline := time.Now().Add(e.o.Converge)
	var last int
	quietSince := time.Now()
	count, others := map[string]int{}, map[string]int{}
	for time.Now().Before(deadline) && ctx.Err() == nil {
		ds, _, err := e.cl.Decisions(ctx)
		if err == nil {
			clear(count)
			clear(others)
			running, setDone := 0, 0
			for _, d := range ds {
				kind, _, _ := cutKind(d.Operator)
				if at, err := time.Parse(time.RFC3339Nano, d.Time); err == nil && d.Policy != policy.NameNodeProfiles &&
					d.Range != 0 && float64(at.UnixNano())/1e9 >= start {
					others[d.Policy+" "+kind+" "+d.Status]++
				}
				if d.Policy != policy.NameNodeProfiles || !slices.Contains(operatorKinds, kind) {
					continue // notes (plans, advice) are no operators
				}
				count[kind+" "+d.Status]++
				if d.Status == "running" || d.Status == "pending" {
					running++
				}
				if kind == "set-profile" && d.Status == "succeeded" {
					setDone++
				}
			}
			if n := opCount(count); n != last || running > 0 || e.restarting() {
				last, quietSince = n, time.Now()
			}
			if setDone > 0 && running == 0 && time.Since(quietSince) > quietFor {
				return true, maps.Clone(count), maps.Clone(others)
			}
		}
		if stopper.SleepContext(ctx, time.Second) != nil {
			break
		}
	}
	return false, maps.Clone(count), maps.Clone(others)
}

// operatorKinds are the kinds of node_profiles' operators (its other entries are notes: plans, advice).
var operatorKinds = []string{"set-profile", "transfer-leader", "move-replica"}

// unsuccessful are node_profiles' operators that ended otherwise than succeeded, with their steps
// and notes, as the decision log holds them now.
func (e *experiment) unsuccessful(ctx context.Context) []string {
	_, raw, err := e.cl.Decisions(ctx)
	if err != nil {
		return []string{fmt.Sprintf("decision log unread: %v", err)}
	}
	var entries []decisions.Entry
	if err := json.Unmarshal(raw, &entries); err != nil {
		return []string{fmt.Sprintf("decision log unread: %v", err)}
	}
	var out []string
	for _, d := range entries {
		kind, _, _ := cutKind(d.Operator)
		if d.Policy != policy.NameNodeProfiles || !slices.Contains(operatorKinds, kind) ||
			slices.Contains([]string{"succeeded", "running", "pending"}, d.Status) {
			continue
		}
		line := fmt.Sprintf("%s r%d %s: %s", d.Time.Format("15:04:05"), d.Range, d.Operator, d.Status)
		for _, st := range d.Steps {
			line += fmt.Sprintf("; %s %.1fs %s", st.Step, st.TookS, st.Error)
		}
		if len(d.Notes) > 0 {
			line += "; notes: " + strings.Join(d.Notes, " | ")
		}
		if out = append(out, line); len(out) == 30 {
			break
		}
	}
	return out
}

// restartsSince are the nodes' profile changes that began at or after start (Unix seconds), by
// start, and how many pairs of them overlapped in time.
func (e *experiment) restartsSince(start float64) ([]RestartSpan, int) {
	var out []RestartSpan
	for i, s := range e.sups {
		for _, sp := range s.Spans() {
			from, to := float64(sp.Start.UnixNano())/1e9, float64(sp.End.UnixNano())/1e9
			if from >= start {
				out = append(out, RestartSpan{Node: i + 1, Profile: sp.Profile, From: from, To: to,
					FromS: math.Round((from-start)*10) / 10, ToS: math.Round((to-start)*10) / 10})
			}
		}
	}
	slices.SortFunc(out, func(a, b RestartSpan) int { return cmp.Compare(a.From, b.From) })
	overlapping := 0
	for i := range out {
		for _, b := range out[i+1:] {
			if b.From < out[i].To {
				overlapping++
			}
		}
	}
	return out, overlapping
}

// restarting reports whether a node's profile change is under way.
func (e *experiment) restarting() bool {
	return slices.ContainsFunc(e.sups, (*supervisor.Supervisor).Restarting)
}

func opCount(count map[string]int) int {
	n := 0
	for _, v := range count {
		n += v
	}
	return n
}

// cutKind is an operator's kind: the text before its first space ("set-profile r2: …").
func cutKind(op string) (string, string, bool) {
	for i := range len(op) {
		if op[i] == ' ' || op[i] == ':' {
			return op[:i], op[i:], true
		}
	}
	return op, "", false
}

// setAll gives every node profile, one node at a time (the rolling restart), with the disks'
// budgets lifted: a reconfiguration between arms is set-up (the settling time after it lets the
// caches fill again); node_profiles' own reconfiguration runs on the budgeted disks.
func (e *experiment) setAll(ctx context.Context, profile string) error {
	e.o.Progress("every node to " + profile)
	e.unthrottle(true)
	defer e.unthrottle(false)
	for i, s := range e.sups {
		if err := s.SetProfile(ctx, profile); err != nil {
			return fmt.Errorf("n%d to %s: %w", i+1, profile, err)
		}
	}
	return nil
}

func (e *experiment) profiles() map[uint64]string {
	out := map[uint64]string{}
	for _, s := range e.sups {
		if n := s.Node(); n != nil {
			out[n.NodeID()] = n.Engine().Profile()
		}
	}
	return out
}

// engines are the nodes' engines now and the user ranges each leads (tenant/index).
func (e *experiment) engines(ctx context.Context) map[uint64]*NodeEngine {
	out := map[uint64]*NodeEngine{}
	for _, s := range e.sups {
		n := s.Node()
		if n == nil {
			continue
		}
		st := n.Config().Storage
		out[n.NodeID()] = &NodeEngine{Profile: n.Engine().Profile(), CacheMiB: mib(n.Engine().CacheBytes()),
			MemTableMiB: mib(int64(st.MemTableBytes)), BlockKiB: n.Engine().BlockBytes() >> 10, HitRatio: -1}
	}
	rs, err := e.userRanges(ctx)
	if err != nil {
		return out
	}
	names := rangeNames(rs)
	for _, name := range slices.Sorted(maps.Keys(names)) {
		if ne := out[names[name]]; ne != nil {
			ne.Leads = append(ne.Leads, name)
		}
	}
	return out
}

// cpuSeconds is the process's user and system CPU time so far.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func mib(b int64) float64 { return math.Round(float64(b)/(1<<20)*100) / 100 }

// cacheCount is one engine's block cache hits and misses so far.
type cacheCount struct {
	engine       *storage.Engine
	hits, misses int64
	stalls       int64
	disk         emudisk.Stats
	at           float64
}

func (e *experiment) cacheCounts() map[uint64]cacheCount {
	out := map[uint64]cacheCount{}
	for _, s := range e.sups {
		if n := s.Node(); n != nil {
			st := n.Engine().Stats()
			out[n.NodeID()] = cacheCount{n.Engine(), st.BlockCacheHits, st.BlockCacheMisses, st.WriteStalls, n.Engine().DeviceStats(), now()}
		}
	}
	return out
}

// hitRatios sets each node's hit ratio between two counts of the same engine.
func hitRatios(nodes map[uint64]*NodeEngine, before, after map[uint64]cacheCount) {
	for id, ne := range nodes {
		b, ok1 := before[id]
		a, ok2 := after[id]
		if !ok1 || !ok2 || a.engine != b.engine {
			continue
		}
		ne.WriteStalls = a.stalls - b.stalls
		if n := (a.hits - b.hits) + (a.misses - b.misses); n > 0 {
			ne.HitRatio = math.Round(float64(a.hits-b.hits)/float64(n)*1000) / 1000
		}
		if d := a.at - b.at; d > 0 {
			round := func(x float64) float64 { return math.Round(x/d*100) / 100 }
			ne.ReadOpsS, ne.WriteOpsS = round(float64(a.disk.ReadOps-b.disk.ReadOps)), round(float64(a.disk.WriteOps-b.disk.WriteOps))
			ne.WaitS = round((a.disk.Throttled - b.disk.Throttled).Seconds())
		}
	}
}

// userRanges are the user ranges with their voters and leader.
func (e *experiment) userRanges(ctx context.Context) ([]*pb.RangeStatus, error) {
	rs, err := e.cl.Ranges(ctx)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(rs, func(r *pb.RangeStatus) bool { return r.Desc.RangeId == 1 }), nil
}

func voters(r *pb.RangeStatus) []uint64 {
	var out []uint64
	for _, rd := range r.Desc.Replicas {
		if !rd.Learner {
			out = append(out, rd.NodeId)
		}
	}
	return out
}

// randomLeaders gives each user range a leader drawn at random among its voters, no node leading
// more than ⌈ranges/nodes⌉ of them — HBase's randomized balancer, which the thesis's
// Random-Homogeneous ran, spreads the regions evenly by count, blind to their load — and returns
// the placement.
func (e *experiment) randomLeaders(ctx context.Context) (map[uint64]uint64, error) {
	rs, err := e.userRanges(ctx)
	if err != nil {
		return nil, err
	}
	return randomPlacement(rs, len(e.sups), e.rng), nil
}

// randomPlacement draws, in a random order of the ranges, each one's leader at random among its
// voters leading fewer than ⌈ranges/nodes⌉ so far; a draw that leaves a range whose voters are all
// full is drawn again (the last of 100 draws is kept as it is).
func randomPlacement(rs []*pb.RangeStatus, nodes int, rng *rand.Rand) map[uint64]uint64 {
	limit := (len(rs) + nodes - 1) / max(nodes, 1)
	var place map[uint64]uint64
	for range 100 {
		led := map[uint64]int{}
		place = map[uint64]uint64{}
		full := false
		for _, i := range rng.Perm(len(rs)) {
			v := voters(rs[i])
			open := slices.DeleteFunc(slices.Clone(v), func(id uint64) bool { return led[id] >= limit })
			if len(open) == 0 {
				open, full = v, true
			}
			to := open[rng.IntN(len(open))]
			place[rs[i].Desc.RangeId] = to
			led[to]++
		}
		if !full {
			break
		}
	}
	return place
}

// balanceLeaders spreads the leaderships by load: each range, costliest first (its leader's last
// report), to the voter leading the least cost so far. It returns the placement, which every
// homogeneous arm places again after its compaction.
func (e *experiment) balanceLeaders(ctx context.Context) (map[uint64]uint64, error) {
	rs, err := e.userRanges(ctx)
	if err != nil {
		return nil, err
	}
	ns, err := e.cl.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	qps := map[uint64]float64{}
	for _, n := range ns {
		for _, rl := range n.GetStats().GetRanges() {
			if rl.Leader {
				// The range's cost as node_profiles weighs it: a scan the bytes of its rows.
				qps[rl.RangeId] = profileplan.Mix{Reads: rl.ReadQps, Writes: rl.WriteQps, Scans: rl.ScanQps,
					ScanBytes: rl.ScanRowsQps * policy.DefaultRowBytes}.Cost()
			}
		}
	}
	slices.SortFunc(rs, func(a, b *pb.RangeStatus) int { return cmp.Compare(qps[b.Desc.RangeId], qps[a.Desc.RangeId]) })
	load := map[uint64]float64{}
	place := map[uint64]uint64{}
	for _, r := range rs {
		v := voters(r)
		best := v[0]
		for _, id := range v[1:] {
			if load[id] < load[best] {
				best = id
			}
		}
		place[r.Desc.RangeId] = best
		load[best] += qps[r.Desc.RangeId]
	}
	e.o.Progress(fmt.Sprintf("leaders balanced by load: %v", load))
	return place, e.placeLeaders(ctx, place)
}

// placeLeaders moves each range's leadership to its node in place, each transfer tried up to
// placeTries times: right after the arms' rolling restarts a node may still be catching up on its
// seek-bound disk (15 s in a run), and one transfer that timed out lost a whole invocation. A
// range whose transfers all fail stays where it is, named in unplaced (the arm's nodes show where
// it is led): a follower of a read-only range that came back from a restart one entry short of
// what its leader counted as matched never caught up, and its five timeouts ended a run.
func (e *experiment) placeLeaders(ctx context.Context, place map[uint64]uint64) error {
	if err := benchutil.WaitFor(ctx, time.Minute, e.replicated); err != nil {
		return fmt.Errorf("ranges not fully replicated before placing their leaders: %w", err)
	}
	for _, id := range slices.Sorted(maps.Keys(place)) {
		to := place[id]
		var err error
		for try := range placeTries {
			if err = e.cl.TransferLeader(ctx, id, to); err == nil {
				break
			}
			e.o.Progress(fmt.Sprintf("r%d to n%d, try %d: %v", id, to, try+1, err))
			if serr := stopper.SleepContext(ctx, 2*time.Second); serr != nil {
				return serr
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			e.unplaced = append(e.unplaced, fmt.Sprintf("r%d to n%d: %v", id, to, err))
		}
	}
	return nil
}

// placeTries bounds the attempts of one leadership transfer of placeLeaders.
const placeTries = 5

// replicated reports whether every range has its voters (three, or one a node) and a leader.
func (e *experiment) replicated() bool {
	return benchutil.FullyReplicated(context.Background(), e.cl, min(3, e.o.Nodes))
}

// spread reports whether every node holds at least ⌊replicas/nodes⌋ − 1 of the user ranges'
// replicas (rebalance stops within its thresholds) and all are fully replicated.
func (e *experiment) spread() bool {
	rs, err := e.userRanges(context.Background())
	if err != nil || !e.replicated() {
		return false
	}
	held := map[uint64]int{}
	total := 0
	for _, r := range rs {
		for _, id := range voters(r) {
			held[id]++
			total++
		}
	}
	for _, s := range e.sups {
		if n := s.Node(); n == nil || held[n.NodeID()] < max(1, total/len(e.sups)-1) {
			return false
		}
	}
	return true
}

// score fills each arm's figures from the tenants' timelines, and the transition's bins.
func (e *experiment) score(reports []*ycsb.Report, arms []Arm, reconf *Reconfiguration) {
	sum := func(from, to float64) (ops, errs int64, per map[string]int64) {
		per = map[string]int64{}
		for i, r := range reports {
			if r == nil {
				continue
			}
			for _, p := range r.Timeline {
				if p.Phase == "run" && p.Unix > from && p.Unix <= to {
					ops += p.Ops - p.Errors
					errs += p.Errors
					per[e.tenants[i].Name] += p.Ops - p.Errors
				}
			}
		}
		return ops, errs, per
	}
	for i := range arms {
		a := &arms[i]
		ops, errs, per := sum(a.From, a.To)
		d := a.To - a.From
		a.Throughput, a.Errors, a.PerTenant = float64(ops)/d, errs, map[string]float64{}
		for k, v := range per {
			a.PerTenant[k] = float64(v) / d
		}
		if a.Name == "before-node_profiles" {
			reconf.BeforeOpsS = a.Throughput
		}
		if a.Name == "reconfiguring" {
			reconf.Errors = errs
			reconf.MinShare = 1
			for t := a.From; t < a.To; t += 10 {
				end := min(t+10, a.To)
				ops, _, per := sum(t, end)
				bin := float64(ops) / (end - t)
				reconf.BinsOpsS = append(reconf.BinsOpsS, bin)
				if reconf.TenantBinsOpsS == nil {
					reconf.TenantBinsOpsS = map[string][]float64{}
				}
				for _, tn := range e.tenants {
					reconf.TenantBinsOpsS[tn.Name] = append(reconf.TenantBinsOpsS[tn.Name], math.Round(float64(per[tn.Name])/(end-t)))
				}
				if reconf.BeforeOpsS > 0 && end-t >= 5 {
					reconf.MinShare = min(reconf.MinShare, bin/reconf.BeforeOpsS)
				}
			}
		}
	}
}

// compare names the best homogeneous arm and node_profiles' gains.
func (e *experiment) compare(rep *Report) {
	byName := map[string]*Arm{}
	for i := range rep.Arms {
		byName[rep.Arms[i].Name] = &rep.Arms[i]
	}
	var best *Arm
	for _, p := range e.o.Homogeneous {
		if a := byName["homogeneous-"+p]; a != nil && (best == nil || a.Throughput > best.Throughput) {
			best = a
		}
	}
	np, rnd := byName["node_profiles"], byName["random-homogeneous"]
	if best == nil || np == nil || rnd == nil {
		return
	}
	rep.BestHomogeneous = best.Name
	rep.Gains["over_best_homogeneous"] = np.Throughput / best.Throughput
	rep.Gains["over_random_homogeneous"] = np.Throughput / rnd.Throughput
	for _, t := range e.tenants {
		if t.Config.Workload == "e" && best.PerTenant[t.Name] > 0 {
			rep.Gains["scan_tenant_over_best_homogeneous"] = np.PerTenant[t.Name] / best.PerTenant[t.Name]
		}
	}
}

func now() float64 { return float64(time.Now().UnixNano()) / 1e9 }
