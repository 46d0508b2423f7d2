package node

import (
	"errors"
	"time"

	"github.com/shoaldb/shoal/node/accessstats"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/plan/usage"
	"github.com/shoaldb/shoal/replica"
	"github.com/shoaldb/shoal/storage"
)

// placeBudget bounds the time one heartbeat spends placing sampled keys in their ranges. Placing a
// key reads table indexes, from disk once a node's hot reads have evicted them from its cache, and
// on a saturated disk each such read waits behind the node's whole queue: a heartbeat that placed
// every key arrived seconds late, so the autopilot saw a hot node's load and utilization only
// after its hot spot had ended. Keys left when the budget is spent go unplaced (the histogram
// has fewer samples for that window).
const placeBudget = 50 * time.Millisecond

// errPlaceBudget is the answer to a key placed after the heartbeat's placeBudget.
var errPlaceBudget = errors.New("node: the heartbeat's time for placing sampled keys is spent")

// fillAccess ends r's access-statistics window and puts its report in rl: the heartbeat carries it
// to the autopilot's usage model. points is r's point reads since the previous report; keys are
// placed until placeBy (the heartbeat's placeBudget, shared by its ranges).
func (n *Node) fillAccess(rl *pb.RangeLoad, r *replica.Replica, points uint64, now, placeBy time.Time) {
	if n.access == nil || r.IsMeta() {
		return
	}
	d := r.Desc()
	if d == nil {
		return
	}
	lo, _ := storage.DataSpan(false, d.StartKey, d.EndKey)
	in := accessstats.Input{PointReads: points, BlockBytes: n.eng.BlockBytes(),
		Offset: func(k []byte) (uint64, error) {
			if time.Now().After(placeBy) {
				return 0, errPlaceBudget
			}
			return n.eng.Offset(lo, storage.UserDataKey(k))
		}}
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

// predictUsage is the node's usage and hit ratio as the usage model predicts them from st's ranges:
// the point reads and scanned blocks of the ranges it leads, their merged block-access histograms
// in its cache, and the writes every replica applies.
func predictUsage(st *pb.NodeStats, m usage.Model) (u, hit float64) {
	var l usage.Load
	var hs []usage.Histogram
	for _, rl := range st.Ranges {
		l.Writes += rl.WriteQps
		if !rl.Leader {
			continue
		}
		l.Reads += max(rl.ReadQps-rl.ScanQps, 0)
		l.Scans += rl.ScanBlocksQps
		h := make(usage.Histogram, 0, len(rl.HistRates))
		for i, r := range rl.HistRates {
			if i < len(rl.HistBlocks) {
				h = append(h, usage.Bucket{Rate: r, Blocks: rl.HistBlocks[i]})
			}
		}
		hs = append(hs, h)
	}
	cache := 0.0
	if st.BlockBytes > 0 {
		cache = float64(st.BlockCacheCapacity) / float64(st.BlockBytes)
	}
	hit = usage.HitRatio(usage.Merge(hs...), cache)
	return m.Predict(l, hit), hit
}

// copyAccess puts the access statistics of the last heartbeat's report prev in rl (status pages
// show the last window's, as they show its rates).
func copyAccess(rl, prev *pb.RangeLoad) {
	rl.MeasuredReads, rl.MeasuredReadHits = prev.MeasuredReads, prev.MeasuredReadHits
	rl.MeasuredBlockBytes, rl.MeasuredBlockBytesInCache = prev.MeasuredBlockBytes, prev.MeasuredBlockBytesInCache
	rl.ScanRowsQps, rl.ScanBlocksQps = prev.ScanRowsQps, prev.ScanBlocksQps
	rl.HistRates, rl.HistBlocks = prev.HistRates, prev.HistBlocks
}
