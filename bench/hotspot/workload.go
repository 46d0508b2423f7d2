package hotspot

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/shoaldb/shoal/bench/report"
	"github.com/shoaldb/shoal/client"
)

// window is the width of a penalty sample (the thesis's 500 ms).
const window = 500 * time.Millisecond

// workload reads at a fixed rate per range (an open loop: a read is due at its scheduled time and
// its latency counts from then, so a backlog shows), the hot prefix's ranges Factor times faster
// while hot. It records each read's latency, failed or not, in the 500 ms window it completed in.
// Its goroutines are its own: stop ends them.
type workload struct {
	o      Options
	cl     *client.Client
	hotSet []int
	hot    atomic.Bool
	busy   atomic.Int64 // reads taken by a worker and not yet answered
	jobs   chan job
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	t0    time.Time
	hists map[int64]*hdrhistogram.Histogram // by window index from t0
	errs  map[int64]int64
}

type job struct {
	key []byte
	due time.Time
}

// workers bounds the reads in flight: enough for the hot load's backlog on a slow disk.
const workers = 256

func startWorkload(ctx context.Context, cl *client.Client, o Options, hotSet []int) *workload {
	ctx, cancel := context.WithCancel(ctx)
	w := &workload{o: o, cl: cl, hotSet: hotSet, jobs: make(chan job, 1<<16), cancel: cancel,
		t0: time.Now(), hists: map[int64]*hdrhistogram.Histogram{}, errs: map[int64]int64{}}
	for range workers {
		w.wg.Go(func() { w.serve(ctx) })
	}
	w.wg.Go(func() { w.schedule(ctx) })
	return w
}

func (w *workload) stop() {
	w.cancel()
	w.wg.Wait()
}

func (w *workload) setHot(on bool) { w.hot.Store(on) }

// backlog is the reads due and not yet answered: queued, or taken by a worker.
func (w *workload) backlog() int { return len(w.jobs) + int(w.busy.Load()) }

// schedule issues each range's reads at its rate, every 5 ms.
func (w *workload) schedule(ctx context.Context) {
	rng := rand.New(rand.NewPCG(w.o.Seed, 99))
	credit := make([]float64, w.o.Ranges)
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			dt := now.Sub(last).Seconds()
			last = now
			hot := w.hot.Load()
			for r := range credit {
				rate := float64(w.o.Rate)
				if hot && contains(w.hotSet, r) {
					rate *= w.o.Factor
				}
				credit[r] += rate * dt
				for ; credit[r] >= 1; credit[r]-- {
					j := job{key: rangeKey(r, rng.IntN(w.o.KeysPerRange)), due: now}
					select {
					case w.jobs <- j:
					default:
						w.record(now, 0, true) // the backlog is full: counted as failed
					}
				}
			}
		}
	}
}

func (w *workload) serve(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case j := <-w.jobs:
			w.busy.Add(1)
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, _, err := w.cl.Get(rctx, j.key)
			cancel()
			w.busy.Add(-1)
			if ctx.Err() != nil {
				return
			}
			w.record(time.Now(), time.Since(j.due), err != nil)
		}
	}
}

func (w *workload) record(at time.Time, lat time.Duration, failed bool) {
	i := int64(at.Sub(w.t0) / window)
	w.mu.Lock()
	defer w.mu.Unlock()
	// A read that failed (a client timeout, 10 s) still waited: its wait counts toward the window's
	// p99 as a slow answer would, or a backlog past the timeout would lower the penalty. One never
	// issued (the queue full) has no wait to count.
	if failed {
		w.errs[i]++
		if lat == 0 {
			return
		}
	}
	h := w.hists[i]
	if h == nil {
		h = report.NewHist()
		w.hists[i] = h
	}
	_ = h.RecordValue(report.ClampUs(lat))
}

// windows returns the p99 (ms) of each 500 ms window from start to end, and the reads and errors in
// them.
func (w *workload) windows(start, end time.Time) (p99s []float64, reads, errs int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := int64(start.Sub(w.t0) / window); i < int64(end.Sub(w.t0)/window); i++ {
		h := w.hists[i]
		p := 0.0
		if h != nil {
			p = float64(h.ValueAtQuantile(99)) / 1000
			reads += h.TotalCount()
		}
		p99s = append(p99s, p)
		errs += w.errs[i]
	}
	return p99s, reads, errs
}

// p99Between is the p99 (ms) of the reads completed from start to end.
func (w *workload) p99Between(start, end time.Time) float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	all := report.NewHist()
	for i := int64(start.Sub(w.t0) / window); i < int64(end.Sub(w.t0)/window); i++ {
		if h := w.hists[i]; h != nil {
			all.Merge(h)
		}
	}
	return float64(all.ValueAtQuantile(99)) / 1000
}

// p99Since is p99Between(since, now).
func (w *workload) p99Since(since time.Time) float64 { return w.p99Between(since, time.Now()) }
