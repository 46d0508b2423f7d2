package scenario

import (
	"fmt"
	"time"

	"github.com/shoaldb/shoal/autopilot/policy"
	"github.com/shoaldb/shoal/bench/benchutil"
	"github.com/shoaldb/shoal/bench/scenario/shape"
	"github.com/shoaldb/shoal/storage/emudisk"
)

// scenarios is every scenario: each reproduces a figure of the research a mechanism comes from, or
// guards a result. `shoal bench scenario --list` prints it.
var scenarios = []Scenario{
	{
		Name: "leader-transfer", Description: "3 nodes; at t=8s the user range's leadership moves to another node; policy rebalance",
		Nodes: 3, Records: 20000, ValueBytes: 256, Threads: 8, ReadFraction: 0.9, Duration: 20 * time.Second,
		Policy: policy.NameRebalance, Events: []Event{{At: 8 * time.Second, Do: TransferLeader}},
	},
	withPolicy(fromShape(shape.NodeKill, "3 nodes; at t=8s the user range's leader is killed, at t=15s restarted; policy replicate"),
		policy.NameReplicate, nil, nil),
	// A node decommissioned under load: the fourth node starts empty (rebalance is off), so the
	// replicas of the last node holding some all move to it, one snapshot stream into one node, as
	// when a node is replaced.
	withPolicy(fromShape(shape.Decommission, "4 nodes, 24 ranges, 144k records; at t=20s n3 is decommissioned, its 24 replicas moving "+
		"to the empty n4; YCSB 90/10 zipfian; policy decommission (on only: off, nothing moves)"),
		policy.NameDecommission, noMoves(), []Variant{{}}),
	// Shedding leadership ahead of heavy background work (the Papaioannou thesis, chapter 3,
	// Figures 3.3–3.5): a task on the node that leads most ranges, shed_leadership on and off.
	shed("compaction", 0.9, 120*time.Second, CompactBusiest,
		"3 nodes, 160k random 256-B records (~45 MB a node: ~3x the 16 MiB block cache, ~20x the 2 MiB memtable), 6 ranges; at t=40s "+
			"(then 47s, 55s) a full compaction on the node leading most ranges; YCSB 90/10 zipfian; policy shed_leadership"),
	withPace(shed("compaction-50", 0.5, 160*time.Second, CompactBusiest,
		"as compaction, with YCSB 50/50 (160 s: writes make the compaction longer), offering 45 % of the warm-up's throughput"), shedPace50),
	shed("backup", 0.9, 120*time.Second, BackupBusiest,
		"as compaction, with a backup of the node leading most ranges instead of the compaction"),
	// Read hints (Papaioannou & Magoutis; thesis chapter 4): one node serves every range, as the
	// journal's single primary; its leaderships move at t=60s, with hints on and off.
	withPace(readHints("read-hints", 32<<20, MoveLeaders, nil,
		"3 nodes, 160k 1 KB records (~5x the 32 MiB block cache), 6 ranges all led by one node; YCSB C (read-only, zipfian), offering 70 % of "+
			"the warm-up's throughput; at t=60s every leadership of that node moves to another; read hints on vs off"), readHintsPace),
	readHints("read-hints-cache-8m", 8<<20, MoveLeaders, nil,
		"as read-hints with an 8 MiB block cache per node (the same data: recovery should not depend on the cache's size)"),
	readHints("read-hints-kill", 32<<20, KillLeader, nil,
		"as read-hints, but at t=60s the serving node is killed (a failover instead of transfers)"),
	readHints("read-hints-fraction", 32<<20, MoveLeaders, fractionVariants(1, 0.5, 0.33, 0.2, 0.1),
		"as read-hints, once per applied fraction of hints (fixed: 1, 0.5, 0.33, 0.2, 0.1) and once without hints (the journal's Table 1)"),
	readHintsOverhead(),
	// A replica moved under load: the move's time against one snapshot at the configured rate, the
	// foreground during it, and the moved copies checked. The nodes share the machine's disk.
	{
		Name: "move", Description: "4 nodes, one range of 128k incompressible 1 KiB records (~130 MiB), RF 3; at t=20s a non-leader replica moves " +
			"to the 4th node (learner, snapshot at the configured rate, joint promote and remove); YCSB B zipfian; autopilot pinned",
		Nodes: 4, Device: &emudisk.Options{}, KV: func(c *benchutil.NodeConfig) { c.KV.RangeMaxBytes = 1 << 40 }, // the range stays whole
		Records: 128 << 10, ValueBytes: 1024, RandomValues: true, Threads: 16, ReadFraction: 0.95, Duration: 60 * time.Second, Warmup: 10 * time.Second,
		Pin: map[string]bool{policy.NameRebalance: false, policy.NameLoadSplit: false, policy.NameMerge: false, policy.NameReplicate: false,
			policy.NameJoin: false},
		Variants: []Variant{moveRate(32<<20, false), moveRate(8<<20, true)},
		Events:   []Event{{At: 20 * time.Second, Do: MoveReplica}}, Score: ScoreMove,
	},
	// A node joining a loaded cluster (the thesis, chapter 2, Figures 2.3–2.7).
	join("3 nodes, 160k records (~3x the block cache), 24 ranges (leaderships balanced at t=0), YCSB B zipfian; closed loop " +
		"for 30 s, then offering 60 % of the warm-up's throughput; at t=55s a 4th node joins: incremental, parallel, parallel throttled to the " +
		"incremental rate, sequential serving at the end; closed loop again from 110 s (capacity after the join against the warm-up's)"),
	joinSurge("as join, but the offered load rises from 16 to 24 threads at t=30s and a latency controller adds the 4th node (incremental vs parallel; Figure 2.7)",
		150*time.Second, &Surge{Threads: 8, LearnFor: 16 * time.Second, TriggerWindows: 3}),
}

