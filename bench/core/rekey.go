package core

import (
	"context"
	"fmt"
	mrand "math/rand"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pingcap/go-ycsb/pkg/generator"

	"github.com/shoaldb/shoal/autopilot/policy"
	"github.com/shoaldb/shoal/bench/benchutil"
	"github.com/shoaldb/shoal/bench/scenario"
	"github.com/shoaldb/shoal/chaos/history"
	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/table"
	"github.com/shoaldb/shoal/table/rekey"
)

// RekeyConfig is one run of the re-key benchmark.
type RekeyConfig struct {
	Rows     int    // rows loaded
	RowBytes int    // about how many bytes a row takes (key and value)
	Rate     int    // foreground operations a second during the first re-key (20× during the second)
	Dist     string // which rows the foreground reads and updates: uniform, zipfian or latest
	// Placement is the re-keys' placement of the new keyspace (rekey.Placements).
	Placement string
	// Disk puts each node on an emulated disk (scenario.DefaultDevice: no page cache, 64 MiB/s, 2 000
	// IOPS), so that the store is disk-bound as the thesis's was.
	Disk bool
	// CheckRows is how many rows a porcupine-checked client reads and writes during each re-key
	// (the foreground load leaves them alone); 0: none.
	CheckRows int
	Progress  func(string)
}

// RekeyReport is an online re-key against a plain copy of the same table (export, then import into
// a new table), at a steady foreground rate and at 20× that rate (Morphus's experiment, thesis
// §2.5, at this machine's scale).
type RekeyReport struct {
	Rows      int        `json:"rows"`
	RowBytes  int        `json:"row_bytes"`
	TableMiB  float64    `json:"table_mib"`
	LoadS     float64    `json:"load_s"`
	BulkCopyS float64    `json:"bulk_copy_s"`
	Runs      []RekeyRun `json:"runs"`
	// RatioToBulk is the first re-key's time to its cutover over the bulk copy's (both to (grp, id)),
	// Slowdown20x the third's (the same re-key again, at 20× the load) over the first's: the old
	// rows are deleted after the cutover, in the background of a table already serving under its
	// new key (rekey_s includes it).
	RatioToBulk float64   `json:"rekey_over_bulk_copy"`
	Slowdown20x float64   `json:"slowdown_at_20x"`
	Workload    string    `json:"workload"`
	Dist        string    `json:"distribution"`
	Disk        string    `json:"disk"`
	Note        string    `json:"note"`
	Started     time.Time `json:"started"`
}

// RekeyRun is one re-key under a foreground load.
type RekeyRun struct {
	From      []string `json:"from_key"`
	To        []string `json:"to_key"`
	OpsPerSec int      `json:"ops_per_sec"`
	// AchievedOpsPerSec is the load that ran: operations started during the re-key over its time.
	AchievedOpsPerSec float64                `json:"achieved_ops_per_sec"`
	RekeyS            float64                `json:"rekey_s"`
	CutoverS          float64                `json:"cutover_s"`
	WritesHeldMs      float64                `json:"writes_held_ms"`
	Reads             OpCount                `json:"reads"`
	Writes            OpCount                `json:"writes"`
	P99Ms             float64                `json:"p99_ms"`        // every operation during the re-key
	P99FencedMs       float64                `json:"p99_fenced_ms"` // operations that ran while writes were held
	MaxFencedMs       float64                `json:"max_fenced_ms"` // the slowest of those
	ChangesCopied     int64                  `json:"changes_followed"`
	Placement         *rekey.PlacementReport `json:"placement,omitempty"`
	// Checked is porcupine's verdict on the checked rows' history ("" without CheckRows).
	Checked string `json:"porcupine,omitempty"`
}

// OpCount is how many operations were tried and how many succeeded (the rest failed: refused,
// timed out, or wrong).
type OpCount struct {
	Tried     int64   `json:"tried"`
	Succeeded int64   `json:"succeeded"`
	Percent   float64 `json:"succeeded_percent"`
}

const rekeyGroups = 16

// rekeyTable is the benchmark's table and how its rows look.
type rekeyTable struct {
	filler string
	stride int64 // rows i·stride are the checked rows (stride 0: none)
}

func (rt rekeyTable) row(id int64, gen int) table.Row {
	return table.Row{"id": id, "grp": id % rekeyGroups, "a": fmt.Sprintf("%064d", gen), "b": rt.filler, "c": rt.filler}
}

