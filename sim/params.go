package sim

import (
	"fmt"
	"math"
	"time"

	"github.com/shoaldb/shoal/autopilot/operator"
	"github.com/shoaldb/shoal/plan/usage"
)

// Params are the simulated hardware and the delays of the cluster's mechanisms: every figure the
// simulator does not derive from the workload, in one place. Where a figure was measured on a real
// cluster, its comment says where; the others are stated as guesses until calibration replaces them.
type Params struct {
	// Cores per node and the reads per second one core serves. The service rate of a node is
	// Cores·OpsPerCore read-equivalents per second. Guess from docs/benchmarks.md: YCSB C did
	// 17 637 ops/s with three nodes and the clients on two cores, ~9 000 per core.
	Cores      float64
	OpsPerCore float64
	// WriteCost and FollowerWriteCost are a write's service time on its leader and on each follower,
	// in reads. From docs/benchmarks.md: YCSB A (50 % writes) did 5 371 ops/s against C's 17 637,
	// so a write costs ~5.6 reads over its three replicas.
	WriteCost, FollowerWriteCost float64
	// DiskBytes is each node's store volume.
	DiskBytes uint64
	// SnapshotSendRate and SnapshotRecvRate bound the snapshot bytes a node sends and receives per
	// second, over all streams (the transport's rate limits; 32 MiB/s and unlimited by default).
	SnapshotSendRate, SnapshotRecvRate float64
	// ApplyRate is how fast a learner, after its snapshot streamed, applies it and catches up with
	// the log, in bytes per second: docs/bench-move.md measured moves of 130 MiB and 1 GiB at 1.71×
	// and 1.75× one snapshot's time at 32 MiB/s, the apply taking 0.73× the streaming time, i.e.
	// 32 MiB/s / 0.73. A rate of the receiver, not a factor of the streaming time: a slower link
	// does not make the apply slower (the join's 4 MiB/s links made 1.7 MB moves 30 % too slow).
	ApplyRate float64
	// SnapshotSetup is a snapshot's fixed cost whatever its size: the sender's checkpoint, the
	// stream's setup, the receiver's ingest and the learner's first appends. Fitted to the real
	// decommission's 1.5 MB moves (Calibrated).
	SnapshotSetup time.Duration
	// ConfChange is a promotion's or removal's configuration change until the executor sees it
	// landed (a joint-consensus round, the range descriptor's update, the model's next view of it):
	// fitted to the real decommission (Calibrated). Transfer a leadership transfer; Split and
	// Merge their raft commands: guesses of a few raft rounds on a LAN.
	ConfChange, Transfer, Split, Merge time.Duration
	// ElectionMin and ElectionMax bound the time from a leader's death to its range's new leader
	// serving clients: the randomized election timeout (replica.Config: 10 ticks of 100 ms, up to
	// twice that), the pre-vote and vote rounds, the new leader's first lease round and the clients'
	// retries. Fitted to the real node-kill (Calibrated).
	ElectionMin, ElectionMax time.Duration
	// Heartbeat is how often nodes report load and liveness; LiveWindow how long a node stays live
	// after its last heartbeat (the node's default: four heartbeats).
	Heartbeat, LiveWindow time.Duration
	// TaskCost is the share of a node's service rate a heavy background task takes while it runs;
	// TaskWait is how long a pending task waits for the node's leaderships to leave (bgtask).
	TaskCost float64
	TaskWait time.Duration
	// LoadEpsilon: a range's reported load changes only when the load it serves moved by more than
	// this fraction (or crossed zero), so that the ranges a snapshot shares with the previous one
	// stay shared (a real heartbeat's rates are as noisy).
	LoadEpsilon float64
	// ReconcileGap is the least time between two reconciliations of the executor triggered by steps
	// landing (the real executor reconciles every 200 ms and when a call returns, and runs reactive
	// rounds at most every 100 ms): 100 ms, the real floor; the scale scenario takes 1 s, as it pays
	// a snapshot of 100 000 ranges for each.
	ReconcileGap time.Duration
	// Host, if set with client threads, is the machine of a loopback cluster, the nodes' disks and
	// caches and the closed loop of clients that drives them (host.go); nil: an open-loop rate.
	Host *Host `json:",omitempty"`
}

