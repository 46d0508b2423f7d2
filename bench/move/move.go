// Package move benchmarks a replica move under load: it starts a local cluster of four in-process
// nodes (replication factor 3), loads one range with a given amount of incompressible data, runs a
// closed-loop YCSB-B-like workload (95 % reads, 5 % updates, scrambled zipfian keys) and, once a
// baseline is measured, moves one non-leader replica of the range to the fourth node with
// RelocateReplica (learner, snapshot streamed at the configured rate, joint promote and remove) while
// the workload continues. It reports the move's time against the configured snapshot rate and the
// foreground latency during the move as a ratio to before it, and verifies that the new replica holds
// the data. Like the other benchmarks it asserts nothing about speed.
package move

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/pingcap/go-ycsb/pkg/generator"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/shoaldb/shoal/autopilot/policy"
	"github.com/shoaldb/shoal/bench/benchutil"
	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/kv"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/transport"
)

// Defaults of Options.
const (
	DefaultSizeBytes   = 1 << 30
	DefaultValueBytes  = 1024
	DefaultThreads     = 16
	DefaultWarmup      = 3 * time.Second
	DefaultBefore      = 20 * time.Second
	DefaultAfter       = 5 * time.Second
	DefaultMoveTimeout = 10 * time.Minute

	// Nodes is the cluster size: three replicas plus the node the move goes to.
	Nodes = 4
	// ReplicationFactor is the number of voters per range.
	ReplicationFactor = 3
	// ReadFraction is YCSB B's read proportion (the rest are updates).
	ReadFraction = 0.95
	// ZipfianConstant is YCSB's request-distribution constant.
	ZipfianConstant = 0.99
	// MaxSnapshotBytes is the receiver's cap on one snapshot's keys plus values (transport's
	// maxSnapshotBytes, unexported there): a range larger than this cannot be moved at all.
	MaxSnapshotBytes = 1 << 30

	keyPrefix = "user"
	keyDigits = 10
	keyBytes  = len(keyPrefix) + keyDigits
)

// Options configure a run. Zero values take the defaults above.
type Options struct {
	// Dir holds the nodes' data directories (required).
	Dir string
	// Out receives report.json, timeline.png and nodes.log (required).
	Out string
	// SizeBytes is the range's data size: keys plus values of the loaded records.
	SizeBytes int64
	// ValueBytes is the size of each record's (random, incompressible) value.
	ValueBytes int
	// RateBytesPerSec is every node's snapshot send rate (kv.Config.SnapshotRateBytesPerSec); 0 keeps
	// the transport's default (32 MiB/s).
	RateBytesPerSec int64
	// Threads are the workload's closed-loop workers.
	Threads int
	// Warmup runs the workload unmeasured; Before measures the baseline; After keeps the workload
	// running once the move is done. A negative Warmup or After means none.
	Warmup, Before, After time.Duration
	// MoveTimeout bounds the move (all RelocateReplica attempts).
	MoveTimeout time.Duration
	// CacheBytes is each node's block cache (0: the storage default, 128 MiB).
	CacheBytes int64
	// Progress receives progress lines; nil for none.
	Progress io.Writer
}

func (o *Options) defaults() error {
	if o.Dir == "" || o.Out == "" {
		return errors.New("move: Dir and Out are required")
	}
	if o.SizeBytes == 0 {
		o.SizeBytes = DefaultSizeBytes
	}
	if o.ValueBytes == 0 {
		o.ValueBytes = DefaultValueBytes
	}
	if o.RateBytesPerSec == 0 {
		o.RateBytesPerSec = transport.DefaultSnapshotRateBytesPerSec
	}
	if o.Threads == 0 {
		o.Threads = DefaultThreads
	}
	if o.Warmup == 0 {
		o.Warmup = DefaultWarmup
	}
	if o.Before == 0 {
		o.Before = DefaultBefore
	}
	if o.After == 0 {
		o.After = DefaultAfter
	}
	if o.MoveTimeout == 0 {
		o.MoveTimeout = DefaultMoveTimeout
	}
	o.Warmup, o.After = max(o.Warmup, 0), max(o.After, 0)
	switch {
	case o.SizeBytes < 0 || o.ValueBytes < 0 || o.RateBytesPerSec < 0 || o.Threads < 0 || o.CacheBytes < 0:
		return errors.New("move: sizes, rate and threads must not be negative")
	case o.Before < 0 || o.MoveTimeout < 0:
		return errors.New("move: Before and MoveTimeout must not be negative")
	case o.ValueBytes > 1<<20:
		return fmt.Errorf("move: value size %d is over 1 MiB", o.ValueBytes)
	case o.SizeBytes < int64(keyBytes+o.ValueBytes)*100:
		return fmt.Errorf("move: size %d holds fewer than 100 records of %d bytes", o.SizeBytes, keyBytes+o.ValueBytes)
	}
	return nil
}

// Settings are the effective settings of a run.
type Settings struct {
	Nodes                  int     `json:"nodes"`
	ReplicationFactor      int     `json:"replication_factor"`
	SizeBytes              int64   `json:"size_bytes"`
	ValueBytes             int     `json:"value_bytes"`
	Records                int64   `json:"records"`
	ConfiguredRateBytesSec int64   `json:"configured_rate_bytes_per_sec"`
	Threads                int     `json:"threads"`
	ReadFraction           float64 `json:"read_fraction"`
	Distribution           string  `json:"distribution"`
	WarmupS                float64 `json:"warmup_s"`
	BeforeS                float64 `json:"before_s"`
	AfterS                 float64 `json:"after_s"`
	CacheBytes             int64   `json:"cache_bytes"`
	EmulatedDisk           bool    `json:"emulated_disk"`
}

