package hints

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoaldb/shoal/hints/hint"
)

func newTestApplier(t *testing.T, r Reader, cfg ApplierConfig) *Applier {
	t.Helper()
	a, err := NewApplier(r, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return a
}

func rangeOf(id uint64, keys ...string) hint.RangeHints {
	return hint.RangeHints{RangeID: id, CapturedAt: time.Now(), Hints: pointHints(keys...)}
}

func manyKeys(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%06d", prefix, i)
	}
	return out
}

func TestApplierReplaysEachHintOnceAndCounts(t *testing.T) {
	model := newCacheModel()
	model.fail["bad"] = true
	model.noRange[9] = true
	a := newTestApplier(t, model, ApplierConfig{Workers: 2, MaxScanRows: 50})
	a.Start()
	r := hint.RangeHints{RangeID: 1, CapturedAt: time.Now(), Hints: []hint.Hint{
		{Descriptor: hint.Point([]byte("a")), Count: 5}, // summarized: replayed once
		{Descriptor: hint.Point([]byte("bad")), Count: 1},
		{Descriptor: hint.ScanOf([]byte("s"), []byte("t"), 0, false), Count: 1},   // no limit: MaxScanRows
		{Descriptor: hint.ScanOf([]byte("s"), []byte("t"), 1000, true), Count: 1}, // above the cap: MaxScanRows
		{Descriptor: hint.ScanOf([]byte("s"), []byte("t"), 10, false), Count: 1},  // its own limit
	}}
	q, d := a.Receive([]hint.RangeHints{r, rangeOf(9, "x", "y")}, time.Now())
	if q != 2 || d != 0 {
		t.Fatalf("queued %d dropped %d", q, d)
	}
	eventually(t, 5*time.Second, "replays", func() bool {
		m := a.Metrics()
		return m.Applied == 4 && m.Dropped[DropNoReplica] == 2
	})
	calls := model.callSet()
	want := map[string]int{"a": 1, "bad": 1, "x": 1, "y": 1, "scan s-t/50/false": 1, "scan s-t/50/true": 1, "scan s-t/10/false": 1}
	if fmt.Sprint(calls) != fmt.Sprint(want) {
		t.Fatalf("reader calls %v, want %v", calls, want)
	}
	m := a.Metrics()
	if m.Received != 7 || m.Dropped[DropReplayError] != 1 || m.ReplayCacheMiss != 4 || m.AppliedBatches != 1 {
		t.Fatalf("metrics %+v", m)
	}
}

// A full queue drops whole range batches, and Receive returns at once while the workers are stuck.
func TestApplierBackPressure(t *testing.T) {
	model := newCacheModel()
	model.gate = make(chan struct{})
	model.started = make(chan struct{}, 1)
	const queueLen = 3
	a := newTestApplier(t, model, ApplierConfig{Workers: 1, QueueLen: queueLen})
	a.Start()
	if q, _ := a.Receive([]hint.RangeHints{rangeOf(1, "first")}, time.Now()); q != 1 {
		t.Fatal("first batch not queued")
	}
	<-model.started // the only worker holds "first"
	start := time.Now()
	var queued, dropped int
	for i := 0; i < 10; i++ {
		q, d := a.Receive([]hint.RangeHints{rangeOf(uint64(10+i), "k1", "k2")}, time.Now())
		queued += q
		dropped += d
	}
	// The worker is stuck until the gate opens: a Receive that blocks behind it never returns, and
	// one that does not returns within any stall of the host.
	if el := time.Since(start); el > 10*time.Second {
		t.Fatalf("Receive blocked %v behind a stuck worker", el)
	}
	if queued != queueLen || dropped != 10-queueLen {
		t.Fatalf("queued %d dropped %d, want %d and %d", queued, dropped, queueLen, 10-queueLen)
	}
	m := a.Metrics()
	if m.Dropped[DropApplyQueueFull] != 2*(10-queueLen) || m.QueueDepth != queueLen {
		t.Fatalf("apply_queue_full %d depth %d", m.Dropped[DropApplyQueueFull], m.QueueDepth)
	}
	close(model.gate)
	eventually(t, 5*time.Second, "the queue drains", func() bool { return a.Metrics().Applied == 1+2*queueLen })
}

