package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestLeaderTransferTiny runs a tiny leader-transfer scenario end to end and checks the report's
// schema and the plots.
func TestLeaderTransferTiny(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two 3-node clusters")
	}
	sc, ok := Lookup("leader-transfer")
	if !ok {
		t.Fatal("leader-transfer not registered")
	}
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	if _, err := Run(ctx, sc, Options{Dir: t.TempDir(), Out: out, Duration: 3 * time.Second, Records: 200, Threads: 4, Progress: &progress}); err != nil {
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
	if _, ok := rep["settings"].(map[string]any); !ok {
		t.Fatalf("settings: %v", rep["settings"])
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
