// Package shape is the part of an experiment that is data: how many nodes, their disks and caches,
// the data loaded, the load offered and when each event fires. bench/scenario runs a shape on a
// cluster of real nodes and sim runs the same shape in the simulator, so that a scenario of one name
// has one size and one schedule in both; each adds what only it knows (the real nodes' settings and
// what the report scores; the model's fitted parameters).
//
// It owns the action vocabulary both runners label their events with. It must never import
// anything beyond the standard library: the simulator may not depend on a node layer (sim's
// TestImportsNoNodeLayer), and a shape holds no closure, only values.
package shape

import "time"

// Action is what an event does; its name labels the event in reports and plots.
type Action string

// The actions of events. Not every runner models every action: the simulator models the ones its
// scenarios use (sim.Action lists them) and refuses the others.
const (
	// TransferLeader moves the first user range's leadership to another live voter.
	TransferLeader Action = "transfer leader"
	// KillLeader kills the node leading the first user range (or, after Gather, every range);
	// Restart restarts every node killed so far.
	KillLeader Action = "kill leader"
	Restart    Action = "restart"
	// CompactBusiest and BackupBusiest run a full compaction or a backup on the node leading most
	// user ranges, and end when it is done (task events).
	CompactBusiest Action = "full compaction"
	BackupBusiest  Action = "backup"
	// Gather moves every user range's leadership to the node leading most of them (a single
	// primary); MoveLeaders moves all of them from it to the next node, at once.
	Gather      Action = "gather"
	MoveLeaders Action = "move leaders"
	// BalanceLeaders spreads the user ranges' leaderships evenly: range i in key order to node i mod n.
	BalanceLeaders Action = "balance leaders"
	// JoinNode starts one more node; the event ends when the autopilot has completed its join.
	JoinNode Action = "node joins"
	// StartController starts a surge's controller; LoadSurge adds the surge's client threads.
	StartController Action = "controller"
	LoadSurge       Action = "load surge"
	// MoveReplica moves a replica of the first user range to a node without one (a task event).
	MoveReplica Action = "move replica"
	// DecommissionLast marks the last node holding user replicas decommissioning; the event ends
	// when it holds none (a task event: with the policy off it never does).
	DecommissionLast Action = "decommission"
	// PolicyOn and PolicyOff switch the scenario's policy (an ABBA schedule's switches).
	PolicyOn  Action = "policy on"
	PolicyOff Action = "policy off"
)

// Event is an action fired at an offset from the start of the measured workload.
type Event struct {
	At time.Duration
	Do Action
}

// Device is a node's disk as the emulated device models it (storage/emudisk's options, as data).
type Device struct {
	// NoPageCache: the node's block cache is its only cache.
	NoPageCache bool
	// Bandwidth each way, operations a second (reads, writes and syncs together) and the latency
	// each operation adds.
	ReadBytesPerSec, WriteBytesPerSec int64
	IOPS                              int
	Latency                           time.Duration
	// ReadaheadBytes is the window a sequential reader's miss fetches in one operation (0: none).
	ReadaheadBytes int64
}

// DefaultDevice is the disk every node of a scenario gets unless its shape names another: 2 000
// operations a second at 200 µs, 64 MiB/s each way, no page cache.
var DefaultDevice = Device{NoPageCache: true, ReadBytesPerSec: 64 << 20, WriteBytesPerSec: 64 << 20, IOPS: 2000,
	Latency: 200 * time.Microsecond}

// DefaultCacheBytes is a node's block cache when a shape leaves CacheBytes 0.
const DefaultCacheBytes = 8 << 20

// Shape is one experiment's size, load and schedule.
type Shape struct {
	Name string
	// The cluster: Nodes nodes, each with a block cache of CacheBytes (0: DefaultCacheBytes) on
	// Device (nil: DefaultDevice), sending and receiving snapshots at LinkBytesPerSec each way (0:
	// the nodes' default).
	Nodes           int
	CacheBytes      int64
	Device          *Device
	LinkBytesPerSec int64
	// The data: Records records of ValueBytes, pre-split into Splits equal ranges (0 or 1: one).
	Records, ValueBytes, Splits int
	// The load: Threads closed-loop clients, ReadFraction of their operations reads of a
	// zipfian-chosen key, the rest overwrites, for Duration; the first Warmup is left out of the
	// steady state. With Pace the threads offer, after the warm-up, that share of the throughput
	// their closed loop reached; with Probe they return to a closed loop from that offset.
	Threads          int
	ReadFraction     float64
	Duration, Warmup time.Duration
	Pace             float64
	Probe            time.Duration
	// Events fire at offsets of the measured workload.
	Events []Event
}

