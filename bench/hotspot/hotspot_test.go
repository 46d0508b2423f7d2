package hotspot

import (
	"context"
	"testing"
	"time"

	"github.com/shoaldb/shoal/client"
)

// TestShortRun runs the experiment at a small scale (one 4-s hot spot): every arm covers the hot
// spot and its tail in 500 ms windows and served reads, and the online choice is judged against
// the penalties measured. It checks the experiment's mechanics, not the offload's figures.
func TestShortRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 5-node cluster")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	o := Options{Ranges: 6, KeysPerRange: 200, Durations: []time.Duration{4 * time.Second}, Gap: 3 * time.Second,
		Tail: 2 * time.Second, Progress: func(s string) { t.Log(s) }}
	rep, err := Run(ctx, t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 1 {
		t.Fatalf("%d results, want 1", len(rep.Results))
	}
	r := rep.Results[0]
	for _, a := range []Arm{r.Off, r.On, r.Auto} {
		if len(a.WindowP99Ms) != 12 || a.Reads == 0 {
			t.Errorf("%s: %d windows (want 12: 4 s + 2 s of 500 ms), %d reads", a.Mode, len(a.WindowP99Ms), a.Reads)
		}
		t.Logf("%s: penalty %.0f ms, detected %.1f s, %d operators, decisions %q, busy %v, read ops/s %v, write ops/s %v", a.Mode, a.PenaltyMs, a.DetectedS, a.Operators, a.Decisions, a.NodeBusy, a.NodeReadOps, a.NodeWriteOps)
	}
	for _, a := range []Arm{r.Off, r.On, r.Auto} {
		for i, ops := range a.NodeReadOps {
			if ops == 0 && i+1 != 1 {
				t.Logf("%s: n%d served no reads (it leads nothing)", a.Mode, i+1)
			}
		}
	}
	if r.Off.Operators != 0 {
		t.Errorf("off: %d operators, want none (the policy only observes)", r.Off.Operators)
	}
	if r.Correct != (r.Pays == r.Chose) {
		t.Errorf("correct %v with pays %v and chose %v", r.Correct, r.Pays, r.Chose)
	}
}

// A decision is attributed to the node it is about: a note's hot node (its operator), an
// operator's source (its reason), not the operator's target.
func TestDecisionNode(t *testing.T) {
	for _, c := range []struct {
		d    client.Decision
		op   bool
		want uint64
	}{
		{client.Decision{Operator: "hot spot on n3 left alone", Reason: "exploring (1 of 4)"}, false, 3},
		{client.Decision{Operator: "hot spot on n12 over", Reason: "lasted 3.0s"}, false, 12},
		{client.Decision{Operator: "transfer-leader r7: transfer-leader n2", Reason: "n4 at 100% busy (cluster mean 50%)"}, true, 4},
		{client.Decision{Operator: "split r2", Reason: "no node"}, true, 0},
	} {
		if got := decisionNode(c.d, c.op); got != c.want {
			t.Errorf("%+v: n%d, want n%d", c.d, got, c.want)
		}
	}
}

// The rows sampled before the hot spot are averaged per node; the rest are kept as they came.
func TestSplitBusy(t *testing.T) {
	t0 := time.Unix(100, 0)
	rows := []busyRow{{t0, []float64{1, 0.2}}, {t0.Add(time.Second), []float64{0.5, 0.4}},
		{t0.Add(2 * time.Second), []float64{0.9, 0.1}}}
	rest, from := splitBusy(rows, t0.Add(1500*time.Millisecond))
	if len(rest) != 2 || rest[0] != 0.75 || rest[1] != 0.3 {
		t.Errorf("rest %v, want [0.75 0.3]", rest)
	}
	if len(from) != 1 || from[0][0] != 0.9 {
		t.Errorf("from %v, want [[0.9 0.1]]", from)
	}
}