func TestApplierCloseDropsQueued(t *testing.T) {
	model := newCacheModel()
	model.gate = make(chan struct{})
	model.started = make(chan struct{}, 1)
	a, err := NewApplier(model, ApplierConfig{Workers: 1, QueueLen: 4})
	if err != nil {
		t.Fatal(err)
	}
	a.Start()
	a.Receive([]hint.RangeHints{rangeOf(1, "a", "b")}, time.Now())
	<-model.started
	a.Receive([]hint.RangeHints{rangeOf(2, "c"), rangeOf(3, "d", "e")}, time.Now())
	a.Close() // cancels the stuck replay
	m := a.Metrics()
	// "a" was cancelled (a replay error), "b" not started, the two queued batches dropped.
	if m.Dropped[DropClosed] != 4 || m.Dropped[DropReplayError] != 1 || m.Applied != 0 {
		t.Fatalf("after close: applied %d dropped %v", m.Applied, m.Dropped)
	}
}

func appliedSet(t *testing.T, sel Selection, frac float64, keys []string) map[string]bool {
	t.Helper()
	model := newCacheModel()
	a := newTestApplier(t, model, ApplierConfig{Workers: 2, QueueLen: 1024, Fraction: frac, Selection: sel})
	a.Start()
	for i := 0; i < len(keys); i += 500 {
		a.Receive([]hint.RangeHints{rangeOf(1, keys[i:min(i+500, len(keys))]...)}, time.Now())
	}
	eventually(t, 10*time.Second, "all hints handled", func() bool {
		m := a.Metrics()
		return m.Applied+m.Dropped[DropSelective] == uint64(len(keys))
	})
	out := map[string]bool{}
	for k := range model.callSet() {
		out[k] = true
	}
	return out
}

// Selective hints: about the configured fraction is applied; hash selection is deterministic and
// nested (a lower fraction applies a subset of a higher one's).
func TestApplierSelectiveFraction(t *testing.T) {
	keys := manyKeys("user", 5000)
	sets := map[float64]map[string]bool{}
	for _, tc := range []struct {
		sel  Selection
		frac float64
	}{
		{SelectHash, 0.1}, {SelectHash, 0.2}, {SelectHash, 0.33}, {SelectHash, 0.5}, {SelectHash, 1},
		{SelectRandom, 0.1}, {SelectRandom, 0.5},
	} {
		t.Run(fmt.Sprintf("sel%d/%v", tc.sel, tc.frac), func(t *testing.T) {
			got := appliedSet(t, tc.sel, tc.frac, keys)
			share := float64(len(got)) / float64(len(keys))
			if math.Abs(share-tc.frac) > 0.03 {
				t.Fatalf("applied %.3f of hints, want %.2f", share, tc.frac)
			}
			if tc.sel == SelectHash {
				sets[tc.frac] = got
				if again := appliedSet(t, tc.sel, tc.frac, keys); fmt.Sprint(again) != fmt.Sprint(got) {
					t.Fatal("hash selection differs between two appliers")
				}
			}
		})
	}
	for _, pair := range [][2]float64{{0.1, 0.2}, {0.2, 0.33}, {0.33, 0.5}, {0.5, 1}} {
		for k := range sets[pair[0]] {
			if !sets[pair[1]][k] {
				t.Fatalf("%q applied at fraction %v but not at %v", k, pair[0], pair[1])
			}
		}
	}
}

func TestAdaptiveFraction(t *testing.T) {
	for _, tc := range []struct{ base, load, want float64 }{
		{1, 0, 1}, {1, 0.7, 1}, {1, 0.8, 0.55}, {1, 0.9, 0.1}, {0.5, 0.8, 0.3}, {0.05, 0.8, 0.05},
	} {
		if got := adaptiveFraction(tc.base, tc.load, 0.7, 0.9, 0.1); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("adaptiveFraction(%v, %v) = %v, want %v", tc.base, tc.load, got, tc.want)
		}
	}
}

