package hints

import "time"

// The drain and the batches it feeds run on the node's scheduler threads like its requests. With one
// thread (GOMAXPROCS=1: a node given one CPU) a request that arrives while the shipper drains a busy
// 90-ms window waits for the whole drain (0.5-1.7 ms in two profiles on a 2-core machine, before
// the batches' hand-written wire encoding cut a drain's in-process cost by ~38 %): with hints on, an
// unsaturated leader's p99 rose 7-9 % there and its median did not (3-6 % paced; two runs each,
// and the gain in throughput was within the runs' noise). So the drain works in slices and, between them, parks for a moment: parked, it lets the
// scheduler poll the network and run the requests waiting. runtime.Gosched would not do: it runs
// the yielding goroutine again before the scheduler looks at the network.
const (
	// drainSlice is how long the drainer works before it pauses.
	drainSlice = 100 * time.Microsecond
	// drainPause is how long it parks: any positive sleep makes the scheduler poll the network first;
	// with nothing else to run the sleep lasts the timer's resolution (about a millisecond), which a
	// batch every 90 ms can afford a few times.
	drainPause = 20 * time.Microsecond
)

// pacer slices a drain. It is not safe for concurrent use: each drain has its own.
type pacer struct {
	now   func() time.Time
	sleep func(time.Duration)
	since time.Time
	// pauses counts the pauses taken (tests).
	pauses int
}

func newPacer() *pacer {
	p := &pacer{now: time.Now, sleep: time.Sleep}
	p.since = p.now()
	return p
}

// pace pauses if the drainer has worked a whole slice since the last pause. A nil pacer never does.
func (p *pacer) pace() {
	if p == nil || p.now().Sub(p.since) < drainSlice {
		return
	}
	p.sleep(drainPause)
	p.pauses++
	p.since = p.now()
}