// Cache is the shape's block cache per node.
func (s Shape) Cache() int64 {
	if s.CacheBytes > 0 {
		return s.CacheBytes
	}
	return DefaultCacheBytes
}

// Disk is the shape's device per node.
func (s Shape) Disk() Device {
	if s.Device != nil {
		return *s.Device
	}
	return DefaultDevice
}

// Ranges is how many user ranges the shape's data starts in.
func (s Shape) Ranges() int { return max(s.Splits, 1) }

// The shapes both runners run.
var (
	// NodeKill: the leader of the one user range is killed and restarted.
	NodeKill = Shape{Name: "node-kill", Nodes: 3, Records: 20000, ValueBytes: 256, Threads: 8, ReadFraction: 0.9,
		Duration: 25 * time.Second, Events: []Event{{8 * time.Second, KillLeader}, {15 * time.Second, Restart}}}

	// Decommission: the last node holding user replicas is decommissioned; its 24 replicas move to
	// a node that starts empty.
	Decommission = Shape{Name: "decommission", Nodes: 4, Records: 144000, ValueBytes: 256, Splits: 24, Threads: 8,
		ReadFraction: 0.9, Duration: 80 * time.Second, Warmup: 8 * time.Second,
		Events: []Event{{20 * time.Second, DecommissionLast}}}

	// Compaction: a full compaction on the node leading every range (gathered first) on a store
	// about three times the block cache, at a paced load. Pace 0.6: closed-loop, that node sits at
	// its disk's IOPS limit and the 1-s throughput swings with every wobble of it (a coefficient of
	// variation near 20 %); the warm-up's throughput runs 10–20 % above what the node sustains
	// later, and at four fifths of it the node was still at its limit. At 60 % the steady state is
	// the offered rate, a task taking more than about a quarter of the node shows as the rate not
	// met, and any interference as latency.
	Compaction = Shape{Name: "compaction", Nodes: 3, CacheBytes: 16 << 20, Records: 160000, ValueBytes: 256, Splits: 6,
		Threads: 8, ReadFraction: 0.9, Duration: 120 * time.Second, Warmup: 20 * time.Second, Pace: 0.6,
		Events: []Event{{0, Gather}, {40 * time.Second, CompactBusiest}}}

	// Join: a fourth node joins a loaded three-node cluster on disks of 250 operations a second
	// (JoinDevice), every link JoinLinkBytesPerSec. Paced: a 30-s closed-loop warm-up (the caches
	// warm for ~20 s), 60 % of its throughput offered from then, the join at 55 s, and a closed-loop
	// probe from 110 s whose throughput against the warm-up's is the capacity the node added.
	// Closed-loop throughout, the nodes sat at their disks' limit and the 1-s throughput swung by
	// 11–18 %: no steady state held to judge the join against.
	Join = Shape{Name: "join", Nodes: 3, CacheBytes: 16 << 20, Device: &JoinDevice, LinkBytesPerSec: JoinLinkBytesPerSec,
		Records: 160000, ValueBytes: 256, Splits: 24, Threads: 16, ReadFraction: 0.95,
		Duration: 130 * time.Second, Warmup: 30 * time.Second, Pace: 0.6, Probe: 110 * time.Second,
		Events: []Event{{0, BalanceLeaders}, {55 * time.Second, JoinNode}}}
)

// JoinLinkBytesPerSec is every node's snapshot link in the join: slow enough that moving the new
// node's share takes a while on one machine, as streaming tens of GB does on a real cluster; and
// since the receiver's link bounds a parallel join as much as one sender at full speed bounds an
// incremental one, the strategies differ in scheduling, not bandwidth (the chapter, §2.2).
const JoinLinkBytesPerSec = 4 << 20

// JoinDevice makes the join's nodes disk-bound, so that a fourth node adds capacity although every
// node shares the same two cores: 250 random-read operations a second, the chapter's disk, and the
// kernel's default readahead of 128 KiB for sequential reads (a streamed range, a compaction).
var JoinDevice = Device{NoPageCache: true, ReadBytesPerSec: 64 << 20, WriteBytesPerSec: 64 << 20, IOPS: 250,
	Latency: 500 * time.Microsecond, ReadaheadBytes: 128 << 10}
