package core

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoaldb/shoal/autopilot/policy"
	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/table"
	"github.com/shoaldb/shoal/table/rekey"
)

// RekeyReport is an online re-key against a plain copy of the same table (export, then import into
// a new table), at a steady foreground rate and at 20× that rate (Morphus's experiment, thesis
// §2.5, at this machine's scale).
type RekeyReport struct {
	Rows        int        `json:"rows"`
	RowBytes    int        `json:"row_bytes"`
	BulkCopyS   float64    `json:"bulk_copy_s"`
	Runs        []RekeyRun `json:"runs"`
	RatioToBulk float64    `json:"rekey_over_bulk_copy"` // the first run's re-key time over the bulk copy's
	Slowdown20x float64    `json:"slowdown_at_20x"`      // the second run's re-key time over the first's
	Workload    string     `json:"workload"`
	Note        string     `json:"note"`
	Started     time.Time  `json:"started"`
}

// RekeyRun is one re-key under a foreground load.
type RekeyRun struct {
	From          []string `json:"from_key"`
	To            []string `json:"to_key"`
	OpsPerSec     int      `json:"ops_per_sec"`
	RekeyS        float64  `json:"rekey_s"`
	CutoverS      float64  `json:"cutover_s"`
	WritesHeldMs  float64  `json:"writes_held_ms"`
	Reads         OpCount  `json:"reads"`
	Writes        OpCount  `json:"writes"`
	P99Ms         float64  `json:"p99_ms"`        // every operation during the re-key
	P99FencedMs   float64  `json:"p99_fenced_ms"` // operations that started while writes were held
	MaxFencedMs   float64  `json:"max_fenced_ms"` // the slowest of those
	ChangesCopied int64    `json:"changes_followed"`
}

// OpCount is how many operations were tried and how many succeeded (the rest failed: refused,
// timed out, or wrong).
type OpCount struct {
	Tried     int64   `json:"tried"`
	Succeeded int64   `json:"succeeded"`
	Percent   float64 `json:"succeeded_percent"`
}

const rekeyGroups = 16

// Rekey loads rows rows into a 3-node in-process cluster, times a bulk copy of the table, then
// re-keys it from (id) to (grp, id) under opsPerSec of 40 % reads, 40 % updates, 20 % inserts, and
// back to (id) under 20 × opsPerSec.
func Rekey(ctx context.Context, dir string, rows, opsPerSec int, progress func(string)) (RekeyReport, error) {
	rep := RekeyReport{Rows: rows, Started: time.Now(), Workload: "40 % reads (by the current key's columns), 40 % updates, 20 % inserts, uniform, open loop",
		Note: "rows of 5 columns (id, grp, 3 strings of 64 bytes); the bulk copy scans the table and writes it into a new table, in batches of 500"}
	c, cl, err := startThree(ctx, dir)
	if err != nil {
		return rep, err
	}
	defer c.Stop()
	defer cl.Close()
	for _, p := range []string{policy.NameMerge, policy.NameRebalance} {
		if err := cl.SetPolicy(ctx, p, false); err != nil {
			return rep, err
		}
	}
	if err := waitWritable(ctx, cl); err != nil {
		return rep, err
	}
	cat := table.NewCatalog(cl)
	cols, err := table.ParseColumns("id:int64,grp:int64,a:string,b:string,c:string")
	if err != nil {
		return rep, err
	}
	d, err := cat.Create(ctx, table.NewDescriptor("usertable", cols, table.ParseKeyList("id")))
	if err != nil {
		return rep, err
	}
	filler := string(make([]byte, 64))
	mkRow := func(id int64, gen int) table.Row {
		return table.Row{"id": id, "grp": id % rekeyGroups, "a": fmt.Sprintf("%064d", gen), "b": filler, "c": filler}
	}
	progress(fmt.Sprintf("loading %d rows", rows))
	var muts []*pb.Mutation
	for i := range rows {
		k, v, err := d.EncodeRow(mkRow(int64(i), 0))
		if err != nil {
			return rep, err
		}
		rep.RowBytes = len(k) + len(v)
		muts = append(muts, &pb.Mutation{Key: k, Value: v})
		if len(muts) == 500 || i == rows-1 {
			if err := cl.WriteMany(ctx, muts); err != nil {
				return rep, fmt.Errorf("load: %w", err)
			}
			muts = muts[:0]
		}
	}
	progress("bulk copy (export, then import into a new table)")
	if rep.BulkCopyS, err = bulkCopy(ctx, cl, cat, d); err != nil {
		return rep, err
	}
	next := atomic.Int64{}
	next.Store(int64(rows))
	for i, step := range []struct {
		to   []string
		rate int
	}{{[]string{"grp", "id"}, opsPerSec}, {[]string{"id"}, 20 * opsPerSec}} {
		progress(fmt.Sprintf("re-key %d: to (%v) under %d ops/s", i+1, step.to, step.rate))
		run, err := rekeyUnderLoad(ctx, cl, cat, step.to, step.rate, rows, &next, mkRow)
		if err != nil {
			return rep, err
		}
		rep.Runs = append(rep.Runs, run)
	}
	rep.RatioToBulk = rep.Runs[0].RekeyS / rep.BulkCopyS
	rep.Slowdown20x = rep.Runs[1].RekeyS / rep.Runs[0].RekeyS
	return rep, nil
}

