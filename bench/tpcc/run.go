package tpcc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/shoaldb/shoal/bench/report"
	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/table"
)

// RunOptions tune a run.
type RunOptions struct {
	// Prefix names the tables (default DefaultPrefix).
	Prefix string
	// Threads is the number of terminals; terminal i's home warehouse is i mod W + 1.
	Threads int
	// Duration is how long transactions are started for; those running at the end are finished
	// and counted.
	Duration time.Duration
	// Rate, if positive, makes the run open-loop: transactions start at Rate a second over all
	// terminals, each latency measured from when its transaction was due (so a backlog counts),
	// and a terminal that is late starts at once. Zero: closed loop, each terminal starts its next
	// transaction when the last ends.
	Rate float64
	// TxnTimeout bounds one transaction (default 30 s). Transactions run to their end when ctx is
	// cancelled, so that a stopped run leaves no half-written order behind.
	TxnTimeout time.Duration
	// Seed seeds the inputs (0: the time).
	Seed uint64
	// Progress, if set, gets a line every ProgressInterval (default 10 s).
	Progress         io.Writer
	ProgressInterval time.Duration
}

// TxnReport is one transaction type's figures. Latencies in milliseconds.
type TxnReport struct {
	Name string `json:"name"`
	// Count is the transactions that ended without error, rollbacks included.
	Count     int64   `json:"count"`
	Rollbacks int64   `json:"rollbacks,omitempty"`
	Errors    int64   `json:"errors"`
	Percent   float64 `json:"percent"`
	P50Ms     float64 `json:"p50_ms"`
	P95Ms     float64 `json:"p95_ms"`
	P99Ms     float64 `json:"p99_ms"`
	MaxMs     float64 `json:"max_ms"`
}

// Report is a run's result.
type Report struct {
	Workload   string      `json:"workload"`
	Note       string      `json:"note"`
	Warehouses int         `json:"warehouses"`
	Items      int         `json:"items"`
	Customers  int         `json:"customers_per_district"`
	Threads    int         `json:"threads"`
	Rate       float64     `json:"rate,omitempty"`
	Seconds    float64     `json:"seconds"`
	Txns       []TxnReport `json:"transactions"`
	Total      int64       `json:"total"`
	Errors     int64       `json:"errors"`
	TxnPerSec  float64     `json:"txn_per_sec"`
	// TpmC is the new orders written per minute (rolled-back ones not counted).
	TpmC       float64          `json:"tpmC"`
	ErrorKinds map[string]int64 `json:"error_kinds,omitempty"`
	FirstError string           `json:"first_error,omitempty"`
	Load       *LoadReport      `json:"load,omitempty"`
}

// NonTransactionalNote says what the figures are not.
const NonTransactionalNote = "non-transactional TPC-C-like mix (row operations without atomicity or isolation): not a TPC-C result"

// terminalStats are one terminal's figures, merged at the end.
type terminalStats struct {
	hist      [numKinds]*hdrhistogram.Histogram
	count     [numKinds]int64
	rollbacks [numKinds]int64
	errors    [numKinds]int64
	kinds     map[string]int64
	first     error
}

// Run runs the mix against tables loaded with sizes s for o.Duration and reports it.
func Run(ctx context.Context, kv table.KV, s Sizes, o RunOptions) (*Report, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if o.Threads < 1 {
		return nil, fmt.Errorf("threads %d: need at least 1", o.Threads)
	}
	if o.Duration <= 0 {
		return nil, fmt.Errorf("duration %v: must be positive", o.Duration)
	}
	if o.Rate < 0 {
		return nil, fmt.Errorf("rate %v: must not be negative", o.Rate)
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.TxnTimeout <= 0 {
		o.TxnTimeout = 30 * time.Second
	}
	if o.ProgressInterval <= 0 {
		o.ProgressInterval = 10 * time.Second
	}
	if o.Seed == 0 {
		o.Seed = uint64(time.Now().UnixNano())
	}
	tabs, err := OpenTables(ctx, table.NewCatalog(kv), o.Prefix)
	if err != nil {
		return nil, err
	}
	if err := CheckSizes(ctx, tabs, s); err != nil {
		return nil, err
	}

	var total, errs, newOrders atomic.Int64
	var ticket atomic.Int64
	stats := make([]*terminalStats, o.Threads)
	start := time.Now()
	deadline := start.Add(o.Duration)
	var wg sync.WaitGroup
	for i := range o.Threads {
		st := &terminalStats{kinds: map[string]int64{}}
		for k := range st.hist {
			st.hist[k] = report.NewHist()
		}
		stats[i] = st
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := NewInput(o.Seed + uint64(i)*104729)
			wk := NewWorker(tabs, s, in, int64(i%s.Warehouses+1))
			for ctx.Err() == nil {
				due := time.Now()
				if o.Rate > 0 {
					n := ticket.Add(1) - 1
					due = start.Add(time.Duration(float64(n) / o.Rate * float64(time.Second)))
					if !sleepUntil(ctx, due, deadline) {
						return
					}
				} else if !due.Before(deadline) {
					return
				}
				k := in.Pick()
				tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.TxnTimeout)
				rb, err := wk.Run(tctx, k)
				cancel()
				st.hist[k].RecordValue(report.ClampUs(time.Since(due)))
				total.Add(1)
				switch {
				case err != nil:
					st.errors[k]++
					errs.Add(1)
					st.kinds[errorKind(err)]++
					if st.first == nil {
						st.first = fmt.Errorf("%v: %w", k, err)
					}
				case rb:
					st.count[k]++
					st.rollbacks[k]++
				default:
					st.count[k]++
					if k == NewOrder {
						newOrders.Add(1)
					}
				}
			}
		}()
	}
	stopProgress := runProgress(o.Progress, o.ProgressInterval, start, &total, &errs, &newOrders)
	wg.Wait()
	stopProgress()
	return summarize(s, o, stats, time.Since(start).Seconds()), nil
}

