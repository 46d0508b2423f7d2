package autopilothost

import (
	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/pb"
)

// accessOf is the access statistics of a leader's range load for the usage model (nil: none
// reported, or a malformed histogram).
func accessOf(rl *pb.RangeLoad) *model.Access {
	if rl.MeasuredReads == 0 && rl.ScanBlocksQps == 0 && len(rl.HistRates) == 0 {
		return nil
	}
	if len(rl.HistRates) != len(rl.HistBlocks) {
		return nil
	}
	a := &model.Access{MeasuredReads: rl.MeasuredReads, MeasuredHits: rl.MeasuredReadHits,
		ScanRowsQPS: rl.ScanRowsQps, ScanBlocksQPS: rl.ScanBlocksQps}
	for i, r := range rl.HistRates {
		a.Hist = append(a.Hist, model.AccessBucket{Rate: r, Blocks: rl.HistBlocks[i]})
	}
	return a
}
