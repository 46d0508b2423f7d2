package storage

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func openTestEngine(t testing.TB, dir string) *Engine {
	t.Helper()
	e, err := Open(dir, Options{CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// journalKeys lists the user keys journaled in epochs after mark, and the span markers.
func journalKeys(t *testing.T, r interface {
	NewIter(lo, hi []byte) (*Iterator, error)
}, after, through uint64) (points map[string]bool, spans [][2]string) {
	t.Helper()
	points = map[string]bool{}
	for ep := after + 1; ep <= through; ep++ {
		lo, hi := JournalPointSpan(ep, nil, nil)
		it, err := r.NewIter(lo, hi)
		if err != nil {
			t.Fatal(err)
		}
		for ok := it.First(); ok; ok = it.Next() {
			points[string(JournalUserKey(it.Key()))] = true
		}
		it.Close()
		lo, hi = JournalSpanMarkers(ep)
		it, err = r.NewIter(lo, hi)
		if err != nil {
			t.Fatal(err)
		}
		for ok := it.First(); ok; ok = it.Next() {
			spans = append(spans, [2]string{string(JournalUserKey(it.Key())), string(it.Value())})
		}
		it.Close()
	}
	return points, spans
}

func commit(t *testing.T, e *Engine, fn func(b *Batch)) {
	t.Helper()
	b := e.NewBatch()
	fn(b)
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
	b.Close()
}

func TestJournalOffUntilFirstBackup(t *testing.T) {
	e := openTestEngine(t, t.TempDir())
	defer e.Close()
	commit(t, e, func(b *Batch) { b.Set(UserDataKey([]byte("a")), []byte("1")) })
	it, _ := e.NewIter([]byte{prefixJournal}, []byte{prefixJournal + 1})
	if it.First() {
		t.Fatalf("journal key %q written before any backup", it.Key())
	}
	it.Close()
	m, err := e.BeginBackupEpoch()
	if err != nil {
		t.Fatal(err)
	}
	if m.Epoch != 0 || m.ID == "" {
		t.Fatalf("first mark %+v", m)
	}
	commit(t, e, func(b *Batch) {
		b.Set(UserDataKey([]byte("b")), []byte("2"))
		b.Delete(UserDataKey([]byte("c")))
		b.Set(AppliedStateKey(7), []byte("x")) // not a user key
		b.Set(MetaDataKey([]byte("m")), []byte("x"))
	})
	pts, spans := journalKeys(t, e, 0, 1)
	if len(pts) != 2 || !pts["b"] || !pts["c"] || len(spans) != 0 {
		t.Fatalf("journal after one batch: points %v spans %v", pts, spans)
	}
}

func TestJournalSpanMarkers(t *testing.T) {
	e := openTestEngine(t, t.TempDir())
	defer e.Close()
	if _, err := e.BeginBackupEpoch(); err != nil {
		t.Fatal(err)
	}
	lo, hi := DataSpan(false, []byte("k"), []byte("n"))
	commit(t, e, func(b *Batch) {
		b.DeleteRange(lo, hi)
		b.Set(UserDataKey([]byte("l")), []byte("in the span"))
		b.Set(UserDataKey([]byte("z")), []byte("outside"))
		rlo, rhi := RaftStateSpan(3)
		b.DeleteRange(rlo, rhi) // raft state: not journaled
	})
	lo2, hi2 := DataSpan(false, []byte("q"), nil)
	kv := [][2]string{{"q1", "v"}, {"q2", "v"}}
	i := 0
	err := e.IngestSpan(context.Background(), lo2, hi2, func() ([]byte, []byte, bool) {
		if i == len(kv) {
			return nil, nil, false
		}
		i++
		return UserDataKey([]byte(kv[i-1][0])), []byte(kv[i-1][1]), true
	})
	if err != nil {
		t.Fatal(err)
	}
	pts, spans := journalKeys(t, e, 0, 1)
	want := [][2]string{{"k", "n"}, {"q", ""}}
	if fmt.Sprint(spans) != fmt.Sprint(want) {
		t.Fatalf("spans %v, want %v", spans, want)
	}
	if len(pts) != 1 || !pts["z"] {
		t.Fatalf("points %v, want only z (l is inside the deleted span)", pts)
	}
}

func TestJournalTrimAndDisable(t *testing.T) {
	e := openTestEngine(t, t.TempDir())
	defer e.Close()
	for i := range 3 {
		if _, err := e.BeginBackupEpoch(); err != nil {
			t.Fatal(err)
		}
		commit(t, e, func(b *Batch) { b.Set(UserDataKey(fmt.Appendf(nil, "k%d", i)), nil) })
	}
	// Epochs 1, 2, 3 hold k0, k1, k2. Trim through 2.
	if err := e.TrimJournal(2); err != nil {
		t.Fatal(err)
	}
	st, _ := e.JournalState()
	if st.Start != 2 || st.Epoch != 3 {
		t.Fatalf("state after trim %+v", st)
	}
	if pts, _ := journalKeys(t, e, 0, 3); len(pts) != 1 || !pts["k2"] {
		t.Fatalf("after trim: %v", pts)
	}
	if err := e.TrimJournal(1); err != nil { // an older mark never lowers the start
		t.Fatal(err)
	}
	if st, _ := e.JournalState(); st.Start != 2 {
		t.Fatalf("start lowered to %d", st.Start)
	}
	if err := e.DisableJournal(); err != nil {
		t.Fatal(err)
	}
	commit(t, e, func(b *Batch) { b.Set(UserDataKey([]byte("after")), nil) })
	if pts, _ := journalKeys(t, e, 0, 10); len(pts) != 0 {
		t.Fatalf("journal after disable: %v", pts)
	}
	if st, _ := e.JournalState(); st.On {
		t.Fatalf("state after disable: %+v", st)
	}
}

// TestJournalOrdersWritesAgainstCheckpoint: writers commit concurrently while backups bump the epoch
// and checkpoint; every write missing from a checkpoint is journaled under an epoch after its mark,
// and every write journaled at or before the mark is in it.
func TestJournalOrdersWritesAgainstCheckpoint(t *testing.T) {
	dir := t.TempDir()
	e := openTestEngine(t, filepath.Join(dir, "engine"))
	defer e.Close()
	var seq atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			for {
				select {
				case <-stop:
					return
				default:
				}
				b := e.NewBatch()
				n := 1 + rng.IntN(3)
				for range n {
					k := fmt.Appendf(nil, "w%d-%06d", w, seq.Add(1))
					b.Set(UserDataKey(k), k)
				}
				if err := b.Commit(rng.IntN(4) == 0); err != nil {
					t.Error(err)
				}
				b.Close()
			}
		}()
	}
	type ck struct {
		mark JournalMark
		dir  string
	}
	var cks []ck
	for i := range 6 {
		m, err := e.BeginBackupEpoch()
		if err != nil {
			t.Fatal(err)
		}
		d := filepath.Join(dir, fmt.Sprint("ck", i))
		if err := e.Checkpoint(d); err != nil {
			t.Fatal(err)
		}
		cks = append(cks, ck{m, d})
	}
	close(stop)
	wg.Wait()
	final, err := e.JournalState()
	if err != nil {
		t.Fatal(err)
	}
	// Where each key was journaled, from the live engine.
	epochOf := map[string]uint64{}
	for ep := uint64(1); ep <= final.Epoch; ep++ {
		pts, _ := journalKeys(t, e, ep-1, ep)
		for k := range pts {
			epochOf[k] = ep
		}
	}
	all, _ := e.NewIter(UserDataKey(nil), []byte{prefixUser + 1})
	var keys []string
	for ok := all.First(); ok; ok = all.Next() {
		keys = append(keys, string(StripDataPrefix(all.Key())))
	}
	all.Close()
	for _, c := range cks {
		cp, err := e.OpenCheckpoint(c.dir)
		if err != nil {
			t.Fatal(err)
		}
		missing, inside := 0, 0
		for _, k := range keys {
			_, found, err := cp.Get(UserDataKey([]byte(k)))
			if err != nil {
				t.Fatal(err)
			}
			ep, ok := epochOf[k]
			if !ok && !found {
				// Only writes before the first bump go unjournaled, and every checkpoint has them.
				t.Fatalf("key %s is journaled nowhere and missing from the checkpoint of mark %d", k, c.mark.Epoch)
			}
			if !found {
				missing++
				if ok && ep <= c.mark.Epoch {
					t.Fatalf("checkpoint of mark %d lacks %s, journaled at epoch %d", c.mark.Epoch, k, ep)
				}
			} else {
				inside++
			}
		}
		t.Logf("mark %d: %d keys in the checkpoint, %d after it", c.mark.Epoch, inside, missing)
		cp.Close(false)
	}
}

// TestJournalEpochSurvivesKill9 kills a process that bumped the epoch and was writing, then reopens
// its store: the epoch is the one last bumped, and every write journaled since is under it.
func TestJournalEpochSurvivesKill9(t *testing.T) {
	if dir := os.Getenv("SHOAL_JOURNAL_KILL_DIR"); dir != "" {
		e, err := Open(dir, Options{CreateIfMissing: true})
		if err != nil {
			os.Exit(3)
		}
		for range 3 {
			if _, err := e.BeginBackupEpoch(); err != nil {
				os.Exit(4)
			}
		}
		for i := 0; ; i++ {
			b := e.NewBatch()
			b.Set(UserDataKey(fmt.Appendf(nil, "k%06d", i)), nil)
			if err := b.Commit(true); err != nil {
				os.Exit(5)
			}
			b.Close()
			if i == 100 {
				fmt.Println("ready")
				os.Stdout.Sync()
			}
		}
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestJournalEpochSurvivesKill9$")
	cmd.Env = append(os.Environ(), "SHOAL_JOURNAL_KILL_DIR="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := out.Read(buf); err != nil || string(buf) != "ready" {
		t.Fatalf("child: %q %v", buf, err)
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	cmd.Wait()
	e := openTestEngine(t, dir)
	defer e.Close()
	st, err := e.JournalState()
	if err != nil {
		t.Fatal(err)
	}
	if !st.On || st.Epoch != 3 || st.Start != 0 {
		t.Fatalf("state after kill -9: %+v", st)
	}
	pts, _ := journalKeys(t, e, 2, 3)
	it, _ := e.NewIter(UserDataKey(nil), []byte{prefixUser + 1})
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
		if !pts[string(StripDataPrefix(it.Key()))] {
			t.Fatalf("%s survived but is not journaled under epoch 3", it.Key())
		}
	}
	it.Close()
	if n < 101 {
		t.Fatalf("only %d synced writes survived", n)
	}
	m, err := e.BeginBackupEpoch()
	if err != nil || m.Epoch != 3 || m.ID != st.ID {
		t.Fatalf("bump after restart: %+v %v", m, err)
	}
}

// TestJournalBumpWaitsForIngest: a bump returns only after an ingest that started under the epoch it
// closes is done (so the checkpoint after it holds the ingest), and commits go on meanwhile.
func TestJournalBumpWaitsForIngest(t *testing.T) {
	e := openTestEngine(t, t.TempDir())
	defer e.Close()
	gate := make(chan struct{})
	ingested := make(chan error, 1)
	lo, hi := DataSpan(false, []byte("s"), []byte("t"))
	sent := false
	go func() {
		ingested <- e.IngestSpan(context.Background(), lo, hi, func() ([]byte, []byte, bool) {
			if sent {
				return nil, nil, false
			}
			<-gate // the ingest is in flight until the gate opens
			sent = true
			return UserDataKey([]byte("s1")), []byte("v"), true
		})
	}()
	// Wait until the ingest is registered.
	for {
		e.journal.ingestMu.Lock()
		n := len(e.journal.ingests)
		e.journal.ingestMu.Unlock()
		if n > 0 {
			break
		}
		runtime.Gosched()
	}
	bumped := make(chan JournalMark, 1)
	go func() {
		m, err := e.BeginBackupEpoch()
		if err != nil {
			t.Error(err)
		}
		bumped <- m
	}()
	commit(t, e, func(b *Batch) { b.Set(UserDataKey([]byte("during")), nil) }) // not held back
	select {
	case <-bumped:
		t.Fatal("the bump returned while an ingest of the epoch it closed was in flight")
	case <-time.After(100 * time.Millisecond):
	}
	close(gate)
	if err := <-ingested; err != nil {
		t.Fatal(err)
	}
	<-bumped
	if _, found, _ := e.Get(UserDataKey([]byte("s1"))); !found {
		t.Fatal("the ingest is not there after the bump")
	}
}