// LoadStats describe the load phase.
type LoadStats struct {
	Records      int64   `json:"records"`
	Bytes        int64   `json:"bytes"`
	DurationS    float64 `json:"duration_s"`
	BytesPerSec  float64 `json:"bytes_per_sec"`
	Retries      int64   `json:"retries"`
	ReplicatedS  float64 `json:"replicated_wait_s"`
	SettledS     float64 `json:"compactions_settled_wait_s"`
	RangeApproxB uint64  `json:"range_approx_bytes"`
}

// MoveStats describe the move.
type MoveStats struct {
	RangeID    uint64   `json:"range_id"`
	LeaderNode uint64   `json:"leader_node"`
	FromNode   uint64   `json:"from_node"`
	ToNode     uint64   `json:"to_node"`
	VotersFrom []uint64 `json:"voters_before"`
	VotersTo   []uint64 `json:"voters_after"`
	Done       bool     `json:"done"`
	Attempts   int      `json:"attempts"`
	// RetryErrors are the answers of the attempts that failed.
	RetryErrors []string `json:"retry_errors,omitempty"`
	Error       string   `json:"error,omitempty"`
	// StartS and EndS are seconds since the workload started.
	StartS    float64 `json:"start_s"`
	EndS      float64 `json:"end_s"`
	DurationS float64 `json:"duration_s"`

	// RangeBytes are the range's keys plus values: what one snapshot carries.
	RangeBytes             int64 `json:"range_bytes"`
	ConfiguredRateBytesSec int64 `json:"configured_rate_bytes_per_sec"`
	// ExpectedS is RangeBytes at the configured rate: the move's time if one snapshot streamed at
	// exactly that rate and nothing else took time. MoveTimeRatio is DurationS over it.
	ExpectedS     float64 `json:"expected_s_at_configured_rate"`
	MoveTimeRatio float64 `json:"move_time_ratio"`
	// EffectiveRate is RangeBytes over DurationS (the range moved per second of move), and its ratio
	// to the configured rate.
	EffectiveRateBytesSec float64 `json:"effective_rate_bytes_per_sec"`
	EffectiveRateRatio    float64 `json:"effective_rate_ratio"`

	// SnapshotBytes are the snapshot chunk bytes the nodes sent during the move (encoded keys and
	// values plus framing, every snapshot); Snapshots counts the snapshots receivers accepted and
	// SnapshotsApplied those the new node installed. More than one means the learner fell behind the
	// leader's truncated log again after installing one.
	SnapshotBytes    uint64 `json:"snapshot_bytes"`
	Snapshots        uint64 `json:"snapshots"`
	SnapshotsApplied uint64 `json:"snapshots_applied_by_new_node"`
	// SendingS is the time snapshot bytes were flowing (100 ms samples; growth less than a second
	// apart counts as one stretch);
	// SendRate is SnapshotBytes over it, PeakSendRate the highest one-second rate: the rate limiter's
	// view, which should not exceed the configured rate.
	SendingS             float64 `json:"sending_s"`
	SendRateBytesSec     float64 `json:"send_rate_bytes_per_sec"`
	SendRateRatio        float64 `json:"send_rate_ratio"`
	PeakSendRateBytesSec float64 `json:"peak_send_rate_bytes_per_sec"`
	PeakSendRateRatio    float64 `json:"peak_send_rate_ratio"`
	WriteStalls          int64   `json:"write_stalls"`
	// Events are snapshots accepted and applied, in order.
	Events []Event `json:"events"`
	// MetricsStallMaxS is, per node, the longest a reading of its counters (kv.Node.Metrics) took:
	// long ones mean a replica's lock was held that long (a snapshot being applied).
	MetricsStallMaxS map[string]float64 `json:"metrics_stall_max_s"`
}

// Event is something the move did, at T seconds since the workload started.
type Event struct {
	T    float64 `json:"t"`
	What string  `json:"what"`
}

// Phase summarizes the foreground workload in one phase.
type Phase struct {
	DurationS  float64 `json:"duration_s"`
	Ops        int64   `json:"ops"`
	Throughput float64 `json:"throughput"`
	P50Ms      float64 `json:"p50_ms"`
	P99Ms      float64 `json:"p99_ms"`
	P999Ms     float64 `json:"p999_ms"`
	MaxMs      float64 `json:"max_ms"`
	Errors     int64   `json:"errors"`
}

// Verify is the check that the moved replica holds the data.
type Verify struct {
	// Replicas are the digests of every voter's local copy once all applied the same index.
	Replicas       []ReplicaDigest `json:"replicas"`
	DigestsMatch   bool            `json:"digests_match"`
	KeysExpected   int64           `json:"keys_expected"`
	LeaderMoved    bool            `json:"leadership_moved_to_new_node"`
	LeaderError    string          `json:"leadership_error,omitempty"`
	SampleReads    int             `json:"sample_reads"`
	SampleFound    int             `json:"sample_found"`
	SampleErrors   int             `json:"sample_errors"`
	ReadsOnNewNode uint64          `json:"reads_served_by_new_node"`
	OldReplicaGone bool            `json:"old_replica_removed"`
	OK             bool            `json:"ok"`
}

