package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/shoaldb/shoal/bench/ycsb"
	"github.com/shoaldb/shoal/client/clienttest"
)

// benchRun runs the CLI in process with every flag back at its default and returns its exit code,
// stdout and stderr.
func benchRun(t *testing.T, argv ...string) (int, string, string) {
	t.Helper()
	var reset func(*cobra.Command)
	reset = func(c *cobra.Command) {
		r := func(f *pflag.Flag) {
			_ = f.Value.Set(f.DefValue)
			f.Changed = false
		}
		c.Flags().VisitAll(r)
		c.PersistentFlags().VisitAll(r)
		for _, sub := range c.Commands() {
			reset(sub)
		}
	}
	reset(rootCmd)
	var out, errOut bytes.Buffer
	code := run(context.Background(), argv, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestBenchYCSBJSON(t *testing.T) {
	cl := clienttest.New(t, 3)
	timeline := filepath.Join(t.TempDir(), "timeline.json")
	code, out, errOut := benchRun(t, "bench", "ycsb", "--workload", "b", "--hosts", strings.Join(cl.Addrs(), ","),
		"--records", "200", "--ops", "600", "--threads", "3", "--format", "json", "--timeline", timeline,
		"--prop", "writeallfields=true", "--progress-interval", "100ms")
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	var rep ycsb.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("stdout is not one JSON report: %v\n%s", err, out)
	}
	if rep.Workload != "b" || rep.Target != "grpc" || rep.Records != 200 || rep.Ops != 600 || rep.Threads != 3 ||
		rep.Errors != 0 || rep.Throughput <= 0 || rep.Load == nil || rep.Load.Ops != 200 {
		t.Fatalf("report %+v", rep)
	}
	if rep.Properties["writeallfields"] != "true" {
		t.Fatalf("--prop not applied: %v", rep.Properties)
	}
	var n int64
	for _, s := range rep.Operations {
		n += s.Count
	}
	if n != 600 {
		t.Fatalf("operations add up to %d", n)
	}
	if rep.Timeline != nil {
		t.Fatal("timeline printed on stdout as well as to its file")
	}
	b, err := os.ReadFile(timeline)
	if err != nil {
		t.Fatal(err)
	}
	var pts []ycsb.Point
	if err := json.Unmarshal(b, &pts); err != nil || len(pts) == 0 {
		t.Fatalf("timeline file: %v, %d points", err, len(pts))
	}
	if !strings.Contains(errOut, "[grpc workload b run] done: 600/600 ops") {
		t.Fatalf("no progress on stderr: %q", errOut)
	}
}

func TestBenchYCSBText(t *testing.T) {
	cl := clienttest.New(t, 1)
	code, out, errOut := benchRun(t, "--host", cl.Addr(1), "bench", "ycsb", "--workload", "f",
		"--records", "50", "--ops", "100", "--threads", "2")
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	for _, want := range []string{"YCSB workload F", "load:", "run:", "100 ops", "READ_MODIFY_WRITE", "P99(ms)"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestBenchYCSBErrors(t *testing.T) {
	cl := clienttest.New(t, 1)
	addr := cl.Addr(1)
	cases := []struct {
		argv   []string
		code   int
		stderr string
	}{
		{[]string{"bench", "ycsb", "--target", "resp", "--workload", "e"}, 2, "scans (workload e) are not supported"},
		{[]string{"bench", "ycsb", "--redis-mode", "plain"}, 2, "--redis-mode applies to --target resp only"},
		{[]string{"bench", "ycsb", "--target", "mongo"}, 2, "invalid --target"},
		{[]string{"bench", "ycsb", "--workload", "g"}, 2, "unknown workload"},
		{[]string{"bench", "ycsb", "--threads", "0"}, 2, "threads must be positive"},
		{[]string{"bench", "ycsb", "--prop", "novalue"}, 2, "invalid --prop"},
		{[]string{"bench", "ycsb", "--distribution", "pareto"}, 2, "requestdistribution"},
		{[]string{"bench", "ycsb", "extra"}, 2, "usage"},
		{[]string{"bench", "ycsb", "--format", "yaml"}, 2, "invalid --format"},
	}
	for _, c := range cases {
		code, _, errOut := benchRun(t, append([]string{"--host", addr}, c.argv...)...)
		if code != c.code || !strings.Contains(errOut, c.stderr) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.argv, code, errOut, c.code, c.stderr)
		}
	}
	cl.Stop()
	code, _, errOut := benchRun(t, "bench", "ycsb", "--hosts", addr, "--records", "10", "--ops", "10")
	if code != 1 || !strings.Contains(errOut, "does not answer") {
		t.Errorf("stopped cluster: exit %d, stderr %q", code, errOut)
	}
}

func TestBenchCompare(t *testing.T) {
	dir := t.TempDir()
	mk := func(name, system, target, workload string, tput, p99 float64) string {
		r := ycsb.Report{Workload: workload, System: system, Target: target, Records: 100, Ops: 1000, Threads: 4,
			Throughput: tput, Distribution: "zipfian",
			Operations: map[string]ycsb.OpStats{"READ": {Count: 500, P50Ms: 1, P95Ms: 2, P99Ms: p99, P999Ms: p99, MaxMs: p99},
				"UPDATE": {Count: 500, P50Ms: 1, P95Ms: 2, P99Ms: 2 * p99, P999Ms: 2 * p99, MaxMs: 2 * p99}}}
		b, _ := json.Marshal(r)
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	files := []string{
		mk("etcd-a.json", "etcd", "etcd", "a", 1000, 4),
		mk("shoal-a.json", "shoal", "grpc", "a", 1500, 2),
		mk("etcd-b.json", "etcd", "etcd", "b", 2000, 4),
		mk("shoal-b.json", "shoal", "grpc", "b", 1000, 8),
	}
	out := filepath.Join(dir, "bench.md")
	code, _, errOut := benchRun(t, append([]string{"bench", "compare", "--out", out, "--note", "Machine: test"}, files...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, want := range []string{
		"- Machine: test",
		"No operation failed in any run.",
		"| A | shoal (grpc) | 1500 | 2.00 | 4.00 | 1.50× |",
		"| A | etcd | 1000 | 4.00 | 8.00 | — |",
		"| B | shoal (grpc) | 1000 | 8.00 | 16.00 | 0.50× |",
		"- Client threads: 4",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("document lacks %q:\n%s", want, doc)
		}
	}
	if code, _, errOut := benchRun(t, "bench", "compare", filepath.Join(dir, "missing.json")); code != 1 {
		t.Errorf("missing file: exit %d, %s", code, errOut)
	}
}

// `bench pool` prints and writes the statistics of finished runs' reports, and refuses a single report.
func TestBenchPool(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for i, windows := range []int{1, 3} {
		rep := map[string]any{"scenario": "join-long", "runs": []map[string]any{{"variant": "incremental",
			"summary": map[string]any{"throughput": 100, "p99_ms": 10},
			"join":    map[string]any{"done": true, "join_s": 10, "violating_windows": windows, "slo_threshold_ms": 150}}}}
		b, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "r"+string(rune('1'+i))+".json")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	out := filepath.Join(dir, "pooled.json")
	code, stdout, stderr := benchRun(t, append([]string{"bench", "pool", "--out", out}, paths...)...)
	if code != 0 || !strings.Contains(stdout, "violating_windows") {
		t.Fatalf("bench pool: exit %d\n%s\n%s", code, stdout, stderr)
	}
	var rr struct {
		Stats map[string]map[string]struct {
			N    int
			Mean float64
		}
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rr); err != nil {
		t.Fatal(err)
	}
	if s := rr.Stats["incremental"]["violating_windows"]; s.N != 2 || s.Mean != 2 {
		t.Errorf("pooled windows %+v, want n 2 mean 2", s)
	}
	if code, _, _ := benchRun(t, "bench", "pool", paths[0]); code == 0 {
		t.Error("bench pool with one report: exit 0")
	}
}

// `bench pool --compare` pairs two variants' runs and prints and writes their ratios; it refuses a
// malformed pair and --control without --compare.
func TestBenchPoolCompare(t *testing.T) {
	dir := t.TempDir()
	run := func(variant string, p99s ...float64) map[string]any {
		var series []map[string]any
		for i, v := range p99s {
			series = append(series, map[string]any{"t": i + 1, "p99_ms": v})
		}
		return map[string]any{"variant": variant, "series": series,
			"join": map[string]any{"done": true, "join_start_s": 0, "join_s": 4, "window_end_s": 4, "slo_threshold_ms": 100}}
	}
	rep := map[string]any{"scenario": "join-surge-long", "runs": []map[string]any{
		run("incremental", 150, 0, 0, 0), run("parallel", 150, 150, 0, 0), run("no-join", 150, 0, 0, 0)}}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "report.json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "compared.json")
	code, stdout, stderr := benchRun(t, "bench", "pool", "--compare", "incremental,parallel", "--control", "no-join", "--out", out, p)
	if code != 0 || !strings.Contains(stdout, "parallel / incremental") || !strings.Contains(stdout, "2.00x") {
		t.Fatalf("bench pool --compare: exit %d\n%s\n%s", code, stdout, stderr)
	}
	var c struct{ Pairs []json.RawMessage }
	if b, err = os.ReadFile(out); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &c); err != nil || len(c.Pairs) != 1 {
		t.Errorf("compared.json: %v, %d pairs", err, len(c.Pairs))
	}
	for _, argv := range [][]string{
		{"bench", "pool", "--compare", "incremental", p},
		{"bench", "pool", "--control", "no-join", p, p},
	} {
		if code, _, _ := benchRun(t, argv...); code == 0 {
			t.Errorf("%v: exit 0", argv)
		}
	}
}

// MeT's experiment runs as a scenario: listed, and flags of the declarative scenarios that it does
// not take are refused before any node starts.
func TestBenchScenarioNodeProfiles(t *testing.T) {
	code, out, errOut := benchRun(t, "bench", "scenario", "list")
	if code != 0 || !strings.Contains(out, "node-profiles") || !strings.Contains(out, "shoal bench profiles --warmup 20s") {
		t.Fatalf("list: exit %d, stdout %s, stderr %s", code, out, errOut)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--out", t.TempDir(), "--repeat", "0"}, "--repeat 0: want at least 1"},
		{[]string{"--out", t.TempDir(), "--variants", "x"}, "--variants does not apply"},
		{[]string{"--out", t.TempDir(), "--rate", "5"}, "--rate does not apply"},
		{nil, "--out is required"},
	} {
		code, _, errOut := benchRun(t, append([]string{"bench", "scenario", "node-profiles"}, tc.args...)...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", tc.args, code, errOut, tc.want)
		}
	}
}

// bench pool on reports of the node-profiles experiment summarizes them as --repeat does: each goal
// figure's median and range, judged on the median; another scenario's report among them is refused.
func TestBenchPoolNodeProfiles(t *testing.T) {
	dir := t.TempDir()
	report := func(name string, np, best, rnd, minShare float64, failed int) string {
		rep := map[string]any{"options": map[string]any{}, "best_homogeneous": "homogeneous-scan", "failed": failed,
			"arms": []map[string]any{{"name": "random-homogeneous", "throughput_ops_s": rnd},
				{"name": "homogeneous-scan", "throughput_ops_s": best}, {"name": "node_profiles", "throughput_ops_s": np}},
			"gains":           map[string]float64{"over_best_homogeneous": np / best, "over_random_homogeneous": np / rnd},
			"reconfiguration": map[string]any{"min_share": minShare, "converged": true}}
		b, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b, c := report("a.json", 420, 300, 200, 0.95, 0), report("b.json", 300, 300, 200, 0.80, 0), report("c.json", 450, 300, 210, 0.92, 0)
	out := filepath.Join(dir, "repeat.json")
	code, stdout, stderr := benchRun(t, "bench", "pool", "--out", out, a, b, c)
	if code != 0 || !strings.Contains(stdout, "3 runs of the experiment") ||
		!strings.Contains(stdout, "median 1.40 (range 1.00–1.50") || !strings.Contains(stdout, "goal ≥ 1.35 on the median: met") ||
		!strings.Contains(stdout, "goal ≥ 2.00 on the median: met") || !strings.Contains(stdout, "goal ≥ 0.90 on the median: met") {
		t.Fatalf("bench pool: exit %d\n%s\n%s", code, stdout, stderr)
	}
	var rr struct {
		Runs int             `json:"runs"`
		Met  map[string]bool `json:"met"`
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &rr); err != nil || rr.Runs != 3 || !rr.Met["over_best_homogeneous"] {
		t.Errorf("repeat.json: %v, %+v", err, rr)
	}
	other := filepath.Join(dir, "join.json")
	if err := os.WriteFile(other, []byte(`{"scenario": "join", "runs": []}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := benchRun(t, "bench", "pool", a, other); code == 0 || !strings.Contains(stderr, "not a report of the node-profiles experiment") {
		t.Errorf("a join report among node-profiles ones: exit %d, stderr %q", code, stderr)
	}
}
