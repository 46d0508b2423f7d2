package tpcc

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/table"
)

// Sizes are the workload's scale. The runner must be given the sizes the data was loaded with.
type Sizes struct {
	Warehouses int
	// Items is the number of items (spec: 100 000), and of stock rows per warehouse.
	Items int
	// Customers is the number of customers per district (spec: 3 000), and of initial orders.
	Customers int
}

// Spec sizes.
const (
	SpecItems     = 100_000
	SpecCustomers = 3_000
)

// Validate refuses sizes the workload cannot run with.
func (s Sizes) Validate() error {
	switch {
	case s.Warehouses < 1:
		return fmt.Errorf("warehouses %d: need at least 1", s.Warehouses)
	case s.Items < 15:
		return fmt.Errorf("items %d: need at least 15 (an order has up to 15 lines)", s.Items)
	case s.Customers < 10:
		return fmt.Errorf("customers per district %d: need at least 10", s.Customers)
	}
	return nil
}

// firstUndelivered is the first initial order of a district left undelivered: the last 30 % of the
// initial orders have new_order rows (spec: orders 2 101–3 000 of 3 000).
func (s Sizes) firstUndelivered() int64 { return int64(s.Customers - s.Customers*3/10 + 1) }

// Rows is about how many rows a load of s writes (order lines: 10 per order on average).
func (s Sizes) Rows() int64 {
	c := int64(s.Customers)
	// customer, its name index, history, order, its customer index, 10 order lines; new_order rows.
	perDistrict := 1 + 15*c + c - s.firstUndelivered() + 1
	return int64(s.Items) + int64(s.Warehouses)*(1+int64(s.Items)+Districts*perDistrict)
}

// LoadOptions tune a load.
type LoadOptions struct {
	// Prefix names the tables (default DefaultPrefix).
	Prefix string
	// Threads is how many batches are written at once (default 8).
	Threads int
	// Batch is how many rows one batch write carries at most (default 256).
	Batch int
	// Progress, if set, gets a line every ProgressInterval (default 1 s): rows written, rows/s.
	Progress         io.Writer
	ProgressInterval time.Duration
	// Seed seeds the generated data (0: the time).
	Seed uint64
}

// LoadReport is what a load did.
type LoadReport struct {
	Rows       int64   `json:"rows"`
	Seconds    float64 `json:"seconds"`
	RowsPerSec float64 `json:"rows_per_sec"`
}

