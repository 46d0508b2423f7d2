package scenario

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/shoaldb/shoal/autopilot/decisions"
	"github.com/shoaldb/shoal/autopilot/policy"
	"github.com/shoaldb/shoal/bench/benchutil"
	"github.com/shoaldb/shoal/kv"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
	"github.com/shoaldb/shoal/storage/emudisk"
)

// Scenarios of issue 10 (docs/design/incremental-join.md): a fourth node joins a loaded three-node
// cluster, with each join strategy (chapter 2 of the Papaioannou thesis, Figures 2.3–2.7).

// joinLink models each node's network link in the join scenarios: every node sends snapshots at most
// this fast and receives them at most this fast from all senders together. It is slow enough that
// moving the new node's share takes a while on one machine, as streaming tens of GB does on a real
// cluster; and since the receiver's link bounds a parallel join as much as one sender at full speed
// bounds an incremental one, the strategies differ in scheduling, not bandwidth (the chapter's point
// in §2.2: sequential sessions need not take longer if one sender can fill the receiver's link).
const joinLink = 4 << 20

// joinDevice makes the nodes disk-bound (a miss costs a random read on a device with few IOPS), so
// that a fourth node adds capacity even though every node shares the same two CPU cores: 250
// random-read IOPS, the chapter's disk (at 600 IOPS with the leaderships balanced the three
// in-process nodes were bound by the two cores and a fourth added none, measured: 0.78-0.82 of the
// pre-join throughput after the join). Sequential
// reads (a snapshot streamed to the new node, a compaction) get the kernel's default readahead of
// 128 KiB: without it every 4 KiB block of a streamed range is an operation of its own, which a real
// disk with a page cache never pays, and a move would cost its sender ~40x the IOPS it does.
var joinDevice = emudisk.Options{
	NoPageCache:      true,
	ReadBytesPerSec:  64 << 20,
	WriteBytesPerSec: 64 << 20,
	IOPS:             250,
	Latency:          500 * time.Microsecond,
	ReadaheadBytes:   128 << 10,
}

func joinStrategy(s string, atEnd bool, sendRate int64) func(*kv.Config) {
	return func(c *kv.Config) {
		c.Autopilot.Policies.Join.Strategy = s
		c.Autopilot.Policies.Join.ServeAtEnd = atEnd
		c.SnapshotRateBytesPerSec = sendRate
		c.SnapshotRecvRateBytesPerSec = joinLink
	}
}

// withHints has a variant's nodes run with tune applied to their read-hints settings.
func withHints(f func(*kv.Config), tune func(*kv.HintsConfig)) func(*kv.Config) {
	return func(c *kv.Config) {
		f(c)
		tune(&c.Hints)
	}
}

// withoutRecvLimit lifts the receiver's limit: a parallel join then gets the sum of its senders'
// rates, as Cassandra's bootstrap does (its stream throttle is per sender, outbound) and as the
// chapter's parallel join did (9 min against the incremental join's 26).
func withoutRecvLimit(f func(*kv.Config)) func(*kv.Config) {
	return func(c *kv.Config) {
		f(c)
		c.SnapshotRecvRateBytesPerSec = 0
	}
}

// withJoinOrder has a variant's joins move ranges in the given order.
func withJoinOrder(f func(*kv.Config), order string) func(*kv.Config) {
	return func(c *kv.Config) {
		f(c)
		c.Autopilot.Policies.Join.Order = order
	}
}

var (
	hintsOff      = func(h *kv.HintsConfig) { h.Off = true }
	hintsQuarter  = func(h *kv.HintsConfig) { h.Fraction = 0.25 }
	hintsCPUOnly  = func(h *kv.HintsConfig) { h.DiskWeight = -1 }
	hintsNoBudget = func(h *kv.HintsConfig) { h.DiskReadShare = -1 }
	hintsBudget15 = func(h *kv.HintsConfig) { h.DiskReadShare = 0.15 }
)

const smallLBase = 1 << 20

