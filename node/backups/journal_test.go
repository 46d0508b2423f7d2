package backups

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/shoaldb/shoal/backup"
	"github.com/shoaldb/shoal/storage"
)

// TestJournalUnderConcurrentWriters: writers put and delete keys in every range (each batch also
// advances its range's applied index, as a raft apply does) while a full backup and incrementals are
// taken; each incremental reads the journal, and each chain restores its checkpoint byte for byte.
func TestJournalUnderConcurrentWriters(t *testing.T) {
	s := newStore(t)
	s.setRange(1, "", "k1", 1)
	s.setRange(2, "k1", "k2", 1)
	s.setRange(3, "k2", "", 1)
	for i := range 600 {
		s.put(fmt.Sprintf("k%d%03d", i%3, i), "v0")
	}
	var mu sync.Mutex // the writers' applied indexes
	applied := map[uint64]uint64{1: 100, 2: 100, 3: 100}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	// Registered after the store's: the writers stop before the engine closes, even on a failure.
	stopWriters := sync.OnceFunc(func() { close(stop); wg.Wait() })
	t.Cleanup(stopWriters)
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 3))
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				r := 1 + rng.IntN(3)
				b := s.eng.NewBatch()
				for range 1 + rng.IntN(4) {
					k := storage.UserDataKey(fmt.Appendf(nil, "k%d%03d", r-1, rng.IntN(1000)))
					if rng.IntN(5) == 0 {
						b.Delete(k)
					} else {
						b.Set(k, fmt.Appendf(nil, "w%d-%d", w, i))
					}
				}
				mu.Lock()
				applied[uint64(r)]++
				b.Set(storage.AppliedStateKey(uint64(r)), binary.BigEndian.AppendUint64(nil, applied[uint64(r)]))
				mu.Unlock()
				if err := b.Commit(rng.IntN(8) == 0); err != nil {
					t.Error(err)
				}
				b.Close()
			}
		}()
	}
	root := t.TempDir()
	parent := ""
	for i := range 5 {
		dir := filepath.Join(root, fmt.Sprint("b", i))
		m := s.backup(dir, parent)
		if i > 0 && m.Method != "journal" {
			t.Fatalf("incremental %d: %s (%s)", i, m.Method, m.Fallback)
		}
		restored(t, dir, s.ckState)
		t.Logf("backup %d: %d keys, %d deletions; checkpoint holds %d keys", i, m.TotalKeys, m.TotalDeletes, len(s.ckState))
		parent = dir
	}
	stopWriters()
}

// TestJournalSpans: a range a snapshot replaced (an ingest) or a range deletion cleared is written
// in full; the chain restores the store.
func TestJournalSpans(t *testing.T) {
	s := newStore(t)
	s.setRange(1, "", "k1", 1)
	s.setRange(2, "k1", "k2", 1)
	s.setRange(3, "k2", "", 1)
	for i := range 300 {
		s.put(fmt.Sprintf("k%d%03d", i%3, i), "v0")
	}
	root := t.TempDir()
	b := func(i int) string { return filepath.Join(root, fmt.Sprint("b", i)) }
	s.backup(b(0), "")

	// Range 2 replaced by a snapshot: an ingest of new data for its span.
	lo, hi := storage.DataSpan(false, []byte("k1"), []byte("k2"))
	for k := range s.data {
		if strings.HasPrefix(k, "k1") {
			delete(s.data, k)
		}
	}
	var snap []string
	for i := range 50 {
		k := fmt.Sprintf("k1%03d", 500+i)
		snap = append(snap, k)
		s.data[k] = "from a snapshot"
	}
	i := 0
	must(t, s.eng.IngestSpan(context.Background(), lo, hi, func() ([]byte, []byte, bool) {
		if i == len(snap) {
			return nil, nil, false
		}
		i++
		return storage.UserDataKey([]byte(snap[i-1])), []byte("from a snapshot"), true
	}))
	s.bump(2)
	// Part of range 3 cleared by a range deletion, one key of range 1 changed.
	dlo, dhi := storage.DataSpan(false, []byte("k20"), []byte("k21"))
	s.batch(func(b *storage.Batch) error { return b.DeleteRange(dlo, dhi) })
	for k := range s.data {
		if k >= "k20" && k < "k21" {
			delete(s.data, k)
		}
	}
	s.bump(3)
	s.put("k0003", "changed")
	m := s.backup(b(1), b(0))
	if m.Method != "journal" {
		t.Fatalf("incremental: %s (%s)", m.Method, m.Fallback)
	}
	for _, e := range m.Ranges {
		if wantDelta := e.RangeID == 1; e.Delta != wantDelta {
			t.Errorf("range %d: delta %v, want %v", e.RangeID, e.Delta, wantDelta)
		}
		if e.RangeID == 1 && e.Keys != 1 {
			t.Errorf("range 1: %d keys written, want the one changed", e.Keys)
		}
	}
	restored(t, b(1), s.held())
	// The next incremental reads only what changed after: the spans are behind the new mark.
	s.put("k1600", "later")
	m = s.backup(b(2), b(1))
	if m.TotalKeys != 1 || m.TotalDeletes != 0 {
		t.Fatalf("incremental after the spans: %d keys, %d deletions, want 1 key", m.TotalKeys, m.TotalDeletes)
	}
	restored(t, b(2), s.held())
}

