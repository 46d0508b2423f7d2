package sim

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/shoaldb/shoal/autopilot"
	"github.com/shoaldb/shoal/autopilot/policy"
	"github.com/shoaldb/shoal/bench/scenario/shape"
)

// Scenario is one simulated experiment: a cluster, its data and workload, events at offsets of the
// run, and the policy it is about. The names of the scenarios that bench/scenario also runs on a real
// cluster (node-kill, join, compaction, leader-transfer's policy) are the same, with the same sizes
// and event times; docs/design/simulator.md says why the definitions are not shared yet.
type Scenario struct {
	Name, Description string
	// Nodes and Ranges (user ranges, equal key spans); RecordsPerRange records of ValueBytes each.
	Nodes, Ranges   int
	RecordsPerRange int64
	ValueBytes      uint64
	// Workload is the key distribution (uniform, zipfian, hotspot, latest); OpsPerSec the mean
	// offered load, ReadFraction of it reads; Diurnal, if set, is the amplitude of a daily swing
	// compressed into the run's Duration.
	Workload     string
	OpsPerSec    float64
	ReadFraction float64
	Diurnal      float64
	// HotRecords is the hotspot workload's hot set (records from the start of the key space; 0: a
	// thousandth), HotOps the share of requests it takes (0: 0.9).
	HotRecords int64
	HotOps     float64
	Duration   time.Duration
	Warmup     time.Duration
	// GatherLeaders starts with every user range led by the first node (LeadBy: by that node).
	// Empty is how many of the last nodes start with no user replica (a node added before the
	// data, rebalance off); MetaOn the nodes of the meta range's replicas (default n1..n3).
	GatherLeaders bool
	LeadBy        uint64
	Empty         int
	MetaOn        []uint64
	// ReplicaReads: clients read at any replica, a learner too (client.ReplicaRead), each replica
	// taking an equal part of its range's reads. OffLearners is the learners every user range starts
	// with in the policy-off run: uniform read replicas, the baseline of read_replicas.
	ReplicaReads bool
	OffLearners  int
	// Policy is the policy the scenario is about: run on, then off. Pin switches others for both runs.
	Policy string
	Pin    map[string]bool
	// Zones are the nodes' zones (node i+1's locality "zone=Zones[i]"); LeadZone, if set, asks
	// that every user range be led in that zone (`shoal admin zone-config`).
	Zones    []string
	LeadZone string
	// Autopilot and Params adjust the autopilot's configuration and the simulated hardware; Setup
	// the autopilot once built (a policy's mode).
	// Tenants, if set, replace Ranges, RecordsPerRange and Workload: the key space is the tenants'
	// one after the other, each read uniformly (workload.Tenants). Scatter places every user range's
	// replicas on nodes drawn from the seed, led by the first drawn (a cluster after a history of
	// splits and moves), not round robin. Ramp steps the offered rate to find the highest that meets
	// an SLO (ramp.go); it sets Duration and Warmup. Options' Ranges, Workload and Duration do not
	// apply to what these set.
	// Stream makes every request an event of a stream job and counts its state accesses under the
	// aligned, placed and unaligned placements (stream.go).
	Stream bool
	// Pace, for closed-loop clients (Params.Host), offers after the warm-up that share of the
	// throughput they served over its second half, or Offered when set; from Probe (0: never) they
	// return to a closed loop — as bench/scenario paces a real run (shape.Shape).
	Pace      float64
	Offered   float64
	Probe     time.Duration
	Tenants   []Tenant
	Scatter   bool
	Ramp      *Ramp
	Autopilot func(*autopilot.Config)
	Setup     func(*autopilot.Autopilot)
	Params    func(*Params)
	Events    []Event
}

// Action is what an event does: bench/scenario's vocabulary (shape), of which the simulator models
// the actions below, and two of its own.
type Action = shape.Action

