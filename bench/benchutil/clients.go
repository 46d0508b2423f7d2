package benchutil

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/shoaldb/shoal/bench/report"
	"github.com/shoaldb/shoal/client"
)

// Clients is a pool of closed-loop clients: each repeats its operation until the pool stops, and the
// pool records every latency per second (Second) and per phase (Phase); failed operations count as
// errors, by kind.
type Clients struct {
	ctx    context.Context
	cancel context.CancelFunc
	newOp  func(worker int) func(context.Context) error
	wait   func(context.Context) error // a pacer's schedule, or nil
	wg     sync.WaitGroup

	mu              sync.Mutex
	workers         int
	sec, phase      *hdrhistogram.Histogram
	secOps, secErrs int64
	phaseErrs, errs int64
	kinds           map[string]int64
	firstErr        string
}

// Second is what the clients completed since the previous call of Second.
type Second struct {
	Ops, Errors int64
	Hist        *hdrhistogram.Histogram
}

// StartClients starts n clients; newOp makes worker w's operation (its own random source, its own
// buffers).
func StartClients(ctx context.Context, n int, newOp func(worker int) func(context.Context) error) *Clients {
	return StartPacedClients(ctx, n, nil, newOp)
}

// StartPacedClients is StartClients with every operation started only when wait returns (a pacer's
// schedule; nil: at once): the time spent waiting is not the operation's latency.
func StartPacedClients(ctx context.Context, n int, wait func(context.Context) error, newOp func(worker int) func(context.Context) error) *Clients {
	c := &Clients{newOp: newOp, wait: wait, sec: report.NewHist(), phase: report.NewHist(), kinds: map[string]int64{}}
	c.ctx, c.cancel = context.WithCancel(ctx)
	c.Add(n)
	return c
}

// Add starts n more clients (a load surge).
func (c *Clients) Add(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := 0; k < n; k++ {
		op := c.newOp(c.workers)
		c.workers++
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			for c.ctx.Err() == nil {
				if c.wait != nil && c.wait(c.ctx) != nil {
					return // the run ended while waiting for a slot
				}
				t0 := time.Now()
				err := op(c.ctx)
				lat := time.Since(t0)
				if c.ctx.Err() != nil {
					return // cut short by the end of the run, not a failure
				}
				c.record(lat, err)
			}
		}()
	}
}

func (c *Clients) record(lat time.Duration, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.secErrs++
		c.phaseErrs++
		c.errs++
		c.kinds[errorKind(err, c.kinds)]++
		if c.firstErr == "" {
			c.firstErr = err.Error()
		}
		return
	}
	c.secOps++
	us := report.ClampUs(lat)
	_ = c.sec.RecordValue(us)
	_ = c.phase.RecordValue(us)
}

// Second returns what completed since the previous call and starts the next second.
func (c *Clients) Second() Second {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Second{Ops: c.secOps, Errors: c.secErrs, Hist: c.sec}
	c.sec, c.secOps, c.secErrs = report.NewHist(), 0, 0
	return s
}

// Phase returns the latencies and errors since the previous call (or the start) and starts the next
// phase.
func (c *Clients) Phase() (*hdrhistogram.Histogram, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, e := c.phase, c.phaseErrs
	c.phase, c.phaseErrs = report.NewHist(), 0
	return h, e
}

// Errors returns the failed operations so far, by kind (nil without any), and the first one's text.
func (c *Clients) Errors() (int64, map[string]int64, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.kinds) == 0 {
		return 0, nil, ""
	}
	kinds := make(map[string]int64, len(c.kinds))
	for k, v := range c.kinds {
		kinds[k] = v
	}
	return c.errs, kinds, c.firstErr
}

// Stop stops every client and waits for them.
func (c *Clients) Stop() {
	c.cancel()
	c.wg.Wait()
}

// maxErrorKinds bounds the kinds of errors counted apart: an error's text may name keys and ranges.
const maxErrorKinds = 8

// errorKind classifies err: the client's error code, or the error's text for an error without one
// (at most maxErrorKinds kinds; the rest count as "other").
func errorKind(err error, kinds map[string]int64) string {
	var ce *client.Error
	k := err.Error()
	if errors.As(err, &ce) {
		k = ce.Code.String()
	}
	if len(k) > 120 {
		k = k[:120]
	}
	if _, ok := kinds[k]; !ok && len(kinds) >= maxErrorKinds {
		k = "other"
	}
	return k
}
