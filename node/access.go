package node

import (
	"context"
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
		in.Upper = n.indexFilter.Upper(lo) // listed with the index and filter bytes (≤ 2 s old)
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

// predictUsage is the node's usage and hit ratio as the usage model predicts them from st's ranges
// (HeardLoad).
func predictUsage(st *pb.NodeStats, m usage.Model) (u, hit float64) {
	l, h, room := HeardLoad(st)
	hit = usage.HitRatio(h, room)
	return m.Predict(l, hit), hit
}

// HeardLoad is a node's load as its report st gives it — the point reads and scanned blocks of the
// ranges it leads, the writes every replica applies — its leaders' merged block-access histogram,
// and its cache's room for data blocks (DataBlockRoom): what the usage model predicts it from.
func HeardLoad(st *pb.NodeStats) (usage.Load, usage.Histogram, float64) {
	var l usage.Load
	var h usage.Histogram
	for _, rl := range st.GetRanges() {
		l.Writes += rl.GetWriteQps()
		if !rl.GetLeader() {
			continue
		}
		l.Reads += max(rl.GetReadQps()-rl.GetScanQps(), 0)
		l.Scans += rl.GetScanBlocksQps()
		for i, r := range rl.GetHistRates() {
			if i < len(rl.GetHistBlocks()) {
				h = append(h, usage.Bucket{Rate: r, Blocks: rl.GetHistBlocks()[i]})
			}
		}
	}
	return l, h, DataBlockRoom(st)
}

// DataBlockRoom is the room st's block cache has for data blocks, in blocks: its room for blocks
// less what index and filter blocks take (0: not reported).
func DataBlockRoom(st *pb.NodeStats) float64 {
	room, idx := st.GetBlockCacheCapacity(), st.GetIndexFilterBytes()
	if st.GetBlockBytes() == 0 || room <= idx {
		return 0
	}
	return float64(room-idx) / float64(st.GetBlockBytes())
}

// indexFilterEvery is how often the node measures the bytes of its index and filter blocks. The
// measure runs on a loop of its own, not in the heartbeat: a new table's properties are a disk read,
// which on a saturated disk waits behind the node's whole queue (see placeBudget).
const indexFilterEvery = 2 * time.Second

// measureIndexFilter measures the block cache's bytes of index and filter blocks of the tables the
// ranges the node leads lie in; the heartbeat reports the last measure, at most the cache's room.
// A failure keeps the last measure.
func (n *Node) measureIndexFilter(context.Context) {
	var led []accessstats.Span
	for _, r := range n.Store().Replicas() {
		d := r.Desc()
		if leader, _ := r.LeaderTerm(); !leader || d == nil || r.IsMeta() {
			continue
		}
		lo, hi := storage.DataSpan(false, d.StartKey, d.EndKey)
		led = append(led, accessstats.Span{Lo: lo, Hi: hi})
	}
	b, err := n.indexFilter.Bytes(n.eng, led, time.Now())
	if err != nil {
		n.log.Debug("index and filter bytes", "err", err)
		return
	}
	n.indexFilterBytes.Store(b)
}

// copyAccess puts the access statistics of the last heartbeat's report prev in rl (status pages
// show the last window's, as they show its rates).
func copyAccess(rl, prev *pb.RangeLoad) {
	rl.MeasuredReads, rl.MeasuredReadHits = prev.MeasuredReads, prev.MeasuredReadHits
	rl.MeasuredBlockBytes, rl.MeasuredBlockBytesInCache = prev.MeasuredBlockBytes, prev.MeasuredBlockBytesInCache
	rl.ScanRowsQps, rl.ScanBlocksQps = prev.ScanRowsQps, prev.ScanBlocksQps
	rl.HistRates, rl.HistBlocks = prev.HistRates, prev.HistBlocks
}
