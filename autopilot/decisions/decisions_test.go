package decisions

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/autopilot/operator"
)

func cluster(t *testing.T, now time.Duration, text string) *model.Cluster {
	t.Helper()
	c, err := model.ParseCluster("now " + now.String() + "\n" + text)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const threeNodes = `
node 1
node 2
node 3
range 2 [a,m) voters=1,2,3 leader=1 reads=3000
`

func splitOp(c *model.Cluster) *operator.Operator {
	r := c.Range(2)
	op := operator.NewSplit("load_split", c.Now, r, []byte("g"), "r2 is hot")
	op.PredictedBenefit = operator.Benefit{Metric: operator.MetricSpanMaxQPS, Before: 3000, Delta: -1500,
		Start: r.StartKey, End: r.EndKey, Key: []byte("g"), Span: r.Span()}
	return op
}

func TestEntryJSONHasTheContractFields(t *testing.T) {
	l := NewLog(0, 0)
	c := cluster(t, 0, threeNodes)
	l.Record(splitOp(c), c.Now)
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	var entries []map[string]any
	if err := json.Unmarshal(b, &entries); err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Fatalf("got %d entries", len(entries))
	}
	var keys []string
	for k := range entries[0] {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	want := []string{"id", "measured", "operator", "policy", "predicted", "range", "reason", "status", "throughput", "time"}
	if !reflect.DeepEqual(keys, want) {
		t.Fatalf("JSON fields %v, want exactly %v", keys, want)
	}
	if entries[0]["measured"] != nil {
		t.Fatalf("measured %v before the operator finished, want null", entries[0]["measured"])
	}
	if !strings.Contains(string(b), `"operator":"split r2: split at \"g\""`) {
		t.Fatalf("operator field in %s", b)
	}
}

func TestMeasuredAfterTheWindow(t *testing.T) {
	l := NewLog(0, 10*time.Second)
	c := cluster(t, 0, threeNodes)
	op := splitOp(c)
	id := l.Record(op, c.Now)
	l.Finish(id, StatusSucceeded, c.Now.Add(time.Second))
	after := `
node 1
node 2
node 3
range 2 [a,g) voters=1,2,3 leader=1 reads=1480
range 7 [g,m) voters=1,2,3 leader=2 reads=1520
`
	l.Observe(cluster(t, 5*time.Second, after))
	if e, _ := l.Get(id); e.Measured != nil {
		t.Fatal("measured before the window passed")
	}
	l.Observe(cluster(t, 11*time.Second, after))
	e, _ := l.Get(id)
	if e.Measured == nil {
		t.Fatal("not measured after the window")
	}
	m := *e.Measured
	if m.Before != 3000 || m.After != 1520 || m.Delta != -1480 {
		t.Fatalf("measured %+v", m)
	}
	if m.Detail != "left 1480 ops/s, right 1520 ops/s, 2.6% apart" {
		t.Fatalf("detail %q", m.Detail)
	}
	// Measured once only.
	l.Observe(cluster(t, 30*time.Second, threeNodes))
	if e2, _ := l.Get(id); e2.Measured.After != 1520 {
		t.Fatal("measurement changed after it was taken")
	}
}

// TestThroughputBeforeAndAfter: a transfer's range served 100 then 300 ops/s in the window before it
// (200 on average), 150 after it; the window after closes a Window after the operator finished.
func TestThroughputBeforeAndAfter(t *testing.T) {
	l := NewLog(0, 10*time.Second)
	load := func(reads, writes int) string {
		return fmt.Sprintf("node 1\nnode 2\nnode 3\nrange 1 [,) voters=1,2,3 system reads=999\n"+
			"range 2 [a,m) voters=1,2,3 leader=1 reads=%d writes=%d\nrange 3 [m,) voters=1,2,3 reads=5000\n", reads, writes)
	}
	l.Observe(cluster(t, -30*time.Second, load(9999, 0))) // older than the window: not counted
	l.Observe(cluster(t, -8*time.Second, load(90, 10)))
	l.Observe(cluster(t, -2*time.Second, load(250, 50)))
	c := cluster(t, 0, load(1000, 0))
	op := operator.NewTransferLeader("shed_leadership", c.Now, c.Range(2), 2, "n1 compacts")
	op.PredictedBenefit = operator.Benefit{Metric: operator.MetricLeaderGap, From: 1, To: 2, Before: 1, Delta: -2}
	id := l.Record(op, c.Now.Add(-time.Second))
	l.Observe(c)
	e, _ := l.Get(id)
	tp := e.Throughput
	if tp == nil || tp.Span != `["a", "m")` || tp.Before == nil || tp.After != nil {
		t.Fatalf("throughput while running: %+v", tp)
	}
	if b := tp.Before; b.Samples != 2 || b.QPS != 200 || b.ReadQPS != 170 || b.WriteQPS != 30 || b.Ranges != 1 {
		t.Fatalf("before: %+v", b)
	}
	l.Finish(id, StatusSucceeded, c.Now.Add(time.Second))
	l.Observe(cluster(t, 3*time.Second, load(100, 0)))
	l.Observe(cluster(t, 6*time.Second, load(200, 0)))
	if e, _ := l.Get(id); e.Throughput.After != nil {
		t.Fatal("the window after closed early")
	}
	l.Observe(cluster(t, 11*time.Second, load(150, 0)))
	e, _ = l.Get(id)
	if a := e.Throughput.After; a == nil || a.Samples != 3 || a.QPS != 150 || !a.From.Equal(c.Now.Add(3*time.Second)) {
		t.Fatalf("after: %+v", a)
	}
	l.Observe(cluster(t, 15*time.Second, load(7, 0)))
	if e, _ := l.Get(id); e.Throughput.After.QPS != 150 {
		t.Fatal("the window after changed once closed")
	}
	b, _ := json.Marshal(e)
	if !strings.Contains(string(b), `"throughput":{"span":"[\"a\", \"m\")","before":{`) {
		t.Fatalf("JSON %s", b)
	}
	if got := (&scope{end: []byte("k")}).String(); got != `[−∞, "k")` {
		t.Errorf("open span %s", got)
	}
	if got := (&scope{system: 1}).String(); got != "r1 (system range)" {
		t.Errorf("system range %s", got)
	}
}

// TestThroughputOfASplitAndAMerge: a split is measured over its range's span (both halves after), a
// merge over the span of both ranges; notes have none.
func TestThroughputOfASplitAndAMerge(t *testing.T) {
	l := NewLog(0, 5*time.Second)
	c := cluster(t, 0, threeNodes)
	l.Observe(c)
	id := l.Record(splitOp(c), c.Now)
	note := l.Note("decommission", "mark n3 decommissioned", "empty", StatusSucceeded, c.Now)
	l.Observe(cluster(t, time.Second, threeNodes))
	l.Finish(id, StatusSucceeded, c.Now.Add(time.Second))
	after := "node 1\nnode 2\nnode 3\nrange 2 [a,g) voters=1,2,3 reads=1400\nrange 7 [g,m) voters=1,2,3 reads=1700\nrange 8 [m,z) voters=1,2,3 reads=10\n"
	l.Observe(cluster(t, 2*time.Second, after))
	l.Observe(cluster(t, 6*time.Second, after))
	e, _ := l.Get(id)
	if tp := e.Throughput; tp == nil || tp.Before.QPS != 3000 || tp.Before.Ranges != 1 || tp.After == nil || tp.After.QPS != 3100 || tp.After.Ranges != 2 {
		t.Fatalf("split throughput: %+v %+v", tp, tp.After)
	}
	if tp := e.Throughput; tp.Detail != "" {
		t.Fatalf("detail %q", tp.Detail)
	}
	if n, _ := l.Get(note); n.Throughput != nil {
		t.Fatalf("a note has a throughput: %+v", n.Throughput)
	}
	// A merge of r2 and r7 is measured over [a, m).
	c2 := cluster(t, 10*time.Second, after)
	left, right := c2.Range(2), c2.Range(7)
	op, err := operator.NewMerge("merge", c2.Now, left, right, "idle")
	if err != nil {
		t.Fatal(err)
	}
	op.PredictedBenefit = operator.Benefit{Metric: operator.MetricSpanRanges, Before: 2, Delta: -1, Start: left.StartKey, End: right.EndKey}
	mid := l.Record(op, c2.Now)
	l.Observe(c2)
	if m, _ := l.Get(mid); m.Throughput == nil || m.Throughput.Before.QPS != 3100 || m.Throughput.Before.Ranges != 2 {
		t.Fatalf("merge throughput: %+v", m.Throughput)
	}
}

func TestOnlySucceededOperatorsAreMeasured(t *testing.T) {
	l := NewLog(0, time.Second)
	c := cluster(t, 0, threeNodes)
	id := l.Record(splitOp(c), c.Now)
	l.Finish(id, StatusCanceled+": r2 is gone", c.Now)
	l.Finish(id, StatusSucceeded, c.Now) // ignored: already finished
	l.Observe(cluster(t, time.Minute, threeNodes))
	e, _ := l.Get(id)
	if e.Status != "canceled: r2 is gone" || e.Measured != nil {
		t.Fatalf("entry %+v", e)
	}
}

func TestRingKeepsTheNewest(t *testing.T) {
	l := NewLog(3, 0)
	c := cluster(t, 0, threeNodes)
	for i := 0; i < 5; i++ {
		l.Record(splitOp(c), c.Now)
	}
	l.Note("decommission", "mark n3 decommissioned", "n3 holds no replicas any more", StatusSucceeded, c.Now)
	var ids []uint64
	for _, e := range l.Entries() {
		ids = append(ids, e.ID)
	}
	if !reflect.DeepEqual(ids, []uint64{4, 5, 6}) {
		t.Fatalf("kept %v, want the 3 newest", ids)
	}
	if _, ok := l.Get(1); ok {
		t.Fatal("dropped entry still reachable")
	}
}

func TestOnFinishReportsFinalStatusOnce(t *testing.T) {
	l := NewLog(0, 0)
	var got []Entry
	l.SetOnFinish(func(e Entry) { got = append(got, e) })
	op := &operator.Operator{Kind: "split", Policy: "load_split", RangeID: 7}
	id := l.Record(op, time.Unix(100, 0))
	if len(got) != 0 {
		t.Fatalf("a running operator was reported: %v", got)
	}
	l.Finish(id, StatusFailed+": step timed out", time.Unix(101, 0))
	l.Finish(id, StatusSucceeded, time.Unix(102, 0)) // already final: ignored
	l.Note("decommission", "mark n4 decommissioned", "empty", StatusSucceeded, time.Unix(103, 0))
	if len(got) != 2 {
		t.Fatalf("got %d finish callbacks, want 2: %v", len(got), got)
	}
	if got[0].Kind != "split" || got[0].Policy != "load_split" || Outcome(got[0].Status) != StatusFailed {
		t.Errorf("first = %+v (outcome %q)", got[0], Outcome(got[0].Status))
	}
	if got[1].Kind != "note" || Outcome(got[1].Status) != StatusSucceeded {
		t.Errorf("second = %+v", got[1])
	}
}

func TestRestoreContinuesTheLog(t *testing.T) {
	old := NewLog(0, 0)
	op1 := &operator.Operator{Kind: "split", Policy: "load_split", RangeID: 3}
	id1 := old.Record(op1, time.Unix(100, 0))
	old.Finish(id1, StatusSucceeded, time.Unix(101, 0))
	op2 := &operator.Operator{Kind: "move-replica", Policy: "rebalance", RangeID: 4}
	old.Record(op2, time.Unix(102, 0)) // still running when that autopilot went away

	l := NewLog(0, 0)
	l.Restore(old.Entries(), time.Unix(200, 0))
	got := l.Entries()
	if len(got) != 2 || got[0].ID != id1 || got[0].Status != StatusSucceeded {
		t.Fatalf("restored %+v", got)
	}
	if Outcome(got[1].Status) != StatusStopped {
		t.Fatalf("a running entry was restored as %q, want stopped", got[1].Status)
	}
	id3 := l.Record(&operator.Operator{Kind: "split", Policy: "load_split", RangeID: 5}, time.Unix(201, 0))
	if id3 <= got[1].ID {
		t.Fatalf("new id %d does not continue after the restored %d", id3, got[1].ID)
	}
}

func TestAnnotateKeepsNotesPerEntry(t *testing.T) {
	l := NewLog(0, 0)
	op := &operator.Operator{Policy: "drain", Kind: operator.KindTransferLeader, RangeID: 7, Reason: "r"}
	id := l.Record(op, time.Unix(100, 0))
	l.Annotate(id, "first")
	l.Annotate(id+100, "unknown id: ignored")
	e, _ := l.Get(id)
	e.Notes[0] = "changed by the caller"
	for i := 0; i < maxNotes+4; i++ {
		l.Annotate(id, "more")
	}
	e, _ = l.Get(id)
	if len(e.Notes) != maxNotes || e.Notes[0] != "first" {
		t.Fatalf("notes %q: want %d, the first one unchanged", e.Notes, maxNotes)
	}
	b, err := json.Marshal(l.Entries())
	if err != nil || !strings.Contains(string(b), `"notes":["first"`) {
		t.Fatalf("JSON %s (%v): want the notes", b, err)
	}
}

func TestStepDoneRecordsTimingsPerEntry(t *testing.T) {
	l := NewLog(0, 0)
	op := &operator.Operator{Policy: "join", Kind: operator.KindMoveReplica, RangeID: 7, Reason: "r"}
	id := l.Record(op, time.Unix(100, 0))
	l.StepDone(id, "add-learner n4", 512345*time.Microsecond, nil)
	l.StepDone(id, "promote-voter n4", 30*time.Millisecond, errors.New("not leader"))
	l.StepDone(id+100, "unknown id: ignored", time.Second, nil)
	for i := 0; i < maxNotes+4; i++ {
		l.StepDone(id, "more", time.Millisecond, nil)
	}
	e, _ := l.Get(id)
	if len(e.Steps) != maxNotes {
		t.Fatalf("%d steps kept, want %d", len(e.Steps), maxNotes)
	}
	want := []StepTiming{{Step: "add-learner n4", TookS: 0.512}, {Step: "promote-voter n4", TookS: 0.03, Error: "not leader"}}
	if e.Steps[0] != want[0] || e.Steps[1] != want[1] {
		t.Fatalf("steps %+v, want %+v first", e.Steps[:2], want)
	}
	e.Steps[0].Step = "changed by the caller"
	if e, _ = l.Get(id); e.Steps[0].Step != "add-learner n4" {
		t.Fatalf("the caller's copy changed the log: %+v", e.Steps[0])
	}
	b, err := json.Marshal(l.Entries())
	if err != nil || !strings.Contains(string(b), `"steps":[{"step":"add-learner n4","took_s":0.512}`) {
		t.Fatalf("JSON %s (%v): want the steps", b, err)
	}
}

// TestLatencyBeforeAndAfter: the p50 and p99 of a transfer's range, from the leaders' latency
// reports in the window before it (one of them carried by two snapshots, counted once) and in the
// window after it, for a split added up over both halves; a span without reports has none.
func TestLatencyBeforeAndAfter(t *testing.T) {
	at := func(now time.Duration, text string) *model.Cluster {
		return cluster(t, now, "node 1\nnode 2\nnode 3\n"+text)
	}
	tests := []struct {
		name           string
		before, after  []*model.Cluster
		timedBefore    uint64
		p50Before      [2]float64 // bounds, in ms
		p99Before      [2]float64
		timedAfter     uint64
		p50After       [2]float64
		p99After       [2]float64
		noLatencyAfter bool
	}{{
		name: "transfer: 10% slow requests before, none after",
		before: []*model.Cluster{
			at(-8*time.Second, "range 2 [a,m) voters=1,2,3 reads=100 latency=450@2ms,50@30ms"),
			at(-5*time.Second, "range 2 [a,m) voters=1,2,3 reads=100 latency=450@2ms,50@30ms"),
		},
		after: []*model.Cluster{
			at(3*time.Second, "range 2 [a,m) voters=1,2,3 leader=2 reads=100 latency=500@1ms"),
			at(6*time.Second, "range 2 [a,m) voters=1,2,3 leader=2 reads=100 latency=500@1ms"),
		},
		timedBefore: 1000, p50Before: [2]float64{1.9, 2.1}, p99Before: [2]float64{28.6, 30.8},
		timedAfter: 1000, p50After: [2]float64{0.95, 1.03}, p99After: [2]float64{0.95, 1.03},
	}, {
		name: "the ranges of the span after a split count together",
		before: []*model.Cluster{
			at(-4*time.Second, "range 2 [a,m) voters=1,2,3 reads=100 latency=1000@8ms"),
		},
		after: []*model.Cluster{
			at(4*time.Second, "range 2 [a,g) voters=1,2,3 reads=50 latency=990@4ms\nrange 7 [g,m) voters=1,2,3 reads=50 latency=10@50ms\nrange 8 [m,) voters=1,2,3 latency=5000@900ms"),
		},
		timedBefore: 1000, p50Before: [2]float64{7.6, 8.2}, p99Before: [2]float64{7.6, 8.2},
		timedAfter: 1000, p50After: [2]float64{3.8, 4.1}, p99After: [2]float64{3.8, 4.1},
	}, {
		name:        "no reports after: no latency",
		before:      []*model.Cluster{at(-4*time.Second, "range 2 [a,m) voters=1,2,3 reads=10 latency=10@1ms")},
		after:       []*model.Cluster{at(4*time.Second, "range 2 [a,m) voters=1,2,3")},
		timedBefore: 10, p50Before: [2]float64{0.95, 1.03}, p99Before: [2]float64{0.95, 1.03},
		noLatencyAfter: true,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := NewLog(0, 10*time.Second)
			for _, c := range tc.before {
				l.Observe(c)
			}
			// A snapshot carrying the newest report again (the autopilot ran twice within one
			// heartbeat): its requests count once.
			again := at(-time.Second, "range 2 [a,m) voters=1,2,3")
			again.Range(2).Latency = tc.before[len(tc.before)-1].Range(2).Latency
			l.Observe(again)
			c := at(0, "range 2 [a,m) voters=1,2,3")
			op := operator.NewTransferLeader("rebalance", c.Now, c.Range(2), 2, "n1 leads more")
			id := l.Record(op, c.Now)
			l.Observe(c)
			l.Finish(id, StatusSucceeded, c.Now.Add(time.Second))
			for _, a := range tc.after {
				l.Observe(a)
			}
			l.Observe(at(12*time.Second, "range 2 [a,m) voters=1,2,3"))
			e, _ := l.Get(id)
			tp := e.Throughput
			if tp == nil || tp.Before == nil || tp.After == nil {
				t.Fatalf("throughput %+v", tp)
			}
			checkLatency(t, "before", tp.Before, tc.timedBefore, tc.p50Before, tc.p99Before)
			if tc.noLatencyAfter {
				if tp.After.Timed != 0 || tp.After.P50Ms != nil || tp.After.P99Ms != nil {
					t.Fatalf("after: latency %+v without reports", *tp.After)
				}
				b, _ := json.Marshal(tp.After)
				if !strings.Contains(string(b), `"timed":0,"p50_ms":null,"p99_ms":null`) {
					t.Fatalf("JSON %s", b)
				}
				return
			}
			checkLatency(t, "after", tp.After, tc.timedAfter, tc.p50After, tc.p99After)
		})
	}
}