func joinVariants() []Variant {
	return []Variant{
		{Name: "incremental", KV: joinStrategy(policy.JoinIncremental, false, joinLink)},
		{Name: "parallel", KV: joinStrategy(policy.JoinParallel, false, joinLink)},
		// The chapter's controls: parallel with each sender throttled to a third of the link (the
		// same aggregate as one incremental sender), and sequential moves that serve only at the end.
		{Name: "parallel-throttled", KV: joinStrategy(policy.JoinParallel, false, joinLink/3)},
		{Name: "sequential-at-end", KV: joinStrategy(policy.JoinIncremental, true, joinLink)},
		// Without read hints: replaying the leaders' reads keeps the followers' caches warm, but on
		// a disk-bound node each replayed miss is a disk read too.
		{Name: "incremental-nohints", KV: withHints(joinStrategy(policy.JoinIncremental, false, joinLink), hintsOff), Optional: true},
		{Name: "parallel-nohints", KV: withHints(joinStrategy(policy.JoinParallel, false, joinLink), hintsOff), Optional: true},
		// Read hints adapted to the CPU load only (the code before session 7): every replay on
		// saturated disks.
		{Name: "incremental-cpuload", KV: withHints(joinStrategy(policy.JoinIncremental, false, joinLink), hintsCPUOnly), Optional: true},
		{Name: "parallel-cpuload", KV: withHints(joinStrategy(policy.JoinParallel, false, joinLink), hintsCPUOnly), Optional: true},
		{Name: "incremental-hints25", KV: withHints(joinStrategy(policy.JoinIncremental, false, joinLink), hintsQuarter), Optional: true},
		// The chapter's order (key order) instead of ours (hottest first): hottest first hands the
		// newcomer, whose cache is the coldest, the busiest ranges first.
		{Name: "incremental-keyorder", KV: withJoinOrder(joinStrategy(policy.JoinIncremental, false, joinLink), policy.OrderKey), Optional: true},
		// The chapter's rates: each sender at the link's rate, the receiver unbounded (3x the
		// incremental join's aggregate). Our parallel baseline is bound by the receiver's link.
		{Name: "parallel-recv-unbounded", KV: withoutRecvLimit(joinStrategy(policy.JoinParallel, false, joinLink)), Optional: true},
		{Name: "parallel-hints25", KV: withHints(joinStrategy(policy.JoinParallel, false, joinLink), hintsQuarter), Optional: true},
		// Replays without the budget on the disk reads they cause (the code before session 12).
		{Name: "incremental-nobudget", KV: withHints(joinStrategy(policy.JoinIncremental, false, joinLink), hintsNoBudget), Optional: true},
		{Name: "parallel-nobudget", KV: withHints(joinStrategy(policy.JoinParallel, false, joinLink), hintsNoBudget), Optional: true},
		// A control: the fourth node starts, but the join policy is off, so it receives nothing; what
		// the dip and SLO measures show over the join's window when no join happens (the old nodes'
		// own flushes and compactions, the machine).
		{Name: "no-join", KV: joinStrategy(policy.JoinIncremental, false, joinLink), PolicyOff: true, Optional: true},
		// A 1 MiB base level: the scenario's stores (~22 MB of tables each) get L4-L6 instead of L6
		// alone. Measured once (session 22): the L4->L6 compactions still spanned every key, and
		// that run's third node never got its leaderships (docs/bench-join.md).
		{Name: "no-join-lbase", KV: joinStrategy(policy.JoinIncremental, false, joinLink), PolicyOff: true, LBaseMaxBytes: smallLBase, Optional: true},
		{Name: "incremental-lbase", KV: joinStrategy(policy.JoinIncremental, false, joinLink), LBaseMaxBytes: smallLBase, Optional: true},
		{Name: "parallel-lbase", KV: joinStrategy(policy.JoinParallel, false, joinLink), LBaseMaxBytes: smallLBase, Optional: true},
		// A looser budget: replays may cause 15 % of the disk's block misses instead of the default 5 %.
		{Name: "incremental-budget15", KV: withHints(joinStrategy(policy.JoinIncremental, false, joinLink), hintsBudget15), Optional: true},
	}
}

func joinBase() Scenario {
	dev := joinDevice
	return Scenario{
		Nodes: 3, Records: 160000, Duration: 120 * time.Second, Threads: 16, ValueBytes: 256,
		CacheBytes: 16 << 20, Splits: joinSplits, Policy: policy.NameJoin, Warmup: 10 * time.Second, Device: &dev,
		Pin:      map[string]bool{policy.NameRebalance: false, policy.NameMerge: false, policy.NameLoadSplit: false},
		Variants: joinVariants(),
	}
}

// joinSplits is the number of user ranges. Each range is a unit of transfer (the chapter's Cassandra
// streams many small token ranges per session); 24 ranges of ~1.7 MB make each snapshot ~425 block
// reads on the sender's emulated disk.
const joinSplits = 24

