package ycsb

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/magiconair/properties"
	"github.com/pingcap/go-ycsb/pkg/prop"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/client/clienttest"
	"github.com/shoaldb/shoal/pb"
)

// fakeDB starts an in-process fake cluster of 3 nodes, split into a few ranges so that scans cross
// range boundaries, and opens the Shoal binding on it.
func fakeDB(t *testing.T, cfg Config) (*clienttest.Cluster, *ShoalDB) {
	t.Helper()
	cl := clienttest.New(t, 3)
	for _, k := range []string{"usertable/user3", "usertable/user6"} {
		if _, _, err := cl.Split(k); err != nil {
			t.Fatalf("split %s: %v", k, err)
		}
	}
	p, err := cfg.Properties()
	if err != nil {
		t.Fatal(err)
	}
	db, err := Open(TargetGRPC, cl.Addrs(), "", p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return cl, db.(*ShoalDB)
}

// countRecords scans the whole table through a fresh client.
func countRecords(t *testing.T, cl *clienttest.Cluster) int {
	t.Helper()
	c, err := client.New(context.Background(), client.Config{Addrs: cl.Addrs()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	kvs, err := c.Scan(context.Background(), []byte("usertable/"), tableEnd("usertable"), 0, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range kvs {
		if _, err := DecodeRecord(kv.GetValue(), nil); err != nil {
			t.Fatalf("key %q: %v", kv.GetKey(), err)
		}
	}
	return len(kvs)
}

// checkConsistent asserts the invariants every report keeps, whatever the speed.
func checkConsistent(t *testing.T, name string, ops, errs int64, byOp map[string]OpStats, dur, tput float64) {
	t.Helper()
	var sumCount, sumErrs int64
	for op, s := range byOp {
		sumCount += s.Count
		sumErrs += s.Errors
		if s.Errors > s.Count {
			t.Errorf("%s %s: %d errors out of %d", name, op, s.Errors, s.Count)
		}
		if s.Count > s.Errors {
			if !(0 < s.P50Ms && s.P50Ms <= s.P95Ms && s.P95Ms <= s.P99Ms && s.P99Ms <= s.P999Ms && s.P999Ms <= s.MaxMs) {
				t.Errorf("%s %s: percentiles out of order: %+v", name, op, s)
			}
			if s.AvgMs <= 0 {
				t.Errorf("%s %s: average %v", name, op, s.AvgMs)
			}
		}
	}
	if sumCount != ops || sumErrs != errs {
		t.Errorf("%s: per-operation counts add up to %d ops and %d errors, report says %d and %d", name, sumCount, sumErrs, ops, errs)
	}
	if ops > 0 && (dur <= 0 || tput <= 0) {
		t.Errorf("%s: %d ops in %vs at %v ops/s", name, ops, dur, tput)
	}
}

func TestRunCoreWorkloads(t *testing.T) {
	wantOps := map[string][]string{
		"a":      {OpRead, OpUpdate},
		"b":      {OpRead, OpUpdate},
		"c":      {OpRead},
		"d":      {OpRead, OpInsert},
		"e":      {OpScan, OpInsert},
		"f":      {OpRead, OpReadModifyWrite},
		"update": {OpUpdate},
		"insert": {OpInsert},
	}
	for _, w := range Workloads() {
		t.Run(w, func(t *testing.T) {
			cfg := Config{Workload: w, Target: TargetGRPC, Records: 300, Ops: 1500, Threads: 4, Load: true}
			cl, db := fakeDB(t, cfg)
			cfg.Hosts = cl.Addrs()
			rep, err := Run(context.Background(), cfg, db)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Load == nil || rep.Load.Ops != cfg.Records || rep.Load.Errors != 0 || rep.Load.Truncated {
				t.Fatalf("load phase: %+v", rep.Load)
			}
			if got := rep.Load.Operations[OpInsert].Count; got != cfg.Records || len(rep.Load.Operations) != 1 {
				t.Fatalf("load phase operations: %+v", rep.Load.Operations)
			}
			checkConsistent(t, "load", rep.Load.Ops, rep.Load.Errors, rep.Load.Operations, rep.Load.DurationS, rep.Load.Throughput)
			if rep.Ops != cfg.Ops || rep.Truncated {
				t.Fatalf("run phase did %d of %d ops (truncated %v)", rep.Ops, cfg.Ops, rep.Truncated)
			}
			// Every key the workload reads was loaded (or inserted before it is chosen), so nothing
			// fails against a working store.
			if rep.Errors != 0 {
				t.Fatalf("run phase: %d errors, e.g. %s", rep.Errors, rep.ErrorSample)
			}
			checkConsistent(t, "run", rep.Ops, rep.Errors, rep.Operations, rep.DurationS, rep.Throughput)
			var got []string
			for op := range rep.Operations {
				got = append(got, op)
			}
			sort.Strings(got)
			want := append([]string(nil), wantOps[w]...)
			sort.Strings(want)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("operations %v, want %v", got, want)
			}
			inserts := rep.Operations[OpInsert].Count
			if n := countRecords(t, cl); int64(n) != cfg.Records+inserts {
				t.Fatalf("store holds %d records, want %d loaded + %d inserted", n, cfg.Records, inserts)
			}
			if rep.Workload != w || rep.System != "shoal" || rep.Threads != 4 || rep.Records != 300 {
				t.Fatalf("report header: %+v", rep)
			}
			wantDist := "zipfian"
			switch w {
			case "d":
				wantDist = "latest"
			case "insert":
				wantDist = "uniform"
			}
			if rep.Distribution != wantDist {
				t.Fatalf("distribution %q, want %q", rep.Distribution, wantDist)
			}
		})
	}
}

// TestReportSchema pins the JSON field names that scripts (bench-peers.sh, docs) read.
func TestReportSchema(t *testing.T) {
	cfg := Config{Workload: "a", Target: TargetGRPC, Records: 100, Ops: 400, Threads: 3, Load: true, Timeline: true}
	cl, db := fakeDB(t, cfg)
	cfg.Hosts = cl.Addrs()
	rep, err := Run(context.Background(), cfg, db)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"workload", "system", "target", "hosts", "records", "ops", "threads", "distribution",
		"started_at", "duration_s", "throughput_ops_s", "errors", "truncated", "operations", "load", "properties", "timeline"} {
		if _, ok := m[k]; !ok {
			t.Errorf("report JSON lacks %q", k)
		}
	}
	read := m["operations"].(map[string]any)["READ"].(map[string]any)
	for _, k := range []string{"count", "errors", "avg_ms", "p50_ms", "p95_ms", "p99_ms", "p999_ms", "max_ms"} {
		if _, ok := read[k]; !ok {
			t.Errorf("operation JSON lacks %q", k)
		}
	}
	// The timeline covers both phases and counts every operation once.
	var loadOps, runOps int64
	for _, p := range rep.Timeline {
		switch p.Phase {
		case "load":
			loadOps += p.Ops
		case "run":
			runOps += p.Ops
		default:
			t.Fatalf("timeline point of phase %q", p.Phase)
		}
		if p.T <= 0 || p.Throughput < 0 {
			t.Fatalf("timeline point %+v", p)
		}
	}
	if loadOps != rep.Load.Ops || runOps != rep.Ops {
		t.Fatalf("timeline counts %d load and %d run ops, report %d and %d", loadOps, runOps, rep.Load.Ops, rep.Ops)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil || back.Ops != rep.Ops || back.Operations[OpRead] != rep.Operations[OpRead] {
		t.Fatalf("report does not round-trip through JSON: %v", err)
	}
}

// A shorter timeline interval gives more points, each stamped with its end in Unix time, in order.
// A host that stalls the run for most of its 500 ms drops the ticks it missed (a ticker does not
// catch up), so a run with too few points runs again, up to five times: an interval not applied
// gives one point (the default is a second) on every run.
func TestTimelineInterval(t *testing.T) {
	for attempt := 1; ; attempt++ {
		cfg := Config{Workload: "c", Target: TargetGRPC, Records: 50, Ops: 1 << 40, Threads: 1, Load: true,
			MaxDuration: 500 * time.Millisecond, Timeline: true, TimelineInterval: 50 * time.Millisecond}
		_, db := fakeDB(t, cfg)
		before := float64(time.Now().UnixNano()) / 1e9
		rep, err := Run(context.Background(), cfg, db)
		if err != nil {
			t.Fatal(err)
		}
		after := float64(time.Now().UnixNano()) / 1e9
		var run []Point
		for _, p := range rep.Timeline {
			if p.Phase == "run" {
				run = append(run, p)
			}
		}
		prev := before
		for _, p := range run {
			if p.Unix < prev || p.Unix > after {
				t.Fatalf("point %+v out of order or outside [%f, %f]", p, prev, after)
			}
			prev = p.Unix
		}
		// 500 ms at 50 ms a point: 10 and the last short one.
		if len(run) >= 4 {
			return
		}
		if attempt == 5 {
			t.Fatalf("%d run points over 500 ms at 50 ms each, on every one of %d runs: %+v", len(run), attempt, run)
		}
		t.Logf("%d run points over 500 ms at 50 ms each: again", len(run))
	}
}

func TestRunBoundedByDuration(t *testing.T) {
	cfg := Config{Workload: "b", Target: TargetGRPC, Records: 50, Ops: 1 << 40, Threads: 2, Load: true,
		MaxDuration: 300 * time.Millisecond}
	_, db := fakeDB(t, cfg)
	start := time.Now()
	rep, err := Run(context.Background(), cfg, db)
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Fatalf("run took %v with a 300ms bound per phase", el)
	}
	if !rep.Truncated || rep.Ops <= 0 || rep.Ops >= cfg.Ops {
		t.Fatalf("truncated %v after %d ops", rep.Truncated, rep.Ops)
	}
	checkConsistent(t, "run", rep.Ops, rep.Errors, rep.Operations, rep.DurationS, rep.Throughput)
}

func TestRunCanceled(t *testing.T) {
	cfg := Config{Workload: "c", Target: TargetGRPC, Records: 20, Ops: 1 << 40, Threads: 2, Load: true}
	_, db := fakeDB(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	rep, err := Run(ctx, cfg, db)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want the context's", err)
	}
	if rep == nil || !rep.Truncated {
		t.Fatalf("report %+v, want a truncated one", rep)
	}
}

func TestRunAbortsWhenEverythingFails(t *testing.T) {
	cfg := Config{Workload: "a", Target: TargetGRPC, Records: 10, Ops: 100000, Threads: 2, Load: true, AbortAfterFailures: 50}
	cl, db := fakeDB(t, cfg)
	cl.SetFault(func(c clienttest.Call) *clienttest.Fault {
		if c.Method != "RangeLookup" {
			return &clienttest.Fault{Err: &pb.Error{Code: pb.ErrorCode_INVALID_ARGUMENT, Message: "injected"}}
		}
		return nil
	})
	rep, err := Run(context.Background(), cfg, db)
	if err == nil || !strings.Contains(err.Error(), "all failed") || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("err %v, want an abort naming the injected failure", err)
	}
	if rep.Load == nil || rep.Load.Errors != rep.Load.Ops || rep.Load.Ops < 10 {
		t.Fatalf("load phase %+v", rep.Load)
	}
}

func TestErrorsAreCounted(t *testing.T) {
	// Without a load phase every read misses.
	cfg := Config{Workload: "c", Target: TargetGRPC, Records: 100, Ops: 200, Threads: 2, AbortAfterFailures: -1}
	_, db := fakeDB(t, cfg)
	rep, err := Run(context.Background(), cfg, db)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Load != nil || rep.Ops != 200 || rep.Errors != 200 || rep.Operations[OpRead].Errors != 200 {
		t.Fatalf("report %+v", rep)
	}
	if !strings.Contains(rep.ErrorSample, ErrNotFound.Error()) {
		t.Fatalf("error sample %q", rep.ErrorSample)
	}
	checkConsistent(t, "run", rep.Ops, rep.Errors, rep.Operations, rep.DurationS, rep.Throughput)
}

func TestShoalDBOperations(t *testing.T) {
	cfg := Config{Workload: "a", Records: 10, Ops: 1, Threads: 1}
	_, db := fakeDB(t, cfg)
	ctx := context.Background()
	full := map[string][]byte{}
	for i := 0; i < 10; i++ {
		full["field"+string(rune('0'+i))] = []byte(strings.Repeat(string(rune('a'+i)), 5))
	}
	if err := db.Insert(ctx, "usertable", "user1", full); err != nil {
		t.Fatal(err)
	}
	got, err := db.Read(ctx, "usertable", "user1", nil)
	if err != nil || !reflect.DeepEqual(normalize(got), normalize(full)) {
		t.Fatalf("read: %v, %v", got, err)
	}
	// A partial update keeps the other fields.
	if err := db.Update(ctx, "usertable", "user1", map[string][]byte{"field3": []byte("new")}); err != nil {
		t.Fatal(err)
	}
	got, err = db.Read(ctx, "usertable", "user1", []string{"field3", "field4"})
	if err != nil || string(got["field3"]) != "new" || string(got["field4"]) != "eeeee" || len(got) != 2 {
		t.Fatalf("read after partial update: %q, %v", got, err)
	}
	// A partial update of a missing record creates it.
	if err := db.Update(ctx, "usertable", "user2", map[string][]byte{"field0": []byte("v")}); err != nil {
		t.Fatal(err)
	}
	if got, err := db.Read(ctx, "usertable", "user2", nil); err != nil || len(got) != 1 {
		t.Fatalf("read of upserted record: %q, %v", got, err)
	}
	// Scans stay within the table, cross ranges, and honour the count.
	for _, k := range []string{"user0", "user5", "user9"} {
		if err := db.Insert(ctx, "usertable", k, map[string][]byte{"field0": []byte(k)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Insert(ctx, "other", "user1", full); err != nil {
		t.Fatal(err)
	}
	recs, err := db.Scan(ctx, "usertable", "user1", 100, []string{"field0"})
	if err != nil || len(recs) != 4 {
		t.Fatalf("scan: %d records, %v", len(recs), err)
	}
	if recs, err = db.Scan(ctx, "usertable", "user", 2, nil); err != nil || len(recs) != 2 || string(recs[0]["field0"]) != "user0" {
		t.Fatalf("limited scan: %q, %v", recs, err)
	}
	if err := db.Delete(ctx, "usertable", "user1"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Read(ctx, "usertable", "user1", nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("read after delete: %v", err)
	}
	if err := Probe(ctx, db, mustProps(t, cfg)); err != nil {
		t.Fatalf("probe: %v", err)
	}
}

func mustProps(t *testing.T, cfg Config) *properties.Properties {
	t.Helper()
	p, err := cfg.Properties()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestProbeUnreachable(t *testing.T) {
	cfg := Config{Workload: "a", Records: 10, Ops: 1, Threads: 1}
	p := mustProps(t, cfg)
	cl := clienttest.New(t, 1)
	addr := cl.Addr(1)
	cl.Stop()
	db, err := Open(TargetGRPC, []string{addr}, "", p)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := Probe(ctx, db, p); err == nil {
		t.Fatal("probe of a stopped node succeeded")
	}
}

func TestProperties(t *testing.T) {
	p := mustProps(t, Config{Workload: "A", Records: 1000, Ops: 10, Threads: 2, Props: map[string]string{prop.WriteAllFields: "true"}})
	for k, want := range map[string]string{
		prop.ReadProportion: "0.5", prop.UpdateProportion: "0.5", prop.RequestDistribution: "zipfian",
		prop.RecordCount: "1000", prop.OperationCount: "10", prop.ThreadCount: "2", prop.WriteAllFields: "true",
		prop.InsertCount: "999", prop.FieldCount: "10", prop.FieldLength: "100",
	} {
		if got := p.GetString(k, ""); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if p := mustProps(t, Config{Workload: "workloadd", Records: 1000, Ops: 10, Threads: 2}); p.GetString(prop.InsertCount, "") != "" {
		t.Errorf("insertcount set for workload d")
	}
	bad := []Config{
		{Workload: "g", Records: 1, Ops: 1, Threads: 1},
		{Workload: "a", Records: 0, Ops: 1, Threads: 1},
		{Workload: "a", Records: 1, Ops: -1, Threads: 1},
		{Workload: "a", Records: 1, Ops: 1, Threads: 0},
		{Workload: "a", Records: 1, Ops: 1, Threads: 1, Props: map[string]string{prop.RequestDistribution: "pareto"}},
		{Workload: "a", Records: 10, Ops: 1, Threads: 1, Props: map[string]string{prop.InsertCount: "11"}},
		{Workload: "a", Records: 10, Ops: 1, Threads: 1, Props: map[string]string{prop.BatchSize: "8"}},
	}
	for _, c := range bad {
		if _, err := c.Properties(); err == nil {
			t.Errorf("config %+v accepted", c)
		}
	}
}

func TestOpenTargets(t *testing.T) {
	p := mustProps(t, Config{Workload: "a", Records: 1, Ops: 1, Threads: 1})
	if _, err := Open("mongo", nil, "", p); err == nil {
		t.Fatal("unknown target accepted")
	}
}

// TestRunPaced: with a rate, the run phase never gets ahead of its schedule (the k-th operation no
// earlier than k/rate seconds in), and the report says it was paced.
func TestRunPaced(t *testing.T) {
	cfg := Config{Workload: "b", Target: TargetGRPC, Records: 50, Ops: 60, Threads: 4, Load: true, Rate: 300}
	_, db := fakeDB(t, cfg)
	rep, err := Run(context.Background(), cfg, db)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Ops != cfg.Ops || rep.Rate != cfg.Rate {
		t.Fatalf("%d ops at rate %v, want %d at %v", rep.Ops, rep.Rate, cfg.Ops, cfg.Rate)
	}
	if least := float64(cfg.Ops-1) / cfg.Rate; rep.DurationS < least {
		t.Errorf("run phase took %.3fs: ahead of a %v ops/s schedule (at least %.3fs)", rep.DurationS, cfg.Rate, least)
	}
	checkConsistent(t, "run", rep.Ops, rep.Errors, rep.Operations, rep.DurationS, rep.Throughput)
	cfg.Rate = -1
	if _, err := Run(context.Background(), cfg, db); err == nil {
		t.Error("a negative rate was accepted")
	}
}