// freshBatches returns a function that delivers a batch of n keys never sent before for a range,
// waits until the applier has replayed or dropped every one, and returns the share it replayed.
func freshBatches(t *testing.T, a *Applier, n int) func(rangeID uint64) float64 {
	batch := 0
	handled := func(m Metrics) uint64 { return m.Applied + m.Dropped[DropSelective] + m.Dropped[DropOverloaded] }
	return func(rangeID uint64) float64 {
		t.Helper()
		batch++
		before := a.Metrics()
		a.Receive([]hint.RangeHints{rangeOf(rangeID, manyKeys(fmt.Sprintf("b%d-", batch), n)...)}, time.Now())
		eventually(t, 10*time.Second, "batch handled", func() bool { return handled(a.Metrics())-handled(before) == uint64(n) })
		return float64(a.Metrics().Applied-before.Applied) / float64(n)
	}
}

// The applier follows a load signal: full fraction when idle, a lower one under load, nothing while
// overloaded (reported in metrics), and it resumes only once the load is clearly lower.
func TestApplierAdaptsToLoad(t *testing.T) {
	var load atomic.Uint64
	setLoad := func(v float64) { load.Store(math.Float64bits(v)) }
	model := newCacheModel()
	a := newTestApplier(t, model, ApplierConfig{Workers: 1, QueueLen: 64, Adaptive: true, LoadInterval: time.Nanosecond,
		Load: func() float64 { return math.Float64frombits(load.Load()) }})
	a.Start()
	send := freshBatches(t, a, 2000)
	for _, step := range []struct {
		load        float64
		wantShare   float64
		wantPaused  bool
		wantPauses  uint64
		description string
	}{
		{0.3, 1, false, 0, "idle: everything"},
		{0.8, 0.55, false, 0, "busy: fraction halfway between 1 and 0.1"},
		{0.95, 0, true, 1, "overloaded: stopped"},
		{0.85, 0, true, 1, "still above the resume point (0.8): stays stopped"},
		{0.75, 0.775, false, 1, "resumed at the adapted fraction"},
		{0.92, 0, true, 2, "overloaded again"},
		{0.1, 1, false, 2, "idle again"},
	} {
		setLoad(step.load)
		share := send(1)
		m := a.Metrics()
		if math.Abs(share-step.wantShare) > 0.05 || m.Paused != step.wantPaused || m.Pauses != step.wantPauses ||
			m.Load != step.load {
			t.Fatalf("%s (load %v): applied %.3f (want %.3f), paused %v (want %v), pauses %d (want %d), load metric %v",
				step.description, step.load, share, step.wantShare, m.Paused, step.wantPaused, m.Pauses, step.wantPauses, m.Load)
		}
		wantFrac := step.wantShare
		if math.Abs(m.Fraction-wantFrac) > 1e-9 {
			t.Fatalf("%s: fraction metric %v, want %v", step.description, m.Fraction, wantFrac)
		}
	}
	if a.Metrics().Dropped[DropOverloaded] != 3*2000 {
		t.Fatalf("overloaded drops %d", a.Metrics().Dropped[DropOverloaded])
	}
}

// Batches already queued when the node becomes overloaded are dropped by the worker, not replayed.
func TestApplierOverloadDropsQueued(t *testing.T) {
	var overloaded atomic.Bool
	model := newCacheModel()
	model.gate = make(chan struct{})
	model.started = make(chan struct{}, 1)
	a := newTestApplier(t, model, ApplierConfig{Workers: 1, QueueLen: 8, Adaptive: true, LoadInterval: time.Nanosecond,
		Load: func() float64 {
			if overloaded.Load() {
				return 1
			}
			return 0
		}})
	a.Start()
	a.Receive([]hint.RangeHints{rangeOf(1, "held")}, time.Now())
	<-model.started
	a.Receive([]hint.RangeHints{rangeOf(2, "q1", "q2"), rangeOf(3, "q3")}, time.Now())
	overloaded.Store(true)
	model.gate <- struct{}{}
	eventually(t, 5*time.Second, "queued batches dropped", func() bool { return a.Metrics().Dropped[DropOverloaded] == 3 })
	if calls := model.callSet(); len(calls) != 1 {
		t.Fatalf("replayed %v while overloaded", calls)
	}
}