// The actions of events.
const (
	// KillLeader stops the node leading the first user range; Restart restarts the killed nodes.
	KillLeader = shape.KillLeader
	Restart    = shape.Restart
	// JoinNodes adds N nodes (N < 1: that fraction of the nodes, rounded up); JoinNode one, as a
	// real run's event does.
	JoinNodes Action = "nodes join"
	JoinNode         = shape.JoinNode
	// Decommission marks the last node holding user replicas decommissioning (a task until it holds
	// none); Drain the node leading most ranges draining.
	Decommission        = shape.DecommissionLast
	Drain        Action = "drain"
	// Compaction starts a heavy task of N seconds on the node leading most user ranges.
	Compaction = shape.CompactBusiest
)

// Event is an action at an offset of the run.
type Event struct {
	At time.Duration
	Do Action
	N  float64
}

var noMoves = map[string]bool{policy.NameRebalance: false, policy.NameMerge: false, policy.NameLoadSplit: false}

// pinLearners is noMoves with replicate off too: it would remove the uniform learners as strays.
var pinLearners = map[string]bool{policy.NameRebalance: false, policy.NameMerge: false, policy.NameLoadSplit: false,
	policy.NameReplicate: false}

// scenarios is the table. `shoal sim list` prints it.
var scenarios = []Scenario{
	mirroredNodeKill(),
	{Name: "node-loss", Description: "4 nodes, 24 ranges; at t=10s the first range's leader is killed for good; policy replicate (replaces it after 60 s)",
		Nodes: 4, Ranges: 24, RecordsPerRange: 6000, ValueBytes: 256, Workload: "zipfian", OpsPerSec: 6000, ReadFraction: 0.9,
		Duration: 150 * time.Second, Policy: policy.NameReplicate, Pin: noMoves,
		Events: []Event{{At: 10 * time.Second, Do: KillLeader}}},
	mirroredJoin(),
	mirroredDecommission(),
	{Name: "drain", Description: "3 nodes, 24 ranges; at t=10s the node leading most ranges drains; policy drain",
		Nodes: 3, Ranges: 24, RecordsPerRange: 6000, ValueBytes: 256, Workload: "zipfian", OpsPerSec: 6000, ReadFraction: 0.9,
		Duration: 60 * time.Second, Policy: policy.NameDrain, Pin: noMoves,
		Events: []Event{{At: 10 * time.Second, Do: Drain}}},
	mirroredCompaction(),
	{Name: "hotspot", Description: "3 nodes, 4 ranges; 90 % of 9000 ops/s on 2 % of the first range's records; policy load_split",
		Nodes: 3, Ranges: 4, RecordsPerRange: 25000, ValueBytes: 256, Workload: "hotspot", HotRecords: 500, OpsPerSec: 9000,
		ReadFraction: 0.9, Duration: 120 * time.Second, Policy: policy.NameLoadSplit},
	{Name: "merge", Description: "3 nodes, 48 small idle ranges; policy merge (after 5 min of idleness)",
		Nodes: 3, Ranges: 48, RecordsPerRange: 1000, ValueBytes: 256, Workload: "uniform", OpsPerSec: 100, ReadFraction: 0.9,
		Duration: 8 * time.Minute, Policy: policy.NameMerge},
	{Name: "rebalance", Description: "3 nodes, 24 ranges all led by n1; policy rebalance",
		Nodes: 3, Ranges: 24, RecordsPerRange: 6000, ValueBytes: 256, Workload: "zipfian", OpsPerSec: 6000, ReadFraction: 0.9,
		Duration: 60 * time.Second, GatherLeaders: true, Policy: policy.NameRebalance},
	{Name: "read-hints", Description: "3 nodes, 6 ranges all led by n1, which drains at t=20s; policy read_hints (a switch: the simulator has no caches to warm)",
		Nodes: 3, Ranges: 6, RecordsPerRange: 26000, ValueBytes: 1000, Workload: "zipfian", OpsPerSec: 6000, ReadFraction: 1,
		Duration: 60 * time.Second, GatherLeaders: true, Policy: policy.NameReadHints, Pin: noMoves,
		Events: []Event{{At: 20 * time.Second, Do: Drain}}},
	{Name: "read-replicas", Description: "5 nodes, 8 ranges; 90 % of 9000 reads/s on 3000 records of the first range; policy read_replicas",
		Nodes: 5, Ranges: 8, RecordsPerRange: 6000, ValueBytes: 256, Workload: "hotspot", HotRecords: 3000, OpsPerSec: 9000,
		ReadFraction: 1, Duration: 90 * time.Second, Policy: policy.NameReadReplicas, Pin: noMoves},
	{Name: "read-replicas-scale", Description: "200 nodes, 20 000 ranges of 1 MB, 1.2 M reads/s zipfian at any replica; policy read_replicas " +
		"(learners by popularity) against 2 learners on every range (policy off); replicate, rebalance, merge and load_split off",
		Nodes: 200, Ranges: 20_000, RecordsPerRange: 1000, ValueBytes: 1000, Workload: "zipfian", OpsPerSec: 1_200_000,
		ReadFraction: 1, Duration: 10 * time.Minute, Warmup: time.Minute, Policy: policy.NameReadReplicas,
		ReplicaReads: true, OffLearners: 2, Pin: pinLearners,
		Autopilot: func(c *autopilot.Config) { c.Policies.ReadReplicas.MaxPerRound = 50 }},
	{Name: "hotspot-offload", Description: "4 nodes, 12 ranges all led by n1, 20000 ops/s zipfian; policy hotspot_offload in act mode " +
		"(its break-even is learnt from hot spots that come and go; this one stays) (rebalance, merge and load_split off)",
		Nodes: 4, Ranges: 12, RecordsPerRange: 6000, ValueBytes: 256, Workload: "zipfian", OpsPerSec: 20000,
		ReadFraction: 0.9, Duration: 60 * time.Second, GatherLeaders: true, Policy: policy.NameHotspot, Pin: noMoves,
		Setup: func(a *autopilot.Autopilot) {
			if p, ok := a.Policies().Policy(policy.NameHotspot).(*policy.HotspotOffload); ok {
				p.SetMode(policy.ModeAct)
			}
		}},
	{Name: "usage-balance", Description: "4 nodes, 12 ranges all led by n1, 20000 ops/s zipfian; policy usage_balance (rebalance, merge and load_split off; " +
		"no host model: the ranges report no access statistics, so it reads each range's blocks as uniform; usage-slo has caches and statistics)",
		Nodes: 4, Ranges: 12, RecordsPerRange: 6000, ValueBytes: 256, Workload: "zipfian", OpsPerSec: 20000,
		ReadFraction: 0.9, Duration: 60 * time.Second, GatherLeaders: true, Policy: policy.NameUsageBalance, Pin: noMoves},
	{Name: "usage-slo", Description: "30 nodes on their own machines (1 000-IOPS disks, 14 MiB block caches), two tenants read uniformly, " +
		"every range offered the same rate: 90 hot ranges of 2 000 records (cacheable) and 90 cold ranges of 100 000 (they miss); " +
		"replicas scattered from the seed; 5 min at 150 reads/s a range, then a ramp from 120 ×1.06 a step (32 steps) to the SLO " +
		"(p99 ≤ 25 ms, 99 % served); policy usage_balance (rebalance on in both runs; merge and load_split off)",
		Nodes: 30, ValueBytes: 256, ReadFraction: 1, Scatter: true,
		Tenants: []Tenant{{Name: "hot", Ranges: 90, RecordsPerRange: 2000, Ops: 0.5}, {Name: "cold", Ranges: 90, RecordsPerRange: 100_000, Ops: 0.5}},
		Ramp: &Ramp{Settle: 5 * time.Minute, SettleOps: 150 * 180, Rates: geometric(120*180, 1.06, 32),
			Warm: 10 * time.Second, Measure: 20 * time.Second, P99: 25 * time.Millisecond, MinServed: 0.99},
		Policy: policy.NameUsageBalance, Pin: map[string]bool{policy.NameMerge: false, policy.NameLoadSplit: false},
		Params: ownMachines(1000, 200*time.Microsecond, 16),
		Autopilot: func(c *autopilot.Config) {
			c.Policies.UsageBalance.Model = machineModel(DefaultParams(), 1000)
		}},
	{Name: "lease-preference", Description: "3 nodes in zones b, c, a, 12 ranges all led by n1; every range is to be led in zone a (n3); policy lease_preference",
		Nodes: 3, Ranges: 12, RecordsPerRange: 6000, ValueBytes: 256, Workload: "zipfian", OpsPerSec: 6000,
		ReadFraction: 0.9, Duration: 30 * time.Second, GatherLeaders: true, Zones: []string{"b", "c", "a"}, LeadZone: "a",
		Policy: policy.NameLeasePreference, Pin: noMoves},
	{Name: "node-profiles", Description: "5 nodes, 10 ranges, 6000 ops/s zipfian, 95 % reads (every range reads): policy node_profiles " +
		"(mix sampled every 5 s, a class after 3 samples) gives the nodes that lead them the read profile, one node at a time " +
		"(the simulator models no engine: it shows the decisions, not their gain)",
		Nodes: 5, Ranges: 10, RecordsPerRange: 6000, ValueBytes: 256, Workload: "zipfian", OpsPerSec: 6000,
		ReadFraction: 0.95, Duration: 60 * time.Second, Policy: policy.NameNodeProfiles, Pin: noMoves,
		Autopilot: func(c *autopilot.Config) {
			c.Policies.NodeProfiles.SampleEvery, c.Policies.NodeProfiles.Samples = 5*time.Second, 3
		}},
	{Name: "stream-64", Description: "64 nodes, 512 ranges, 64 000 stream events/s zipfian (each a state read and write); at t=60s 8 nodes join; " +
		"policy incremental_join, rebalance on: the job's state accesses local under aligned, placed and unaligned tasks",
		Nodes: 64, Ranges: 512, RecordsPerRange: 1000, ValueBytes: 256, Workload: "zipfian", OpsPerSec: 64_000, ReadFraction: 0.5,
		Duration: 180 * time.Second, Warmup: 10 * time.Second, Policy: policy.NameJoin, Stream: true,
		Events: []Event{{At: 60 * time.Second, Do: JoinNodes, N: 8}}},
	{Name: "scale", Description: "1000 nodes, 100 000 ranges of 64 MiB, one simulated hour of a diurnal zipfian load (400 k ops/s ±50 %); " +
		"a node fails at 5 min, 10 % more nodes join at 20 min; every policy on",
		Nodes: 1000, Ranges: 100_000, RecordsPerRange: 1000, ValueBytes: 64 << 10, Workload: "zipfian", OpsPerSec: 400_000,
		ReadFraction: 0.9, Diurnal: 0.5, Duration: time.Hour, Warmup: time.Minute,
		// A reconciliation a second, not five: each costs a snapshot and the decision log's
		// measurement, both O(ranges) (docs/design/simulator.md, figures).
		Params: func(p *Params) { p.ReconcileGap = time.Second },
		Events: []Event{{At: 5 * time.Minute, Do: KillLeader}, {At: 20 * time.Minute, Do: JoinNodes, N: 0.1}}},
}

// Lookup returns the named scenario.
func Lookup(name string) (Scenario, bool) {
	for _, s := range scenarios {
		if s.Name == name {
			return s, true
		}
	}
	return Scenario{}, false
}

// List returns the table sorted by name.
func List() []Scenario {
	out := append([]Scenario(nil), scenarios...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Schedule describes the events: "8s kill leader, 15s restart".
func (s Scenario) Schedule() string {
	var parts []string
	for _, e := range s.Events {
		p := fmt.Sprintf("%v %s", e.At, e.Do)
		if e.N != 0 {
			p += fmt.Sprintf(" (%g)", e.N)
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ", ")
}