// Point is one second of the workload.
// A stalled process delays the sampler: IntervalS is the time the point covers (normally 1 s), and
// rates are over it.
type Point struct {
	T              float64 `json:"t"`
	IntervalS      float64 `json:"interval_s"`
	Phase          string  `json:"phase"`
	Ops            int64   `json:"ops"`
	OpsPerSec      float64 `json:"ops_per_sec"`
	P50Ms          float64 `json:"p50_ms"`
	P99Ms          float64 `json:"p99_ms"`
	Errors         int64   `json:"errors"`
	SnapshotBytesS float64 `json:"snapshot_bytes_per_sec"`
	// LeaderApplied and NewReplicaApplied are the applied indexes of the range's leader and of the
	// new node's replica (0 before it exists): the learner's lag in raft entries.
	LeaderApplied     uint64 `json:"leader_applied"`
	NewReplicaApplied uint64 `json:"new_replica_applied"`
}

// leaderApplied is the applied index of the range's leader (0 if none is known).
func leaderApplied(stats []*nodeStats) uint64 {
	for _, st := range stats {
		if st.leader.Load() {
			return st.applied.Load()
		}
	}
	return 0
}

// Report is what report.json holds.
type Report struct {
	Settings Settings  `json:"settings"`
	Load     LoadStats `json:"load"`
	Move     MoveStats `json:"move"`
	Before   Phase     `json:"before"`
	During   Phase     `json:"during"`
	After    Phase     `json:"after"`
	// P50Ratio, P99Ratio and ThroughputRatio are During over Before.
	P50Ratio        float64 `json:"p50_ratio"`
	P99Ratio        float64 `json:"p99_ratio"`
	ThroughputRatio float64 `json:"throughput_ratio"`
	// Errors counts failed foreground operations over the whole workload (warmup included).
	Errors      int64  `json:"errors"`
	ErrorSample string `json:"error_sample,omitempty"`
	Verify      Verify `json:"verify"`
	// MaxRSSBytes is the benchmark process's peak resident memory (all four nodes and the workload).
	MaxRSSBytes int64    `json:"max_rss_bytes"`
	Series      []Point  `json:"series"`
	Plots       []string `json:"plots"`
}

const (
	phWarmup = iota
	phBefore
	phDuring
	phAfter
	phases
)

var phaseNames = [phases]string{"warmup", "before", "during", "after"}

func key(i int64) []byte { return fmt.Appendf(nil, "%s%0*d", keyPrefix, keyDigits, i) }