// shed is a scenario of the shed_leadership policy: a task on the node leading most ranges at t=40s,
// 47s and 55s (a run of each, policy on and off), after a closed-loop warm-up of 20 s that warms the
// caches and measures the rate to offer, and at least 20 s of paced steady state to judge. Every
// leadership is gathered on that node first: the ranges' first leader leads them all only while no
// election moved one during the load (on a busy machine one run in six started with 2 and 4).
func shed(name string, reads float64, d time.Duration, task Action, desc string) Scenario {
	s := withPolicy(fromShape(shape.Compaction, desc), policy.NameShed, noMoves(), nil)
	s.Name, s.ReadFraction, s.Duration, s.RandomValues, s.Score = name, reads, d, true, ScoreTask
	s.Offsets = []time.Duration{0, 7 * time.Second, 15 * time.Second}
	for i := range s.Events {
		if s.Events[i].Do == shape.CompactBusiest {
			s.Events[i].Do = task
		}
	}
	return s
}

// withPolicy is s about policy p, with the policies pin sets and the variants vs (nil: p on and off).
func withPolicy(s Scenario, p string, pin map[string]bool, vs []Variant) Scenario {
	s.Policy, s.Pin, s.Variants = p, pin, vs
	return s
}

// noMoves pins off the policies that would move leaderships or ranges beside the scenario's own.
func noMoves() map[string]bool {
	return map[string]bool{policy.NameRebalance: false, policy.NameMerge: false, policy.NameLoadSplit: false}
}

// shedPace50 is compaction-50's share. At 50/50 the warm-up's closed loop overstates what the busiest
// node sustains by more than at 90/10 (its writes' flushes and compactions come later): at 60 % the
// node sat at 1 800–2 000 of its disk's 2 000 IOPS before the task, and half the runs' steady states
// failed the CV check (12–15 %). At 45 % its disk still does ~1 900 operations a second, queued, but
// on a quiet machine the rate is met to within 1 % a second; seconds the process is starved of CPU
// still fail a run.
const shedPace50 = 0.45

// withPace is s offering the share pace of its warm-up's throughput.
func withPace(s Scenario, pace float64) Scenario {
	s.Pace = pace
	return s
}

// readHintsPace is the share of the warm-up's throughput read-hints offers after it. Closed-loop, the
// serving node sat at its disk's IOPS limit and the 1-s throughput swung with it (CV 16–40 %). The
// warm-up's throughput understates the warm cache's (the hit ratio still climbs), so 70 % of it
// leaves the warm leader slack while a cold one, missing up to half as often again, may not keep
// up: its cost shows as the rate not met, as latency and as the hit ratio.
const readHintsPace = 0.7

// moveRate is the move scenario's variant of a snapshot rate for every node.
func moveRate(rate int64, optional bool) Variant {
	return Variant{Name: fmt.Sprintf("rate-%dMiB", rate>>20), Optional: optional,
		KV: func(c *benchutil.NodeConfig) { c.Transport.SnapshotRateBytesPerSec = rate }}
}

// readHintsPin keeps every other policy from moving leaderships (and load_split from splitting the
// hot ranges), so that the only change is the scenario's.
var readHintsPin = map[string]bool{
	policy.NameRebalance: false, policy.NameMerge: false, policy.NameLoadSplit: false, policy.NameShed: false,
}

// readHintsKV is the journal's setting: every hint sent to every other replica and applied. The
// shared two-core machine runs all three nodes and the clients, so the process's CPU stays above
// the adaptive fraction's pause threshold, and adaptive hints would simply be off.
func readHintsKV(c *benchutil.NodeConfig) { c.Hints.FixedFraction = true }

