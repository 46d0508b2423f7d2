package scenario

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoaldb/shoal/stopper"
)

// A closed loop of client threads offers all the load the cluster can take: its throughput is the
// bottleneck's capacity, and every wobble of that capacity (a cache still warming, an emulated
// disk's queue, another process on the machine's cores) shows in the 1-s throughput — a
// "steady state" that swings by a fifth. An event's dip then cannot be told from the background's.
// A paced workload offers a fixed rate below capacity instead (YCSB's -target): the steady state is
// that rate, and an event shows as the rate no longer being met and as latency.

// maxPaceLag is how far a paced workload may fall behind its schedule before the missed slots are
// dropped rather than fired in a burst: an overloaded cluster loses that load, as clients who give
// up do, instead of having it replayed the moment it recovers (which would hide the dip).
const maxPaceLag = 100 * time.Millisecond

// pacer spaces the operations of every client thread together at one rate; until a rate is set,
// they run closed-loop.
type pacer struct {
	interval atomic.Int64 // nanoseconds between operations; 0: not paced
	mu       sync.Mutex
	next     time.Time
}

// setRate paces the threads at opsPerSec together (0: closed loop again).
func (p *pacer) setRate(opsPerSec float64) {
	if opsPerSec <= 0 {
		p.interval.Store(0)
		return
	}
	p.interval.Store(int64(float64(time.Second) / opsPerSec))
}

// wait blocks until the caller's slot in the schedule.
func (p *pacer) wait(ctx context.Context) error {
	iv := time.Duration(p.interval.Load())
	if iv == 0 {
		return nil
	}
	p.mu.Lock()
	now := time.Now()
	if p.next.Before(now.Add(-maxPaceLag)) {
		p.next = now
	}
	at := p.next
	p.next = p.next.Add(iv)
	p.mu.Unlock()
	d := time.Until(at)
	if d <= 0 {
		return nil
	}
	return stopper.SleepContext(ctx, d)
}

// paceRate is the rate a paced scenario offers: opts' fixed rate, else the fraction sc.Pace of the
// throughput the closed loop reached over the second half of the warm-up (series so far).
func paceRate(sc Scenario, opts Options, series []Point) float64 {
	if opts.Rate > 0 {
		return opts.Rate
	}
	from := sc.Warmup.Seconds() / 2
	var sum, n float64
	for _, p := range series {
		if p.T-1 >= from {
			sum, n = sum+float64(p.Ops), n+1
		}
	}
	if n == 0 {
		return 0
	}
	return sc.Pace * sum / n
}
