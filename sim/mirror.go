package sim

import (
	"time"

	"github.com/shoaldb/shoal/autopilot/policy"
	"github.com/shoaldb/shoal/bench/scenario/shape"
)

// The scenarios bench/scenario also runs on a real cluster take their size, data, load and
// schedule from the same shape; what is the simulator's own (the offered load or the fitted
// clients' think time, where the real run placed its replicas, a task's length) is set here.
// A shape's Pace and Probe apply to closed-loop clients (onLoopback); an open loop offers its rate.

// mirror is the simulated scenario of sh: its nodes, ranges, records, read share, duration and
// events. Gathering leaderships becomes the cluster's starting placement, balancing them its
// default; the other events are the simulator's own actions of the same names.
func mirror(sh shape.Shape, desc string) Scenario {
	sc := Scenario{Name: sh.Name, Description: desc, Nodes: sh.Nodes, Ranges: sh.Ranges(),
		RecordsPerRange: int64(sh.Records / sh.Ranges()), ValueBytes: uint64(sh.ValueBytes), Workload: "zipfian",
		ReadFraction: sh.ReadFraction, Duration: sh.Duration, Warmup: sh.Warmup, Pace: sh.Pace, Probe: sh.Probe}
	for _, e := range sh.Events {
		switch e.Do {
		case shape.Gather:
			sc.GatherLeaders = true
		case shape.BalanceLeaders:
		default:
			sc.Events = append(sc.Events, Event{At: e.At, Do: e.Do})
		}
	}
	return sc
}

// onLoopback runs sc on the model of the machine sh's real run shares (loopback): sh's client
// threads with think time think, its disks, caches and snapshot links; ops is the reference load.
func onLoopback(sc Scenario, sh shape.Shape, think time.Duration, ops float64) Scenario {
	d := sh.Disk()
	streamRead := float64(4 << 10) // a block a read, without readahead
	if d.ReadaheadBytes > 0 {
		streamRead = float64(d.ReadaheadBytes)
	}
	host := loopback(sh.Threads, think, float64(d.IOPS), d.Latency, float64(sh.Cache())/(1<<20), streamRead)
	link := float64(sh.LinkBytesPerSec)
	sc.OpsPerSec = ops
	sc.Params = func(p *Params) {
		if link > 0 {
			p.SnapshotSendRate, p.SnapshotRecvRate = link, link
		}
		host(p)
	}
	return sc
}

func mirroredNodeKill() Scenario {
	sc := onLoopback(mirror(shape.NodeKill, "3 nodes, one range; at t=8s the range's leader is killed, at t=15s restarted; policy replicate"),
		shape.NodeKill, Calibrated.NodeKillThink, Calibrated.NodeKillOps)
	sc.LeadBy, sc.Policy = 2, policy.NameReplicate
	return sc
}

func mirroredJoin() Scenario {
	sc := onLoopback(mirror(shape.Join, "3 nodes, 24 ranges, 160k records, YCSB B zipfian; at t=55s a 4th node joins (4 MiB/s links); "+
		"policy incremental_join"), shape.Join, Calibrated.JoinThink, Calibrated.JoinOps)
	sc.Policy, sc.Pin = policy.NameJoin, noMoves
	return sc
}

// mirroredDecommission places the replicas as the real run does: user ranges on n1–n3 led by n2,
// the meta range on n1, n2, n4.
func mirroredDecommission() Scenario {
	sc := onLoopback(mirror(shape.Decommission, "4 nodes, 24 ranges, 144k records, YCSB 90/10 zipfian; at t=20s n3, the last node "+
		"holding user replicas, is decommissioned, its 24 replicas moving to n4 (which holds a meta replica only); policy decommission"),
		shape.Decommission, Calibrated.DecommissionThink, Calibrated.DecommissionOps)
	sc.Empty, sc.LeadBy, sc.MetaOn = 1, 2, []uint64{1, 2, 4}
	sc.Policy, sc.Pin = policy.NameDecommission, noMoves
	return sc
}

// mirroredCompaction is an open loop at a fixed rate, without the host model; the compaction a task
// of 40 s.
func mirroredCompaction() Scenario {
	sc := mirror(shape.Compaction, "3 nodes, 6 ranges, 160k records, all led by one node; at t=40s a 40-s full compaction on it; "+
		"policy shed_leadership")
	sc.OpsPerSec, sc.Policy, sc.Pin = 12000, policy.NameShed, noMoves
	for i := range sc.Events {
		if sc.Events[i].Do == Compaction {
			sc.Events[i].N = 40
		}
	}
	return sc
}