func readHints(name string, cache int64, change Action, variants []Variant, desc string) Scenario {
	return Scenario{Name: name, Description: desc,
		Nodes: 3, CacheBytes: cache, KV: readHintsKV, Records: 160000, ValueBytes: 1000, Splits: 6, Threads: 8, ReadFraction: 1,
		Duration: 90 * time.Second, Warmup: 20 * time.Second, Policy: policy.NameReadHints, Pin: readHintsPin, Variants: variants,
		Events: []Event{{At: 0, Do: Gather}, {At: 60 * time.Second, Do: change}}, Score: ScoreReadHints}
}

// fractionVariants apply each fraction of the hints (fixed), and one runs without hints at all.
func fractionVariants(fractions ...float64) []Variant {
	var vs []Variant
	for _, f := range fractions {
		vs = append(vs, Variant{Name: fmt.Sprintf("fraction-%.2f", f), KV: func(c *benchutil.NodeConfig) {
			readHintsKV(c)
			c.Hints.Fraction = f
		}})
	}
	return append(vs, Variant{Name: "no-hints", KV: func(c *benchutil.NodeConfig) { c.Hints.Off = true }})
}

// readHintsOverhead is the steady-state cost of read hints: no leadership change, hints switched in
// ABBA pairs of windows within one run (two clusters on one shared machine differ by more than the
// cost). Run with --hosts against nodes in processes of their own (scripts/readhints-saturated.sh),
// it is the cost on a saturated serving node.
func readHintsOverhead() Scenario {
	s := readHints("read-hints-overhead", 32<<20, "", []Variant{{Name: "recurring", KV: readHintsKV}},
		"as read-hints without a leadership change: hints switched in 24 ABBA pairs of 12-s windows (on,off | off,on | ...) after 20 s; "+
			"the cost of hints (1 - on/off) with a 95 % confidence interval over the pairs")
	s.Events = s.Events[:1]
	s.Toggle = &Toggle{Window: 12 * time.Second, Pairs: 24, Skip: 5 * time.Second}
	s.Duration = s.Warmup + 2*time.Duration(s.Toggle.Pairs)*s.Toggle.Window
	return s
}

// joinLink is each node's snapshot link in the join scenarios (shape.Join): every node sends
// snapshots at most this fast and receives them at most this fast from all senders together.
const joinLink = shape.JoinLinkBytesPerSec

func joinStrategy(s string, atEnd bool, sendRate int64) func(*benchutil.NodeConfig) {
	return func(c *benchutil.NodeConfig) {
		c.Autopilot.Policies.Join.Strategy = s
		c.Autopilot.Policies.Join.ServeAtEnd = atEnd
		c.Transport.SnapshotRateBytesPerSec = sendRate
		c.Transport.SnapshotRecvRateBytesPerSec = joinLink
	}
}

// join is the join scenario (shape.Join). Each of the 24 ranges (~1.7 MB) is a unit of transfer, as
// the chapter's token ranges are.
func join(desc string) Scenario {
	s := withPolicy(fromShape(shape.Join, desc), policy.NameJoin, noMoves(), []Variant{
		{Name: "incremental", KV: joinStrategy(policy.JoinIncremental, false, joinLink)},
		{Name: "parallel", KV: joinStrategy(policy.JoinParallel, false, joinLink)},
		// The chapter's controls: parallel with each sender at a third of the link (the same
		// aggregate as one incremental sender), and sequential moves that serve only at the end.
		{Name: "parallel-throttled", KV: joinStrategy(policy.JoinParallel, false, joinLink/3)},
		{Name: "sequential-at-end", KV: joinStrategy(policy.JoinIncremental, true, joinLink)},
		// The floor: the node starts but the policy is off, so it receives nothing.
		{Name: "no-join", KV: joinStrategy(policy.JoinIncremental, false, joinLink), PolicyOff: true, Optional: true},
	})
	s.Score = ScoreJoin
	return s
}

// joinSurge is join in a closed loop throughout (10-s warm-up), for d, where the 4th node comes
// when the surge's controller decides (Figure 2.7): incremental and parallel, the controls by name.
func joinSurge(desc string, d time.Duration, surge *Surge) Scenario {
	s := join(desc)
	s.Name, s.Duration, s.Warmup, s.Pace, s.Probe, s.Surge = "join-surge", d, 10*time.Second, 0, 0, surge
	s.Events = []Event{{At: 0, Do: BalanceLeaders}, {At: 10 * time.Second, Do: StartController}, {At: 30 * time.Second, Do: LoadSurge}}
	for i := 2; i < len(s.Variants); i++ {
		s.Variants[i].Optional = true
	}
	return s
}