// Run runs the benchmark and writes report.json and timeline.png into opts.Out.
func Run(ctx context.Context, opts Options) (*Report, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.Out, 0o755); err != nil {
		return nil, err
	}
	records := opts.SizeBytes / int64(keyBytes+opts.ValueBytes)
	rep := &Report{Settings: Settings{
		Nodes: Nodes, ReplicationFactor: ReplicationFactor, SizeBytes: opts.SizeBytes, ValueBytes: opts.ValueBytes,
		Records: records, ConfiguredRateBytesSec: opts.RateBytesPerSec, Threads: opts.Threads, ReadFraction: ReadFraction,
		Distribution: fmt.Sprintf("scrambled zipfian (%.2f)", ZipfianConstant), WarmupS: opts.Warmup.Seconds(),
		BeforeS: opts.Before.Seconds(), AfterS: opts.After.Seconds(), CacheBytes: opts.CacheBytes,
	}}
	// Progress lines go through a goroutine of their own and are dropped when it lags: a write to a
	// terminal or file can block (dirty-page throttling while a node writes a large snapshot), and
	// the sampler that reports progress must not stall with it.
	lines := make(chan string, 64)
	printed := make(chan struct{})
	go func() {
		defer close(printed)
		for l := range lines {
			if opts.Progress != nil {
				io.WriteString(opts.Progress, l)
			}
		}
	}()
	defer func() {
		close(lines)
		<-printed
	}()
	progress := func(format string, args ...any) {
		select {
		case lines <- fmt.Sprintf("\r\033[Kmove: "+format, args...):
		default:
		}
	}
	done := func() { lines <- "\n" }
	if opts.SizeBytes > MaxSnapshotBytes {
		progress("warning: %d bytes exceed the snapshot receiver's cap of %d bytes: the move cannot succeed", opts.SizeBytes, MaxSnapshotBytes)
		done()
	}

	logf, err := os.Create(filepath.Join(opts.Out, "nodes.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cfg := kv.Config{
		RangeMaxBytes:           1 << 40, // no size splits: the range must stay whole
		ReplicationFactor:       ReplicationFactor,
		SnapshotRateBytesPerSec: opts.RateBytesPerSec,
		HeartbeatInterval:       500 * time.Millisecond,
		QueueInterval:           time.Second,
		Logger:                  nodeLogger(logf),
	}
	progress("starting %d nodes in %s", Nodes, opts.Dir)
	c, err := startCluster(ctx, opts.Dir, Nodes, cfg, opts.CacheBytes)
	if err != nil {
		return nil, err
	}
	defer c.stop()
	cl, err := client.New(ctx, client.Config{Addrs: c.addrs()})
	if err != nil {
		return nil, err
	}
	defer cl.Close()

	// Only the replicate policy may act (it brings the ranges to three voters); then it goes off too,
	// so that nothing but this benchmark changes the range (it would remove the move's learner).
	progress("switching autopilot policies off")
	for _, p := range []string{policy.NameRebalance, policy.NameLoadSplit, policy.NameMerge} {
		if err := setPolicy(ctx, cl, p, false); err != nil {
			return nil, err
		}
	}
	progress("waiting for %d-way replication", ReplicationFactor)
	if err := waitFor(ctx, 2*time.Minute, func() bool { return benchutil.FullyReplicated(ctx, cl, ReplicationFactor) }); err != nil {
		return nil, fmt.Errorf("ranges not %d-way replicated: %w", ReplicationFactor, err)
	}
	if err := setPolicy(ctx, cl, policy.NameReplicate, false); err != nil {
		return nil, err
	}
	time.Sleep(2 * time.Second) // the autopilot applies switches every second
	if !benchutil.FullyReplicated(ctx, cl, ReplicationFactor) {
		return nil, errors.New("ranges changed while the autopilot was being switched off")
	}
	urs, err := benchutil.UserRanges(ctx, cl)
	if err != nil {
		return nil, err
	}
	if len(urs) != 1 {
		return nil, fmt.Errorf("want one user range, have %d", len(urs))
	}
	rangeID := urs[0].GetDesc().GetRangeId()
	done()

	// Load.
	if err := load(ctx, cl, opts, records, rep, progress); err != nil {
		return nil, err
	}
	done()
	if urs, err = benchutil.UserRanges(ctx, cl); err != nil {
		return nil, err
	}
	if len(urs) != 1 {
		return nil, fmt.Errorf("the range split during the load: %d user ranges", len(urs))
	}
	desc := urs[0].GetDesc()
	t0 := time.Now()
	progress("waiting until every replica applied the load")
	if err := waitFor(ctx, 5*time.Minute, func() bool { return caughtUp(c, rangeID, voters(desc)) }); err != nil {
		return nil, fmt.Errorf("replicas did not apply the load: %w", err)
	}
	rep.Load.ReplicatedS = time.Since(t0).Seconds()
	t0 = time.Now()
	progress("waiting for compactions to settle")
	quiet := 0
	for quiet < 3 && time.Since(t0) < 3*time.Minute && ctx.Err() == nil {
		if c.settled() {
			quiet++
		} else {
			quiet = 0
		}
		time.Sleep(500 * time.Millisecond)
	}
	rep.Load.SettledS = time.Since(t0).Seconds()
	done()

	// Pick the move: a voter other than the leader goes to the node without a replica.
	leader := c.leaderOf(rangeID)
	if leader == 0 {
		return nil, fmt.Errorf("range %d has no leader", rangeID)
	}
	if r := c.replicaOn(leader, rangeID); r != nil {
		rep.Load.RangeApproxB = r.ApproximateBytes()
	}
	mv := &rep.Move
	mv.RangeID, mv.LeaderNode, mv.VotersFrom = rangeID, leader, voters(desc)
	mv.ConfiguredRateBytesSec = opts.RateBytesPerSec
	for _, v := range mv.VotersFrom {
		if v != leader && mv.FromNode == 0 {
			mv.FromNode = v
		}
	}
	for _, n := range c.nodes {
		if id := n.KV.NodeID(); !hasReplica(desc, id) {
			mv.ToNode = id
		}
	}
	if mv.FromNode == 0 || mv.ToNode == 0 {
		return nil, fmt.Errorf("no move to make: range %d has replicas on %v", rangeID, mv.VotersFrom)
	}

	if err := runWorkload(ctx, c, cl, opts, records, rep, progress); err != nil {
		return nil, err
	}
	done()

	progress("verifying the new replica")
	verify(ctx, c, cl, records, opts.ValueBytes, rep)
	done()

	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		rep.MaxRSSBytes = ru.Maxrss << 10 // KiB on Linux
	}
	if p, err := writePlot(rep, opts.Out); err != nil {
		return nil, fmt.Errorf("plot: %w", err)
	} else {
		rep.Plots = []string{p}
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(opts.Out, "report.json"), append(b, '\n'), 0o644); err != nil {
		return nil, err
	}
	return rep, nil
}

func setPolicy(ctx context.Context, cl *client.Client, name string, on bool) error {
	var err error
	werr := waitFor(ctx, time.Minute, func() bool {
		err = cl.SetPolicy(ctx, name, on)
		return err == nil
	})
	if werr != nil {
		return fmt.Errorf("switch policy %s %v: %v (%w)", name, on, err, werr)
	}
	return nil
}