func init() {
	b := joinBase()
	b.Name, b.ReadFraction = "join", 0.95
	b.Description = "3 nodes, 160k records (~3x the block cache), 24 ranges (leaderships balanced at t=0), YCSB B zipfian; at t=30s a 4th node joins: incremental, parallel, parallel throttled to the incremental rate, sequential serving at the end"
	b.Events = []Event{
		{At: 0, What: "balance leaders", Do: BalanceLeaders()},
		{At: 30 * time.Second, What: joinLabel, Do: JoinSpareNode(), Task: true},
	}
	Register(b)
	a := b
	a.Name, a.ReadFraction = "join-a", 0.5
	a.Description = "as join, with YCSB A (50/50)"
	Register(a)
	// join-long is the chapter's proportions: its joins last 9-26 minutes against 2-minute bins,
	// join's about 10 s against 10-s bins, so a join's cost there is a bin or two and the machine's
	// noise. Four times the data makes every range 4x larger and the join ~35 s: several bins.
	// The node joins at 90 s of 360 s: the old nodes' first wave of compactions after the load
	// starts 35-50 s into the run and then runs nearly continuously (session 16, the no-join
	// control); a join at 45 s of 180 s met that wave's onset, and its dip measured the wave.
	l := b
	l.Name, l.Records, l.Duration = "join-long", 4*b.Records, 360*time.Second
	l.Description = "as join with 4x the data (640k records, ~10x the block cache; ranges of ~7 MB) over 360 s, the 4th node starting at t=90s (after the old nodes' compactions have begun): a join of several 10-s bins, as the chapter's last many 2-minute bins"
	l.Events = []Event{b.Events[0], {At: 90 * time.Second, What: joinLabel, Do: JoinSpareNode(), Task: true}}
	Register(l)
}

// joinLabel is the label of the event (or, for the surge, the mark) of the join that joinReport measures.
const joinLabel = "node joins"

// joinTrace is what the join's actions observed, for joinReport: the scenario's actions run inside
// the runner (run.go), which hands joinReport only the series and the events, so the actions leave
// the finer facts here. The runs of one invocation are sequential; each run's first join action
// starts a fresh trace and joinReport takes it.
type joinTrace struct {
	mu sync.Mutex
	// fired is when the trace's first action fired (its event's T in the run's clock), so that
	// absolute times convert to the run's seconds.
	fired      time.Time
	firedLabel string
	// nodeStart is when the new node was started (the join's start: what the report counts from);
	// nodeUp when it was running.
	nodeStart, nodeUp time.Time
	// trigger and triggerWhy: the surge controller's decision to add the node.
	trigger, violatedSince time.Time
	triggerWhy             string
	// joinEnd is when the join was done (or the run ended); done is closed when its action is over.
	joinEnd time.Time
	done    chan struct{}
	// firstLead is when the new node was first seen leading a user range (polled every 50 ms).
	firstLead time.Time
	// rec is the join record as last seen; decisions the incremental_join decisions of the join.
	recStarted, recFirst, recDone time.Time
	decisions                     []JoinStep
	// load is the extra clients of the surge (their operations join the run's series).
	load *loadGen
}

var traces struct {
	sync.Mutex
	cur *joinTrace
}

func newTrace(label string) *joinTrace {
	t := &joinTrace{fired: time.Now(), firedLabel: label, done: make(chan struct{})}
	traces.Lock()
	traces.cur = t
	traces.Unlock()
	return t
}

func takeTrace() *joinTrace {
	traces.Lock()
	defer traces.Unlock()
	t := traces.cur
	traces.cur = nil
	return t
}

