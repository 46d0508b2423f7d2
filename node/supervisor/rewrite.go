package supervisor

import (
	"context"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/plan/profileplan"
	"github.com/shoaldb/shoal/replica"
	"github.com/shoaldb/shoal/storage"
)

// What a profile change rewrites with its block size. Pebble writes a block size into the tables
// it writes only, so the rewrite is a manual compaction; on a seek-bound disk it is most of a
// restart, and the node serves none of its leaderships meanwhile.

// minScanQPS: a range scanned less often than this a second gains too little from larger blocks to
// be rewritten for them (node_profiles does not classify a range under 1 request a second).
const minScanQPS = 1.0

// span is an engine key span [lo, hi).
type span struct{ lo, hi []byte }

// scanSpans are the engine spans of the user ranges among descs whose reads are mostly scans
// (more than profileplan.Threshold of them, the classifier's share, and at least minScanQPS a
// second, as c's heartbeats report them): what larger blocks serve better. A range of point reads
// reads no faster from 128 KiB blocks (it loads more for each), and the whole store's rewrite for
// the scan profile took 122 s of a 143-s restart at 150 operations a second, while the node's
// leaderships loaded the other nodes' disks.
func scanSpans(descs []*pb.RangeDescriptor, c cluster) []span {
	out := []span{}
	for _, d := range descs {
		if d.GetRangeId() == replica.MetaRangeID {
			continue
		}
		m := c.scanned[d.GetRangeId()]
		if m[1] < minScanQPS || m[1] <= profileplan.Threshold*m[0] {
			continue
		}
		lo, hi := storage.DataSpan(false, d.GetStartKey(), d.GetEndKey())
		out = append(out, span{lo, hi})
	}
	return out
}

// rewriteSpans are the spans a change to profile rewrites when it rewrites (rewrites): for the
// scan profile the ranges the node holds whose reads are mostly scans (scanSpans, by the view c,
// taken before the shed); the whole store (nil) when the blocks shrink — every point read then
// loads less — or without a view of the ranges' reads.
func rewriteSpans(descs []*pb.RangeDescriptor, c cluster, known bool, profile string) []span {
	if !known || profile != "scan" {
		return nil
	}
	return scanSpans(descs, c)
}

// compactSpans compacts each of spans of e down to its bottom level, or the whole store when
// spans is nil.
func compactSpans(ctx context.Context, e *storage.Engine, spans []span) error {
	if spans == nil {
		return e.CompactAll(ctx)
	}
	for _, sp := range spans {
		if err := e.CompactSpan(ctx, sp.lo, sp.hi); err != nil {
			return err
		}
	}
	return nil
}

// descsOf are the descriptors of the replicas of r.
func descsOf(rs []*replica.Replica) []*pb.RangeDescriptor {
	out := make([]*pb.RangeDescriptor, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.Desc())
	}
	return out
}