// bulkCopy times the plain alternative: scan every row and write it into a new table.
func bulkCopy(ctx context.Context, cl *client.Client, cat *table.Catalog, d table.Descriptor) (float64, error) {
	t0 := time.Now()
	nd, err := cat.Create(ctx, table.NewDescriptor("bulkcopy", d.Columns, table.ParseKeyList("grp,id")))
	if err != nil {
		return 0, err
	}
	start, end := table.TableSpan(d.ID)
	for {
		kvs, err := cl.Scan(ctx, start, end, 500, false)
		if err != nil {
			return 0, err
		}
		muts := make([]*pb.Mutation, 0, len(kvs))
		for _, e := range kvs {
			row, err := d.DecodeRow(e.Key, e.Value)
			if err != nil {
				return 0, err
			}
			k, v, err := nd.EncodeRow(row)
			if err != nil {
				return 0, err
			}
			muts = append(muts, &pb.Mutation{Key: k, Value: v})
		}
		if len(muts) > 0 {
			if err := cl.WriteMany(ctx, muts); err != nil {
				return 0, err
			}
		}
		if len(kvs) < 500 {
			break
		}
		start = append(kvs[len(kvs)-1].Key, 0)
	}
	took := time.Since(t0).Seconds()
	if _, err := cat.Drop(ctx, "bulkcopy", nil); err != nil {
		return took, err
	}
	return took, nil
}

// rekeyUnderLoad re-keys usertable to key while an open-loop load of rate ops/s runs.
func rekeyUnderLoad(ctx context.Context, cl *client.Client, cat *table.Catalog, key []string, rate, rows int, next *atomic.Int64,
	mkRow func(int64, int) table.Row) (RekeyRun, error) {
	run := RekeyRun{To: key, OpsPerSec: rate}
	tb, err := cat.Open(ctx, "usertable")
	if err != nil {
		return run, err
	}
	run.From = tb.Desc.PrimaryKey
	var fencedFrom, fencedTo atomic.Int64 // ns since start, while writes were held
	load := startLoad(ctx, tb, rate, next, mkRow)
	time.Sleep(time.Second)
	t0 := time.Now()
	res, err := rekey.Run(ctx, cl, "usertable", rekey.Options{PrimaryKey: key, Progress: func(p rekey.Progress) {
		switch p.Phase {
		case "fenced":
			fencedFrom.Store(int64(time.Since(load.start)))
		case "cutover":
			fencedTo.Store(int64(time.Since(load.start)))
		}
	}})
	rekeyTook := time.Since(t0)
	time.Sleep(time.Second)
	samples := load.stop()
	if err != nil {
		return run, err
	}
	run.RekeyS, run.CutoverS = rekeyTook.Seconds(), res.CutoverAt.Seconds()
	run.WritesHeldMs, run.ChangesCopied = float64(res.FenceHeld.Microseconds())/1000, res.Changes
	var all, fenced []float64
	from, to := time.Duration(fencedFrom.Load()), time.Duration(fencedTo.Load())
	for _, s := range samples {
		if s.at < t0.Sub(load.start) || s.at > t0.Sub(load.start)+rekeyTook {
			continue
		}
		c := &run.Writes
		if s.read {
			c = &run.Reads
		}
		c.Tried++
		if s.ok {
			c.Succeeded++
		}
		ms := float64(s.took.Microseconds()) / 1000
		all = append(all, ms)
		if s.at >= from && s.at <= to {
			fenced = append(fenced, ms)
		}
	}
	for _, c := range []*OpCount{&run.Reads, &run.Writes} {
		if c.Tried > 0 {
			c.Percent = 100 * float64(c.Succeeded) / float64(c.Tried)
		}
	}
	run.P99Ms, run.P99FencedMs = pct(all, 0.99), pct(fenced, 0.99)
	if len(fenced) > 0 {
		run.MaxFencedMs = slices.Max(fenced)
	}
	return run, nil
}

// opSample is one operation of the load: when it started (since the load's start), how long it
// took, whether it read, whether it succeeded.
type opSample struct {
	at, took time.Duration
	read, ok bool
}

// tableLoad is an open-loop load on a table: 40 % reads, 40 % updates, 20 % inserts.
type tableLoad struct {
	start   time.Time
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	samples []opSample
}

func startLoad(ctx context.Context, tb *table.Table, rate int, next *atomic.Int64, mkRow func(int64, int) table.Row) *tableLoad {
	l := &tableLoad{start: time.Now()}
	lctx, cancel := context.WithCancel(ctx)
	l.cancel = cancel
	tick := time.NewTicker(time.Second / time.Duration(rate))
	sem := make(chan struct{}, 256)
	l.wg.Go(func() {
		defer tick.Stop()
		rng := rand.New(rand.NewPCG(uint64(rate), 7))
		for gen := 1; ; gen++ {
			select {
			case <-lctx.Done():
				return
			case <-tick.C:
			}
			p, id := rng.IntN(100), rng.Int64N(next.Load())
			sem <- struct{}{}
			l.wg.Go(func() {
				defer func() { <-sem }()
				t0 := time.Now()
				var err error
				read := p < 40
				switch {
				case read:
					_, _, err = tb.GetRow(lctx, mkRow(id, 0))
				case p < 80:
					err = tb.Put(lctx, mkRow(id, gen))
				default:
					err = tb.Put(lctx, mkRow(next.Add(1)-1, gen))
				}
				if lctx.Err() != nil {
					return
				}
				l.mu.Lock()
				l.samples = append(l.samples, opSample{at: t0.Sub(l.start), took: time.Since(t0), read: read, ok: err == nil})
				l.mu.Unlock()
			})
		}
	})
	return l
}

// stop ends the load and returns its samples.
func (l *tableLoad) stop() []opSample {
	l.cancel()
	l.wg.Wait()
	return l.samples
}

func pct(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}