// BalanceLeaders spreads the user ranges' leaderships evenly over the nodes (range i in key order to
// node i mod n), as the chapter's cluster is balanced before the join: splits leave every range led by
// its parent's leader, and rebalance is pinned off in the join scenarios. It runs at the start of
// the warm-up, in rounds until every range is led by its node or balanceFor has passed: just after
// the load a transfer can fail while its target catches up (session 17: one run's third node took
// none of its eight, so the join measured a cluster with one node idle and one disk-bound). A
// cluster still unbalanced at the end is an error, so the run's report says so.
func BalanceLeaders() Action {
	return func(ctx context.Context, env *Env) (string, error) {
		deadline := time.Now().Add(balanceFor)
		moved, failed, rounds := 0, 0, 0
		var lastErr error
		for {
			rounds++
			todo, err := leaderPlan(ctx, env)
			if err != nil {
				return "", err
			}
			// The nodes' own view, as the run's series reports it (n1 first).
			perNode, _ := env.c.userReplicas()
			if len(todo) == 0 {
				return fmt.Sprintf("%d leaderships moved in %d rounds (%d transfers failed); leaders per node %v", moved, rounds, failed, perNode), nil
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return "", fmt.Errorf("leaders not balanced after %v: %d ranges not on their node, leaders per node %v; %d transfers failed, the last: %v",
					balanceFor, len(todo), perNode, failed, lastErr)
			}
			for _, m := range todo {
				if err := env.Client.TransferLeader(ctx, m.rangeID, m.to); err != nil {
					failed++
					lastErr = err
					continue
				}
				moved++
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

// balanceFor bounds BalanceLeaders: well inside the join scenarios' 30-90 s before the join.
const balanceFor = 25 * time.Second

type leaderMove struct{ rangeID, to uint64 }

// leaderPlan lists the transfers that would balance the user ranges' leaderships: range i in key
// order to its i mod n-th voter.
func leaderPlan(ctx context.Context, env *Env) ([]leaderMove, error) {
	rs, err := env.Client.Ranges(ctx)
	if err != nil {
		return nil, err
	}
	var user []*pb.RangeStatus
	for _, r := range rs {
		if r.GetDesc().GetRangeId() != replica.MetaRangeID {
			user = append(user, r)
		}
	}
	sort.Slice(user, func(i, j int) bool {
		return bytes.Compare(user[i].GetDesc().GetStartKey(), user[j].GetDesc().GetStartKey()) < 0
	})
	var todo []leaderMove
	for i, r := range user {
		var voters []uint64
		for _, rd := range r.GetDesc().GetReplicas() {
			if !rd.Learner {
				voters = append(voters, rd.NodeId)
			}
		}
		if len(voters) == 0 {
			continue
		}
		sort.Slice(voters, func(a, b int) bool { return voters[a] < voters[b] })
		if to := voters[i%len(voters)]; to != r.LeaderNodeId {
			todo = append(todo, leaderMove{rangeID: r.GetDesc().GetRangeId(), to: to})
		}
	}
	return todo, nil
}

// JoinSpareNode starts one more node and returns when the autopilot has completed its join (or the
// run ends).
func JoinSpareNode() Action {
	return func(ctx context.Context, env *Env) (string, error) {
		tr := newTrace(joinLabel)
		defer close(tr.done)
		return joinNode(ctx, env, tr)
	}
}

// joinNode starts the spare node, follows its join (first leadership, join record) until it is done
// or ctx ends, and collects the join's decisions.
func joinNode(ctx context.Context, env *Env, tr *joinTrace) (string, error) {
	start := time.Now()
	tr.mu.Lock()
	tr.nodeStart = start
	tr.mu.Unlock()
	i, err := env.c.addNode(ctx)
	if err != nil {
		return "", fmt.Errorf("start the new node: %w", err)
	}
	tr.mu.Lock()
	tr.nodeUp = time.Now()
	tr.mu.Unlock()
	id := env.c.nodes[i].kv.NodeID()
	// The first leadership, seen on the node itself every 50 ms (the series samples once a second).
	pollCtx, stopPoll := context.WithCancel(ctx)
	defer stopPoll()
	go func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-pollCtx.Done():
				return
			case <-t.C:
			}
			if l := env.c.userLeaders(); i < len(l) && l[i] > 0 {
				tr.mu.Lock()
				tr.firstLead = time.Now()
				tr.mu.Unlock()
				return
			}
		}
	}()
	desc := ""
	for desc == "" {
		select {
		case <-ctx.Done():
			desc = fmt.Sprintf("n%d still joining after %.1fs", id, time.Since(start).Seconds())
		case <-time.After(250 * time.Millisecond):
		}
		if desc != "" {
			break
		}
		nodes, err := env.Client.Nodes(ctx)
		if err != nil {
			continue
		}
		for _, n := range nodes {
			j := n.GetJoin()
			if n.GetDesc().GetNodeId() != id || j == nil {
				continue
			}
			tr.mu.Lock()
			tr.recStarted = unixOrZero(j.StartedUnixNanos)
			tr.recFirst = unixOrZero(j.FirstServedUnixNanos)
			tr.recDone = unixOrZero(j.DoneUnixNanos)
			tr.mu.Unlock()
			if j.DoneUnixNanos != 0 {
				desc = fmt.Sprintf("n%d joined (%s): %d replicas, leads %d, in %.1fs", id, j.Strategy, j.Held, j.Leading,
					time.Unix(0, j.DoneUnixNanos).Sub(start).Seconds())
				if j.FirstServedUnixNanos != 0 {
					desc += fmt.Sprintf(", first range served after %.1fs", time.Unix(0, j.FirstServedUnixNanos).Sub(start).Seconds())
				}
			}
		}
	}
	tr.mu.Lock()
	tr.joinEnd = time.Now()
	tr.mu.Unlock()
	// The autopilot's decisions during the join, for the timeline (the run may be over: a short deadline of its own).
	dctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if ds, err := decisionsSince(dctx, env, start); err == nil {
		var steps []JoinStep
		for _, d := range ds {
			steps = append(steps, stepOf(d, start))
		}
		tr.mu.Lock()
		tr.decisions = steps
		tr.mu.Unlock()
	}
	return desc, nil
}

func unixOrZero(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

func round1(x float64) float64 { return math.Round(x*10) / 10 }

// JoinStep is one autopilot decision during the join, at its time from the join's start.
type JoinStep struct {
	AtS      float64  `json:"at_s"`
	Policy   string   `json:"policy"`
	Operator string   `json:"operator"`
	Range    uint64   `json:"range,omitempty"`
	Reason   string   `json:"reason"`
	Status   string   `json:"status"`
	Notes    []string `json:"notes,omitempty"`
	// Steps: how long each step call took (the decision log's timings).
	Steps []decisions.StepTiming `json:"steps,omitempty"`
}

// JoinReport is the chapter's evaluation of one join (§2.3; docs/bench-join.md has the definitions):
//
//   - Dip: the chapter compares the mean throughput of consecutive 2-minute bins of the join with
//     the mean of the 5 minutes before it, over joins of 9–26 minutes. Ours are ~1–2 minutes, so the
//     bins are DipBinS (10 s, within the chapter's 8–22 % of a join) long, consecutive from the
//     join's start; the pre-join mean is that of the 15 s before the join (the chapter: the 5 minutes
//     before it). DipNoise is the worst bin of the steady state (warm-up to the join, counted back
//     from the join) against that mean, and at most 0: the noise floor of the measure.
//     DipBeyondNoise is WorstDip less DipNoise: how much worse the join's worst bin was than the
//     steady state's worst bin of the same run (each the worst of about two bins; WorstDip itself
//     when no steady bin fell below the reference), the figure whose mean over repetitions
//     estimates the join's own dip.
//   - SLO (chapter, eq. 2.1–2.3): 2-second windows of the mean response time against a target;
//     the count of windows over it and the sum of the excess, from the join's first to its last
//     window. Our target is ChapterTargetFactor (1.25: 50 ms over the chapter's 40 ms) × the
//     steady-state mean latency. The variant: 1-second windows of p99 against SLOFactor ×
//     the steady-state p99. Both are also summed from the join's start to the run's end (…ToEnd),
//     which does not reward a join for being short.
type JoinReport struct {
	// JoinStartS is when the join started (the new node was started), in the run's seconds.
	JoinStartS float64 `json:"join_start_s"`
	// TriggerWhy is the surge controller's reason for adding the node (surge variants); TriggerS when
	// it decided, ViolatedSinceS the start of the first of the violating windows it acted on.
	TriggerWhy     string  `json:"trigger_why,omitempty"`
	TriggerS       float64 `json:"trigger_s,omitempty"`
	ViolatedSinceS float64 `json:"violated_since_s,omitempty"`
	// NodeUpS, PolicyStartS: from the join's start, until the node ran and until the autopilot
	// recorded the join's start.
	NodeUpS      float64 `json:"node_up_s"`
	PolicyStartS float64 `json:"policy_start_s"`
	// FirstServedS: from the join's start until the new node first led a user range (-1: never).
	FirstServedS float64 `json:"first_served_s"`
	// FullShareS: from the join's start until the end of the first second in which the new node led
	// as many user ranges as it did when the join ended (its share of leaderships: the capacity the
	// join brings), to the second (-1: it led none).
	FullShareS float64 `json:"full_share_s"`
	// FirstServedRecordS: the same by the join record (written by the autopilot's next round).
	FirstServedRecordS float64 `json:"first_served_record_s"`
	JoinS              float64 `json:"join_s"`
	// WindowEndS is where the join's window ends, in the run's seconds: the join's scores (dip,
	// SLO windows, throughput ratio) count the seconds from JoinStartS to it.
	WindowEndS float64 `json:"window_end_s,omitempty"`
	Done       bool    `json:"done"`

	PreJoinThroughput float64 `json:"pre_join_throughput"`
	DipBinS           int     `json:"dip_bin_s"`
	// WorstDip is e.g. -0.13: the worst bin of the join was 13 % below the pre-join mean.
	WorstDip float64   `json:"worst_dip"`
	DipBins  []float64 `json:"dip_bins"` // every bin of the join, relative to the pre-join mean
	DipNoise float64   `json:"dip_noise"`
	// DipBeyondNoise is WorstDip − DipNoise (negative: the join's worst bin was the worse).
	DipBeyondNoise float64 `json:"dip_beyond_noise"`
	// WorstDip5sSliding is the previous definition (the worst of every 5-s window), for comparison.
	WorstDip5sSliding float64 `json:"worst_dip_5s_sliding"`
	ThroughputRatio   float64 `json:"throughput_ratio"` // mean throughput during the join / before

	SteadyMeanMs         float64 `json:"steady_mean_ms"`
	ChapterTargetMs      float64 `json:"chapter_target_ms"`
	ChapterTargetFactor  float64 `json:"chapter_target_factor"`
	ChapterWindows       int     `json:"chapter_windows"` // 2-s windows of the join
	ChapterViolations    int     `json:"chapter_violations"`
	ChapterExcessMs      float64 `json:"chapter_excess_ms"`
	ChapterViolationsEnd int     `json:"chapter_violations_to_end"`
	ChapterExcessEndMs   float64 `json:"chapter_excess_to_end_ms"`

	SLOThresholdMs      float64 `json:"slo_threshold_ms"`
	SLOFactor           float64 `json:"slo_factor"`
	ViolatingWindows    int     `json:"violating_windows"`
	ExcessMs            float64 `json:"excess_ms"`
	ViolatingWindowsEnd int     `json:"violating_windows_to_end"`
	ExcessEndMs         float64 `json:"excess_to_end_ms"`

	PostJoinRatio float64 `json:"post_join_ratio"` // throughput after the join / before

	// OldNodes are the cache and compaction figures of the nodes that were there before the join.
	OldNodes []OldNodeFigures `json:"old_nodes,omitempty"`
	Timeline []JoinStep       `json:"timeline,omitempty"`
}

const (
	dipBinS             = 10
	dipWindow           = dipBinS // the runner prints it
	sloFactor           = 1.5
	chapterTargetFactor = 1.25
	chapterWindowS      = 2
	preJoinS            = 15
)

// windowsOver counts the seconds from from to to (a second counts when its midpoint lies in the
// window) whose p99 is above thresholdMs, and sums their excess over it.
func windowsOver(series []Point, thresholdMs, from, to float64) (n int, excessMs float64) {
	for _, p := range series {
		if mid := p.T - 0.5; mid < from || mid >= to || p.P99Ms <= thresholdMs {
			continue
		}
		n++
		excessMs += p.P99Ms - thresholdMs
	}
	return n, excessMs
}

// joinReport measures the join of the run's trace (or, without one, the first "node joins" event).
// For a surge it also adds the surge clients' operations to the series, the join to the events and
// recomputes the task window. nodes is the number of nodes before the join.
func joinReport(rr *RunReport, perSec []*hdrhistogram.Snapshot, warmup time.Duration, nodes int) *JoinReport {
	tr := takeTrace()
	var fired *EventMark
	for i := range rr.Events {
		if tr != nil && rr.Events[i].Label == tr.firedLabel {
			fired = &rr.Events[i]
			break
		}
	}
	if tr == nil || fired == nil {
		return nil
	}
	select { // the surge's controller may still be collecting the join's decisions
	case <-tr.done:
	case <-time.After(10 * time.Second):
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	// Absolute time → the run's seconds.
	runS := func(t time.Time) float64 { return fired.T + t.Sub(tr.fired).Seconds() }
	if tr.load != nil {
		tr.load.stop()
		tr.load.mergeInto(rr, perSec, fired.T)
	}
	if tr.nodeStart.IsZero() {
		return nil // the surge never triggered a join
	}
	start := runS(tr.nodeStart)
	end := fired.EndT
	if !tr.joinEnd.IsZero() {
		end = runS(tr.joinEnd)
	}
	if tr.load != nil { // the surge's action is not the join: mark the join itself
		m := EventMark{T: start, EndT: end, What: strings.TrimSpace(joinLabel + " " + tr.triggerWhy), Label: joinLabel, Task: true}
		rr.Events = append(rr.Events, m)
		for i := range rr.Events {
			if rr.Events[i].Label != joinLabel {
				rr.Events[i].Task = false
			}
		}
		rr.Task = taskWindow(rr, perSec, warmup)
	}
	since := func(t time.Time) float64 {
		if t.IsZero() {
			return -1
		}
		return round1(t.Sub(tr.nodeStart).Seconds())
	}
	jr := &JoinReport{JoinStartS: round1(start), TriggerWhy: tr.triggerWhy, NodeUpS: since(tr.nodeUp),
		PolicyStartS: since(tr.recStarted), FirstServedS: since(tr.firstLead), FirstServedRecordS: since(tr.recFirst),
		Done: !tr.recDone.IsZero(), DipBinS: dipBinS, SLOFactor: sloFactor, ChapterTargetFactor: chapterTargetFactor,
		Timeline: tr.decisions}
	if !tr.trigger.IsZero() {
		jr.TriggerS, jr.ViolatedSinceS = round1(runS(tr.trigger)), round1(runS(tr.violatedSince))
	}
	jr.JoinS = round1(end - start)
	jr.WindowEndS = math.Round(end*1000) / 1000
	if jr.Done {
		jr.JoinS = round1(runS(tr.recDone) - start)
	}
	// The SLO thresholds come from the steady state: up to the join, or to the surge.
	steadyTo := start
	for _, e := range rr.Events {
		if e.Label == surgeLabel && e.T < steadyTo {
			steadyTo = e.T
		}
	}
	measureJoin(jr, rr.Series, perSec, warmup.Seconds(), steadyTo, start, end)
	jr.FullShareS = fullShareS(rr.Series, nodes, start, end)
	jr.OldNodes = oldNodeFigures(rr.Series, nodes, math.Max(warmup.Seconds(), start-preJoinS), start, end)
	return jr
}

// OldNodeFigures is one node that was in the cluster before the join: its own reads' block-cache
// hit ratio (by bytes, with the ranges it streamed out and its compactions left out:
// Point.NodeServedHitRatio; -1 without reads) over the pre-join reference (the 15 s before the join),
// the join, and the 20 s after it; and the seconds of the reference and of the join in which its
// engine was compacting. A compaction rewrites tables whose blocks the cache holds, and on the
// scenarios' 250-IOPS disks an L0 compaction runs for tens of seconds: where it falls decides much of
// a window's throughput, join or not.
type OldNodeFigures struct {
	Node              int     `json:"node"`
	ServedHitBefore   float64 `json:"served_hit_before"`
	ServedHitDuring   float64 `json:"served_hit_during"`
	ServedHitAfter    float64 `json:"served_hit_after"`
	CompactingBeforeS int     `json:"compacting_before_s"`
	CompactingDuringS int     `json:"compacting_during_s"`
}

// oldNodeFigures is JoinReport.OldNodes for the first nodes nodes of the series.
func oldNodeFigures(series []Point, nodes int, refFrom, start, end float64) []OldNodeFigures {
	in := func(p Point, from, to float64) bool { mid := p.T - 0.5; return mid >= from && mid < to }
	hit := func(i int, from, to float64) float64 {
		var sum float64
		n := 0
		for _, p := range series {
			if in(p, from, to) && i < len(p.NodeServedHitRatio) && p.NodeServedHitRatio[i] >= 0 {
				sum += p.NodeServedHitRatio[i]
				n++
			}
		}
		if n == 0 {
			return -1
		}
		return math.Round(sum/float64(n)*1000) / 1000
	}
	compacting := func(i int, from, to float64) int {
		n := 0
		for _, p := range series {
			if in(p, from, to) && i < len(p.Compacting) && p.Compacting[i] > 0 {
				n++
			}
		}
		return n
	}
	out := make([]OldNodeFigures, nodes)
	for i := range out {
		out[i] = OldNodeFigures{Node: i + 1, ServedHitBefore: hit(i, refFrom, start), ServedHitDuring: hit(i, start, end),
			ServedHitAfter: hit(i, end, end+postJoinS), CompactingBeforeS: compacting(i, refFrom, start),
			CompactingDuringS: compacting(i, start, end)}
	}
	return out
}

// postJoinS is how long after the join OldNodeFigures.ServedHitAfter looks.
const postJoinS = 20

// fullShareS is JoinReport.FullShareS for the node at index node of the series' per-node leaders.
func fullShareS(series []Point, node int, start, end float64) float64 {
	led := func(p Point) int {
		if node < len(p.Leaders) {
			return p.Leaders[node]
		}
		return 0
	}
	target := 0
	for _, p := range series { // the last second that ends by the join's end, or the first after it
		if p.T <= end+1 {
			target = led(p)
		}
	}
	if target == 0 {
		return -1
	}
	for _, p := range series {
		if p.T > start && led(p) >= target {
			return round1(p.T - start)
		}
	}
	return -1
}

// measureJoin fills jr's throughput and SLO figures from the run's seconds: steady state from
// warmup to steadyTo (the join's start, or the surge), the join from start to end, the rest after it.
func measureJoin(jr *JoinReport, series []Point, perSec []*hdrhistogram.Snapshot, warmup, steadyTo, start, end float64) {
	// A second counts in a window when its midpoint lies in it (as taskWindow does).
	in := func(p Point, from, to float64) bool { mid := p.T - 0.5; return mid >= from && mid < to }
	// The pre-join reference is the most recent preJoinS before the join (the chapter: the last 5
	// minutes before it), so that a drift of the shared machine earlier in the run does not count as
	// the join's; the SLO thresholds come from the whole steady state.
	refFrom := math.Max(warmup, start-preJoinS)
	pre, _, preN := window(series, perSec, refFrom, start)
	_, preP99, _ := window(series, perSec, warmup, steadyTo)
	if preN == 0 || pre == 0 {
		return
	}
	jr.PreJoinThroughput = pre
	jr.SLOThresholdMs = sloFactor * preP99
	steady := benchutil.NewHist()
	for i, p := range series {
		if in(p, warmup, steadyTo) && i < len(perSec) {
			steady.Merge(hdrhistogram.Import(perSec[i]))
		}
	}
	jr.SteadyMeanMs = steady.Mean() / 1000
	jr.ChapterTargetMs = chapterTargetFactor * jr.SteadyMeanMs

	// Bins of the join (the last one may be partial; a bin needs at least half its seconds).
	bins := func(from, to float64, ref float64) []float64 {
		var out []float64
		for b := from; b < to; b += dipBinS {
			var ops int64
			n := 0
			for _, p := range series {
				if in(p, b, math.Min(b+dipBinS, to)) {
					ops += p.Ops
					n++
				}
			}
			if n > 0 && 2*n >= dipBinS || n > 0 && len(out) == 0 {
				out = append(out, float64(ops)/float64(n)/ref-1)
			}
		}
		return out
	}
	jr.DipBins = bins(start, end, pre)
	jr.WorstDip = 0
	for i, d := range jr.DipBins {
		jr.DipBins[i] = math.Round(d*1000) / 1000
		if i == 0 || d < jr.WorstDip {
			jr.WorstDip = d
		}
	}
	// Noise floor: the steady state's own bins, counted back from the join's start.
	var noise []float64
	for b := start - dipBinS; b >= warmup-0.5; b -= dipBinS {
		noise = append(noise, bins(b, b+dipBinS, pre)...)
	}
	for _, d := range noise {
		jr.DipNoise = math.Min(jr.DipNoise, d)
	}
	var during []Point
	var duringOps, postOps int64
	postN := 0
	for _, p := range series {
		switch {
		case in(p, start, end):
			during = append(during, p)
			duringOps += p.Ops
		case p.T-0.5 >= end:
			postOps += p.Ops
			postN++
		}
	}
	if len(during) > 0 {
		jr.ThroughputRatio = float64(duringOps) / float64(len(during)) / pre
	}
	jr.WorstDip5sSliding = math.Inf(1)
	for i := 0; i+5 <= len(during); i++ {
		var ops int64
		for _, p := range during[i : i+5] {
			ops += p.Ops
		}
		jr.WorstDip5sSliding = math.Min(jr.WorstDip5sSliding, float64(ops)/5/pre-1)
	}
	if math.IsInf(jr.WorstDip5sSliding, 1) {
		jr.WorstDip5sSliding = jr.WorstDip
	}
	if postN > 0 {
		jr.PostJoinRatio = float64(postOps) / float64(postN) / pre
	}

	// The score: 1-s windows' p99 over the threshold.
	jr.ViolatingWindows, jr.ExcessMs = windowsOver(series, jr.SLOThresholdMs, start, end)
	jr.ViolatingWindowsEnd, jr.ExcessEndMs = windowsOver(series, jr.SLOThresholdMs, start, math.Inf(1))
	// The chapter's score: 2-s windows' mean latency over the target, from the join's start.
	last := 0.0
	if len(series) > 0 {
		last = series[len(series)-1].T
	}
	for w := start; w+chapterWindowS/2 <= last; w += chapterWindowS {
		h := benchutil.NewHist()
		for i, p := range series {
			if in(p, w, w+chapterWindowS) && i < len(perSec) {
				h.Merge(hdrhistogram.Import(perSec[i]))
			}
		}
		if h.TotalCount() == 0 {
			continue
		}
		during := w < end
		if during {
			jr.ChapterWindows++
		}
		mean := h.Mean() / 1000
		if mean <= jr.ChapterTargetMs {
			continue
		}
		jr.ChapterViolationsEnd++
		jr.ChapterExcessEndMs += mean - jr.ChapterTargetMs
		if during {
			jr.ChapterViolations++
			jr.ChapterExcessMs += mean - jr.ChapterTargetMs
		}
	}
	jr.DipBeyondNoise = jr.WorstDip - jr.DipNoise
	for _, f := range []*float64{&jr.DipBeyondNoise, &jr.ExcessMs, &jr.ExcessEndMs, &jr.ChapterExcessMs, &jr.ChapterExcessEndMs,
		&jr.WorstDip, &jr.WorstDip5sSliding, &jr.DipNoise, &jr.ThroughputRatio, &jr.PostJoinRatio,
		&jr.SteadyMeanMs, &jr.ChapterTargetMs, &jr.SLOThresholdMs, &jr.PreJoinThroughput} {
		*f = math.Round(*f*1000) / 1000
	}
}
