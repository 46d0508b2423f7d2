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
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/shoaldb/shoal/autopilot/policy"
	"github.com/shoaldb/shoal/bench/benchutil"
	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/kv"
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
	// RateBytesPerSec is every node's snapshot send rate (0: transport.DefaultSnapshotRateBytesPerSec).
	RateBytesPerSec int64
	// Threads are the workload's closed-loop workers.
	Threads int
	// Warmup runs the workload unmeasured; Before measures the baseline; After keeps the workload
	// running once the move is done. A negative Warmup or After means none.
	Warmup, Before, After time.Duration
	// MoveTimeout bounds the move (all RelocateReplica attempts).
	MoveTimeout time.Duration
	// CacheBytes is each node's block cache (0: the storage default).
	CacheBytes int64
	// Progress receives progress lines; nil for none.
	Progress io.Writer
}

func (o *Options) defaults() error {
	if o.Dir == "" || o.Out == "" {
		return errors.New("move: Dir and Out are required")
	}
	def := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.SizeBytes, DefaultSizeBytes)
	def(&o.RateBytesPerSec, transport.DefaultSnapshotRateBytesPerSec)
	for _, d := range []struct {
		v *time.Duration
		d time.Duration
	}{{&o.Warmup, DefaultWarmup}, {&o.Before, DefaultBefore}, {&o.After, DefaultAfter}, {&o.MoveTimeout, DefaultMoveTimeout}} {
		if *d.v == 0 {
			*d.v = d.d
		}
	}
	if o.ValueBytes == 0 {
		o.ValueBytes = DefaultValueBytes
	}
	if o.Threads == 0 {
		o.Threads = DefaultThreads
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
	// apart counts as one stretch); SendRate is SnapshotBytes over it, PeakSendRate the highest
	// one-second rate: the rate limiter's view, which should not exceed the configured rate.
	SendingS             float64 `json:"sending_s"`
	SendRateBytesSec     float64 `json:"send_rate_bytes_per_sec"`
	SendRateRatio        float64 `json:"send_rate_ratio"`
	PeakSendRateBytesSec float64 `json:"peak_send_rate_bytes_per_sec"`
	PeakSendRateRatio    float64 `json:"peak_send_rate_ratio"`
	WriteStalls          int64   `json:"write_stalls"`
	// Events are snapshots accepted and applied, in order.
	Events []Event `json:"events"`
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

func phaseOf(h *hdrhistogram.Histogram, errs int64, d time.Duration) Phase {
	p := Phase{DurationS: d.Seconds(), Ops: h.TotalCount(), Errors: errs, P50Ms: benchutil.Quantile(h, 50),
		P99Ms: benchutil.Quantile(h, 99), P999Ms: benchutil.Quantile(h, 99.9), MaxMs: benchutil.UsToMs(h.Max())}
	if p.DurationS > 0 {
		p.Throughput = float64(p.Ops) / p.DurationS
	}
	return p
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

// Point is one second of the workload. A stalled process delays the sampler: IntervalS is the time
// the point covers (normally 1 s), and rates are over it.
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

func key(i int64) []byte { return fmt.Appendf(nil, "%s%0*d", keyPrefix, keyDigits, i) }

// progress prints progress lines from a goroutine of its own and drops them when it lags: a write
// to a terminal or file can block (dirty-page throttling while a node writes a large snapshot), and
// the sampler that reports progress must not stall with it.
type progress struct {
	lines   chan string
	printed chan struct{}
}

func newProgress(w io.Writer) *progress {
	p := &progress{lines: make(chan string, 64), printed: make(chan struct{})}
	go func() {
		defer close(p.printed)
		for l := range p.lines {
			if w != nil {
				io.WriteString(w, l)
			}
		}
	}()
	return p
}

func (p *progress) printf(format string, args ...any) {
	select {
	case p.lines <- fmt.Sprintf("\r\033[Kmove: "+format, args...):
	default:
	}
}

func (p *progress) done() { p.lines <- "\n" }

func (p *progress) close() {
	close(p.lines)
	<-p.printed
}

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
	p := newProgress(opts.Progress)
	defer p.close()
	logf, err := os.Create(filepath.Join(opts.Out, "nodes.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cfg := benchutil.NodeConfig{
		KV:                kv.Config{RangeMaxBytes: 1 << 40, QueueInterval: time.Second}, // no size splits: the range must stay whole
		Transport:         transport.Config{SnapshotRateBytesPerSec: opts.RateBytesPerSec},
		HeartbeatInterval: 500 * time.Millisecond,
		Logger:            slog.New(slog.NewTextHandler(logf, &slog.HandlerOptions{Level: slog.LevelInfo})),
	}
	p.printf("starting %d nodes in %s", Nodes, opts.Dir)
	bc, err := benchutil.StartCluster(ctx, opts.Dir, Nodes, benchutil.NodeSpec{CacheBytes: opts.CacheBytes, Config: cfg})
	if err != nil {
		return nil, err
	}
	defer bc.Stop()
	c := cluster{bc}
	cl, err := client.New(ctx, client.Config{Addrs: c.Addrs()})
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	if err := prepare(ctx, c, cl, p); err != nil {
		return nil, err
	}
	if err := load(ctx, cl, opts, records, rep, p); err != nil {
		return nil, err
	}
	p.done()
	if err := pickMove(ctx, c, cl, rep, p); err != nil {
		return nil, err
	}
	if err := measure(ctx, c, cl, opts, records, rep, p); err != nil {
		return nil, err
	}
	p.done()
	p.printf("verifying the new replica")
	verify(ctx, c, cl, records, opts.ValueBytes, rep)
	p.done()
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		rep.MaxRSSBytes = ru.Maxrss << 10 // KiB on Linux
	}
	if err := writePlot(rep, filepath.Join(opts.Out, "timeline.png")); err != nil {
		return nil, fmt.Errorf("plot: %w", err)
	}
	rep.Plots = []string{"timeline.png"}
	return rep, benchutil.WriteJSON(filepath.Join(opts.Out, "report.json"), rep)
}

// prepare switches the autopilot off once the ranges are three-way replicated (only the replicate
// policy may act until then), so that nothing but this benchmark changes the range: the autopilot
// would remove the move's learner.
func prepare(ctx context.Context, c cluster, cl *client.Client, p *progress) error {
	p.printf("switching autopilot policies off")
	for _, name := range []string{policy.NameRebalance, policy.NameLoadSplit, policy.NameMerge} {
		if err := setPolicy(ctx, cl, name, false); err != nil {
			return err
		}
	}
	p.printf("waiting for %d-way replication", ReplicationFactor)
	if err := benchutil.WaitFor(ctx, 2*time.Minute, func() bool { return benchutil.FullyReplicated(ctx, cl, ReplicationFactor) }); err != nil {
		return fmt.Errorf("ranges not %d-way replicated: %w", ReplicationFactor, err)
	}
	if err := setPolicy(ctx, cl, policy.NameReplicate, false); err != nil {
		return err
	}
	time.Sleep(2 * time.Second) // the autopilot applies switches every second
	if !benchutil.FullyReplicated(ctx, cl, ReplicationFactor) {
		return errors.New("ranges changed while the autopilot was being switched off")
	}
	if urs, err := cl.UserRanges(ctx); err != nil || len(urs) != 1 {
		return fmt.Errorf("want one user range, have %d (%v)", len(urs), err)
	}
	p.done()
	return nil
}

func setPolicy(ctx context.Context, cl *client.Client, name string, on bool) error {
	var err error
	werr := benchutil.WaitFor(ctx, time.Minute, func() bool {
		err = cl.SetPolicy(ctx, name, on)
		return err == nil
	})
	if werr != nil {
		return fmt.Errorf("switch policy %s %v: %v (%w)", name, on, err, werr)
	}
	return nil
}

// pickMove waits until every replica applied the load and compactions settled, then picks the move:
// a voter other than the leader goes to the node without a replica.
func pickMove(ctx context.Context, c cluster, cl *client.Client, rep *Report, p *progress) error {
	urs, err := cl.UserRanges(ctx)
	if err != nil {
		return err
	}
	if len(urs) != 1 {
		return fmt.Errorf("the range split during the load: %d user ranges", len(urs))
	}
	desc := urs[0].GetDesc()
	mv := &rep.Move
	mv.RangeID, mv.VotersFrom, mv.ConfiguredRateBytesSec = desc.GetRangeId(), voters(desc), rep.Settings.ConfiguredRateBytesSec
	t0 := time.Now()
	p.printf("waiting until every replica applied the load")
	if err := benchutil.WaitFor(ctx, 5*time.Minute, func() bool { return c.caughtUp(mv.RangeID, mv.VotersFrom) }); err != nil {
		return fmt.Errorf("replicas did not apply the load: %w", err)
	}
	rep.Load.ReplicatedS = time.Since(t0).Seconds()
	t0 = time.Now()
	p.printf("waiting for compactions to settle")
	for quiet := 0; quiet < 3 && time.Since(t0) < 3*time.Minute && ctx.Err() == nil; time.Sleep(500 * time.Millisecond) {
		quiet++
		if !c.settled() {
			quiet = 0
		}
	}
	rep.Load.SettledS = time.Since(t0).Seconds()
	p.done()
	mv.LeaderNode = c.leaderOf(mv.RangeID)
	if mv.LeaderNode == 0 {
		return fmt.Errorf("range %d has no leader", mv.RangeID)
	}
	if r := c.replicaOn(mv.LeaderNode, mv.RangeID); r != nil {
		rep.Load.RangeApproxB = r.ApproximateBytes()
	}
	for _, v := range mv.VotersFrom {
		if v != mv.LeaderNode && mv.FromNode == 0 {
			mv.FromNode = v
		}
	}
	for _, n := range c.nodes() {
		if id := n.KV.NodeID(); !holds(desc, id, false) {
			mv.ToNode = id
		}
	}
	if mv.FromNode == 0 || mv.ToNode == 0 {
		return fmt.Errorf("no move to make: range %d has replicas on %v", mv.RangeID, mv.VotersFrom)
	}
	return nil
}