// Load creates the workload's tables (none may exist: ErrTablesExist) and fills them for s: items,
// then per warehouse its row, districts, stock, and per district customers (with their name index
// and one history row each) and the initial orders (lines, new_order rows, index). Rows go out as
// batch writes of consecutive keys of one table; a batch the store refuses as crossing a range
// boundary is halved until each half fits (table.WriteSplitting).
func Load(ctx context.Context, kv table.KV, s Sizes, o LoadOptions) (LoadReport, error) {
	if err := s.Validate(); err != nil {
		return LoadReport{}, err
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	o.Threads = max(o.Threads, 1)
	if o.Batch <= 0 {
		o.Batch = 256
	}
	if o.ProgressInterval <= 0 {
		o.ProgressInterval = time.Second
	}
	if o.Seed == 0 {
		o.Seed = uint64(time.Now().UnixNano())
	}
	cat := table.NewCatalog(kv)
	if err := CreateTables(ctx, cat, o.Prefix); err != nil {
		return LoadReport{}, err
	}
	tabs, err := OpenTables(ctx, cat, o.Prefix)
	if err != nil {
		return LoadReport{}, err
	}
	l := &loader{kv: kv, t: tabs, s: s, batch: o.Batch, now: time.Now().UTC()}

	var jobs []func(*loader, *Input) error
	const chunk = 5000
	for lo := 1; lo <= s.Items; lo += chunk {
		jobs = append(jobs, func(l *loader, in *Input) error { return l.items(ctx, in, lo, min(lo+chunk-1, s.Items)) })
	}
	for w := int64(1); w <= int64(s.Warehouses); w++ {
		jobs = append(jobs, func(l *loader, in *Input) error { return l.warehouse(ctx, in, w) })
		for lo := 1; lo <= s.Items; lo += chunk {
			jobs = append(jobs, func(l *loader, in *Input) error { return l.stock(ctx, in, w, lo, min(lo+chunk-1, s.Items)) })
		}
		for d := int64(1); d <= Districts; d++ {
			jobs = append(jobs, func(l *loader, in *Input) error { return l.customers(ctx, in, w, d) })
			jobs = append(jobs, func(l *loader, in *Input) error { return l.orders(ctx, in, w, d) })
		}
	}

	start := time.Now()
	stopProgress := l.progress(o.Progress, o.ProgressInterval, s.Rows())
	err = runJobs(ctx, o.Threads, o.Seed, l, jobs)
	stopProgress()
	el := time.Since(start).Seconds()
	rep := LoadReport{Rows: l.rows.Load(), Seconds: el, RowsPerSec: float64(l.rows.Load()) / max(el, 1e-9)}
	if err != nil {
		return rep, fmt.Errorf("loading: %d rows written, then: %w", rep.Rows, err)
	}
	return rep, nil
}

// runJobs runs jobs on n workers, each with its own input generator; the first error stops the
// others' next jobs and is returned.
func runJobs(ctx context.Context, n int, seed uint64, l *loader, jobs []func(*loader, *Input) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan func(*loader, *Input) error)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := NewInput(seed + uint64(i)*7919)
			for job := range next {
				if err := job(l, in); err != nil {
					once.Do(func() { first = err; cancel() })
				}
			}
		}()
	}