// waitFor polls cond every 200 ms until it holds, ctx ends or d passes.
func waitFor(ctx context.Context, d time.Duration, cond func() bool) error {
	deadline := time.Now().Add(d)
	for !cond() {
		if err := ctx.Err(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still not done after %v", d)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil
}

// caughtUp reports whether every node in nodes has applied what the range's leader has.
func caughtUp(c *cluster, rangeID uint64, nodes []uint64) bool {
	leader := c.leaderOf(rangeID)
	if leader == 0 {
		return false
	}
	lr := c.replicaOn(leader, rangeID)
	if lr == nil {
		return false
	}
	want := lr.Status().Applied
	for _, n := range nodes {
		r := c.replicaOn(n, rangeID)
		if r == nil || r.Status().Applied < want {
			return false
		}
	}
	return true
}

// load writes the records in batches of about 1 MiB from two writers.
func load(ctx context.Context, cl *client.Client, opts Options, records int64, rep *Report, progress func(string, ...any)) error {
	per := int64(max(1, (1<<20)/(keyBytes+opts.ValueBytes)))
	batches := (records + per - 1) / per
	var next, loaded, retries atomic.Int64
	var firstErr error
	var errOnce sync.Once
	start := time.Now()
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				n := loaded.Load()
				b := n * int64(keyBytes+opts.ValueBytes)
				progress("loading %s", benchutil.Bar(float64(n)/float64(records), fmt.Sprintf("%d/%d MiB, %.1f MiB/s",
					b>>20, opts.SizeBytes>>20, float64(b)/(1<<20)/time.Since(start).Seconds())))
			}
		}
	}()
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.NewChaCha8([32]byte{byte(w), 'l', 'o', 'a', 'd'})
			for {
				b := next.Add(1) - 1
				if b >= batches {
					return
				}
				lo, hi := b*per, min((b+1)*per, records)
				muts := make([]*pb.Mutation, 0, hi-lo)
				for i := lo; i < hi; i++ {
					v := make([]byte, opts.ValueBytes)
					_, _ = rng.Read(v)
					muts = append(muts, &pb.Mutation{Key: key(i), Value: v})
				}
				var err error
				for attempt := 0; attempt < 10; attempt++ {
					if err = cl.BatchWrite(ctx, muts); err == nil || ctx.Err() != nil {
						break
					}
					retries.Add(1)
					time.Sleep(200 * time.Millisecond)
				}
				if err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("load batch %d: %w", b, err) })
					next.Store(batches)
					return
				}
				loaded.Add(hi - lo)
			}
		}(w)
	}
	wg.Wait()
	close(stop)
	if firstErr != nil {
		return firstErr
	}
	d := time.Since(start).Seconds()
	bytes := records * int64(keyBytes+opts.ValueBytes)
	rep.Load = LoadStats{Records: records, Bytes: bytes, DurationS: d, BytesPerSec: float64(bytes) / d, Retries: retries.Load()}
	progress("loaded %d records, %d MiB in %.1fs (%.1f MiB/s)", records, bytes>>20, d, float64(bytes)/(1<<20)/d)
	return nil
}

