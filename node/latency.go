package node

import (
	"sync"
	"time"

	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/pb"
)

// rangeLatency keeps a latency recorder per range this node serves requests for. kv reports every
// served request (observer.Served); each heartbeat takes the window of every local range and ships
// the leaders' windows in its range loads, where the autopilot's model finds them
// (model.Range.Latency) and the decision log turns them into a decision's p99 before and after.
type rangeLatency struct {
	// recorders maps range id → *model.LatencyRecorder; a sync.Map keeps the per-request lookup off
	// a node-wide lock (the same choice as the key samplers').
	recorders sync.Map
}

// record notes a request on rangeID that took d. It is on the request path: a map load and an atomic
// add, and an allocation only for a range's first request.
func (l *rangeLatency) record(rangeID uint64, d time.Duration) {
	rec, ok := l.recorders.Load(rangeID)
	if !ok {
		rec, _ = l.recorders.LoadOrStore(rangeID, model.NewLatencyRecorder())
	}
	rec.(*model.LatencyRecorder).Record(d)
}

// take ends rangeID's window at at (nil: no request in it).
func (l *rangeLatency) take(rangeID uint64, at time.Time) *model.LatencyHistogram {
	rec, ok := l.recorders.Load(rangeID)
	if !ok {
		return nil
	}
	return rec.(*model.LatencyRecorder).Take(at)
}

// retain drops the recorders of the ranges not in keep (no longer on this node), so memory stays
// bounded by the node's replicas. A request racing with the drop may go uncounted.
func (l *rangeLatency) retain(keep map[uint64]loadMark) {
	l.recorders.Range(func(id, _ any) bool {
		if _, ok := keep[id.(uint64)]; !ok {
			l.recorders.Delete(id)
		}
		return true
	})
}

// fillLatency puts h into rl (nothing for nil).
func fillLatency(rl *pb.RangeLoad, h *model.LatencyHistogram) {
	if h == nil {
		return
	}
	rl.LatencyBuckets, rl.LatencyCounts, rl.LatencyAtUnixNanos = h.Buckets, h.Counts, h.At.UnixNano()
}