func TestApplierSetFraction(t *testing.T) {
	model := newCacheModel()
	a := newTestApplier(t, model, ApplierConfig{Workers: 1})
	a.Start()
	a.SetFraction(0)
	a.Receive([]hint.RangeHints{rangeOf(1, "a", "b")}, time.Now())
	eventually(t, 5*time.Second, "selective drops", func() bool { return a.Metrics().Dropped[DropSelective] == 2 })
	a.SetFraction(1)
	a.Receive([]hint.RangeHints{rangeOf(1, "a", "b")}, time.Now())
	eventually(t, 5*time.Second, "applied", func() bool { return a.Metrics().Applied == 2 })
}

func TestApplierConfig(t *testing.T) {
	for _, cfg := range []ApplierConfig{{Fraction: 1.5}, {StartAt: 0.9, StopAt: 0.5}, {Selection: 7}} {
		if _, err := NewApplier(newCacheModel(), cfg); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
	if _, err := NewApplier(nil, ApplierConfig{}); err == nil {
		t.Error("nil Reader accepted")
	}
}

func TestWarmFullReplay(t *testing.T) {
	model := newCacheModel()
	a := newTestApplier(t, model, ApplierConfig{Fraction: 0.1})
	st, err := a.Warm(context.Background(), 1, pointHints(manyKeys("k", 100)...))
	if err != nil || st.CacheMiss != 100 {
		t.Fatalf("warm: %v %+v (a synchronous replay ignores the fraction)", err, st)
	}
	w := a.Warmth(1)
	if !w.Known || w.HintsApplied != 100 || w.Replays != 0 {
		t.Fatalf("warmth after Warm: %+v (its cold replays do not count towards the hit ratio)", w)
	}
	model.noRange[2] = true
	if _, err := a.Warm(context.Background(), 2, pointHints("x")); !errors.Is(err, ErrNoReplica) {
		t.Fatalf("warm without a replica: %v", err)
	}
}

func TestApplierReceiveAfterClose(t *testing.T) {
	a, err := NewApplier(newCacheModel(), ApplierConfig{})
	if err != nil {
		t.Fatal(err)
	}
	a.Start()
	a.Close()
	if q, d := a.Receive([]hint.RangeHints{rangeOf(1, "a", "b")}, time.Now()); q != 0 || d != 1 || a.Metrics().Dropped[DropClosed] != 2 {
		t.Fatalf("after close: queued %d dropped %d, %v", q, d, a.Metrics().Dropped)
	}
}

// Hints all skipped by a low fraction still show that hints flow (the idle time restarts), but add no
// replays to the hit ratio.
func TestApplierSkippedBatchKeepsWarmthFresh(t *testing.T) {
	model := newCacheModel()
	a := newTestApplier(t, model, ApplierConfig{Workers: 1})
	a.Start()
	a.SetFraction(1e-9) // above 0, but no hash falls below it
	sent := time.Now()
	a.Receive([]hint.RangeHints{rangeOf(3, "a")}, time.Now())
	eventually(t, 5*time.Second, "batch handled", func() bool { return a.Warmth(3).Known })
	// Idle counts from the batch, which was handled after it was sent: never longer than that ago.
	w := a.Warmth(3)
	if w.Replays != 0 || w.HintsApplied != 0 || w.Idle > time.Since(sent) || a.Metrics().Dropped[DropSelective] != 1 {
		t.Fatalf("warmth %+v, drops %v", w, a.Metrics().Dropped)
	}
}

// With applying off (fraction 0) batches are dropped without refreshing the warmth: the range goes
// idle, so a transfer's warmth check fails instead of trusting replays from before.
func TestApplierFractionZeroLetsWarmthGoStale(t *testing.T) {
	model := newCacheModel()
	a := newTestApplier(t, model, ApplierConfig{Workers: 1})
	a.Start()
	a.Receive([]hint.RangeHints{rangeOf(3, "a", "b")}, time.Now())
	eventually(t, 5*time.Second, "batch applied", func() bool { return a.Warmth(3).HintsApplied == 2 })
	last := a.Warmth(3)
	a.SetFraction(0)
	time.Sleep(20 * time.Millisecond)
	a.Receive([]hint.RangeHints{rangeOf(3, "a", "b")}, time.Now())
	eventually(t, 5*time.Second, "batch dropped", func() bool { return a.Metrics().Dropped[DropSelective] == 2 })
	w := a.Warmth(3)
	if w.HintsApplied != 2 || w.Idle < last.Idle+20*time.Millisecond {
		t.Fatalf("warmth %+v after a batch dropped with fraction 0 (before: %+v): want it unchanged and idler", w, last)
	}
	crit := WarmCriteria{MaxIdle: 10 * time.Millisecond}
	if err := crit.Check(w); !errors.Is(err, ErrNotWarm) {
		t.Fatalf("check %v: want not warm (idle)", err)
	}
}

// RecurringOnly replays a read only once it recurs: repeated in its batch, or received again within
// the window; a read seen once is dropped as one_off (and remembered).
func TestApplierRecurringOnly(t *testing.T) {
	model := newCacheModel()
	a := newTestApplier(t, model, ApplierConfig{Workers: 1, RecurringOnly: true, RecurWindow: time.Hour})
	a.Start()
	first := rangeOf(1, "once", "again", "twice")
	first.Hints[2].Count = 2 // "twice" was read twice in this batch
	a.Receive([]hint.RangeHints{first}, time.Now())
	eventually(t, 5*time.Second, "first batch", func() bool { m := a.Metrics(); return m.Applied+m.Dropped[DropOneOff] == 3 })
	if calls := model.callSet(); len(calls) != 1 || calls["twice"] != 1 {
		t.Fatalf("replayed %v after the first batch: want only the read repeated in it", calls)
	}
	a.Receive([]hint.RangeHints{rangeOf(1, "again", "new")}, time.Now())
	eventually(t, 5*time.Second, "second batch", func() bool { m := a.Metrics(); return m.Applied+m.Dropped[DropOneOff] == 5 })
	m := a.Metrics()
	if calls := model.callSet(); m.Applied != 2 || m.Dropped[DropOneOff] != 3 || calls["again"] != 1 || calls["new"]+calls["once"] != 0 {
		t.Fatalf("replayed %v, applied %d, one-off drops %d: want \"again\" replayed on its second read", calls, m.Applied, m.Dropped[DropOneOff])
	}
	if w := a.Warmth(1); !w.Known || w.HintsApplied != 2 {
		t.Fatalf("warmth %+v", w)
	}
}

func TestRecentReadsForgetsAfterTwoWindows(t *testing.T) {
	var r recentReads
	t0 := time.Unix(0, 0)
	w := time.Second
	if r.recurring(7, 1, t0, w) {
		t.Fatal("first sighting counted as recurring")
	}
	if !r.recurring(7, 1, t0.Add(1500*time.Millisecond), w) {
		t.Fatal("a read from the previous window not remembered")
	}
	if r.recurring(8, 1, t0.Add(2*time.Second), w) || r.recurring(8, 1, t0.Add(5*time.Second), w) {
		t.Fatal("a read older than two windows remembered")
	}
}

// ReplayEvery replays a recurring read at most once per period: the same hot read in the next
// batches is dropped as recently_replayed (and the range's warmth still advances), and replayed
// again once the period is over. The applier reads the clock itself, so a host that stalls for a
// period between the first two batches makes the second one legitimately due again: that attempt
// proves nothing and runs again on a new applier.
func TestApplierReplayEvery(t *testing.T) {
	const every = 300 * time.Millisecond
	hot := func() hint.RangeHints {
		r := rangeOf(1, "hot")
		r.Hints[0].Count = 3
		return r
	}
	for attempt := 1; ; attempt++ {
		model := newCacheModel()
		a := newTestApplier(t, model, ApplierConfig{Workers: 1, RecurringOnly: true, RecurWindow: time.Hour, ReplayEvery: every})
		a.Start()
		first := time.Now()
		a.Receive([]hint.RangeHints{hot()}, time.Now())
		eventually(t, 5*time.Second, "first batch", func() bool { return a.Metrics().Applied == 1 })
		time.Sleep(5 * time.Millisecond)
		sent := time.Now()
		a.Receive([]hint.RangeHints{hot()}, time.Now())
		eventually(t, 5*time.Second, "second batch", func() bool {
			m := a.Metrics()
			return m.Applied+m.Dropped[DropRecentlyReplayed] == 2
		})
		w, idle := a.Warmth(1), time.Since(sent)
		if took := time.Since(first); took >= every {
			if attempt == 10 {
				t.Fatalf("the two batches took %v or more on every attempt, want them within the %v period", took, every)
			}
			t.Logf("the two batches took %v, past the %v period: again", took, every)
			continue
		}
		if calls := model.callSet(); calls["hot"] != 1 || a.Metrics().Applied != 1 || a.Metrics().Dropped[DropRecentlyReplayed] != 1 {
			t.Fatalf("replayed %v, applied %d: want one replay within the period", calls, a.Metrics().Applied)
		}
		// Refreshed: the last batch was applied after the second was sent, not at the first.
		if w.Idle > idle {
			t.Fatalf("warmth %+v after a batch replayed recently: idle for more than the %v since it was sent", w, idle)
		}
		time.Sleep(every + 50*time.Millisecond)
		a.Receive([]hint.RangeHints{hot()}, time.Now())
		eventually(t, 5*time.Second, "after the period", func() bool { return a.Metrics().Applied == 2 })
		return
	}
}

func TestRecentReplaysOncePerPeriod(t *testing.T) {
	var r recentReplays
	t0 := time.Unix(0, 0)
	if r.seen(7, t0, time.Second) {
		t.Fatal("first replay counted as seen")
	}
	if !r.seen(7, t0.Add(900*time.Millisecond), time.Second) || r.seen(8, t0.Add(900*time.Millisecond), time.Second) {
		t.Fatal("within the period: want 7 seen, 8 new")
	}
	if r.seen(7, t0.Add(time.Second), time.Second) {
		t.Fatal("a new period: want 7 replayed again")
	}
}

func TestApplierShedding(t *testing.T) {
	var load atomic.Uint64
	a := newTestApplier(t, newCacheModel(), ApplierConfig{Adaptive: true, LoadInterval: time.Nanosecond,
		Load: func() float64 { return math.Float64frombits(load.Load()) }})
	for _, tt := range []struct {
		load float64
		want bool
	}{{0.2, false}, {0.69, false}, {0.75, true}, {0.95, true}, {0.85, true}, {0.5, false}} { // 0.85: still paused (resumes below 0.8)
		load.Store(math.Float64bits(tt.load))
		if got := a.Shedding(time.Now()); got != tt.want {
			t.Fatalf("load %v: Shedding %v, want %v", tt.load, got, tt.want)
		}
	}
	fixed := newTestApplier(t, newCacheModel(), ApplierConfig{Fraction: 0.5, Load: func() float64 { return 1 }})
	if fixed.Shedding(time.Now()) {
		t.Fatal("a fixed fraction is not shedding for load")
	}
}

// A range a leadership transfer waits on (Await) is replayed at the configured fraction whatever the
// node sheds; the node's other ranges are shed as usual, and so is the range once the wait is over.
func TestApplierAwaitedRangeIsNotShed(t *testing.T) {
	var load atomic.Uint64
	model := newCacheModel()
	a := newTestApplier(t, model, ApplierConfig{Workers: 1, QueueLen: 64, Adaptive: true, LoadInterval: time.Nanosecond,
		Load: func() float64 { return math.Float64frombits(load.Load()) }})
	a.Start()
	send := freshBatches(t, a, 1000)
	done := a.Await(7)
	for _, step := range []struct {
		load           float64
		awaited, other float64 // shares applied of range 7 (awaited) and of range 8
		wantBatches    uint64
	}{
		{0.3, 1, 1, 0},    // not shedding: nothing to exempt
		{0.8, 1, 0.55, 1}, // adapted fraction: the awaited range at 1
		{0.95, 1, 0, 2},   // paused for overload: the awaited range still replayed
		{0.85, 1, 0, 3},   // still paused
		{0.3, 1, 1, 3},    // room again
		{0.95, 1, 0, 4},   // and paused once more
	} {
		load.Store(math.Float64bits(step.load))
		got7, got8 := send(7), send(8)
		if math.Abs(got7-step.awaited) > 0.05 || math.Abs(got8-step.other) > 0.05 || a.Metrics().AwaitedBatches != step.wantBatches {
			t.Fatalf("load %v: applied %.3f of the awaited range (want %.3f), %.3f of another (want %.3f), %d awaited batches (want %d)",
				step.load, got7, step.awaited, got8, step.other, a.Metrics().AwaitedBatches, step.wantBatches)
		}
	}
	done()
	done()                             // idempotent
	load.Store(math.Float64bits(0.75)) // below the resume point (0.8)
	if got := send(7); math.Abs(got-0.775) > 0.05 {
		t.Fatalf("after the wait: applied %.3f of range 7, want the adapted 0.775", got)
	}
	if n := len(a.awaited); n != 0 {
		t.Fatalf("%d ranges still awaited", n)
	}
}

// WaitWarm marks its range awaited for as long as it waits, and only then.
func TestWaitWarmAwaitsTheRange(t *testing.T) {
	a := newTestApplier(t, newCacheModel(), ApplierConfig{Workers: 1})
	if _, err := a.WaitWarm(context.Background(), 3, DefaultWarmCriteria(), 0); err == nil || a.isAwaited(3) {
		t.Fatalf("a check (wait 0) of an unknown range: err %v, awaited %v", err, a.isAwaited(3))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	waited := make(chan error, 1)
	go func() {
		_, err := a.WaitWarm(ctx, 3, DefaultWarmCriteria(), time.Minute)
		waited <- err
	}()
	eventually(t, 5*time.Second, "range 3 awaited during the wait", func() bool { return a.isAwaited(3) })
	cancel()
	if err := <-waited; !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitWarm after cancel: %v", err)
	}
	if a.isAwaited(3) {
		t.Fatal("range 3 still awaited after the wait")
	}
}

// A batch the sender withheld (no recurring reads) keeps an awaited range's warmth fresh while the
// node is paused, as it would a range the node applies; another range's stays unknown.
func TestApplierAwaitedWithheldBatchKeepsWarmthFresh(t *testing.T) {
	a := newTestApplier(t, newCacheModel(), ApplierConfig{Workers: 1, Adaptive: true, LoadInterval: time.Nanosecond,
		Load: func() float64 { return 1 }})
	a.Start()
	defer a.Await(17)()
	a.Receive([]hint.RangeHints{{RangeID: 17, CapturedAt: time.Now()}, {RangeID: 18, CapturedAt: time.Now()}}, time.Now())
	if !a.Metrics().Paused {
		t.Fatal("not paused at load 1")
	}
	if w := a.Warmth(17); !w.Known || w.Idle > time.Second {
		t.Fatalf("awaited range: warmth %v, want known and fresh", w)
	}
	if w := a.Warmth(18); w.Known {
		t.Fatalf("range not awaited, node paused: warmth %v, want unknown", w)
	}
}
