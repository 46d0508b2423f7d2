package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/pb"
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

func TestRegistry(t *testing.T) {
	names := map[string]bool{}
	for _, s := range List() {
		names[s.Name] = true
		if s.Policy == "" || s.Duration <= 0 || s.Nodes <= 0 || len(s.Events) == 0 {
			t.Errorf("scenario %s incomplete: %+v", s.Name, s)
		}
	}
	for _, want := range []string{"leader-transfer", "node-kill"} {
		if !names[want] {
			t.Errorf("scenario %s not registered", want)
		}
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
	js, _ := Lookup("join-surge-long")
	if _, err := Run(context.Background(), js, Options{Dir: dir, Out: dir, SurgeThreads: -1}); err == nil || !strings.Contains(err.Error(), "positive") {
		t.Errorf("Run with SurgeThreads -1: %v, want an error asking for a positive number", err)
	}
	if s, _ := Lookup("join-surge-long"); s.SurgeThreads != 8 {
		t.Errorf("join-surge-long's surge adds %d threads, want 8 (16 -> 24)", s.SurgeThreads)
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
	named, err := selectVariants(s.Variants, []string{"parallel-recv-unbounded", "incremental"})
	if err != nil || names(named) != "incremental,parallel-recv-unbounded" {
		t.Fatalf("join-surge named variants = %q, %v", names(named), err)
	}
	// The surge's copy of the variants must not make the plain join's controls optional.
	j, _ := Lookup("join")
	if def, _ := selectVariants(j.Variants, nil); names(def) != "incremental,parallel,parallel-throttled,sequential-at-end" {
		t.Errorf("join default variants = %q", names(def))
	}
}

// TestJoinSurgeLongIsJoinLongWithASurge checks that the long surge has join-long's data, ranges and
// run, its load rising where join-long's node starts (after the old nodes' compactions have begun),
// the controller started before it, and Figure 2.7's two strategies by default.
func TestJoinSurgeLongIsJoinLongWithASurge(t *testing.T) {
	l, _ := Lookup("join-long")
	s, ok := Lookup("join-surge-long")
	if !ok {
		t.Fatal("join-surge-long not registered")
	}
	if s.Records != l.Records || s.Splits != l.Splits || s.Duration != l.Duration || s.ReadFraction != l.ReadFraction {
		t.Errorf("join-surge-long: %d records, %d splits, %s, reads %.2f; join-long: %d, %d, %s, %.2f",
			s.Records, s.Splits, s.Duration, s.ReadFraction, l.Records, l.Splits, l.Duration, l.ReadFraction)
	}
	at := map[string]time.Duration{}
	for _, e := range s.Events {
		at[e.What] = e.At
	}
	var nodeAt time.Duration
	for _, e := range l.Events {
		if e.What == joinLabel {
			nodeAt = e.At
		}
	}
	if at[surgeLabel] != nodeAt || at["controller"] <= 0 || at["controller"] >= at[surgeLabel] {
		t.Errorf("join-surge-long events %v; want the controller before the surge at %s", at, nodeAt)
	}
	if def, err := selectVariants(s.Variants, nil); err != nil || len(def) != 2 || def[0].Name != "incremental" || def[1].Name != "parallel" {
		t.Errorf("join-surge-long default variants = %v, %v", def, err)
	}
}

// TestJoinLongKeepsJoinsProportions checks that join-long is join with more data: the same variants
// and ranges, its node starting at the same fraction of the run (the steady state before it and the
// time left after it scale with the run), under the label joinReport measures.
func TestJoinLongKeepsJoinsProportions(t *testing.T) {
	j, _ := Lookup("join")
	l, ok := Lookup("join-long")
	if !ok {
		t.Fatal("join-long not registered")
	}
	if l.Records != 4*j.Records || l.Splits != j.Splits || len(l.Variants) != len(j.Variants) {
		t.Errorf("join-long: %d records, %d splits, %d variants; want %d, %d, %d",
			l.Records, l.Splits, len(l.Variants), 4*j.Records, j.Splits, len(j.Variants))
	}
	at := func(s Scenario) time.Duration {
		for _, e := range s.Events {
			if e.What == joinLabel {
				return e.At
			}
		}
		t.Fatalf("%s has no %q event", s.Name, joinLabel)
		return 0
	}
	if got, want := float64(at(l))/float64(l.Duration), float64(at(j))/float64(j.Duration); got != want {
		t.Errorf("join-long's node starts at %.3f of the run, join's at %.3f", got, want)
	}
}

// TestSaturatedDrainTiny: read-hints-saturated-drain's drain goes through the autopilot — every
// leadership of the serving node moves, each transfer's decision carries the read-hints warmth it
// saw — and the event says so.
func TestSaturatedDrainTiny(t *testing.T) {
	sc, ctx := tinyScenario(t, "read-hints-saturated-drain")
	rep, err := Run(ctx, sc, Options{Dir: t.TempDir(), Out: t.TempDir(), Duration: 20 * time.Second, Records: 500, Threads: 2,
		Variants: []string{"sampled-500ms"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 1 {
		t.Fatalf("want 1 run, got %d", len(rep.Runs))
	}
	var drain *EventMark
	for i, e := range rep.Runs[0].Events {
		if e.Label == "drain serving node" {
			drain = &rep.Runs[0].Events[i]
		}
	}
	if drain == nil {
		t.Fatalf("no drain event: %+v", rep.Runs[0].Events)
	}
	t.Logf("drain: %s", drain.What)
	if drain.Error != "" {
		t.Fatalf("drain failed: %s", drain.Error)
	}
	if !strings.Contains(drain.What, "drained of 6 leaderships") {
		t.Errorf("the drain did not move the serving node's 6 leaderships: %s", drain.What)
	}
	// An operator of the autopilot's own node ends "stopped" when the drain (of that node) moves the
	// autopilot away as it finishes; its transfer is done all the same (drained of 6, above).
	if n := strings.Count(drain.What, " succeeded, proposed at ") +
		strings.Count(drain.What, " stopped: the autopilot moved to another node while it ran, proposed at "); n != 6 {
		t.Errorf("%d drain transfers finished in the decision log, want 6: %s", n, drain.What)
	}
	if n := strings.Count(drain.What, "(read hints: "); n != 6 {
		t.Errorf("%d transfers recorded the target's warmth, want 6: %s", n, drain.What)
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

func TestErrorKind(t *testing.T) {
	kinds := map[string]int64{}
	long := strings.Repeat("x", 200)
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("get: %w", client.ErrTimeout), "TIMEOUT"},
		{&client.Error{Code: pb.ErrorCode_UNAVAILABLE, Message: "range 7 on n4"}, "UNAVAILABLE"},
		{errors.New("dial tcp: refused"), "dial tcp: refused"},
		{errors.New(long), long[:120]},
	} {
		got := errorKind(tc.err, kinds)
		if got != tc.want {
			t.Errorf("errorKind(%v) = %q, want %q", tc.err, got, tc.want)
		}
		kinds[got]++
	}
	for i := len(kinds); i < maxErrorKinds; i++ {
		kinds[fmt.Sprint("kind ", i)]++
	}
	if got := errorKind(errors.New("one too many"), kinds); got != "other" {
		t.Errorf("a kind past maxErrorKinds = %q, want other", got)
	}
	if got := errorKind(client.ErrTimeout, kinds); got != "TIMEOUT" {
		t.Errorf("a known kind past maxErrorKinds = %q, want TIMEOUT", got)
	}
	if got, want := errorKindsText(map[string]int64{"b": 2, "a": 1}), " (a: 1, b: 2)"; got != want {
		t.Errorf("errorKindsText = %q, want %q", got, want)
	}
}

// A surge run with --records and --surge-threads: the controller's and surge's clients choose among
// the records the run loaded, not the scenario's default count (their reads would mostly miss the
// data otherwise), and the surge adds the threads the run was given.
func TestSurgeClientsUseTheLoadedRecords(t *testing.T) {
	ctl := &surgeController{cfg: surgeConfig{Scenario: "join-surge", Records: 160000, SensorThreads: 2, LearnFor: time.Second}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the clients and the controller loop stop at once: no cluster needed
	env := &Env{Records: 1234, SurgeThreads: 5}
	if _, err := ctl.start(ctx, env); err != nil {
		t.Fatal(err)
	}
	if desc, err := ctl.surge(ctx, env); err != nil || desc != "+5 client threads" {
		t.Fatalf("surge = %q, %v; want +5 client threads", desc, err)
	}
	<-ctl.tr.done
	ctl.tr.load.wg.Wait()
	if got := ctl.tr.load.cfg.Records; got != 1234 {
		t.Errorf("surge clients choose among %d records, want the 1234 loaded", got)
	}
}

// The controller learns a typical 2-s window: a compaction burst in a few windows of its learning
// period must not lift its target (a mean over the whole period did, and the node came 147 s late).
func TestSurgeControllerLearnsATypicalWindow(t *testing.T) {
	base := time.Unix(1000, 0)
	g := &loadGen{base: base}
	for s := 0; s < 20; s++ {
		lat := 10 * time.Millisecond
		if s >= 6 && s < 10 { // two windows of a burst, at 10× the latency
			lat = 100 * time.Millisecond
		}
		at := base.Add(time.Duration(s)*time.Second + 500*time.Millisecond)
		for k := 0; k < 50; k++ {
			g.record(at, lat, nil)
		}
		g.record(at, time.Second, errors.New("a failed operation has no latency"))
	}
	mean, _ := g.mean(base, base.Add(20*time.Second))
	if mean < 25 {
		t.Fatalf("the burst should lift the whole period's mean: %.1f ms", mean)
	}
	if got := g.steadyMean(base, base.Add(20*time.Second)); math.Abs(got-10) > 0.1 {
		t.Errorf("steadyMean = %.2f ms, want the typical window's 10 ms", got)
	}
	if got := g.steadyMean(base.Add(30*time.Second), base.Add(40*time.Second)); !math.IsNaN(got) {
		t.Errorf("steadyMean without operations = %v, want NaN", got)
	}
}

// TestRandomValuesFastLoad runs a tiny scenario with incompressible values loaded on unthrottled
// disks (the disks' budgets restored for the workload) and a scaled LSM shape, and checks the
// report says so.
func TestRandomValuesFastLoad(t *testing.T) {
	sc, ctx := tinyScenario(t, "leader-transfer")
	rep, err := Run(ctx, sc, Options{Dir: t.TempDir(), Out: t.TempDir(), Duration: 3 * time.Second, Records: 300, Threads: 2,
		RandomValues: true, FastLoad: true, LBaseMaxBytes: 256 << 10, TargetFileBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Settings.RandomValues || !rep.Settings.FastLoad ||
		rep.Settings.LBaseMaxBytes != 256<<10 || rep.Settings.TargetFileBytes != 64<<10 {
		t.Fatalf("settings %+v: want random_values, fast_load and the LSM shape", rep.Settings)
	}
	for _, r := range rep.Runs {
		if r.Summary.Ops == 0 {
			t.Errorf("run %q served no operations", r.Variant)
		}
	}
	if _, err := Run(ctx, sc, Options{Dir: t.TempDir(), Out: t.TempDir(), TargetFileBytes: -1}); err == nil {
		t.Error("a negative target file size was accepted")
	}
}