// DefaultParams are the figures above.
func DefaultParams() Params {
	return Params{
		Cores: 2, OpsPerCore: 9000, WriteCost: 2.5, FollowerWriteCost: 1.5,
		DiskBytes:        512 << 30,
		SnapshotSendRate: operator.DefaultSnapshotRate, SnapshotRecvRate: 0,
		ApplyRate: operator.DefaultSnapshotRate / 0.73, SnapshotSetup: Calibrated.SnapshotSetup,
		ConfChange: Calibrated.ConfChange, Transfer: 300 * time.Millisecond,
		Split: 100 * time.Millisecond, Merge: 500 * time.Millisecond,
		ElectionMin: Calibrated.ElectionMin, ElectionMax: Calibrated.ElectionMax,
		Heartbeat: time.Second, LiveWindow: 4 * time.Second,
		TaskCost: 0.5, TaskWait: 30 * time.Second,
		LoadEpsilon:  0.02,
		ReconcileGap: 100 * time.Millisecond,
	}
}

func (p Params) validate() error {
	switch {
	case p.Cores <= 0 || p.OpsPerCore <= 0:
		return fmt.Errorf("sim: cores and ops per core must be positive")
	case p.Heartbeat <= 0 || p.ReconcileGap <= 0:
		// A zero gap would let an operator that fails at once be proposed, fail and be proposed
		// again at one instant for ever.
		return fmt.Errorf("sim: heartbeat and reconcile gap must be positive")
	case p.ElectionMax < p.ElectionMin:
		return fmt.Errorf("sim: election max below min")
	}
	return nil
}

// snapshotTime is how long a snapshot of b bytes takes from its start to the learner caught up,
// beyond its streaming time: its setup and its apply.
func (p Params) snapshotTime(b uint64) time.Duration {
	d := p.SnapshotSetup
	if p.ApplyRate > 0 {
		d += seconds(float64(b) / p.ApplyRate)
	}
	return d
}

// mu is a node's service rate in read-equivalents per second.
func (p Params) mu() float64 { return p.Cores * p.OpsPerCore }

// snapshotRate is the rate of one snapshot from a sender to a receiver.
func (p Params) snapshotRate() float64 {
	r := p.SnapshotSendRate
	if p.SnapshotRecvRate > 0 && (r <= 0 || p.SnapshotRecvRate < r) {
		r = p.SnapshotRecvRate
	}
	if r <= 0 {
		r = operator.DefaultSnapshotRate
	}
	return r
}

// Calibrated are the figures fitted to real runs of `shoal bench scenario` on one 2-core machine
// with emulated disks (docs/design/simulator.md, Calibration, gives the runs and the fit): what
// DefaultParams and the scenarios node-kill, join and decommission take from them.
var Calibrated = struct {
	// SnapshotSetup, ConfChange, ElectionMin and ElectionMax: Params'.
	SnapshotSetup, ConfChange, ElectionMin, ElectionMax time.Duration
	// The offered load of the scenarios run for real: the closed-loop threads' throughput after
	// the warm-up and before the first event, policy on (median of the runs; calibrate takes each
	// run's own). Join: the 40-s run of sim/testdata (load average 10–12). With Params.Host the
	// threads set the load; these stay the reference a killed leader's recovery is measured to.
	NodeKillOps, JoinOps, DecommissionOps float64
	// WriteIOs, ScanShare and StreamWriteBytes: Host's, fitted to the real decommission's and
	// join's 10-s throughput bins (docs/design/simulator.md, Calibration). The think time of each scenario's clients
	// (Host.Think) as fitted to its real run before the first event (calibrate fits each run's
	// own): 0 where the disks bind even without it.
	WriteIOs, ScanShare, StreamWriteBytes       float64
	NodeKillThink, JoinThink, DecommissionThink time.Duration
}{
	SnapshotSetup: 0, ConfChange: 1300 * time.Millisecond, ElectionMin: 3 * time.Second, ElectionMax: 4 * time.Second,
	NodeKillOps: 6168, JoinOps: 1705, DecommissionOps: 3118,
	WriteIOs: 1, ScanShare: 0.3, StreamWriteBytes: 24 << 10,
	NodeKillThink: time.Millisecond, JoinThink: 0, DecommissionThink: 0,
}