feed:
	for _, j := range jobs {
		select {
		case next <- j:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// loader writes generated rows in batches.
type loader struct {
	kv    table.KV
	t     *Tables
	s     Sizes
	batch int
	now   time.Time
	rows  atomic.Int64
}

// progress prints the rows written every interval, and a last line when stop is called.
func (l *loader) progress(w io.Writer, every time.Duration, total int64) (stop func()) {
	if w == nil {
		return func() {}
	}
	start, last, lastT := time.Now(), int64(0), time.Now()
	return everyInterval(every, func(now time.Time) {
		n := l.rows.Load()
		fmt.Fprintf(w, "load: %d of ~%d rows (%.0f%%), %.0f rows/s\n", n, total, 100*float64(n)/float64(max(total, 1)), float64(n-last)/now.Sub(lastT).Seconds())
		last, lastT = n, now
	}, func() {
		n := l.rows.Load()
		fmt.Fprintf(w, "load: %d rows in %.1fs (%.0f rows/s)\n", n, time.Since(start).Seconds(), float64(n)/time.Since(start).Seconds())
	})
}

// everyInterval calls tick every interval from a goroutine of its own, until stop is called; stop
// then calls final (if set) and returns once the goroutine is gone.
func everyInterval(every time.Duration, tick func(now time.Time), final func()) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				if final != nil {
					final()
				}
				return
			case now := <-t.C:
				tick(now)
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// batcher collects the rows of one table and writes them in batches.
type batcher struct {
	l    *loader
	t    *table.Table
	muts []*pb.Mutation
}

func (l *loader) batcher(t *table.Table) *batcher { return &batcher{l: l, t: t} }

func (b *batcher) add(ctx context.Context, row table.Row) error {
	k, v, err := b.t.Desc.EncodeRow(row)
	if err != nil {
		return fmt.Errorf("table %s: %w", b.t.Desc.Name, err)
	}
	b.muts = append(b.muts, &pb.Mutation{Key: k, Value: v})
	if len(b.muts) >= b.l.batch {
		return b.flush(ctx)
	}
	return nil
}

func (b *batcher) flush(ctx context.Context) error {
	if len(b.muts) == 0 {
		return nil
	}
	if err := table.WriteSplitting(ctx, b.l.kv, b.muts); err != nil {
		return fmt.Errorf("table %s: batch of %d rows: %w", b.t.Desc.Name, len(b.muts), err)
	}
	b.l.rows.Add(int64(len(b.muts)))
	b.muts = b.muts[:0]
	return nil
}

// sortRows sorts rows of t into t's key order (a row that does not encode sorts first; the batcher
// reports it).
func sortRows(rows []table.Row, t *table.Table) {
	type keyed struct {
		k []byte
		r table.Row
	}
	ks := make([]keyed, len(rows))
	for i, r := range rows {
		k, _, _ := t.Desc.EncodeRow(r)
		ks[i] = keyed{k, r}
	}
	slices.SortFunc(ks, func(a, b keyed) int { return bytes.Compare(a.k, b.k) })
	for i := range ks {
		rows[i] = ks[i].r
	}
}

func flushAll(ctx context.Context, bs ...*batcher) error {
	for _, b := range bs {
		if err := b.flush(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (l *loader) items(ctx context.Context, in *Input, lo, hi int) error {
	b := l.batcher(l.t.Item)
	for i := lo; i <= hi; i++ {
		if err := b.add(ctx, table.Row{"i_id": int64(i), "i_im_id": in.Uniform(1, 10000), "i_name": in.AString(14, 24), "i_price": in.Float(1, 100), "i_data": in.Data()}); err != nil {
			return err
		}
	}
	return b.flush(ctx)
}

// address fills the street, city, state and zip columns named with prefix p.
func address(in *Input, row table.Row, p string) table.Row {
	row[p+"street_1"] = in.AString(10, 20)
	row[p+"street_2"] = in.AString(10, 20)
	row[p+"city"] = in.AString(10, 20)
	row[p+"state"] = in.AString(2, 2)
	row[p+"zip"] = in.Zip()
	return row
}

func (l *loader) warehouse(ctx context.Context, in *Input, w int64) error {
	wb, db := l.batcher(l.t.Warehouse), l.batcher(l.t.District)
	if err := wb.add(ctx, address(in, table.Row{"w_id": w, "w_name": in.AString(6, 10), "w_tax": in.Float(0, 0.2), "w_ytd": 300000.0}, "w_")); err != nil {
		return err
	}
	for d := int64(1); d <= Districts; d++ {
		row := table.Row{"d_w_id": w, "d_id": d, "d_name": in.AString(6, 10), "d_tax": in.Float(0, 0.2), "d_ytd": 30000.0, "d_next_o_id": int64(l.s.Customers + 1)}
		if err := db.add(ctx, address(in, row, "d_")); err != nil {
			return err
		}
	}
	return flushAll(ctx, wb, db)
}

// distColumns are the stock columns s_dist_01 … s_dist_10, one per district.
var distColumns = func() (out [Districts]string) {
	for i := range out {
		out[i] = fmt.Sprintf("s_dist_%02d", i+1)
	}
	return out
}()

func (l *loader) stock(ctx context.Context, in *Input, w int64, lo, hi int) error {
	b := l.batcher(l.t.Stock)
	for i := lo; i <= hi; i++ {
		row := table.Row{"s_w_id": w, "s_i_id": int64(i), "s_quantity": in.Uniform(10, 100), "s_ytd": int64(0), "s_order_cnt": int64(0), "s_remote_cnt": int64(0), "s_data": in.Data()}
		for _, c := range distColumns {
			row[c] = in.AString(24, 24)
		}
		if err := b.add(ctx, row); err != nil {
			return err
		}
	}
	return b.flush(ctx)
}

func (l *loader) customers(ctx context.Context, in *Input, w, d int64) error {
	cb, nb, hb := l.batcher(l.t.Customer), l.batcher(l.t.CustomerByName), l.batcher(l.t.History)
	byName := make([]table.Row, 0, l.s.Customers)
	for c := int64(1); c <= int64(l.s.Customers); c++ {
		last := LastName(c - 1)
		if c > 1000 {
			last = LastName(in.LastNameNumber(l.s.Customers))
		}
		credit := "GC"
		if in.Percent(10) {
			credit = "BC"
		}
		first := in.AString(8, 16)
		row := table.Row{
			"c_w_id": w, "c_d_id": d, "c_id": c, "c_first": first, "c_middle": "OE", "c_last": last,
			"c_phone": in.NString(16, 16), "c_since": l.now, "c_credit": credit, "c_credit_lim": 50000.0,
			"c_discount": in.Float(0, 0.5), "c_balance": -10.0, "c_ytd_payment": 10.0, "c_payment_cnt": int64(1),
			"c_delivery_cnt": int64(0), "c_data": in.AString(300, 500),
		}
		if err := cb.add(ctx, address(in, row, "c_")); err != nil {
			return err
		}
		byName = append(byName, table.Row{"c_w_id": w, "c_d_id": d, "c_last": last, "c_first": first, "c_id": c})
		if err := hb.add(ctx, table.Row{"h_c_w_id": w, "h_c_d_id": d, "h_c_id": c, "h_id": in.Int63(), "h_d_id": d, "h_w_id": w, "h_date": l.now, "h_amount": 10.0, "h_data": in.AString(12, 24)}); err != nil {
			return err
		}
	}
	// The name index is written in its key order, so that its batches are runs of adjacent keys.
	sortRows(byName, l.t.CustomerByName)
	for _, r := range byName {
		if err := nb.add(ctx, r); err != nil {
			return err
		}
	}
	return flushAll(ctx, cb, hb, nb)
}

func (l *loader) orders(ctx context.Context, in *Input, w, d int64) error {
	ob, lb, nb, xb := l.batcher(l.t.Order), l.batcher(l.t.OrderLine), l.batcher(l.t.NewOrder), l.batcher(l.t.OrderByCustomer)
	n := l.s.Customers
	perm := in.r.Perm(n)
	index := make([]table.Row, 0, n)
	firstNew := l.s.firstUndelivered()
	for o := int64(1); o <= int64(n); o++ {
		c := int64(perm[o-1] + 1)
		delivered := o < firstNew
		cnt := in.Uniform(5, 15)
		row := table.Row{"o_w_id": w, "o_d_id": d, "o_id": o, "o_c_id": c, "o_entry_d": l.now, "o_ol_cnt": cnt, "o_all_local": int64(1)}
		if delivered {
			row["o_carrier_id"] = in.Uniform(1, 10)
		}
		if err := ob.add(ctx, row); err != nil {
			return err
		}
		for n := int64(1); n <= cnt; n++ {
			line := table.Row{"ol_w_id": w, "ol_d_id": d, "ol_o_id": o, "ol_number": n, "ol_i_id": in.Uniform(1, int64(l.s.Items)),
				"ol_supply_w_id": w, "ol_quantity": int64(5), "ol_amount": 0.0, "ol_dist_info": in.AString(24, 24)}
			if delivered {
				line["ol_delivery_d"] = l.now
			} else {
				line["ol_amount"] = in.Float(0.01, 9999.99)
			}
			if err := lb.add(ctx, line); err != nil {
				return err
			}
		}
		if !delivered {
			if err := nb.add(ctx, table.Row{"no_w_id": w, "no_d_id": d, "no_o_id": o}); err != nil {
				return err
			}
		}
		index = append(index, table.Row{"o_w_id": w, "o_d_id": d, "o_c_id": c, "o_id": o})
	}
	sortRows(index, l.t.OrderByCustomer)
	for _, r := range index {
		if err := xb.add(ctx, r); err != nil {
			return err
		}
	}
	return flushAll(ctx, ob, lb, nb, xb)
}
