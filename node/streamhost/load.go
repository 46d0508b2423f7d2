package streamhost

import (
	"sync"
	"time"

	"github.com/shoaldb/shoal/autopilot/model"
)

// streamSampleSize is how many event keys a range's window keeps: enough for a median within a few
// percent of the events (stream_align splits there), small enough for a heartbeat.
const streamSampleSize = 256

// rangeLoad is the stream load of one range at this node: the events its tasks applied and a sample
// of their keys, since the last heartbeat took them.
type rangeLoad struct {
	mu      sync.Mutex
	since   time.Time
	sampler *model.KeySampler
}

// record notes n applied events of key in rangeID's window.
func (h *Host) record(rangeID uint64, key []byte, n int) {
	v, ok := h.loads.Load(rangeID)
	if !ok {
		v, _ = h.loads.LoadOrStore(rangeID, &rangeLoad{since: time.Now(), sampler: model.NewKeySampler(streamSampleSize, rangeID)})
	}
	l := v.(*rangeLoad)
	for range n {
		l.sampler.Record(key)
	}
}

// TakeLoad ends rangeID's window at now: the events a second its tasks applied in it and the sample
// of their keys (0, nil: none since the last call). The heartbeat calls it for the ranges the node
// leads; the windows of ranges it does not lead are dropped by Retain.
func (h *Host) TakeLoad(rangeID uint64, now time.Time) (float64, *model.KeySample) {
	v, ok := h.loads.Load(rangeID)
	if !ok {
		return 0, nil
	}
	l := v.(*rangeLoad)
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.sampler.Take(now)
	dt := now.Sub(l.since).Seconds()
	l.since = now
	if s.Requests == 0 || dt <= 0 {
		return 0, nil
	}
	return float64(s.Requests) / dt, s
}

// Retain forgets the windows of the ranges keep refuses (no longer led here).
func (h *Host) Retain(keep func(rangeID uint64) bool) {
	h.loads.Range(func(k, _ any) bool {
		if !keep(k.(uint64)) {
			h.loads.Delete(k)
		}
		return true
	})
}