// checked reports whether id is one of the porcupine-checked rows.
func (rt rekeyTable) checked(id int64) bool { return rt.stride > 0 && id%rt.stride == 0 }

// Rekey loads cfg.Rows rows into a 3-node in-process cluster, times a bulk copy of the table, then
// re-keys it from (id) to (grp, id) under cfg.Rate operations a second of 40 % reads, 40 % updates,
// 20 % inserts, back to (id) at that rate, and to (grp, id) again under 20 × that rate.
func Rekey(ctx context.Context, dir string, cfg RekeyConfig) (RekeyReport, error) {
	rep := RekeyReport{Rows: cfg.Rows, Started: time.Now(), Dist: cfg.Dist, Disk: "the machine's",
		Workload: "40 % reads (by the current key's columns), 40 % updates, 20 % inserts, open loop",
		Note:     "rows of 5 columns (id, grp, a 64-byte string, two fillers); the bulk copy scans the table and writes it into a new table, 4 batches of 500 in flight, as the re-key's copy"}
	if cfg.Disk {
		rep.Disk = "emulated: no page cache, 64 MiB/s each way, 2 000 IOPS, 200 µs"
	}
	if cfg.CheckRows < 0 || cfg.CheckRows > cfg.Rows/2 {
		return rep, fmt.Errorf("check rows %d: between 0 and half the rows (%d)", cfg.CheckRows, cfg.Rows/2)
	}
	c, cl, err := startThreeOn(ctx, dir, cfg.Disk)
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
	rt := rekeyTable{filler: strings.Repeat("x", max(1, (cfg.RowBytes-110)/2))}
	if cfg.CheckRows > 0 {
		rt.stride = max(1, int64(cfg.Rows/cfg.CheckRows))
	}
	cfg.Progress(fmt.Sprintf("loading %d rows", cfg.Rows))
	t0 := time.Now()
	if rep.RowBytes, err = loadRows(ctx, cl, d, cfg.Rows, rt, cfg.Progress); err != nil {
		return rep, err
	}
	rep.LoadS = time.Since(t0).Seconds()
	rep.TableMiB = float64(rep.RowBytes) * float64(cfg.Rows) / (1 << 20)
	cfg.Progress(fmt.Sprintf("loaded %.0f MiB in %.0f s; bulk copy (export, then import into a new table)", rep.TableMiB, rep.LoadS))
	if rep.BulkCopyS, err = bulkCopy(ctx, cl, cat, d); err != nil {
		return rep, err
	}
	cfg.Progress(fmt.Sprintf("bulk copy took %.1f s", rep.BulkCopyS))
	next := atomic.Int64{}
	next.Store(int64(cfg.Rows))
	for i, step := range []struct {
		to   []string
		rate int
	}{{[]string{"grp", "id"}, cfg.Rate}, {[]string{"id"}, cfg.Rate}, {[]string{"grp", "id"}, 20 * cfg.Rate}} {
		cfg.Progress(fmt.Sprintf("re-key %d: to (%v) under %d ops/s", i+1, step.to, step.rate))
		run, err := rekeyUnderLoad(ctx, cl, cat, cfg, step.to, step.rate, &next, rt)
		if err != nil {
			return rep, err
		}
		cfg.Progress(fmt.Sprintf("re-key %d took %.1f s, writes held %.0f ms, porcupine %s", i+1, run.RekeyS, run.WritesHeldMs, run.Checked))
		rep.Runs = append(rep.Runs, run)
	}
	rep.RatioToBulk = rep.Runs[0].CutoverS / rep.BulkCopyS
	rep.Slowdown20x = rep.Runs[2].CutoverS / rep.Runs[0].CutoverS
	return rep, nil
}

// startThreeOn is startThree, each node on an emulated disk when disk is set.
//
// Each replica keeps 16 MiB of recent changes (a node 256 MiB; readers pin up to 8× that): a re-key's
// watch must find every change made while its initial scan of a range runs, and a 1 GB table under
// 2 000 ops/s writes about 1.3 MB/s for a scan of minutes, beyond the 1 MiB / 64 MiB defaults.
func startThreeOn(ctx context.Context, dir string, disk bool) (*benchutil.Cluster, *client.Client, error) {
	spec := benchutil.NodeSpec{Config: benchutil.NodeConfig{HeartbeatInterval: 200 * time.Millisecond}}
	spec.Config.KV.ChangeStreams.RangeBufferBytes = 16 << 20
	spec.Config.KV.ChangeStreams.NodeBufferBytes = 256 << 20
	if disk {
		dev := scenario.DefaultDevice
		spec.Device = &dev
	}
	return startThreeWith(ctx, dir, spec)
}

