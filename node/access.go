package node

import (
	"time"

	"github.com/shoaldb/shoal/node/accessstats"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
	"github.com/shoaldb/shoal/storage"
)

// fillAccess ends r's access-statistics window and puts its report in rl: the heartbeat carries it
// to the autopilot's usage model. points is r's point reads since the previous report.
func (n *Node) fillAccess(rl *pb.RangeLoad, r *replica.Replica, points uint64, now time.Time) {
	if n.access == nil || r.IsMeta() {
		return
	}
	d := r.Desc()
	if d == nil {
		return
	}
	lo, _ := storage.DataSpan(false, d.StartKey, d.EndKey)
	in := accessstats.Input{PointReads: points, BlockBytes: n.eng.BlockBytes(),
		Offset: func(k []byte) (uint64, error) { return n.eng.Offset(lo, storage.UserDataKey(k)) }}
	if rl.Leader {
		in.Bytes = r.ApproximateBytes()
	}
	rep := n.access.Take(r.RangeID(), in, now)
	rl.MeasuredReads, rl.MeasuredReadHits = rep.Measured, rep.Hits
	rl.MeasuredBlockBytes, rl.MeasuredBlockBytesInCache = rep.PointBytes, rep.PointHit
	rl.ScanRowsQps, rl.ScanBlocksQps = rep.ScanRowsQPS, rep.ScanBlocksQPS
	if !rl.Leader {
		return // a follower serves few reads: its histogram would misstate the range's
	}
	for _, b := range rep.Hist {
		rl.HistRates = append(rl.HistRates, b.Rate)
		rl.HistBlocks = append(rl.HistBlocks, b.Blocks)
	}
}
