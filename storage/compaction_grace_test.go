package storage

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// fakeCompactionDB is a DB that always has a compaction waiting and allows `allowed` at a time.
type fakeCompactionDB struct {
	allowed   int
	scheduled int
}

func (f *fakeCompactionDB) GetAllowedWithoutPermission() int { return f.allowed }
func (f *fakeCompactionDB) GetWaitingCompaction() (bool, pebble.WaitingCompaction) {
	return true, pebble.WaitingCompaction{}
}
func (f *fakeCompactionDB) Schedule(pebble.CompactionGrantHandle) bool { f.scheduled++; return true }

type fakeNow struct{ t time.Time }

func (c *fakeNow) now() time.Time { return c.t }

func compactionOut(reason string, bytes uint64, err error) pebble.CompactionInfo {
	return pebble.CompactionInfo{Reason: reason, Done: true, Err: err,
		Output: pebble.LevelInfo{Level: 6, Tables: []pebble.TableInfo{{Size: bytes / 2}, {Size: bytes - bytes/2}}}}
}

func newTestGrace(t *testing.T, grace time.Duration, allowed int) (*graceScheduler, *fakeCompactionDB, *fakeNow) {
	clock := &fakeNow{t: time.Unix(1000, 0)}
	s := newGraceScheduler(grace, clock.now)
	s.noGranter = true
	db := &fakeCompactionDB{allowed: allowed}
	s.Register(1, db)
	t.Cleanup(s.Unregister)
	return s, db, clock
}

// Without a grace in effect it is Pebble's concurrency limit.
func TestGraceSchedulerGrantsUpToTheAllowedConcurrency(t *testing.T) {
	s, db, _ := newTestGrace(t, time.Second, 1)
	if ok, h := s.TrySchedule(); !ok || h == nil {
		t.Fatal("first compaction refused with nothing running")
	}
	if ok, _ := s.TrySchedule(); ok {
		t.Fatal("second compaction granted beyond the allowed 1")
	}
	// Its end grants the waiting one at once (the DB always has one waiting).
	s.Done()
	if db.scheduled != 1 {
		t.Fatalf("scheduled %d compactions when the running one finished, want 1", db.scheduled)
	}
	s.Done()
	db.allowed = 2
	s.mu.Lock()
	s.tryGrantLockedAndUnlock()
	if db.scheduled != 3 {
		t.Fatalf("scheduled %d compactions in all once 2 are allowed, want 3", db.scheduled)
	}
	if holds, _ := s.counters(); holds != 0 {
		t.Errorf("holds = %d without any compaction end, want 0", holds)
	}
}

func TestGraceSchedulerHoldsAfterARewrite(t *testing.T) {
	const grace = 2 * time.Second
	for _, tc := range []struct {
		name    string
		end     pebble.CompactionInfo
		allowed int
		hold    bool
	}{
		{"rewrite of 4 MiB", compactionOut("default", 4<<20, nil), 1, true},
		{"read compaction", compactionOut("read", 2<<20, nil), 1, true},
		{"small rewrite", compactionOut("default", refillGraceMinBytes-1, nil), 1, false},
		{"move keeps the blocks", compactionOut("move", 64<<20, nil), 1, false},
		{"copy writes a new table", compactionOut("copy", 2<<20, nil), 1, true},
		{"delete-only", compactionOut("delete-only", 64<<20, nil), 1, false},
		{"failed compaction", compactionOut("default", 4<<20, errors.New("cancelled")), 1, false},
		{"L0 backing up", compactionOut("default", 4<<20, nil), 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, db, clock := newTestGrace(t, grace, tc.allowed)
			s.compactionEnded(tc.end)
			clock.t = clock.t.Add(500 * time.Millisecond)
			ok, _ := s.TrySchedule()
			if ok == tc.hold {
				t.Fatalf("granted = %v, want %v", ok, !tc.hold)
			}
			holds, _ := s.counters()
			if want := map[bool]int64{true: 1, false: 0}[tc.hold]; holds != want {
				t.Fatalf("holds = %d, want %d", holds, want)
			}
			if !tc.hold {
				return
			}
			// Still within the grace: the granter grants nothing.
			clock.t = clock.t.Add(time.Second)
			s.mu.Lock()
			s.tryGrantLockedAndUnlock()
			if db.scheduled != 0 {
				t.Fatalf("scheduled %d compactions during the grace", db.scheduled)
			}
			// The grace over (2 s after the end): the waiting compaction is granted.
			clock.t = clock.t.Add(600 * time.Millisecond)
			s.mu.Lock()
			s.tryGrantLockedAndUnlock()
			if db.scheduled != 1 {
				t.Fatalf("scheduled %d compactions after the grace, want 1", db.scheduled)
			}
			// Held from the refusal (0.5 s after the end) to the grace's end: 1.5 s.
			if holds, held := s.counters(); holds != 1 || held != 1500*time.Millisecond {
				t.Errorf("counters = %d holds, %v held; want 1, 1.5s", holds, held)
			}
			// Nothing more granted than allowed once it runs.
			if ok, _ := s.TrySchedule(); ok {
				t.Error("granted beyond the allowed concurrency after the hold")
			}
		})
	}
}