// loadRows writes rows rows through four concurrent writers and returns a row's size in bytes.
func loadRows(ctx context.Context, cl *client.Client, d table.Descriptor, rows int, rt rekeyTable, progress func(string)) (int, error) {
	const batch, writers = 500, 4
	k, v, err := d.EncodeRow(rt.row(0, 0))
	if err != nil {
		return 0, err
	}
	var done atomic.Int64
	g := newGroup(writers)
	for w := range writers {
		g.Go(func() error {
			muts := make([]*pb.Mutation, 0, batch)
			for start := w * batch; start < rows && g.Err() == nil; start += writers * batch {
				muts = muts[:0]
				for i := start; i < min(rows, start+batch); i++ {
					k, v, err := d.EncodeRow(rt.row(int64(i), 0))
					if err != nil {
						return err
					}
					muts = append(muts, &pb.Mutation{Key: k, Value: v})
				}
				if err := retry(ctx, func() error { return cl.WriteMany(ctx, muts) }); err != nil {
					return fmt.Errorf("load: %w", err)
				}
				done.Add(int64(len(muts)))
			}
			return nil
		})
	}
	stop := make(chan struct{})
	var reporter sync.WaitGroup
	reporter.Go(func() {
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		t0 := time.Now()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				n := done.Load()
				progress(fmt.Sprintf("loaded %d of %d rows (%.0f rows/s)", n, rows, float64(n)/time.Since(t0).Seconds()))
			}
		}
	})
	err = g.Wait()
	close(stop)
	reporter.Wait()
	return len(k) + len(v), err
}

