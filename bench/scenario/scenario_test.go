package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/bench/benchutil"
	"github.com/shoaldb/shoal/storage/emudisk"
)

// TestLeaderTransferTiny runs a tiny leader-transfer scenario end to end and checks the report's
// schema and the plots.
func TestLeaderTransferTiny(t *testing.T) {
	sc, ctx := tinyScenario(t, "leader-transfer")
	out := t.TempDir()
	var progress bytes.Buffer
	if _, err := Run(ctx, sc, Options{Dir: t.TempDir(), Out: out, Duration: 3 * time.Second, Records: 200, Threads: 4, Splits: 2, Progress: &progress}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	// Decode into a generic map: the test checks the schema as written, not as Go types read it.
	var rep map[string]any
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	t.Logf("report.json:\n%s", b)
	if rep["scenario"] != "leader-transfer" || rep["policy"] != "rebalance" {
		t.Fatalf("scenario/policy: %v/%v", rep["scenario"], rep["policy"])
	}
	settings, ok := rep["settings"].(map[string]any)
	if !ok {
		t.Fatalf("settings: %v", rep["settings"])
	}
	// --splits (Options.Splits) pre-split the key space, and the report says so.
	if settings["splits"] != float64(2) {
		t.Errorf("settings.splits = %v, want 2", settings["splits"])
	}
	if !strings.Contains(progress.String(), "splitting the key space into 2 ranges") {
		t.Errorf("no split in the progress output:\n%s", progress.String())
	}
	// The nodes ran on the default emulated disks, and the report says so.
	dev, ok := settings["device"].(map[string]any)
	if !ok {
		t.Fatalf("settings.device: %v", settings["device"])
	}
	for k, want := range map[string]float64{"read_bytes_per_sec": 64 << 20, "write_bytes_per_sec": 64 << 20,
		"iops": 2000, "latency_ns": float64(200 * time.Microsecond)} {
		if dev[k] != want {
			t.Errorf("settings.device.%s = %v, want %v", k, dev[k], want)
		}
	}
	if dev["no_page_cache"] != true {
		t.Errorf("settings.device.no_page_cache = %v", dev["no_page_cache"])
	}
	runs, _ := rep["runs"].([]any)
	if len(runs) != 2 {
		t.Fatalf("want 2 runs, got %d", len(runs))
	}
	for i, r := range runs {
		run := r.(map[string]any)
		if on, ok := run["policy_on"].(bool); !ok || on != (i == 0) {
			t.Fatalf("run %d policy_on = %v", i, run["policy_on"])
		}
		sum, _ := run["summary"].(map[string]any)
		for _, k := range []string{"ops", "throughput", "p50_ms", "p99_ms", "errors"} {
			if _, ok := sum[k].(float64); !ok {
				t.Fatalf("run %d summary.%s missing: %v", i, k, sum)
			}
		}
		if sum["ops"].(float64) <= 0 {
			t.Fatalf("run %d did no operations: %v", i, sum)
		}
		series, _ := run["series"].([]any)
		if len(series) == 0 {
			t.Fatalf("run %d: empty series", i)
		}
		for _, p := range series {
			pt := p.(map[string]any)
			for _, k := range []string{"t", "ops", "p50_ms", "p99_ms", "hit_ratio"} {
				if _, ok := pt[k]; !ok {
					t.Fatalf("run %d series point lacks %s: %v", i, k, pt)
				}
			}
		}
		ds, _ := run["device"].(map[string]any)
		if w, _ := ds["write_bytes"].(float64); w <= 0 {
			t.Fatalf("run %d: the emulated disks saw no writes: %v", i, run["device"])
		}
		if s, _ := ds["syncs"].(float64); s <= 0 {
			t.Fatalf("run %d: the emulated disks saw no syncs: %v", i, run["device"])
		}
		events, _ := run["events"].([]any)
		if len(events) != 1 {
			t.Fatalf("run %d: want 1 event, got %v", i, run["events"])
		}
		ev := events[0].(map[string]any)
		if _, ok := ev["t"].(float64); !ok || ev["what"] == "" {
			t.Fatalf("run %d event: %v", i, ev)
		}
		if e, ok := ev["error"]; ok {
			t.Errorf("run %d event failed: %v", i, e)
		}
	}
	for _, f := range []string{"throughput.png", "latency.png", "hit_ratio.png"} {
		b, err := os.ReadFile(filepath.Join(out, f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) || len(b) <= 1024 {
			t.Fatalf("%s: not a non-empty PNG (%d bytes)", f, len(b))
		}
	}
	if !bytes.Contains(progress.Bytes(), []byte("#")) {
		t.Errorf("no progress bar written: %q", progress.String())
	}
}

// TestMoveTiny moves the replica of a small range under a short workload: the move is done onto the
// fourth node, its snapshot bytes flowed and are counted, the moved copies are equal and complete, the
// workload lost nothing, and the move's figure is drawn. It asserts nothing about speed.
func TestMoveTiny(t *testing.T) {
	sc, ctx := tinyScenario(t, "move")
	out := t.TempDir()
	rep, err := Run(ctx, sc, Options{Dir: t.TempDir(), Out: out, Duration: 9 * time.Second, Records: 2000, Threads: 4})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 1 || rep.Runs[0].Variant != "rate-32MiB" {
		t.Fatalf("runs %+v, want one of rate-32MiB", rep.Runs)
	}
	r := rep.Runs[0]
	mv := r.Move
	if mv == nil || !mv.Done || !mv.Verified || mv.From == mv.To || mv.From == mv.Leader || len(mv.Replicas) != 3 {
		t.Fatalf("move %+v, events %+v", mv, r.Events)
	}
	for _, d := range mv.Replicas {
		if d.Keys != 2000 || d.CRC64 != mv.Replicas[0].CRC64 {
			t.Errorf("replica on n%d: %+v", d.Node, d)
		}
	}
	if mv.SnapshotBytes < uint64(mv.RangeBytes) || mv.SnapshotsApplied < 1 || mv.SendingS < 1 || mv.RateBytesPerSec != 32<<20 || mv.MoveTimeRatio <= 0 {
		t.Errorf("snapshot figures %+v", mv)
	}
	if r.Task == nil || r.Summary.Errors != 0 {
		t.Errorf("task window %+v, summary %+v", r.Task, r.Summary)
	}
	if !slices.Contains(rep.Plots, "snapshot.png") {
		t.Errorf("plots %v", rep.Plots)
	}
}

// TestEffectiveDevice: the default emulated disk, a scenario's own, an invocation's override, and
// off (by flag or by zero Options), which report.json records as null.
func TestEffectiveDevice(t *testing.T) {
	slow := &emudisk.Options{IOPS: 100}
	for _, tc := range []struct {
		name string
		sc   Scenario
		opts Options
		want *emudisk.Options
	}{
		{"default", Scenario{}, Options{}, &DefaultDevice},
		{"scenario's", Scenario{Device: slow}, Options{}, slow},
		{"override", Scenario{Device: slow}, Options{Device: &emudisk.Options{Latency: time.Millisecond}}, &emudisk.Options{Latency: time.Millisecond}},
		{"flag off", Scenario{Device: slow}, Options{NoEmulatedDisk: true}, nil},
		{"zero off", Scenario{Device: &emudisk.Options{}}, Options{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := EffectiveDevice(tc.sc, tc.opts)
			if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			b, err := json.Marshal(Settings{Device: got})
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			json.Unmarshal(b, &m)
			if v, ok := m["device"]; !ok || (tc.want == nil) != (v == nil) {
				t.Fatalf("settings JSON %s", b)
			}
		})
	}
	if got := EffectiveDevice(Scenario{}, Options{}); got == &DefaultDevice {
		t.Fatal("EffectiveDevice returned DefaultDevice itself, not a copy")
	}
}

// The table holds the scenarios that reproduce a figure or guard a result, each complete, every
// event an action the runner knows.
func TestTable(t *testing.T) {
	var names []string
	for _, s := range List() {
		names = append(names, s.Name)
		if s.Policy == "" && len(s.Variants) == 0 || s.Duration <= 0 || s.Nodes <= 0 || s.Records <= 0 || len(s.Events) == 0 || s.Description == "" {
			t.Errorf("scenario %s incomplete: %+v", s.Name, s)
		}
		for _, e := range s.Events {
			if _, ok := actions[e.Do]; !ok {
				t.Errorf("scenario %s: unknown action %q", s.Name, e.Do)
			}
		}
		if s.Schedule() == "" {
			t.Errorf("scenario %s: no schedule", s.Name)
		}
		if s.Pace < 0 || s.Pace >= 1 { // a paced load offers a share of what the closed loop reached
			t.Errorf("scenario %s: pace %v, want a share in (0, 1) or 0 for a closed loop", s.Name, s.Pace)
		}
	}
	want := "backup compaction compaction-50 decommission join join-surge leader-transfer move node-kill read-hints read-hints-cache-8m " +
		"read-hints-fraction read-hints-kill read-hints-overhead"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("scenarios %s, want %s", got, want)
	}
	if j, _ := Lookup("join-surge"); j.VariantNames() != "incremental, parallel, [parallel-throttled], [sequential-at-end], [no-join]" {
		t.Errorf("join-surge variants %s", j.VariantNames())
	}
}

func TestSelectVariants(t *testing.T) {
	all := []Variant{{Name: "incremental"}, {Name: "parallel"}, {Name: "parallel-throttled"}, {Name: "no-hints", Optional: true}}
	for _, tc := range []struct {
		want    []string
		names   string
		wantErr string
	}{
		{want: nil, names: "incremental,parallel,parallel-throttled"},
		{want: []string{"parallel", "incremental"}, names: "incremental,parallel"},
		{want: []string{"no-hints", "parallel"}, names: "parallel,no-hints"},
		{want: []string{"parallel", "nope"}, wantErr: "unknown nope"},
	} {
		got, err := selectVariants(all, tc.want)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("selectVariants(%v) error = %v, want %q", tc.want, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("selectVariants(%v): %v", tc.want, err)
		}
		var names []string
		for _, v := range got {
			names = append(names, v.Name)
		}
		if strings.Join(names, ",") != tc.names {
			t.Errorf("selectVariants(%v) = %v, want %s", tc.want, names, tc.names)
		}
	}
	if _, err := selectVariants(nil, []string{"x"}); err == nil {
		t.Error("selectVariants on a scenario without variants: no error")
	}
}

// The surge runs Figure 2.7's two strategies by default, and the join's controls only when named.
// --surge-threads on a scenario without a surge, or below zero, is an error before anything starts.
func TestSurgeThreadsNeedASurge(t *testing.T) {
	sc, ok := Lookup("leader-transfer")
	if !ok {
		t.Fatal("no leader-transfer scenario")
	}
	dir := t.TempDir()
	_, err := Run(context.Background(), sc, Options{Dir: dir, Out: dir, SurgeThreads: 4})
	if err == nil || !strings.Contains(err.Error(), "no load surge") {
		t.Fatalf("Run with SurgeThreads on leader-transfer: %v, want a no-load-surge error", err)
	}
	js, _ := Lookup("join-surge")
	if _, err := Run(context.Background(), js, Options{Dir: dir, Out: dir, SurgeThreads: -1}); err == nil || !strings.Contains(err.Error(), "positive") {
		t.Errorf("Run with SurgeThreads -1: %v, want an error asking for a positive number", err)
	}
	if js.Surge.Threads != 8 || js.Threads != 16 {
		t.Errorf("join-surge's surge adds %d threads to %d, want 8 to 16", js.Surge.Threads, js.Threads)
	}
	if _, err := Run(context.Background(), sc, Options{Dir: dir, Out: dir, TogglePairs: 2}); err == nil || !strings.Contains(err.Error(), "toggles") {
		t.Errorf("Run with TogglePairs on leader-transfer: %v, want an error", err)
	}
}

func TestJoinSurgeVariants(t *testing.T) {
	s, ok := Lookup("join-surge")
	if !ok {
		t.Fatal("join-surge not registered")
	}
	names := func(vs []Variant) string {
		var out []string
		for _, v := range vs {
			out = append(out, v.Name)
		}
		return strings.Join(out, ",")
	}
	def, err := selectVariants(s.Variants, nil)
	if err != nil || names(def) != "incremental,parallel" {
		t.Fatalf("join-surge default variants = %q, %v; want incremental,parallel", names(def), err)
	}
	named, err := selectVariants(s.Variants, []string{"no-join", "incremental"})
	if err != nil || names(named) != "incremental,no-join" {
		t.Fatalf("join-surge named variants = %q, %v", names(named), err)
	}
	// The surge's copy of the variants must not make the plain join's controls optional.
	j, _ := Lookup("join")
	if def, _ := selectVariants(j.Variants, nil); names(def) != "incremental,parallel,parallel-throttled,sequential-at-end" {
		t.Errorf("join default variants = %q", names(def))
	}
}

// TestVariantPolicyOff: a variant marked PolicyOff runs with the scenario's policy switched off
// (the join's no-join control), and its report says so.
func TestVariantPolicyOff(t *testing.T) {
	sc, ctx := tinyScenario(t, "leader-transfer")
	sc.Variants = []Variant{{Name: "on"}, {Name: "control", PolicyOff: true}}
	rep, err := Run(ctx, sc, Options{Dir: t.TempDir(), Out: t.TempDir(), Duration: 3 * time.Second, Records: 200, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, r := range rep.Runs {
		got[r.Variant] = r.PolicyOn
	}
	if len(got) != 2 || !got["on"] || got["control"] {
		t.Fatalf("policy_on per variant = %v, want on: true, control: false", got)
	}
}

// tinyScenario returns the registered scenario name for a tiny run on a real cluster, skipping the
// test under -short, and a context bounding the run.
func tinyScenario(t *testing.T, name string) (Scenario, context.Context) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts real clusters")
	}
	sc, ok := Lookup(name)
	if !ok {
		t.Fatalf("%s not registered", name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return sc, ctx
}

// TestHostsTiny runs read-hints-overhead against a cluster started apart (as the saturated driver's
// processes are): one run, its switches applied, its windows paired.
func TestHostsTiny(t *testing.T) {
	sc, ctx := tinyScenario(t, "read-hints-overhead")
	c, err := benchutil.StartCluster(ctx, t.TempDir(), 3, benchutil.NodeSpec{Config: benchutil.NodeConfig{HeartbeatInterval: 200 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	rep, err := Run(ctx, sc, Options{Dir: t.TempDir(), Out: t.TempDir(), Records: 300, Threads: 2, Hosts: c.Addrs(),
		TogglePairs: 1, ToggleWindow: 4 * time.Second, ToggleSkip: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 1 || rep.Settings.Device != nil || len(rep.Settings.Hosts) != 3 {
		t.Fatalf("runs %d, settings %+v", len(rep.Runs), rep.Settings)
	}
	r := rep.Runs[0]
	for _, e := range r.Events {
		if e.Error != "" {
			t.Errorf("event %s: %s", e.What, e.Error)
		}
	}
	if h := r.ReadHints; h == nil || len(h.ToggleWindows) != 2 || h.Paired == nil || h.Paired.Pairs != 1 {
		t.Fatalf("read hints %+v: want 2 windows, 1 pair", h)
	}
}

func TestRepeatRefusesOneRepetition(t *testing.T) {
	if _, _, err := Repeat(context.Background(), Scenario{Name: "x"}, Options{}, 1); err == nil {
		t.Fatal("one repetition accepted")
	}
}
