package bgtask

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestHeavyClassification(t *testing.T) {
	tr := NewTracker(Config{HeavyCompactionBytes: 100}, nil)
	for _, tc := range []struct {
		kind  Kind
		bytes uint64
		heavy bool
	}{
		{KindFlush, 1 << 40, false},
		{KindCompaction, 99, false},
		{KindCompaction, 100, true},
		{KindManualCompaction, 0, true},
		{KindBackup, 0, true},
		{KindAnnounced, 0, true},
	} {
		h := tr.Begin(tc.kind, "x", tc.bytes)
		if got := tr.Status().Busy(); got != tc.heavy {
			t.Errorf("%s %d bytes: busy=%v, want %v", tc.kind, tc.bytes, got, tc.heavy)
		}
		h.End()
		h.End() // idempotent
		if tr.Status().Busy() || len(tr.Status().Tasks) != 0 {
			t.Fatalf("%s: task left after End: %+v", tc.kind, tr.Status().Tasks)
		}
	}
}

func TestLastCompletedAndLedBefore(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	tr := NewTracker(Config{ReturnWindow: time.Minute}, clk.now)
	led := []uint64{3, 7}
	changes := 0
	tr.SetHooks(func() []uint64 { return led }, func() { changes++ })

	h := tr.Begin(KindBackup, "b1", 0)
	led = nil // leaderships moved away while the task runs
	st := tr.Status()
	if !st.Busy() || len(st.LedBefore) != 2 || st.LedBefore[0] != 3 {
		t.Fatalf("status while busy: %+v", st)
	}
	// A second heavy task during the busy period keeps the original set.
	h2 := tr.Begin(KindManualCompaction, "c", 0)
	h2.End()
	clk.add(10 * time.Second)
	h.End()
	st = tr.Status()
	if got := st.LastCompleted[KindBackup]; !got.Equal(clk.now()) {
		t.Fatalf("last backup %v, want %v", got, clk.now())
	}
	if len(st.LedBefore) != 2 {
		t.Fatalf("led before must be reported within the return window: %+v", st)
	}
	if changes != 4 {
		t.Fatalf("onChange called %d times, want 4 (two heavy tasks appeared and ended)", changes)
	}
	clk.add(2 * time.Minute)
	if st = tr.Status(); st.LedBefore != nil {
		t.Fatalf("led before reported after the return window: %v", st.LedBefore)
	}
	// Flushes and light compactions record nothing heavy and never call onChange.
	tr.Begin(KindFlush, "f", 0).End()
	tr.Begin(KindCompaction, "small", 1).End()
	if changes != 4 {
		t.Fatalf("light tasks called onChange")
	}
	if _, ok := tr.Status().LastCompleted[KindFlush]; ok {
		t.Fatalf("flushes must not count as completed tasks")
	}
}

func TestAcquire(t *testing.T) {
	t.Run("proceeds at once when clear", func(t *testing.T) {
		tr := NewTracker(Config{}, nil)
		h, out, err := tr.Acquire(context.Background(), KindBackup, "b", time.Time{}, func() (bool, string) { return true, "follower" })
		if err != nil || out.GaveUp || out.Why != "follower" {
			t.Fatalf("acquire: %v %+v", err, out)
		}
		if st := tr.Status(); len(st.Tasks) != 1 || st.Tasks[0].State != Running {
			t.Fatalf("task not running: %+v", st.Tasks)
		}
		h.End()
	})
	t.Run("pending until notified", func(t *testing.T) {
		tr := NewTracker(Config{Recheck: time.Hour}, nil)
		var clear atomic.Bool
		done := make(chan Outcome, 1)
		go func() {
			h, out, err := tr.Acquire(context.Background(), KindManualCompaction, "c", time.Time{}, func() (bool, string) {
				if clear.Load() {
					return true, "no leaderships left"
				}
				return false, "2 leaderships to move"
			})
			if err != nil {
				t.Error(err)
			}
			h.End()
			done <- out
		}()
		waitFor(t, func() bool { st := tr.Status(); return len(st.Tasks) == 1 && st.Tasks[0].State == Pending })
		if !tr.Status().Busy() {
			t.Fatal("a pending heavy task must make the node busy")
		}
		select {
		case <-done:
			t.Fatal("ran before its condition held")
		case <-time.After(50 * time.Millisecond):
		}
		clear.Store(true)
		tr.Notify()
		select {
		case out := <-done:
			if out.GaveUp || out.Why != "no leaderships left" {
				t.Fatalf("outcome %+v", out)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Notify did not wake the waiting task")
		}
	})
	t.Run("gives up after MaxPostpone", func(t *testing.T) {
		tr := NewTracker(Config{MaxPostpone: 30 * time.Millisecond, Recheck: 5 * time.Millisecond}, nil)
		h, out, err := tr.Acquire(context.Background(), KindBackup, "b", time.Time{}, func() (bool, string) { return false, "no idle candidate" })
		if err != nil || !out.GaveUp || out.Waited < 30*time.Millisecond {
			t.Fatalf("acquire: %v %+v", err, out)
		}
		h.End()
	})
	t.Run("withdrawn when ctx ends", func(t *testing.T) {
		tr := NewTracker(Config{Recheck: time.Millisecond}, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		_, _, err := tr.Acquire(ctx, KindBackup, "b", time.Time{}, func() (bool, string) { return false, "wait" })
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err %v", err)
		}
		if st := tr.Status(); len(st.Tasks) != 0 {
			t.Fatalf("withdrawn task still listed: %+v", st.Tasks)
		}
		if _, ok := tr.Status().LastCompleted[KindBackup]; ok {
			t.Fatal("a withdrawn task must not count as completed")
		}
	})
}

func TestAnnouncedExpiry(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	tr := NewTracker(Config{}, clk.now)
	h, _, err := tr.Acquire(context.Background(), KindAnnounced, "reindex", clk.now().Add(time.Minute), func() (bool, string) { return true, "" })
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Status().Busy() {
		t.Fatal("announced task not reported")
	}
	clk.add(2 * time.Minute)
	if tr.Status().Busy() {
		t.Fatal("an announced task past its end must not keep the node busy")
	}
	h.End()
}

func TestJitter(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	base := 30 * time.Minute
	lo, hi := time.Duration(1<<62), time.Duration(0)
	for i := 0; i < 1000; i++ {
		d := Jittered(base, rng)
		if d < base || d > base*3/2 {
			t.Fatalf("jittered %v outside [%v, %v]", d, base, base*3/2)
		}
		lo, hi = min(lo, d), max(hi, d)
		if f := FirstDelay(base, rng); f < 0 || f >= base {
			t.Fatalf("first delay %v outside [0, %v)", f, base)
		}
	}
	if hi-lo < base/3 {
		t.Fatalf("jitter spread %v too small: replicas would stay aligned", hi-lo)
	}
	if Jittered(0, rng) != 0 || FirstDelay(0, rng) != 0 {
		t.Fatal("zero period must mean no delay")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond)
	}
}