// bulkCopy times the plain alternative: scan every row and write it into a new table, with as many
// batches in flight as the re-key's copy.
func bulkCopy(ctx context.Context, cl *client.Client, cat *table.Catalog, d table.Descriptor) (float64, error) {
	t0 := time.Now()
	nd, err := cat.Create(ctx, table.NewDescriptor("bulkcopy", d.Columns, table.ParseKeyList("grp,id")))
	if err != nil {
		return 0, err
	}
	start, end := table.TableSpan(d.ID)
	g := newGroup(4)
	for g.Err() == nil {
		kvs, err := cl.Scan(ctx, start, end, 500, false)
		if err != nil {
			if werr := g.Wait(); werr != nil {
				return 0, werr // the writers' error made the scan's
			}
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
			g.Go(func() error { return cl.WriteMany(ctx, muts) })
		}
		if len(kvs) < 500 {
			break
		}
		start = append(kvs[len(kvs)-1].Key, 0)
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	took := time.Since(t0).Seconds()
	if _, err := cat.Drop(ctx, "bulkcopy", nil); err != nil {
		return took, err
	}
	return took, nil
}

// rekeyUnderLoad re-keys usertable to key while an open-loop load of rate ops/s runs, and a
// porcupine-checked client works on the checked rows.
func rekeyUnderLoad(ctx context.Context, cl *client.Client, cat *table.Catalog, cfg RekeyConfig, key []string, rate int, next *atomic.Int64,
	rt rekeyTable) (RekeyRun, error) {
	run := RekeyRun{To: key, OpsPerSec: rate}
	tb, err := cat.Open(ctx, "usertable")
	if err != nil {
		return run, err
	}
	run.From = tb.Desc.PrimaryKey
	var fencedFrom, fencedTo atomic.Int64 // ns since start, while writes were held
	load, err := startLoad(ctx, tb, rate, cfg.Dist, next, rt)
	if err != nil {
		return run, err
	}
	chk := startChecker(ctx, cat, rt, cfg.CheckRows)
	time.Sleep(time.Second)
	t0 := time.Now()
	res, err := rekey.Run(ctx, cl, "usertable", rekey.Options{PrimaryKey: key, Placement: cfg.Placement, Progress: func(p rekey.Progress) {
		switch p.Phase {
		case "fencing": // about to fence: operations from here on may be held
			fencedFrom.Store(int64(time.Since(load.start)))
		case "cutover":
			fencedTo.Store(int64(time.Since(load.start)))
		}
	}})
	rekeyTook := time.Since(t0)
	time.Sleep(time.Second)
	samples := load.stop()
	run.Checked = chk.stop(ctx)
	if err != nil {
		return run, err
	}
	run.Placement = res.Placement
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
		if s.at <= to && s.at+s.took >= from { // ran while writes were held
			fenced = append(fenced, ms)
		}
	}
	for _, c := range []*OpCount{&run.Reads, &run.Writes} {
		if c.Tried > 0 {
			c.Percent = 100 * float64(c.Succeeded) / float64(c.Tried)
		}
	}
	run.AchievedOpsPerSec = float64(run.Reads.Tried+run.Writes.Tried) / rekeyTook.Seconds()
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

// Distributions of the load's reads and updates.
const (
	DistUniform = "uniform"
	DistZipfian = "zipfian"
	DistLatest  = "latest"
)

// picker chooses the row a read or update touches among the next ids written so far.
func picker(dist string, rows int64) (func(rng *mrand.Rand, next int64) int64, error) {
	switch dist {
	case DistUniform, "":
		return func(rng *mrand.Rand, next int64) int64 { return rng.Int63n(next) }, nil
	case DistZipfian:
		z := generator.NewScrambledZipfian(0, rows-1, generator.ZipfianConstant)
		return func(rng *mrand.Rand, _ int64) int64 { return z.Next(rng) }, nil
	case DistLatest:
		// The newest rows are the most popular (YCSB's latest: a zipfian distance from the newest).
		z := generator.NewZipfianWithRange(0, rows-1, generator.ZipfianConstant)
		return func(rng *mrand.Rand, next int64) int64 { return max(0, next-1-z.Next(rng)) }, nil
	}
	return nil, fmt.Errorf("distribution %q: want %s, %s or %s", dist, DistUniform, DistZipfian, DistLatest)
}

func startLoad(ctx context.Context, tb *table.Table, rate int, dist string, next *atomic.Int64, rt rekeyTable) (*tableLoad, error) {
	pick, err := picker(dist, next.Load())
	if err != nil {
		return nil, err
	}
	l := &tableLoad{start: time.Now()}
	lctx, cancel := context.WithCancel(ctx)
	l.cancel = cancel
	tick := time.NewTicker(time.Second / time.Duration(rate))
	sem := make(chan struct{}, 256)
	l.wg.Go(func() {
		defer tick.Stop()
		rng := mrand.New(mrand.NewSource(int64(rate)))
		for gen := 1; ; gen++ {
			select {
			case <-lctx.Done():
				return
			case <-tick.C:
			}
			p, id := rng.Intn(100), pick(rng, next.Load())
			if rt.checked(id) {
				id++ // the checked rows are the checker's alone
			}
			sem <- struct{}{}
			l.wg.Go(func() {
				defer func() { <-sem }()
				t0 := time.Now()
				var err error
				read := p < 40
				switch {
				case read:
					_, _, err = tb.GetRow(lctx, rt.row(id, 0))
				case p < 80:
					err = tb.Put(lctx, rt.row(id, gen))
				default:
					ins := next.Add(1) - 1
					for rt.checked(ins) {
						ins = next.Add(1) - 1
					}
					err = tb.Put(lctx, rt.row(ins, gen))
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
	return l, nil
}

// checker reads and writes the checked rows from four table clients, recording a history for
// porcupine: a stale or lost read across the re-key's cutover makes it fail.
type checker struct {
	h      *history.History
	rt     rekeyTable
	n      int
	cat    *table.Catalog
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	errs   []error
}

const checkClients = 4

func startChecker(ctx context.Context, cat *table.Catalog, rt rekeyTable, n int) *checker {
	ck := &checker{h: history.New(checkClients + 1), rt: rt, n: n, cat: cat}
	if n == 0 {
		return ck
	}
	// Each checked row's value, written first and in the history: the model starts from nothing.
	tb, err := cat.Open(ctx, "usertable")
	if err != nil {
		ck.fail(err)
		return ck
	}
	for i := range int64(n) {
		id := i * rt.stride
		row := rt.row(id, 0)
		row["a"] = "init"
		call := ck.h.Now()
		err := tb.Put(ctx, row)
		if _, bad := ck.h.Add(checkClients, history.Input{Kind: history.Put, Key: checkKey(id), Value: "init"}, history.Output{}, call, ck.h.Now(), err); err != nil || bad != nil {
			ck.fail(fmt.Errorf("write checked row %d: %v %v", id, err, bad))
			return ck
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	ck.cancel = cancel
	for w := range checkClients {
		ck.wg.Go(func() { ck.client(cctx, w) })
	}
	return ck
}

func (ck *checker) fail(err error) {
	ck.mu.Lock()
	ck.errs = append(ck.errs, err)
	ck.mu.Unlock()
}

func checkKey(id int64) string { return fmt.Sprintf("row%d", id) }

func (ck *checker) client(ctx context.Context, w int) {
	tb, err := ck.cat.Open(ctx, "usertable")
	if err != nil {
		ck.fail(err)
		return
	}
	rng := mrand.New(mrand.NewSource(int64(w)))
	cid := w
	for seq := 0; ctx.Err() == nil; seq++ {
		id := int64(rng.Intn(ck.n)) * ck.rt.stride
		in := history.Input{Key: checkKey(id)}
		var out history.Output
		octx, ocancel := context.WithTimeout(context.Background(), 10*time.Second)
		call := ck.h.Now()
		if rng.Intn(2) == 0 {
			in.Kind = history.Get
			var row table.Row
			row, out.Found, err = tb.GetRow(octx, ck.rt.row(id, 0))
			if out.Found {
				out.Value = row["a"].(string)
			}
		} else {
			in.Kind, in.Value = history.Put, fmt.Sprintf("w%d.%d", w, seq)
			row := ck.rt.row(id, 0)
			row["a"] = in.Value
			err = tb.Put(octx, row)
		}
		ret := ck.h.Now()
		ocancel()
		pending, bad := ck.h.Add(cid, in, out, call, ret, err)
		if bad != nil {
			ck.fail(bad)
			return
		}
		if pending {
			cid = ck.h.NewClientID()
		}
		time.Sleep(2 * time.Millisecond) // a steady trickle, not a second load
	}
}

// stop ends the clients, reads every checked row once more, and checks the history.
func (ck *checker) stop(ctx context.Context) string {
	if ck.n == 0 {
		return ""
	}
	if ck.cancel != nil {
		ck.cancel()
	}
	ck.wg.Wait()
	if len(ck.errs) > 0 {
		return fmt.Sprintf("not checked: %v", ck.errs[0])
	}
	tb, err := ck.cat.Open(ctx, "usertable")
	if err != nil {
		return fmt.Sprintf("not checked: %v", err)
	}
	fin := ck.h.NewClientID()
	for i := range int64(ck.n) {
		id := i * ck.rt.stride
		call := ck.h.Now()
		row, found, err := tb.GetRow(ctx, ck.rt.row(id, 0))
		out := history.Output{Found: found}
		if found {
			out.Value = row["a"].(string)
		}
		ck.h.Add(fin, history.Input{Kind: history.Get, Key: checkKey(id)}, out, call, ck.h.Now(), err)
	}
	ops := ck.h.Finish()
	res, _, err := history.Check(ops, time.Minute, "", "")
	if err != nil {
		return fmt.Sprintf("%s on %d operations (%v)", res, len(ops), err)
	}
	return fmt.Sprintf("%s on %d operations", res, len(ops))
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

// group runs functions on at most limit goroutines at once and keeps the first error.
type group struct {
	sem chan struct{}
	wg  sync.WaitGroup
	mu  sync.Mutex
	err error
}

func newGroup(limit int) *group { return &group{sem: make(chan struct{}, limit)} }

// Go runs f once a goroutine is free.
func (g *group) Go(f func() error) {
	g.sem <- struct{}{}
	g.wg.Go(func() {
		defer func() { <-g.sem }()
		if err := f(); err != nil {
			g.mu.Lock()
			if g.err == nil {
				g.err = err
			}
			g.mu.Unlock()
		}
	})
}

// Err is the first error so far.
func (g *group) Err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

// Wait waits for every function and returns the first error.
func (g *group) Wait() error {
	g.wg.Wait()
	return g.Err()
}

// retry runs f up to five times, a second apart, until it succeeds: a bulk load's idempotent
// batches ride out an election on a loaded machine.
func retry(ctx context.Context, f func() error) error {
	var err error
	for range 5 {
		if err = f(); err == nil || ctx.Err() != nil {
			return err
		}
		time.Sleep(time.Second)
	}
	return err
}
