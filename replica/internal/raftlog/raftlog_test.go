package raftlog

import (
	"errors"
	"fmt"
	"testing"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/shoaldb/shoal/storage"
)

const testRangeID = 7

// logEnv is an engine in a temporary directory that can be closed and reopened (a node restart).
type logEnv struct {
	t   *testing.T
	dir string
	eng *storage.Engine
}

func newLogEnv(t *testing.T) *logEnv {
	t.Helper()
	env := &logEnv{t: t, dir: t.TempDir()}
	eng, err := storage.Open(env.dir, storage.Options{CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	env.eng = eng
	t.Cleanup(func() {
		if env.eng != nil {
			env.eng.Close()
		}
	})
	return env
}

// reopen closes the engine and opens it again from disk.
func (env *logEnv) reopen() {
	env.t.Helper()
	if err := env.eng.Close(); err != nil {
		env.t.Fatal(err)
	}
	env.eng = nil
	eng, err := storage.Open(env.dir, storage.Options{})
	if err != nil {
		env.t.Fatalf("reopen engine: %v", err)
	}
	env.eng = eng
}

// initialized writes the initial state of a range's log and returns the log.
func (env *logEnv) initialized(rangeID uint64) *Log {
	env.t.Helper()
	b := env.eng.NewIndexedBatch()
	defer b.Close()
	if err := WriteInitialState(b, rangeID); err != nil {
		env.t.Fatal(err)
	}
	if err := b.Commit(true); err != nil {
		env.t.Fatal(err)
	}
	return env.load(rangeID)
}

func (env *logEnv) load(rangeID uint64) *Log {
	env.t.Helper()
	l, err := Load(env.eng, env.eng, rangeID)
	if err != nil {
		env.t.Fatalf("Load(%d): %v", rangeID, err)
	}
	return l
}

// write runs fn on a fresh batch and commits it.
func (env *logEnv) write(fn func(b *storage.Batch) error) {
	env.t.Helper()
	b := env.eng.NewBatch()
	defer b.Close()
	if err := fn(b); err != nil {
		env.t.Fatal(err)
	}
	if err := b.Commit(true); err != nil {
		env.t.Fatal(err)
	}
}

func (env *logEnv) appendEnts(l *Log, ents ...*raftpb.Entry) {
	env.t.Helper()
	env.write(func(b *storage.Batch) error { return l.Append(b, ents) })
}

// logIndexesOnDisk lists the indexes of every log entry of rangeID in the engine.
func (env *logEnv) logIndexesOnDisk(rangeID uint64) []uint64 {
	env.t.Helper()
	lo, hi := storage.RaftLogSpan(rangeID)
	it, err := env.eng.NewIter(lo, hi)
	if err != nil {
		env.t.Fatal(err)
	}
	defer it.Close()
	var out []uint64
	for ok := it.First(); ok; ok = it.Next() {
		out = append(out, storage.RaftLogIndex(it.Key()))
	}
	return out
}

func ent(index, term uint64, data string) *raftpb.Entry {
	e := &raftpb.Entry{Index: proto.Uint64(index), Term: proto.Uint64(term), Type: raftpb.EntryNormal.Enum()}
	if data != "" {
		e.Data = []byte(data)
	}
	return e
}

// ents builds entries lo..hi (inclusive) of one term with payloads of growing size.
func ents(lo, hi, term uint64) []*raftpb.Entry {
	var out []*raftpb.Entry
	for i := lo; i <= hi; i++ {
		out = append(out, ent(i, term, fmt.Sprintf("cmd-%d-%0*d", i, int(i%5)*7, term)))
	}
	return out
}

func indexes(es []*raftpb.Entry) []uint64 {
	var out []uint64
	for _, e := range es {
		out = append(out, e.GetIndex())
	}
	return out
}

func equalU64(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func span(lo, hi uint64) []uint64 {
	var out []uint64
	for i := lo; i <= hi; i++ {
		out = append(out, i)
	}
	return out
}

func bounds(t *testing.T, l raft.Storage) (first, last uint64) {
	t.Helper()
	first, err := l.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	last, err = l.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	return first, last
}

func wantBounds(t *testing.T, l raft.Storage, first, last uint64) {
	t.Helper()
	f, la := bounds(t, l)
	if f != first || la != last {
		t.Fatalf("FirstIndex, LastIndex = %d, %d; want %d, %d", f, la, first, last)
	}
}

func wantTerm(t *testing.T, l raft.Storage, i, term uint64, wantErr error) {
	t.Helper()
	got, err := l.Term(i)
	if wantErr != nil {
		if !errors.Is(err, wantErr) {
			t.Errorf("Term(%d) = %d, %v; want error %v", i, got, err, wantErr)
		}
		return
	}
	if err != nil || got != term {
		t.Errorf("Term(%d) = %d, %v; want %d", i, got, err, term)
	}
}

const noLimit = ^uint64(0)

func TestRaftLogInitialState(t *testing.T) {
	env := newLogEnv(t)
	l := env.initialized(testRangeID)

	wantBounds(t, l, InitialIndex+1, InitialIndex)
	wantTerm(t, l, InitialIndex, InitialTerm, nil)
	wantTerm(t, l, InitialIndex-1, 0, raft.ErrCompacted)
	wantTerm(t, l, 0, 0, raft.ErrCompacted)
	wantTerm(t, l, InitialIndex+1, 0, raft.ErrUnavailable)

	hs, _, err := l.InitialState()
	if err != nil {
		t.Fatal(err)
	}
	if hs.GetTerm() != InitialTerm || hs.GetCommit() != InitialIndex || hs.GetVote() != 0 {
		t.Errorf("initial hard state = %v, want term %d commit %d", hs, InitialTerm, InitialIndex)
	}

	// The empty interval at the start is fine; anything reaching past it is not there.
	if es, err := l.Entries(11, 11, noLimit); err != nil || len(es) != 0 {
		t.Errorf("Entries(11, 11) = %v, %v; want empty", es, err)
	}
	if _, err := l.Entries(11, 12, noLimit); !errors.Is(err, raft.ErrUnavailable) {
		t.Errorf("Entries(11, 12) on an empty log: %v, want ErrUnavailable", err)
	}
	if _, err := l.Entries(10, 11, noLimit); !errors.Is(err, raft.ErrCompacted) {
		t.Errorf("Entries(10, 11): %v, want ErrCompacted", err)
	}
	if got := env.logIndexesOnDisk(testRangeID); len(got) != 0 {
		t.Errorf("fresh log has entries on disk: %v", got)
	}
	// No snapshot builder attached yet: raft must retry later.
	if _, err := l.Snapshot(); !errors.Is(err, raft.ErrSnapshotTemporarilyUnavailable) {
		t.Errorf("Snapshot() without a builder: %v", err)
	}

	// A range that was never initialized (replica created by a message) looks like raft's empty log.
	u := env.load(testRangeID + 1)
	ms := raft.NewMemoryStorage()
	for _, s := range []raft.Storage{u, ms} {
		wantBounds(t, s, 1, 0)
		wantTerm(t, s, 0, 0, nil)
		wantTerm(t, s, 1, 0, raft.ErrUnavailable)
	}
}

func TestRaftLogAppendAndRead(t *testing.T) {
	env := newLogEnv(t)
	l := env.initialized(testRangeID)
	all := ents(11, 20, 6)
	env.appendEnts(l, all...)

	wantBounds(t, l, 11, 20)
	for _, e := range all {
		wantTerm(t, l, e.GetIndex(), 6, nil)
	}
	wantTerm(t, l, 10, InitialTerm, nil)
	wantTerm(t, l, 21, 0, raft.ErrUnavailable)
	if got, want := env.logIndexesOnDisk(testRangeID), span(11, 20); !equalU64(got, want) {
		t.Errorf("on disk: %v, want %v", got, want)
	}

	size := func(from, n int) uint64 {
		var s uint64
		for _, e := range all[from-11 : from-11+n] {
			s += uint64(proto.Size(e))
		}
		return s
	}
	for _, tc := range []struct {
		lo, hi, maxSize uint64
		want            []uint64
	}{
		{11, 21, noLimit, span(11, 20)},
		{13, 16, noLimit, span(13, 15)},
		{20, 21, noLimit, span(20, 20)},
		{11, 11, noLimit, nil},
		{11, 21, 0, span(11, 11)},                    // at least one entry, even over the limit
		{15, 21, 1, span(15, 15)},                    // idem
		{11, 21, size(11, 3), span(11, 13)},          // exactly three entries fit
		{11, 21, size(11, 3) - 1, span(11, 12)},      // one byte short of three
		{14, 21, size(14, 4) + 1, span(14, 17)},      // one byte more than four
		{12, 16, size(12, 10-1) + 100, span(12, 15)}, // limit beyond hi
	} {
		for _, cached := range []bool{true, false} {
			name := fmt.Sprintf("Entries(%d, %d, %d) cached=%v", tc.lo, tc.hi, tc.maxSize, cached)
			if !cached {
				l.ForgetApplied(20)
			}
			got, err := l.Entries(tc.lo, tc.hi, tc.maxSize)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			if !equalU64(indexes(got), tc.want) {
				t.Errorf("%s = %v, want %v", name, indexes(got), tc.want)
			}
			for _, e := range got {
				if want := all[e.GetIndex()-11]; !proto.Equal(e, want) {
					t.Errorf("%s: entry %d = %v, want %v", name, e.GetIndex(), e, want)
				}
			}
		}
		// Put the entries back in the cache for the next case.
		l.cacheMu.Lock()
		for _, e := range all {
			l.cache[e.GetIndex()] = e
		}
		l.cacheMu.Unlock()
	}

	for _, tc := range []struct {
		lo, hi  uint64
		wantErr error
	}{
		{10, 12, raft.ErrCompacted},
		{5, 12, raft.ErrCompacted},
		{11, 22, raft.ErrUnavailable},
		{21, 22, raft.ErrUnavailable},
	} {
		if got, err := l.Entries(tc.lo, tc.hi, noLimit); !errors.Is(err, tc.wantErr) {
			t.Errorf("Entries(%d, %d) = %v, %v; want %v", tc.lo, tc.hi, indexes(got), err, tc.wantErr)
		}
	}
}

func TestRaftLogOverwriteConflictingSuffix(t *testing.T) {
	env := newLogEnv(t)
	l := env.initialized(testRangeID)
	env.appendEnts(l, ents(11, 20, 6)...)

	// A new leader at term 7 replaces the uncommitted tail from 15 on with a shorter one.
	env.appendEnts(l, ents(15, 17, 7)...)
	wantBounds(t, l, 11, 17)
	for i := uint64(11); i <= 14; i++ {
		wantTerm(t, l, i, 6, nil)
	}
	for i := uint64(15); i <= 17; i++ {
		wantTerm(t, l, i, 7, nil)
	}
	wantTerm(t, l, 18, 0, raft.ErrUnavailable)
	if got, want := env.logIndexesOnDisk(testRangeID), span(11, 17); !equalU64(got, want) {
		t.Errorf("on disk after overwrite: %v, want %v (18..20 must be deleted)", got, want)
	}
	for i := uint64(18); i <= 20; i++ {
		if _, ok, _ := env.eng.Get(storage.RaftLogKey(testRangeID, i)); ok {
			t.Errorf("entry %d still in the engine", i)
		}
		l.cacheMu.Lock()
		_, cached := l.cache[i]
		l.cacheMu.Unlock()
		if cached {
			t.Errorf("entry %d still in the cache", i)
		}
	}
	check := func(when string) {
		t.Helper()
		got, err := l.Entries(11, 18, noLimit)
		if err != nil {
			t.Fatalf("%s: Entries(11, 18): %v", when, err)
		}
		var terms []uint64
		for _, e := range got {
			terms = append(terms, e.GetTerm())
		}
		if want := []uint64{6, 6, 6, 6, 7, 7, 7}; !equalU64(terms, want) {
			t.Errorf("%s: terms of 11..17 = %v, want %v", when, terms, want)
		}
		if _, err := l.Entries(11, 21, noLimit); !errors.Is(err, raft.ErrUnavailable) {
			t.Errorf("%s: Entries past the new last index: %v", when, err)
		}
	}
	check("cached")
	l.ForgetApplied(20)
	check("from the engine")

	// The overwrite survives a restart.
	env.reopen()
	l = env.load(testRangeID)
	wantBounds(t, l, 11, 17)
	wantTerm(t, l, 17, 7, nil)
	check("after restart")

	// Overwriting with a longer tail extends the log; no deletes are needed.
	env.appendEnts(l, ents(16, 25, 8)...)
	wantBounds(t, l, 11, 25)
	wantTerm(t, l, 15, 7, nil)
	wantTerm(t, l, 16, 8, nil)
	wantTerm(t, l, 25, 8, nil)
	if got, want := env.logIndexesOnDisk(testRangeID), span(11, 25); !equalU64(got, want) {
		t.Errorf("on disk: %v, want %v", got, want)
	}

	// Overwrite and re-append in one batch (two Ready cycles before one commit) is consistent too.
	b := env.eng.NewBatch()
	if err := l.Append(b, ents(12, 22, 9)); err != nil {
		t.Fatal(err)
	}
	if err := l.Append(b, ents(20, 21, 10)); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b.Close()
	wantBounds(t, l, 11, 21)
	if got, want := env.logIndexesOnDisk(testRangeID), span(11, 21); !equalU64(got, want) {
		t.Errorf("on disk after two appends in one batch: %v, want %v", got, want)
	}
	env.reopen()
	l = env.load(testRangeID)
	wantBounds(t, l, 11, 21)
	wantTerm(t, l, 19, 9, nil)
	wantTerm(t, l, 21, 10, nil)
}

func TestRaftLogAppendRejectsGapsAndCompactedIndexes(t *testing.T) {
	env := newLogEnv(t)
	l := env.initialized(testRangeID)
	env.appendEnts(l, ents(11, 20, 6)...)

	for _, tc := range []struct {
		name string
		ents []*raftpb.Entry
	}{
		{"gap after the last index", ents(22, 23, 6)},
		{"gap on an empty tail", ents(30, 30, 6)},
		{"starts inside the compacted prefix", ents(10, 12, 6)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := env.eng.NewBatch()
			defer b.Close()
			err := l.Append(b, tc.ents)
			if err == nil {
				t.Fatalf("append %v succeeded", indexes(tc.ents))
			}
			if !b.Empty() {
				t.Errorf("refused append left writes in the batch")
			}
			wantBounds(t, l, 11, 20)
			wantTerm(t, l, 20, 6, nil)
		})
	}
	// An empty append is a no-op.
	env.appendEnts(l)
	wantBounds(t, l, 11, 20)
	// Appending right after the last index is fine.
	env.appendEnts(l, ents(21, 21, 6)...)
	wantBounds(t, l, 11, 21)
}

func TestRaftLogTruncate(t *testing.T) {
	env := newLogEnv(t)
	l := env.initialized(testRangeID)
	env.appendEnts(l, ents(11, 15, 6)...)
	env.appendEnts(l, ents(16, 20, 7)...)

	env.write(func(b *storage.Batch) error { return l.Truncate(b, 14) })
	check := func(when string) {
		t.Helper()
		wantBounds(t, l, 15, 20)
		wantTerm(t, l, 14, 6, nil) // truncTerm: the entry is gone, its term is kept
		wantTerm(t, l, 13, 0, raft.ErrCompacted)
		wantTerm(t, l, 15, 6, nil)
		wantTerm(t, l, 16, 7, nil)
		for _, lo := range []uint64{12, 14} {
			if _, err := l.Entries(lo, 18, noLimit); !errors.Is(err, raft.ErrCompacted) {
				t.Errorf("%s: Entries(%d, 18): %v, want ErrCompacted", when, lo, err)
			}
		}
		if got, err := l.Entries(15, 21, noLimit); err != nil || !equalU64(indexes(got), span(15, 20)) {
			t.Errorf("%s: Entries(15, 21) = %v, %v", when, indexes(got), err)
		}
		if got, want := env.logIndexesOnDisk(testRangeID), span(15, 20); !equalU64(got, want) {
			t.Errorf("%s: on disk: %v, want %v", when, got, want)
		}
	}
	check("after truncate")
	l.cacheMu.Lock()
	for i := range l.cache {
		if i <= 14 {
			t.Errorf("truncated entry %d still cached", i)
		}
	}
	l.cacheMu.Unlock()
	l.ForgetApplied(20)
	check("cache cleared")

	// Truncating at or below the current point, or past the last index, changes nothing.
	for _, idx := range []uint64{10, 13, 14, 21, 100} {
		env.write(func(b *storage.Batch) error { return l.Truncate(b, idx) })
		check(fmt.Sprintf("after no-op truncate(%d)", idx))
	}

	env.reopen()
	l = env.load(testRangeID)
	check("after restart")

	// Truncate everything: the log is empty but its last index and term survive.
	env.write(func(b *storage.Batch) error { return l.Truncate(b, 20) })
	for _, when := range []string{"all truncated", "all truncated, restarted"} {
		wantBounds(t, l, 21, 20)
		wantTerm(t, l, 20, 7, nil)
		wantTerm(t, l, 19, 0, raft.ErrCompacted)
		if got := env.logIndexesOnDisk(testRangeID); len(got) != 0 {
			t.Errorf("%s: entries left on disk: %v", when, got)
		}
		if when == "all truncated" {
			env.reopen()
			l = env.load(testRangeID)
		}
	}
	env.appendEnts(l, ents(21, 22, 8)...)
	wantBounds(t, l, 21, 22)
}

func TestRaftLogRestartRecoversState(t *testing.T) {
	env := newLogEnv(t)
	l := env.initialized(testRangeID)
	env.appendEnts(l, ents(11, 30, 6)...)
	hs := &raftpb.HardState{Term: proto.Uint64(6), Vote: proto.Uint64(1), Commit: proto.Uint64(25)}
	env.write(func(b *storage.Batch) error { return l.SetHardState(b, hs) })
	env.write(func(b *storage.Batch) error { return l.Truncate(b, 20) })

	// A second range on the same engine must not be disturbed by (or disturb) this one.
	other := env.initialized(testRangeID + 1)
	env.appendEnts(other, ents(11, 12, 9)...)

	env.reopen()
	l = env.load(testRangeID)
	wantBounds(t, l, 21, 30)
	wantTerm(t, l, 20, 6, nil)
	wantTerm(t, l, 30, 6, nil)
	got, _, err := l.InitialState()
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, hs) {
		t.Errorf("hard state after restart = %v, want %v", got, hs)
	}
	es, err := l.Entries(21, 31, noLimit)
	if err != nil || !equalU64(indexes(es), span(21, 30)) {
		t.Fatalf("Entries after restart = %v, %v", indexes(es), err)
	}
	other = env.load(testRangeID + 1)
	wantBounds(t, other, 11, 12)
	wantTerm(t, other, 12, 9, nil)
	wantTerm(t, other, 10, InitialTerm, nil)
}

func TestRaftLogResetToSnapshot(t *testing.T) {
	env := newLogEnv(t)
	l := env.initialized(testRangeID)
	env.appendEnts(l, ents(11, 20, 6)...)
	env.write(func(b *storage.Batch) error { return l.Truncate(b, 12) })

	env.write(func(b *storage.Batch) error { return l.ResetTo(b, 40, 9) })
	check := func(when string) {
		t.Helper()
		wantBounds(t, l, 41, 40)
		wantTerm(t, l, 40, 9, nil)
		wantTerm(t, l, 39, 0, raft.ErrCompacted)
		wantTerm(t, l, 15, 0, raft.ErrCompacted)
		wantTerm(t, l, 41, 0, raft.ErrUnavailable)
		if es, err := l.Entries(41, 41, noLimit); err != nil || len(es) != 0 {
			t.Errorf("%s: Entries(41, 41) = %v, %v", when, es, err)
		}
		if _, err := l.Entries(20, 41, noLimit); !errors.Is(err, raft.ErrCompacted) {
			t.Errorf("%s: Entries(20, 41): %v, want ErrCompacted", when, err)
		}
		if got := env.logIndexesOnDisk(testRangeID); len(got) != 0 {
			t.Errorf("%s: old entries left on disk: %v", when, got)
		}
		l.cacheMu.Lock()
		n := len(l.cache)
		l.cacheMu.Unlock()
		if n != 0 {
			t.Errorf("%s: %d entries left in the cache", when, n)
		}
	}
	check("after reset")
	env.reopen()
	l = env.load(testRangeID)
	check("after restart")

	b := env.eng.NewBatch()
	if err := l.Append(b, ents(42, 42, 9)); err == nil {
		t.Errorf("append leaving a gap after the snapshot succeeded")
	}
	b.Close()
	env.appendEnts(l, ents(41, 43, 10)...)
	wantBounds(t, l, 41, 43)
	wantTerm(t, l, 40, 9, nil)
	wantTerm(t, l, 41, 10, nil)

	// A snapshot behind the current log (a follower that has more than the snapshot) also resets.
	env.write(func(b *storage.Batch) error { return l.ResetTo(b, 42, 10) })
	wantBounds(t, l, 43, 42)
	if got := env.logIndexesOnDisk(testRangeID); len(got) != 0 {
		t.Errorf("entries left on disk after reset: %v", got)
	}
}

func TestRaftLogCacheMiss(t *testing.T) {
	env := newLogEnv(t)
	l := env.initialized(testRangeID)
	all := ents(11, 20, 6)
	env.appendEnts(l, all...)

	readAll := func(when string) {
		t.Helper()
		got, err := l.Entries(11, 21, noLimit)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if len(got) != len(all) {
			t.Fatalf("%s: %d entries, want %d", when, len(got), len(all))
		}
		for i := range got {
			if !proto.Equal(got[i], all[i]) {
				t.Errorf("%s: entry %d = %v, want %v", when, i+11, got[i], all[i])
			}
		}
		for _, e := range all {
			wantTerm(t, l, e.GetIndex(), e.GetTerm(), nil)
		}
	}

	// Whole cache dropped: everything comes from the engine.
	l.cacheMu.Lock()
	l.cache = make(map[uint64]*raftpb.Entry)
	l.cacheMu.Unlock()
	readAll("empty cache")

	// Applied prefix forgotten: the first entries miss the cache.
	env.appendEnts(l, all...)
	l.ForgetApplied(14)
	readAll("prefix forgotten")

	// Cached prefix, missing tail: the rest is read from the engine.
	l.cacheMu.Lock()
	l.cache = make(map[uint64]*raftpb.Entry)
	for _, e := range all[:4] {
		l.cache[e.GetIndex()] = e
	}
	l.cacheMu.Unlock()
	readAll("cached prefix")

	// A hole in the middle of the cache.
	l.cacheMu.Lock()
	for _, e := range all {
		l.cache[e.GetIndex()] = e
	}
	delete(l.cache, 15)
	l.cacheMu.Unlock()
	readAll("hole in the cache")

	// The size limit counts cached and engine entries alike.
	l.cacheMu.Lock()
	l.cache = map[uint64]*raftpb.Entry{11: all[0], 12: all[1]}
	l.cacheMu.Unlock()
	limit := uint64(proto.Size(all[0]) + proto.Size(all[1]) + proto.Size(all[2]))
	got, err := l.Entries(11, 21, limit)
	if err != nil || !equalU64(indexes(got), span(11, 13)) {
		t.Errorf("Entries with limit across cache and engine = %v, %v; want 11..13", indexes(got), err)
	}
}

// memLog mirrors a sequence of operations on raft.MemoryStorage, the reference raft.Storage.
type memLog struct{ ms *raft.MemoryStorage }

func newMemLog(t *testing.T, index, term uint64) *memLog {
	ms := raft.NewMemoryStorage()
	if err := ms.ApplySnapshot(&raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{Index: proto.Uint64(index), Term: proto.Uint64(term), ConfState: &raftpb.ConfState{}}}); err != nil {
		t.Fatal(err)
	}
	return &memLog{ms: ms}
}