// loopback is bench/scenario's machine for a scenario run for real: threads closed-loop clients
// with think time think, every node on the 2-core machine and on an emulated disk of iops
// operations per second, 64 MiB/s each way and latency per operation, with a block cache of
// cacheMiB less what Pebble reserves in it for memtables (blockRoom), and
// snapshot streams read in operations of streamRead bytes (the readahead window, or a 4-KiB block).
func loopback(threads int, think time.Duration, iops float64, latency time.Duration, cacheMiB, streamRead float64) func(*Params) {
	return func(p *Params) {
		p.Host = &Host{Threads: threads, Think: think, IOPS: iops, ReadBytesPerSec: 64 << 20, WriteBytesPerSec: 64 << 20,
			DiskLatency: latency, CacheBytes: blockRoom(cacheMiB), BlockBytes: 4 << 10, RecordBytes: 300,
			WriteIOs: Calibrated.WriteIOs, StreamReadBytes: streamRead, StreamWriteBytes: Calibrated.StreamWriteBytes,
			ScanShare:   Calibrated.ScanShare,
			SharedCores: 2}
	}
}

// ownMachines gives every node a machine of its own under an open loop (Host.open): its cores
// (Params.Cores), a disk of iops operations per second, 64 MiB/s each way and latency per operation,
// snapshot streams read in 128-KiB operations (readahead), and a block cache of cacheMiB less the
// memtables' reservation (blockRoom).
func ownMachines(iops float64, latency time.Duration, cacheMiB float64) func(*Params) {
	return func(p *Params) {
		p.Host = &Host{IOPS: iops, ReadBytesPerSec: 64 << 20, WriteBytesPerSec: 64 << 20, DiskLatency: latency,
			CacheBytes: blockRoom(cacheMiB), BlockBytes: 4 << 10, RecordBytes: 300,
			WriteIOs: Calibrated.WriteIOs, StreamReadBytes: 128 << 10, StreamWriteBytes: Calibrated.StreamWriteBytes,
			ScanShare: Calibrated.ScanShare}
	}
}

// blockRoom is the bytes a block cache of cacheMiB holds for blocks beside the memtables a real
// node of that cache runs: bench/scenario gives them an eighth of the cache each, and Pebble
// charges two to the cache — the one filling and the one flushing or kept for reuse
// (storage.Stats.BlockCacheCapacity).
func blockRoom(cacheMiB float64) float64 { return cacheMiB * (1 << 20) * 3 / 4 }

// machineModel is the usage model (plan/usage) of a node of p's cores with a disk of iops: what
// `shoal bench usage-train` would fit on it. A read that hits is CPU, a miss CPU and a disk
// operation, a write CPU on the leader and WriteIOs operations, a scanned block an operation.
func machineModel(p Params, iops float64) usage.Model {
	m := usage.Default
	cpu := 1 / p.mu()
	m.HitCost, m.MissCost = cpu, cpu+1/iops
	m.Write = p.WriteCost*cpu + Calibrated.WriteIOs/iops
	m.Scan = 1 / iops
	return m
}

// geometric is n rates from first, each factor times the last, rounded.
func geometric(first, factor float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = math.Round(first * math.Pow(factor, float64(i)))
	}
	return out
}