// TestJournalFallbacks: an incremental the journal cannot serve diffs against the index its parent's
// chain implies (delta indexes merged), says why, and restores the same state.
func TestJournalFallbacks(t *testing.T) {
	s := newStore(t)
	s.setRange(1, "", "k5", 1)
	s.setRange(2, "k5", "", 1)
	rng := rand.New(rand.NewPCG(5, 5))
	churn := func(n int) {
		for range n {
			k := fmt.Sprintf("k%03d", rng.IntN(1000))
			if _, ok := s.data[k]; ok && rng.IntN(4) == 0 {
				s.del(k)
			} else {
				s.put(k, fmt.Sprint("v", rng.Uint32()))
			}
		}
	}
	churn(800)
	root := t.TempDir()
	b := func(i int) string { return filepath.Join(root, fmt.Sprint("b", i)) }
	expect := func(m *backup.Manifest, method, why string) {
		t.Helper()
		if m.Method != method || !strings.Contains(m.Fallback, why) {
			t.Fatalf("incremental: method %q, fallback %q; want %q, %q", m.Method, m.Fallback, method, why)
		}
	}
	s.backup(b(0), "")
	churn(100)
	expect(s.backup(b(1), b(0)), "journal", "")
	churn(100)
	expect(s.backup(b(2), b(1)), "journal", "")
	// Against b0 again: the journal was trimmed to b2's mark.
	churn(50)
	expect(s.backup(b(3), b(0)), "diff", "trimmed past the parent")
	restored(t, b(3), s.held())
	// Journaling switched off: the journal is deleted and the incremental diffs against the index
	// b3's chain implies (b3's own, a full one: it diffed).
	s.cfg.NoJournal = true
	churn(50)
	m := s.backup(b(4), b(3))
	expect(m, "diff", "journaling is off")
	if m.Journal != nil {
		t.Fatalf("a backup without journaling recorded mark %+v", m.Journal)
	}
	if st, _ := s.eng.JournalState(); st.On {
		t.Fatal("the journal is still on")
	}
	restored(t, b(4), s.held())
	// On again: the parent has no mark.
	s.cfg.NoJournal = false
	churn(50)
	expect(s.backup(b(5), b(4)), "diff", "no journal mark")
	churn(50)
	expect(s.backup(b(6), b(5)), "journal", "")
	churn(50)
	expect(s.backup(b(7), b(6)), "journal", "")
	restored(t, b(7), s.held())

	// Another store holding the same data: its journal is not the parent's. Its incremental diffs
	// against the index b7's chain implies: b5's full index with b6's and b7's deltas merged over it.
	o := newStore(t)
	o.setRange(1, "", "k5", 1)
	o.setRange(2, "k5", "", 1)
	for k, v := range s.data {
		o.put(k, v)
	}
	o.backup(filepath.Join(root, "other0"), "") // starts o's journal
	o.put("k001", "on the other node")
	o.del("k999")
	m = o.backup(b(8), b(7))
	expect(m, "diff", "another node")
	restored(t, b(8), o.held())
	if want := 2; int(m.TotalKeys+m.TotalDeletes) > want+len(diffKeys(s.data, o.data)) {
		t.Fatalf("the diff wrote %d changes; the stores differ in %d keys", m.TotalKeys+m.TotalDeletes, len(diffKeys(s.data, o.data)))
	}
}

func diffKeys(a, b map[string]string) []string {
	var out []string
	for k := range maps.Keys(a) {
		if v, ok := b[k]; !ok || v != a[k] {
			out = append(out, k)
		}
	}
	for k := range maps.Keys(b) {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	return out
}

// TestJournalTrimmed: after a backup completes, the journal keeps only the epochs after its mark.
func TestJournalTrimmed(t *testing.T) {
	s := newStore(t)
	s.setRange(1, "", "", 1)
	root := t.TempDir()
	parent := ""
	for i := range 4 {
		for j := range 20 {
			s.put(fmt.Sprintf("k%d-%d", i, j), "v")
		}
		dir := filepath.Join(root, fmt.Sprint("b", i))
		m := s.backup(dir, parent)
		parent = dir
		st, err := s.eng.JournalState()
		must(t, err)
		if st.Start != m.Journal.Epoch || st.Epoch != m.Journal.Epoch+1 {
			t.Fatalf("after backup %d (mark %d): journal %+v", i, m.Journal.Epoch, st)
		}
		for ep := uint64(0); ep <= m.Journal.Epoch; ep++ {
			lo, hi := storage.JournalEpochSpan(ep)
			it, err := s.eng.NewIter(lo, hi)
			must(t, err)
			if it.First() {
				t.Fatalf("epoch %d kept after the backup of mark %d", ep, m.Journal.Epoch)
			}
			it.Close()
		}
	}
}
