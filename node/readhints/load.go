package readhints

import (
	"github.com/shoaldb/shoal/hints"
)

// DefaultDiskWeight is what a saturated disk counts for in the load read hints adapt to, on a node
// that serves reads (Config.DiskWeight).
//
// Replaying hints costs the receiver's disk what the leader's misses cost the leader's. Where the
// disk is the bottleneck, that comes straight out of the node's own clients: in the join scenario
// (250-IOPS disks, data 3x the cache) every node's disk was saturated and hints cost ~27 % of the
// throughput (the join scenario), while the CPU-based signal read low and applied every hint.
// A disk that serves closed-loop clients reads 100 % busy whenever it is the bottleneck, overloaded
// or not, so a saturated disk must not stop replays (CPU overload still does): at 0.85 the applied
// fraction falls to about a third with the applier's default curve (full at 0.7, 10 % at 0.9), the
// same hash-selected subset on every node. A node that leads no range is left alone: its disk serves
// only replays and raft writes, and slowing replays there would buy nothing.
const DefaultDiskWeight = 0.85

// DefaultDiskReadShare is the most of a node's disk reads (block-cache misses) that replaying
// hints may cause while the node serves clients from a saturated disk (Config.DiskReadShare).
//
// The disk weight above replays a share of the hints; what they cost is their misses, and after a
// join most of them miss (the new node is cold; the old ones' caches hold ranges they gave away):
// on join-surge's saturated disks hints then cost 15 % of the throughput (the join-surge scenario). A budget on the misses themselves keeps replays that hit, which cost no disk, and
// limits the cost on a saturated disk to about this share of its reads.
const DefaultDiskReadShare = 0.05

// diskSaturatedAt is the disk utilization above which a serving node's replays are budgeted.
const diskSaturatedAt = 0.9

// diskSaturated reports whether the node serves clients from a disk that is the bottleneck.
func diskSaturated(disk func() float64, serves func() bool) func() bool {
	return func() bool { return serves() && disk() >= diskSaturatedAt }
}

// hintLoad is the node's load signal for read hints: the larger of the CPU load and, while the node
// leads a user range, weight × its disk's utilization.
func hintLoad(cpu, disk func() float64, serves func() bool, weight float64) hints.LoadFunc {
	return func() float64 {
		l := cpu()
		if weight > 0 && l < weight && serves() {
			l = max(l, weight*disk())
		}
		return l
	}
}