func checkLatency(t *testing.T, which string, w *LoadWindow, timed uint64, p50, p99 [2]float64) {
	t.Helper()
	if w.Timed != timed || w.P50Ms == nil || w.P99Ms == nil {
		b, _ := json.Marshal(w)
		t.Fatalf("%s: %d requests timed, want %d with p50 and p99: %s", which, w.Timed, timed, b)
	}
	if *w.P50Ms < p50[0] || *w.P50Ms > p50[1] || *w.P99Ms < p99[0] || *w.P99Ms > p99[1] {
		t.Fatalf("%s: p50 %.3f ms (want %v), p99 %.3f ms (want %v)", which, *w.P50Ms, p50, *w.P99Ms, p99)
	}
}

// TestRestoreReopensTheWindowAfter: an operator that succeeded less than a Window before its autopilot
// went away has no window after; the next autopilot measures one from when it took over.
func TestRestoreReopensTheWindowAfter(t *testing.T) {
	load := func(now time.Duration, latency string) *model.Cluster {
		return cluster(t, now, "node 1\nnode 2\nnode 3\nrange 2 [a,m) voters=1,2,3 leader=2 reads=100 latency="+latency)
	}
	old := NewLog(0, 10*time.Second)
	old.Observe(load(-3*time.Second, "100@8ms"))
	c := load(0, "100@8ms")
	id := old.Record(operator.NewTransferLeader("drain", c.Now, c.Range(2), 3, "n2 drains"), c.Now)
	old.Observe(c)
	old.Finish(id, StatusSucceeded, c.Now.Add(time.Second))
	old.Observe(load(3*time.Second, "100@2ms"))

	l := NewLog(0, 10*time.Second)
	l.Restore(old.Entries(), c.Now.Add(5*time.Second))
	for _, now := range []time.Duration{6 * time.Second, 9 * time.Second, 16 * time.Second} {
		l.Observe(load(now, "100@1ms"))
	}
	e, _ := l.Get(id)
	tp := e.Throughput
	if tp == nil || tp.Before == nil || tp.After == nil {
		t.Fatalf("throughput %+v", tp)
	}
	checkLatency(t, "before", tp.Before, 200, [2]float64{7.6, 8.2}, [2]float64{7.6, 8.2})
	checkLatency(t, "after", tp.After, 200, [2]float64{0.95, 1.03}, [2]float64{0.95, 1.03})
	if !tp.After.From.Equal(c.Now.Add(6*time.Second)) || !strings.Contains(tp.Detail, "the autopilot moved") {
		t.Fatalf("after from %v, detail %q", tp.After.From, tp.Detail)
	}
}
