package scenario

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoaldb/shoal/bench/report"
)

// Threads that share a pacer start operations at its rate together, however many they are; unpaced
// they do not wait. The counts hold however slowly the host runs: the slots a pacer hands out are at
// least an interval apart, so the time that actually passed caps them.
func TestPacerSpacesThreadsTogether(t *testing.T) {
	p := &pacer{}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	t0 := time.Now()
	for range 1000 {
		// A wait that sleeps returns the cancelled context's error: unpaced, none does.
		if err := p.wait(cancelled); err != nil {
			t.Fatalf("unpaced: a wait waited (%v)", err)
		}
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Fatalf("unpaced: 1000 waits took %v", d)
	}
	const rate = 2000
	p.setRate(rate)
	ctx := context.Background()
	var n atomic.Int64
	var wg sync.WaitGroup
	t0 = time.Now()
	for range 8 {
		wg.Go(func() {
			// 0.5 s, and on a host too slow for 300 slots in it, until there are (within 10 s).
			for d := time.Since(t0); d < 500*time.Millisecond || n.Load() < 300 && d < 10*time.Second; d = time.Since(t0) {
				if p.wait(ctx) == nil {
					n.Add(1)
				}
			}
		})
	}
	wg.Wait()
	el := time.Since(t0)
	// 2 000/s for 0.5 s: about 1 000 slots; slow timers on a loaded machine give fewer, never more
	// than one an interval of the time that passed.
	if got, most := n.Load(), int64(el.Seconds()*rate*1.1)+1; got > most || got < 300 {
		t.Fatalf("8 threads at %d/s for %v started %d operations, want 300-%d", rate, el.Round(time.Millisecond), got, most)
	}
}

// A pacer that fell behind by more than maxPaceLag drops the missed slots: the load the cluster could
// not take is lost, not replayed in a burst that would hide a dip.
func TestPacerDropsMissedSlots(t *testing.T) {
	const iv = 10 * time.Millisecond
	p := &pacer{}
	p.setRate(float64(time.Second / iv))
	ctx := context.Background()
	_ = p.wait(ctx)
	time.Sleep(500 * time.Millisecond) // 50 slots missed
	t0 := time.Now()
	burst := 0
	for time.Since(t0) < 50*time.Millisecond {
		_ = p.wait(ctx)
		burst++
	}
	el := time.Since(t0)
	// Replaying the backlog would start ~50 at once; dropping it leaves at most the 100 ms of lag
	// (10 slots) plus one an interval of the time the loop ran (5 in 50 ms, more on a stalled host).
	if most := int((maxPaceLag+el)/iv) + 5; burst > most {
		t.Fatalf("after falling 500 ms behind, %d operations started within %v: the backlog was replayed (want at most %d)",
			burst, el.Round(time.Millisecond), most)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	p.setRate(0.001)
	_ = p.wait(ctx) // takes the next slot; the one after is 1 000 s away
	if err := p.wait(cctx); err == nil {
		t.Fatal("wait returned nil after its context was cancelled")
	}
}

// The rate offered is the scenario's fraction of the closed loop's throughput over the second half
// of its warm-up, unless a rate is given.
func TestPaceRate(t *testing.T) {
	sc := Scenario{Warmup: 20 * time.Second, Pace: 0.8}
	var series []Point
	for s := 1; s <= 20; s++ {
		ops := int64(1000)
		if s > 10 {
			ops = 3000 // the cache warmed
		}
		series = append(series, Point{T: float64(s), Ops: ops})
	}
	if got := paceRate(sc, Options{}, series); got != 2400 {
		t.Errorf("paceRate = %v, want 0.8 × 3000", got)
	}
	if got := paceRate(sc, Options{Rate: 500}, series); got != 500 {
		t.Errorf("paceRate with a fixed rate = %v, want 500", got)
	}
}

// A compaction's bytes count when it finishes: a full compaction that ends within the window's last
// second still counts for the window.
func TestEventHeavierCountsTheLastSecond(t *testing.T) {
	rr := &RunReport{Task: &TaskWindow{StartS: 40, EndS: 54.2, DurationS: 14.2, Node: 1}}
	for s := 1; s <= 80; s++ {
		var c int64
		if s%5 == 0 {
			c = 3 << 20 // the background's compactions
		}
		if s == 55 {
			c = 60 << 20 // the full compaction, finished at 54.2 s
		}
		rr.Series = append(rr.Series, Point{T: float64(s), Nodes: []NodeSecond{{Node: 1, CompactedBytes: c}}})
	}
	cs := taskChecks(rr, 10, true)
	if len(cs) != 2 || cs[1].Verdict != report.Pass {
		t.Fatalf("%v: want event_heavier pass", cs)
	}
	// No compaction at all in the window before it: the task is heavier, not unjudged.
	for i := range rr.Series {
		if rr.Series[i].T != 55 {
			rr.Series[i].Nodes[0].CompactedBytes = 0
		}
	}
	if cs := taskChecks(rr, 10, true); len(cs) != 2 || cs[1].Verdict != report.Pass {
		t.Fatalf("nothing compacted before the task: %v, want event_heavier pass", cs)
	}
}