// TestRaftLogMatchesMemoryStorage runs the same operations on Log and raft.MemoryStorage and
// compares every answer of the raft.Storage interface after each step, with and without the cache.
func TestRaftLogMatchesMemoryStorage(t *testing.T) {
	env := newLogEnv(t)
	l := env.initialized(testRangeID)
	ref := newMemLog(t, InitialIndex, InitialTerm)

	type op struct {
		name string
		do   func(t *testing.T)
	}
	appendBoth := func(es []*raftpb.Entry) func(t *testing.T) {
		return func(t *testing.T) {
			env.appendEnts(l, es...)
			if err := ref.ms.Append(es); err != nil {
				t.Fatal(err)
			}
		}
	}
	compactBoth := func(i uint64) func(t *testing.T) {
		return func(t *testing.T) {
			env.write(func(b *storage.Batch) error { return l.Truncate(b, i) })
			if err := ref.ms.Compact(i); err != nil {
				t.Fatal(err)
			}
		}
	}
	snapshotBoth := func(i, term uint64) func(t *testing.T) {
		return func(t *testing.T) {
			env.write(func(b *storage.Batch) error { return l.ResetTo(b, i, term) })
			if err := ref.ms.ApplySnapshot(&raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{Index: proto.Uint64(i), Term: proto.Uint64(term), ConfState: &raftpb.ConfState{}}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	restart := func(t *testing.T) {
		env.reopen()
		l = env.load(testRangeID)
	}
	for _, o := range []op{
		{"initial", func(*testing.T) {}},
		{"append 11..20 t6", appendBoth(ents(11, 20, 6))},
		{"overwrite 15..17 t7", appendBoth(ents(15, 17, 7))},
		{"extend 18..24 t7", appendBoth(ents(18, 24, 7))},
		{"overwrite 24..26 t8", appendBoth(ents(24, 26, 8))},
		{"compact 14", compactBoth(14)},
		{"restart", restart},
		{"overwrite 20..21 t9", appendBoth(ents(20, 21, 9))},
		{"compact 21", compactBoth(21)},
		{"append 22..25 t9", appendBoth(ents(22, 25, 9))},
		{"snapshot 30 t10", snapshotBoth(30, 10)},
		{"append 31..35 t10", appendBoth(ents(31, 35, 10))},
		{"restart", restart},
	} {
		o.do(t)
		for _, cached := range []bool{true, false} {
			if !cached {
				l.ForgetApplied(^uint64(0))
			}
			compareStorage(t, fmt.Sprintf("after %s (cached=%v)", o.name, cached), l, ref.ms)
		}
	}
}

func compareStorage(t *testing.T, when string, got, want raft.Storage) {
	t.Helper()
	gf, gl := bounds(t, got)
	wf, wl := bounds(t, want)
	if gf != wf || gl != wl {
		t.Fatalf("%s: bounds [%d, %d], reference [%d, %d]", when, gf, gl, wf, wl)
	}
	errClass := func(err error) string {
		switch {
		case err == nil:
			return "ok"
		case errors.Is(err, raft.ErrCompacted):
			return "compacted"
		case errors.Is(err, raft.ErrUnavailable):
			return "unavailable"
		}
		return err.Error()
	}
	for i := uint64(0); i <= wl+2; i++ {
		gt, gerr := got.Term(i)
		wt, werr := want.Term(i)
		if errClass(gerr) != errClass(werr) || gt != wt {
			t.Errorf("%s: Term(%d) = %d, %v; reference %d, %v", when, i, gt, gerr, wt, werr)
		}
	}
	if wl < wf {
		return // the reference has no entries: its Entries answers ErrUnavailable for every slice
	}
	var sizes []uint64
	if es, err := want.Entries(wf, wl+1, noLimit); err == nil {
		for _, e := range es {
			sizes = append(sizes, uint64(proto.Size(e)))
		}
	}
	// Limits around the size of the first few entries (counted from the first index; entries differ
	// in size, so from other starting points they fall between entry boundaries too).
	limits := []uint64{0, 1, noLimit}
	var sum uint64
	for n := 0; n < len(sizes) && n < 3; n++ {
		sum += sizes[n]
		limits = append(limits, sum-1, sum, sum+1)
	}
	for lo := wf - 1; lo <= wl; lo++ {
		for hi := lo + 1; hi <= wl+1; hi++ {
			for _, max := range limits {
				ge, gerr := got.Entries(lo, hi, max)
				we, werr := want.Entries(lo, hi, max)
				if errClass(gerr) != errClass(werr) {
					t.Errorf("%s: Entries(%d, %d, %d) error %v; reference %v", when, lo, hi, max, gerr, werr)
					continue
				}
				if len(ge) != len(we) {
					t.Errorf("%s: Entries(%d, %d, %d) = %v; reference %v", when, lo, hi, max, indexes(ge), indexes(we))
					continue
				}
				for i := range ge {
					if !proto.Equal(ge[i], we[i]) {
						t.Errorf("%s: Entries(%d, %d, %d)[%d] = %v; reference %v", when, lo, hi, max, i, ge[i], we[i])
					}
				}
			}
		}
	}
}

func TestRaftLogHardState(t *testing.T) {
	env := newLogEnv(t)
	l := env.initialized(testRangeID)
	for _, hs := range []*raftpb.HardState{
		{Term: proto.Uint64(6), Vote: proto.Uint64(1), Commit: proto.Uint64(10)},
		{Term: proto.Uint64(7), Vote: proto.Uint64(0), Commit: proto.Uint64(10)},
		{Term: proto.Uint64(7), Vote: proto.Uint64(2), Commit: proto.Uint64(10)},
	} {
		env.write(func(b *storage.Batch) error { return l.SetHardState(b, hs) })
		if got, _, _ := l.InitialState(); !proto.Equal(got, hs) {
			t.Errorf("InitialState = %v, want %v", got, hs)
		}
		env.reopen()
		l = env.load(testRangeID)
		if got, _, _ := l.InitialState(); !proto.Equal(got, hs) {
			t.Errorf("after restart InitialState = %v, want %v", got, hs)
		}
	}

	// A vote cast before the replica was initialized survives WriteInitialState (no double vote).
	b := env.eng.NewIndexedBatch()
	defer b.Close()
	if err := WriteInitialState(b, testRangeID); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	l = env.load(testRangeID)
	if got, _, _ := l.InitialState(); got.GetTerm() != 7 || got.GetVote() != 2 {
		t.Errorf("WriteInitialState over a newer vote: hard state %v, want term 7 vote 2", got)
	}
}