// sleepUntil waits until due; false if ctx ends first or due is at or past the deadline.
func sleepUntil(ctx context.Context, due, deadline time.Time) bool {
	if !due.Before(deadline) {
		return false
	}
	d := time.Until(due)
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// errorKind names an error for the report: the store's error code, or timeout, or other.
func errorKind(err error) string {
	var ce *client.Error
	switch {
	case errors.As(err, &ce):
		return ce.Code.String()
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, ErrMissingRow):
		return "missing_row"
	}
	return "other"
}

func runProgress(w io.Writer, every time.Duration, start time.Time, total, errs, newOrders *atomic.Int64) (stop func()) {
	if w == nil {
		return func() {}
	}
	return everyInterval(every, func(now time.Time) {
		el := now.Sub(start).Seconds()
		fmt.Fprintf(w, "run: %.0fs, %d transactions (%.0f/s), %d errors, tpmC %.0f\n", el, total.Load(), float64(total.Load())/el, errs.Load(), float64(newOrders.Load())*60/el)
	}, nil)
}

func summarize(s Sizes, o RunOptions, stats []*terminalStats, seconds float64) *Report {
	rep := &Report{Workload: "tpcc", Note: NonTransactionalNote, Warehouses: s.Warehouses, Items: s.Items, Customers: s.Customers,
		Threads: o.Threads, Rate: o.Rate, Seconds: seconds, ErrorKinds: map[string]int64{}}
	var firstSet bool
	for _, k := range Kinds() {
		h := report.NewHist()
		tr := TxnReport{Name: k.String()}
		for _, st := range stats {
			h.Merge(st.hist[k])
			tr.Count += st.count[k]
			tr.Rollbacks += st.rollbacks[k]
			tr.Errors += st.errors[k]
		}
		if h.TotalCount() > 0 {
			tr.P50Ms, tr.P95Ms, tr.P99Ms = report.Quantile(h, 50), report.Quantile(h, 95), report.Quantile(h, 99)
			tr.MaxMs = report.UsToMs(h.Max())
		}
		rep.Txns = append(rep.Txns, tr)
		rep.Total += tr.Count + tr.Errors
		rep.Errors += tr.Errors
		if k == NewOrder {
			rep.TpmC = float64(tr.Count-tr.Rollbacks) * 60 / seconds
		}
	}
	for i := range rep.Txns {
		if rep.Total > 0 {
			rep.Txns[i].Percent = 100 * float64(rep.Txns[i].Count+rep.Txns[i].Errors) / float64(rep.Total)
		}
	}
	for _, st := range stats {
		for kind, n := range st.kinds {
			rep.ErrorKinds[kind] += n
		}
		if st.first != nil && !firstSet {
			rep.FirstError, firstSet = st.first.Error(), true
		}
	}
	rep.TxnPerSec = float64(rep.Total) / seconds
	return rep
}

// CheckSizes checks that the tables hold data of sizes s: warehouse W and item Items exist,
// warehouse W+1 and item Items+1 do not, customer Customers of district 1 exists and
// Customers+1 does not.
func CheckSizes(ctx context.Context, t *Tables, s Sizes) error {
	probes := []struct {
		t    *table.Table
		key  []any
		want bool
	}{
		{t.Warehouse, []any{int64(s.Warehouses)}, true},
		{t.Warehouse, []any{int64(s.Warehouses + 1)}, false},
		{t.Item, []any{int64(s.Items)}, true},
		{t.Item, []any{int64(s.Items + 1)}, false},
		{t.Customer, []any{int64(1), int64(1), int64(s.Customers)}, true},
		{t.Customer, []any{int64(1), int64(1), int64(s.Customers + 1)}, false},
	}
	for _, p := range probes {
		_, found, err := p.t.Get(ctx, p.key...)
		if err != nil {
			return fmt.Errorf("checking the loaded sizes: %w", err)
		}
		if found != p.want {
			return fmt.Errorf("the tables were not loaded with %d warehouse(s), %d items and %d customers per district (%s %v exists: %v): give the load's sizes",
				s.Warehouses, s.Items, s.Customers, p.t.Desc.Name, p.key, found)
		}
	}
	return nil
}
