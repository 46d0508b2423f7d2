package supervisor

import (
	"context"
	"fmt"
	"time"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/plan/profileplan"
	"github.com/shoaldb/shoal/replica"
	"github.com/shoaldb/shoal/stopper"
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

// RewriteShare is the share of the disk's time a profile's rewrite takes: after each piece it
// pauses (1/RewriteShare − 1) times as long as the piece took. At the disk's full budget the scan
// node's rewrite was the lowest 10-s bins of a reconfiguration (55–62 % of the level before it):
// the node follows the ranges it shed meanwhile, and its appends and syncs, which the ranges'
// writes wait on when another voter is slow, queued behind the compaction's reads and writes.
const RewriteShare = 0.5

// pacer runs pieces of work at a share of the time: after a piece that took d it sleeps
// d·(1/share − 1). now and sleep are the clock (a fake one in tests).
type pacer struct {
	share float64
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error
}

// realPacer paces at RewriteShare on the wall clock.
var realPacer = pacer{share: RewriteShare, now: time.Now, sleep: stopper.SleepContext}

// run compacts each piece with compact, pausing after each but the last.
func (p pacer) run(ctx context.Context, pieces []span, compact func(ctx context.Context, lo, hi []byte) error) error {
	for i, sp := range pieces {
		start := p.now()
		if err := compact(ctx, sp.lo, sp.hi); err != nil {
			return fmt.Errorf("rewrite piece %d of %d: %w", i+1, len(pieces), err)
		}
		if i == len(pieces)-1 || p.share >= 1 || p.share <= 0 {
			continue
		}
		if err := p.sleep(ctx, time.Duration(float64(p.now().Sub(start))*(1/p.share-1))); err != nil {
			return fmt.Errorf("pause after rewrite piece %d of %d: %w", i+1, len(pieces), err)
		}
	}
	return nil
}

// wholeStore is the engine key span CompactAll compacts.
var wholeStore = span{[]byte{0x00}, []byte{0xff}}

// pieces splits each of spans (nil: the whole store) at the start keys of the tables of the lowest
// level holding any of it: a manual compaction takes whole tables, so that is the least it can
// rewrite at a time (a table of the levels above spanning several pieces goes with the first).
func pieces(e *storage.Engine, spans []span) ([]span, error) {
	if spans == nil {
		spans = []span{wholeStore}
	}
	var out []span
	for _, sp := range spans {
		cuts, err := e.BottomTableStarts(sp.lo, sp.hi)
		if err != nil {
			return nil, err
		}
		lo := sp.lo
		for _, k := range cuts {
			out = append(out, span{lo, k})
			lo = k
		}
		out = append(out, span{lo, sp.hi})
	}
	return out, nil
}

// compactSpans compacts each of spans of e down to its bottom level, or the whole store when
// spans is nil, a table's worth at a time at RewriteShare of the time (pieces, pacer).
func compactSpans(ctx context.Context, e *storage.Engine, spans []span) error {
	ps, err := pieces(e, spans)
	if err != nil {
		return err
	}
	return realPacer.run(ctx, ps, e.CompactSpan)
}

// descsOf are the descriptors of the replicas of r.
func descsOf(rs []*replica.Replica) []*pb.RangeDescriptor {
	out := make([]*pb.RangeDescriptor, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.Desc())
	}
	return out
}