// A later end extends the grace; an earlier one never shortens it.
func TestGraceSchedulerExtendsTheHold(t *testing.T) {
	s, _, clock := newTestGrace(t, 2*time.Second, 1)
	s.compactionEnded(compactionOut("default", 4<<20, nil))
	clock.t = clock.t.Add(1500 * time.Millisecond)
	s.compactionEnded(compactionOut("default", 4<<20, nil)) // another engine job's end
	clock.t = clock.t.Add(time.Second)                      // 2.5 s after the first, 1 s after the second
	if ok, _ := s.TrySchedule(); ok {
		t.Fatal("granted inside the second compaction's grace")
	}
	clock.t = clock.t.Add(time.Second)
	if ok, _ := s.TrySchedule(); !ok {
		t.Fatal("refused after both graces")
	}
}

// On a real engine a grace holds a compaction that follows a rewrite, and the compaction then runs:
// nothing stalls.
func TestEngineCompactionRefillGrace(t *testing.T) {
	e, err := Open(t.TempDir(), Options{CreateIfMissing: true, CompactionRefillGrace: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	rng := rand.New(rand.NewPCG(1, 2))
	write := func(round int) {
		b := e.NewBatch()
		v := make([]byte, 64)
		for i := 0; i < 40000; i++ { // ~3 MB of incompressible values: a compaction writes > 1 MiB
			for j := range v {
				v[j] = byte(rng.Uint32())
			}
			must(t, b.Set([]byte(fmt.Sprintf("k%06d", i)), v))
		}
		must(t, b.Commit(true))
		must(t, e.db.Flush())
	}
	write(0)
	write(1)
	must(t, e.CompactAll(context.Background()))
	// The first compaction rewrote > 1 MiB: the next one waits for the grace, then runs.
	write(2)
	write(3)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	must(t, e.CompactAll(ctx))
	st := e.Stats()
	if st.CompactionGraceHolds == 0 || st.CompactionGraceHeld <= 0 {
		t.Fatalf("no compaction held after a rewrite: holds %d, held %v", st.CompactionGraceHolds, st.CompactionGraceHeld)
	}
	if st.CompactionGraceHeld > 300*time.Millisecond*time.Duration(st.CompactionGraceHolds) {
		t.Errorf("held %v over %d holds: longer than the grace each", st.CompactionGraceHeld, st.CompactionGraceHolds)
	}
	if el := time.Since(start); el > 20*time.Second {
		t.Errorf("second full compaction took %v", el)
	}
	if st.L0Files != 0 {
		t.Errorf("L0 holds %d tables after a full compaction", st.L0Files)
	}
	if _, err := Open(t.TempDir(), Options{CreateIfMissing: true, CompactionRefillGrace: -time.Second}); err == nil {
		t.Error("a negative grace was accepted")
	}
}

// A DB whose Open fails after Register never calls Unregister: abandon stops the granter, and is a
// no-op when Register never ran.
func TestGraceSchedulerAbandon(t *testing.T) {
	s := newGraceScheduler(time.Second, time.Now)
	s.abandon() // never registered: must not wait for a granter that was never started
	s = newGraceScheduler(time.Second, time.Now)
	s.Register(1, &fakeCompactionDB{allowed: 1})
	s.abandon()
	select {
	case <-s.done:
	default:
		t.Fatal("the granter still runs after abandon")
	}
	if ok, _ := s.TrySchedule(); ok {
		t.Error("an abandoned scheduler granted a compaction")
	}
}