// runWorkload runs the closed-loop workload through warmup, baseline, move and after, and fills in
// the phases, the move and the per-second series.
func runWorkload(ctx context.Context, c *cluster, cl *client.Client, opts Options, records int64, rep *Report, progress func(string, ...any)) error {
	var (
		phase    atomic.Int32
		mu       sync.Mutex
		hists    [phases]*hdrhistogram.Histogram
		errsPh   [phases]int64
		secHist  = benchutil.NewHist()
		secOps   int64
		secErrs  int64
		errTotal int64
		errOnce  sync.Once
	)
	for i := range hists {
		hists[i] = benchutil.NewHist()
	}
	stats, stopStats := c.pollStats(100*time.Millisecond, rep.Move.RangeID)
	defer stopStats()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < opts.Threads; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			r := mrand.New(mrand.NewSource(start.UnixNano() + int64(w)))
			zipf := generator.NewScrambledZipfian(0, records-1, ZipfianConstant)
			vr := rand.NewChaCha8([32]byte{byte(w), 'r', 'u', 'n'})
			value := make([]byte, opts.ValueBytes)
			for wctx.Err() == nil {
				k := key(zipf.Next(r))
				ph := phase.Load()
				t := time.Now()
				var err error
				if r.Float64() < ReadFraction {
					_, _, err = cl.Get(wctx, k)
				} else {
					_, _ = vr.Read(value)
					err = cl.Put(wctx, k, value)
				}
				lat := time.Since(t)
				if wctx.Err() != nil {
					return // cut short by the end of the run, not a failure
				}
				mu.Lock()
				if err != nil {
					secErrs++
					errsPh[ph]++
					errTotal++
					errOnce.Do(func() { rep.ErrorSample = err.Error() })
				} else {
					secOps++
					us := benchutil.ClampUs(lat)
					_ = secHist.RecordValue(us)
					_ = hists[ph].RecordValue(us)
				}
				mu.Unlock()
			}
		}(w)
	}

	// The sampler: every 100 ms the nodes' latest counters (snapshot bytes flowing, snapshots
	// accepted and applied), a point every second.
	mv := &rep.Move
	var (
		sampMu     sync.Mutex
		sending    time.Duration // time snapshot bytes were flowing during the move
		lastGrowth time.Time
		moving     atomic.Bool
		events     []Event
		peakRate   float64
	)
	sampDone := make(chan struct{})
	stopSamp := make(chan struct{})
	go func() {
		defer close(sampDone)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		prevBytes, _, _ := sums(stats)
		prevSent := make([]uint64, len(stats))
		prevApplied := make([]uint64, len(stats))
		for i, st := range stats {
			prevSent[i], prevApplied[i] = st.snapsSent.Load(), st.snapsApplied.Load()
		}
		secStartBytes := prevBytes
		lastPoint := start
		for n := 1; ; n++ {
			select {
			case <-stopSamp:
				return
			case now := <-tick.C:
				t := now.Sub(start).Seconds()
				b, _, _ := sums(stats)
				sampMu.Lock()
				if b > prevBytes && moving.Load() {
					// Chunks leave every chunk/rate seconds (250 ms for 1 MiB at 4 MiB/s): growth seen
					// less than a second apart is one stretch of sending.
					if !lastGrowth.IsZero() && now.Sub(lastGrowth) <= time.Second {
						sending += now.Sub(lastGrowth)
					} else {
						sending += 100 * time.Millisecond
					}
					lastGrowth = now
				}
				for i, st := range stats {
					if v := st.snapsSent.Load(); v != prevSent[i] {
						events = append(events, Event{T: t, What: fmt.Sprintf("n%d: snapshot accepted by its receiver (%d so far)", st.id, v)})
						prevSent[i] = v
					}
					if v := st.snapsApplied.Load(); v != prevApplied[i] {
						what := fmt.Sprintf("n%d: snapshot applied (%d so far)", st.id, v)
						if la := leaderApplied(stats); st.id == mv.ToNode && la > 0 {
							a := st.applied.Load()
							what += fmt.Sprintf(" at index %d; leader applied %d (%d entries ahead)", a, la, int64(la)-int64(a))
						}
						events = append(events, Event{T: t, What: what})
						prevApplied[i] = v
					}
				}
				sampMu.Unlock()
				prevBytes = b
				if n%10 != 0 {
					continue
				}
				mu.Lock()
				p := Point{T: t, Phase: phaseNames[phase.Load()], Ops: secOps, Errors: secErrs,
					P50Ms: benchutil.UsToMs(secHist.ValueAtQuantile(50)), P99Ms: benchutil.UsToMs(secHist.ValueAtQuantile(99))}
				secOps, secErrs = 0, 0
				secHist.Reset()
				mu.Unlock()
				p.LeaderApplied = leaderApplied(stats)
				for _, st := range stats {
					if st.id == mv.ToNode {
						p.NewReplicaApplied = st.applied.Load()
					}
				}
				p.IntervalS = now.Sub(lastPoint).Seconds()
				p.OpsPerSec = float64(p.Ops) / p.IntervalS
				p.SnapshotBytesS = float64(b-secStartBytes) / p.IntervalS
				secStartBytes, lastPoint = b, now
				sampMu.Lock()
				if p.Phase == phaseNames[phDuring] {
					peakRate = max(peakRate, p.SnapshotBytesS)
				}
				rep.Series = append(rep.Series, p)
				sampMu.Unlock()
				progress("t=%3.0fs %-6s %6.0f ops/s p99 %6.1f ms snapshot %5.1f MiB/s", p.T, p.Phase, p.OpsPerSec, p.P99Ms, p.SnapshotBytesS/(1<<20))
			}
		}
	}()

	sleep := func(d time.Duration) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(d):
			return true
		}
	}
	finish := func() {
		cancel()
		wg.Wait()
		close(stopSamp)
		<-sampDone
		stopStats()
	}
	if !sleep(opts.Warmup) {
		finish()
		return ctx.Err()
	}
	phase.Store(phBefore)
	beforeStart := time.Now()
	if !sleep(opts.Before) {
		finish()
		return ctx.Err()
	}

	// The move.
	bytes0, snaps0, stalls0 := sums(stats)
	applied0 := uint64(0)
	for _, st := range stats {
		if st.id == mv.ToNode {
			applied0 = st.snapsApplied.Load()
		}
	}
	moving.Store(true)
	phase.Store(phDuring)
	moveStart := time.Now()
	d, attempts, retryErrs, err := relocate(ctx, c, opts.MoveTimeout, mv.RangeID, mv.ToNode, mv.FromNode)
	moveEnd := time.Now()
	phase.Store(phAfter)
	moving.Store(false)
	time.Sleep(200 * time.Millisecond) // the pollers' next readings
	bytes1, snaps1, stalls1 := sums(stats)
	for _, st := range stats {
		if st.id == mv.ToNode {
			mv.SnapshotsApplied = st.snapsApplied.Load() - applied0
		}
	}
	mv.WriteStalls = stalls1 - stalls0
	mv.Attempts, mv.RetryErrors = attempts, retryErrs
	if err != nil {
		mv.Error = err.Error()
	} else {
		mv.VotersTo = voters(d)
		mv.Done = hasVoter(d, mv.ToNode) && !hasReplica(d, mv.FromNode)
		if !mv.Done {
			mv.Error = fmt.Sprintf("relocate returned replicas %v", d.GetReplicas())
		}
	}
	if ctx.Err() == nil {
		sleep(opts.After)
	}
	afterEnd := time.Now()
	finish()
	if err := ctx.Err(); err != nil {
		return err
	}

	mv.StartS, mv.EndS = moveStart.Sub(start).Seconds(), moveEnd.Sub(start).Seconds()
	mv.DurationS = moveEnd.Sub(moveStart).Seconds()
	mv.SnapshotBytes, mv.Snapshots = bytes1-bytes0, snaps1-snaps0
	rate := float64(opts.RateBytesPerSec)
	mv.RangeBytes = rep.Load.Bytes
	mv.ExpectedS = float64(mv.RangeBytes) / rate
	if mv.DurationS > 0 {
		mv.MoveTimeRatio = mv.DurationS / mv.ExpectedS
		mv.EffectiveRateBytesSec = float64(mv.RangeBytes) / mv.DurationS
		mv.EffectiveRateRatio = mv.EffectiveRateBytesSec / rate
	}
	mv.SendingS = sending.Seconds()
	if mv.SendingS > 0 {
		mv.SendRateBytesSec = float64(mv.SnapshotBytes) / mv.SendingS
		mv.SendRateRatio = mv.SendRateBytesSec / rate
	}
	mv.PeakSendRateBytesSec, mv.PeakSendRateRatio = peakRate, peakRate/rate
	mv.Events = events
	if mv.Events == nil {
		mv.Events = []Event{}
	}
	mv.MetricsStallMaxS = map[string]float64{}
	for _, st := range stats {
		mv.MetricsStallMaxS[fmt.Sprintf("n%d", st.id)] = time.Duration(st.maxCall.Load()).Seconds()
	}

	phaseOf := func(ph int, dur time.Duration) Phase {
		h := hists[ph]
		p := Phase{DurationS: dur.Seconds(), Ops: h.TotalCount(), Errors: errsPh[ph],
			P50Ms: benchutil.UsToMs(h.ValueAtQuantile(50)), P99Ms: benchutil.UsToMs(h.ValueAtQuantile(99)),
			P999Ms: benchutil.UsToMs(h.ValueAtQuantile(99.9)), MaxMs: benchutil.UsToMs(h.Max())}
		if p.DurationS > 0 {
			p.Throughput = float64(p.Ops) / p.DurationS
		}
		return p
	}
	rep.Before = phaseOf(phBefore, moveStart.Sub(beforeStart))
	rep.During = phaseOf(phDuring, moveEnd.Sub(moveStart))
	rep.After = phaseOf(phAfter, afterEnd.Sub(moveEnd))
	rep.Errors = errTotal
	if rep.Before.P50Ms > 0 {
		rep.P50Ratio = rep.During.P50Ms / rep.Before.P50Ms
	}
	if rep.Before.P99Ms > 0 {
		rep.P99Ratio = rep.During.P99Ms / rep.Before.P99Ms
	}
	if rep.Before.Throughput > 0 {
		rep.ThroughputRatio = rep.During.Throughput / rep.Before.Throughput
	}
	return nil
}

// relocate moves rangeID's replica from remove to add through the RelocateReplica RPC of a node that
// is neither (any node forwards to the leader), retrying retryable answers until timeout.
func relocate(ctx context.Context, c *cluster, timeout time.Duration, rangeID, add, remove uint64) (*pb.RangeDescriptor, int, []string, error) {
	addr := c.nodes[0].Addr
	for _, n := range c.nodes {
		if id := n.KV.NodeID(); id != add && id != remove {
			addr = n.Addr
			break
		}
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, 0, nil, err
	}
	defer conn.Close()
	sc := pb.NewShoalClient(conn)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var errs []string
	for attempt := 1; ; attempt++ {
		resp, err := sc.RelocateReplica(ctx, &pb.RelocateReplicaRequest{RangeId: rangeID, AddNodeId: add, RemoveNodeId: remove,
			Step: pb.RelocateStep_RELOCATE_ALL})
		if err == nil && resp.GetError() == nil {
			return resp.GetRange(), attempt, errs, nil
		}
		retry := true
		if err == nil {
			e := resp.GetError()
			err = fmt.Errorf("%s: %s", e.GetCode(), e.GetMessage())
			retry = e.GetCode() != pb.ErrorCode_INVALID_ARGUMENT
		}
		errs = append(errs, err.Error())
		if !retry || ctx.Err() != nil {
			return nil, attempt, errs, fmt.Errorf("relocate range %d n%d→n%d after %d attempt(s): %s", rangeID, remove, add, attempt, strings.Join(errs, "; "))
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// verify waits for every voter to apply the same index, digests every voter's copy, moves the
// leadership to the new node and reads a sample of keys through it.
func verify(ctx context.Context, c *cluster, cl *client.Client, records int64, valueBytes int, rep *Report) {
	mv, v := &rep.Move, &rep.Verify
	v.KeysExpected = records
	if !mv.Done {
		return
	}
	vs := mv.VotersTo
	// A write cut short when the workload stopped may still commit: digest until every voter's copy
	// was read at one and the same applied index.
	for try := 0; try < 20; try++ {
		_ = waitFor(ctx, 2*time.Minute, func() bool { return caughtUp(c, mv.RangeID, vs) })
		v.Replicas, v.DigestsMatch = nil, true
		stable := true
		for _, n := range vs {
			r := c.replicaOn(n, mv.RangeID)
			if r == nil {
				v.Replicas = append(v.Replicas, ReplicaDigest{Node: n, Error: "no local replica"})
				v.DigestsMatch = false
				continue
			}
			d := digest(n, r)
			v.Replicas = append(v.Replicas, d)
			if d.Applied != v.Replicas[0].Applied || strings.HasPrefix(d.Error, "applied index moved") {
				stable = false
			}
			if d.Error != "" || d.Keys != records || d.CRC64 != v.Replicas[0].CRC64 {
				v.DigestsMatch = false
			}
		}
		if stable {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}

	// Move the leadership to the new replica and read through it.
	err := waitFor(ctx, time.Minute, func() bool {
		if c.leaderOf(mv.RangeID) == mv.ToNode {
			return true
		}
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_ = cl.TransferLeader(tctx, mv.RangeID, mv.ToNode)
		time.Sleep(300 * time.Millisecond)
		return c.leaderOf(mv.RangeID) == mv.ToNode
	})
	v.LeaderMoved = err == nil
	if err != nil {
		v.LeaderError = err.Error()
	}
	nr := c.replicaOn(mv.ToNode, mv.RangeID)
	var reads0 uint64
	if nr != nil {
		reads0 = nr.Reads.Load()
	}
	rng := rand.New(rand.NewPCG(1, 2))
	v.SampleReads = 1000
	for i := 0; i < v.SampleReads; i++ {
		val, found, err := cl.Get(ctx, key(rng.Int64N(records)))
		switch {
		case err != nil:
			v.SampleErrors++
		case found && len(val) == valueBytes:
			v.SampleFound++
		}
	}
	if nr != nil {
		v.ReadsOnNewNode = nr.Reads.Load() - reads0
	}
	// The removed replica is garbage-collected by its node's queue once it learns of the change.
	_ = waitFor(ctx, 20*time.Second, func() bool { return c.replicaOn(mv.FromNode, mv.RangeID) == nil })
	v.OldReplicaGone = c.replicaOn(mv.FromNode, mv.RangeID) == nil
	v.OK = v.DigestsMatch && len(v.Replicas) == ReplicationFactor && v.LeaderMoved &&
		v.SampleErrors == 0 && v.SampleFound == v.SampleReads && v.ReadsOnNewNode >= uint64(v.SampleReads)
}

// WriteSummary prints the report for people.
func WriteSummary(w io.Writer, rep *Report) {
	s, mv := rep.Settings, rep.Move
	mib := func(b float64) float64 { return b / (1 << 20) }
	fmt.Fprintf(w, "range %d: %d records, %.0f MiB (keys+values), %d nodes, RF %d, %d threads, %.0f%% reads, %s\n",
		mv.RangeID, s.Records, mib(float64(rep.Load.Bytes)), s.Nodes, s.ReplicationFactor, s.Threads, 100*s.ReadFraction, s.Distribution)
	fmt.Fprintf(w, "load: %.1fs (%.1f MiB/s), replicas applied after %.1fs more, compactions settled in %.1fs\n",
		rep.Load.DurationS, mib(rep.Load.BytesPerSec), rep.Load.ReplicatedS, rep.Load.SettledS)
	status := "done"
	if !mv.Done {
		status = "FAILED: " + mv.Error
	}
	fmt.Fprintf(w, "move n%d→n%d (leader n%d): %s after %d attempt(s)\n", mv.FromNode, mv.ToNode, mv.LeaderNode, status, mv.Attempts)
	fmt.Fprintf(w, "  move time %.1fs; one snapshot of the range (%.1f MiB) at the configured %.1f MiB/s takes %.1fs: ratio %.2f\n",
		mv.DurationS, mib(float64(mv.RangeBytes)), mib(float64(mv.ConfiguredRateBytesSec)), mv.ExpectedS, mv.MoveTimeRatio)
	fmt.Fprintf(w, "  effective rate %.1f MiB/s of range moved per second (%.2f× configured)\n", mib(mv.EffectiveRateBytesSec), mv.EffectiveRateRatio)
	fmt.Fprintf(w, "  snapshots: %d accepted, %d applied by n%d, %.1f MiB sent in %.1fs of sending: %.1f MiB/s (%.2f× configured), peak second %.1f MiB/s (%.2f×)\n",
		mv.Snapshots, mv.SnapshotsApplied, mv.ToNode, mib(float64(mv.SnapshotBytes)), mv.SendingS, mib(mv.SendRateBytesSec), mv.SendRateRatio,
		mib(mv.PeakSendRateBytesSec), mv.PeakSendRateRatio)
	for _, e := range mv.Events {
		if strings.HasPrefix(e.What, fmt.Sprintf("n%d: snapshot applied", mv.ToNode)) {
			fmt.Fprintf(w, "    t=%.1fs %s\n", e.T, e.What)
		}
	}
	fmt.Fprintf(w, "foreground   %8s %10s %9s %9s %9s %7s\n", "seconds", "ops/s", "p50 ms", "p99 ms", "p99.9 ms", "errors")
	for _, p := range []struct {
		name string
		p    Phase
	}{{"before", rep.Before}, {"during", rep.During}, {"after", rep.After}} {
		fmt.Fprintf(w, "  %-10s %8.1f %10.0f %9.2f %9.2f %9.2f %7d\n", p.name, p.p.DurationS, p.p.Throughput, p.p.P50Ms, p.p.P99Ms, p.p.P999Ms, p.p.Errors)
	}
	fmt.Fprintf(w, "during/before: p99 %.2f×, p50 %.2f×, throughput %.2f×; errors %d in all\n", rep.P99Ratio, rep.P50Ratio, rep.ThroughputRatio, rep.Errors)
	fmt.Fprintf(w, "peak memory of the process (4 nodes + workload): %.1f GiB\n", float64(rep.MaxRSSBytes)/(1<<30))
	v := rep.Verify
	ok := "OK"
	if !v.OK {
		ok = "FAILED"
	}
	fmt.Fprintf(w, "verify %s: digests match %v over %d replicas (%d keys expected), leadership on n%d %v, %d/%d sample reads found (%d served by n%d), old replica removed %v\n",
		ok, v.DigestsMatch, len(v.Replicas), v.KeysExpected, mv.ToNode, v.LeaderMoved, v.SampleFound, v.SampleReads, v.ReadsOnNewNode, mv.ToNode, v.OldReplicaGone)
}
