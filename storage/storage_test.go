package storage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// openNew creates a fresh store in a temporary directory and closes it when the test ends.
func openNew(t *testing.T) (*Engine, string) {
	t.Helper()
	dir := t.TempDir()
	e, err := Open(dir, Options{CreateIfMissing: true})
	if err != nil {
		t.Fatalf("Open(CreateIfMissing): %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return e, dir
}

func put(t *testing.T, e *Engine, kvs ...string) {
	t.Helper()
	if len(kvs)%2 != 0 {
		t.Fatalf("put: odd number of arguments")
	}
	b := e.NewBatch()
	defer b.Close()
	for i := 0; i < len(kvs); i += 2 {
		if err := b.Set([]byte(kvs[i]), []byte(kvs[i+1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
}

type getter2 interface {
	Get(key []byte) ([]byte, bool, error)
}

func mustGet(t *testing.T, r getter2, key string) (string, bool) {
	t.Helper()
	v, ok, err := r.Get([]byte(key))
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return string(v), ok
}

// dirState maps every file of dir to a digest of its contents, to prove that a refused Open changed
// nothing.
func dirState(t *testing.T, dir string) map[string]string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		t.Fatal(err)
	}
	out := make(map[string]string)
	for _, ent := range ents {
		data, err := os.ReadFile(filepath.Join(dir, ent.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[ent.Name()] = fmt.Sprintf("%x", sha256.Sum256(data))
	}
	return out
}

func TestOpenRefusesMissingOrForeignStore(t *testing.T) {
	for _, tc := range []struct {
		name    string
		setup   func(t *testing.T, dir string)
		isNoSt  bool     // errors.Is(err, ErrNoStore)
		mention []string // substrings the message must contain
	}{
		{
			name:    "empty directory",
			setup:   func(t *testing.T, dir string) {},
			isNoSt:  true,
			mention: []string{"--bootstrap", "--join"},
		},
		{
			name: "directory does not exist",
			setup: func(t *testing.T, dir string) {
				if err := os.Remove(dir); err != nil {
					t.Fatal(err)
				}
			},
			isNoSt:  true,
			mention: []string{"--bootstrap", "--join"},
		},
		{
			name: "non-empty directory without marker",
			setup: func(t *testing.T, dir string) {
				if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("hello"), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			mention: []string{"not empty", markerFile, "refusing to start"},
		},
		{
			name: "pebble store without marker",
			setup: func(t *testing.T, dir string) {
				e, err := Open(dir, Options{CreateIfMissing: true})
				if err != nil {
					t.Fatal(err)
				}
				put(t, e, "k", "v")
				e.Close()
				if err := os.Remove(filepath.Join(dir, markerFile)); err != nil {
					t.Fatal(err)
				}
			},
			mention: []string{"not empty", markerFile},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			tc.setup(t, dir)
			before := dirState(t, dir)
			e, err := Open(dir, Options{})
			if err == nil {
				e.Close()
				t.Fatalf("Open succeeded, want refusal")
			}
			if got := errors.Is(err, ErrNoStore); got != tc.isNoSt {
				t.Errorf("errors.Is(err, ErrNoStore) = %v, want %v (err: %v)", got, tc.isNoSt, err)
			}
			for _, m := range tc.mention {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not mention %q", err, m)
				}
			}
			if !strings.Contains(err.Error(), dir) {
				t.Errorf("error %q does not name the directory", err)
			}
			if after := dirState(t, dir); !mapsEqual(before, after) {
				t.Errorf("refused Open changed the directory:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestCreateReopenPersists(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nested", "data")
	e, err := Open(dir, Options{CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	if e.Dir() != dir {
		t.Errorf("Dir() = %q, want %q", e.Dir(), dir)
	}
	if _, err := os.Stat(filepath.Join(dir, markerFile)); err != nil {
		t.Fatalf("marker not written: %v", err)
	}
	put(t, e, "a", "1", "b", "2")
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	// Reopen without CreateIfMissing: the marker is there, the data too.
	e, err = Open(dir, Options{})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	for k, want := range map[string]string{"a": "1", "b": "2"} {
		if v, ok := mustGet(t, e, k); !ok || v != want {
			t.Errorf("after reopen Get(%q) = %q, %v; want %q", k, v, ok, want)
		}
	}
	put(t, e, "c", "3")
	e.Close()

	// Reopen with CreateIfMissing on an existing store opens it, never re-initializes it.
	e, err = Open(dir, Options{CreateIfMissing: true})
	if err != nil {
		t.Fatalf("reopen with CreateIfMissing: %v", err)
	}
	defer e.Close()
	for k, want := range map[string]string{"a": "1", "b": "2", "c": "3"} {
		if v, ok := mustGet(t, e, k); !ok || v != want {
			t.Errorf("after second reopen Get(%q) = %q, %v; want %q", k, v, ok, want)
		}
	}
}

func TestSecondOpenRefusedWhileInUse(t *testing.T) {
	dir := t.TempDir()
	e, err := Open(dir, Options{CreateIfMissing: true})
	must(t, err)
	put(t, e, "k", "v")
	for _, opts := range []Options{{}, {CreateIfMissing: true}} {
		e2, err := Open(dir, opts)
		if err == nil {
			e2.Close()
			t.Fatalf("second Open(%+v) succeeded while the store is open", opts)
		}
		if !strings.Contains(err.Error(), "in use by another shoal process") {
			t.Errorf("second Open error %q does not say the directory is in use", err)
		}
	}
	// The first engine still works, and once it is closed the directory can be opened again.
	if v, ok := mustGet(t, e, "k"); !ok || v != "v" {
		t.Fatalf("first engine Get = %q, %v", v, ok)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e3, err := Open(dir, Options{})
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	e3.Close()
}

func TestOpenRefusesDamagedStore(t *testing.T) {
	isManifest := func(n string) bool { return strings.HasPrefix(n, "MANIFEST-") }
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, dir, name string) // called for every file of the store
	}{
		{"MANIFEST removed", func(t *testing.T, dir, n string) {
			if isManifest(n) {
				must(t, os.Remove(filepath.Join(dir, n)))
			}
		}},
		{"MANIFEST truncated to zero", func(t *testing.T, dir, n string) {
			if isManifest(n) {
				must(t, os.Truncate(filepath.Join(dir, n), 0))
			}
		}},
		{"MANIFEST torn in the middle", func(t *testing.T, dir, n string) {
			if isManifest(n) {
				fi, err := os.Stat(filepath.Join(dir, n))
				must(t, err)
				must(t, os.Truncate(filepath.Join(dir, n), fi.Size()/2))
			}
		}},
		{"manifest marker removed", func(t *testing.T, dir, n string) {
			if strings.HasPrefix(n, "marker.manifest") {
				must(t, os.Remove(filepath.Join(dir, n)))
			}
		}},
		{"every pebble file removed", func(t *testing.T, dir, n string) {
			if n != markerFile && n != "shoal.lock" {
				must(t, os.Remove(filepath.Join(dir, n)))
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			e, err := Open(dir, Options{CreateIfMissing: true})
			must(t, err)
			put(t, e, "k", "v")
			must(t, e.Close())
			ents, err := os.ReadDir(dir)
			must(t, err)
			for _, ent := range ents {
				tc.damage(t, dir, ent.Name())
			}
			before := dirState(t, dir)

			for _, opts := range []Options{{}, {CreateIfMissing: true}} {
				e, err := Open(dir, opts)
				if err == nil {
					e.Close()
					t.Fatalf("Open(%+v) of a damaged store succeeded", opts)
				}
				if errors.Is(err, ErrNoStore) {
					t.Errorf("damaged store reported as missing (ErrNoStore): %v", err)
				}
				for _, m := range []string{dir, "cannot be opened", "refusing to start"} {
					if !strings.Contains(err.Error(), m) {
						t.Errorf("error %q does not mention %q", err, m)
					}
				}
			}
			after := dirState(t, dir)
			if _, ok := after[markerFile]; !ok {
				t.Errorf("marker %s disappeared", markerFile)
			}
			// Pebble may leave its (empty) LOCK file behind; nothing else may change.
			if _, had := before["LOCK"]; !had {
				delete(after, "LOCK")
			}
			if !mapsEqual(before, after) {
				t.Errorf("refused Open changed the store:\nbefore %v\nafter  %v", before, after)
			}
			// The lock is released: a later attempt gets the same refusal, not "in use".
			if _, err := Open(dir, Options{}); err == nil || strings.Contains(err.Error(), "in use") {
				t.Errorf("third Open: %v", err)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestCloseTwice documents that Engine.Close is not idempotent.
func TestCloseTwice(t *testing.T) {
	e, err := Open(t.TempDir(), Options{CreateIfMissing: true})
	must(t, err)
	must(t, e.Close())
	if err := e.Close(); err != nil {
		t.Logf("second Close: %v", err)
	}
}

func TestBatchAtomicity(t *testing.T) {
	e, _ := openNew(t)
	put(t, e, "keep", "old", "gone", "x", "r1", "1", "r2", "2", "r3", "3")

	b := e.NewBatch()
	must(t, b.Set([]byte("keep"), []byte("new")))
	must(t, b.Set([]byte("added"), []byte("y")))
	must(t, b.Delete([]byte("gone")))
	must(t, b.DeleteRange([]byte("r1"), []byte("r3")))
	if b.Empty() || b.Len() == 0 {
		t.Fatalf("batch with writes reports Empty=%v Len=%d", b.Empty(), b.Len())
	}
	// Nothing is visible before Commit.
	want := map[string]string{"keep": "old", "gone": "x", "r1": "1", "r2": "2", "r3": "3"}
	checkAll := func(when string, want map[string]string, absent ...string) {
		t.Helper()
		for k, w := range want {
			if v, ok := mustGet(t, e, k); !ok || v != w {
				t.Errorf("%s: Get(%q) = %q, %v; want %q", when, k, v, ok, w)
			}
		}
		for _, k := range absent {
			if v, ok := mustGet(t, e, k); ok {
				t.Errorf("%s: Get(%q) = %q, want absent", when, k, v)
			}
		}
	}
	checkAll("before commit", want, "added")
	must(t, b.Commit(true))
	b.Close()
	checkAll("after commit", map[string]string{"keep": "new", "added": "y", "r3": "3"}, "gone", "r1", "r2")

	// A closed, uncommitted batch leaves nothing behind.
	b = e.NewBatch()
	must(t, b.Set([]byte("never"), []byte("1")))
	must(t, b.Delete([]byte("keep")))
	b.Close()
	checkAll("after abandoned batch", map[string]string{"keep": "new"}, "never")

	// An empty batch commits fine.
	b = e.NewBatch()
	if !b.Empty() {
		t.Errorf("new batch not Empty")
	}
	must(t, b.Commit(false))
	b.Close()
}

func TestIndexedBatchReadsOwnWrites(t *testing.T) {
	e, _ := openNew(t)
	put(t, e, "a", "engine-a", "b", "engine-b", "c", "engine-c")

	b := e.NewIndexedBatch()
	defer b.Close()
	must(t, b.Set([]byte("a"), []byte("batch-a")))
	must(t, b.Delete([]byte("b")))
	must(t, b.Set([]byte("d"), []byte("batch-d")))
	for _, tc := range []struct {
		key, want string
		found     bool
	}{
		{"a", "batch-a", true},  // overwritten in the batch
		{"b", "", false},        // deleted in the batch
		{"c", "engine-c", true}, // untouched: read through to the engine
		{"d", "batch-d", true},  // only in the batch
		{"zz", "", false},       // nowhere
	} {
		if v, ok := mustGet(t, b, tc.key); ok != tc.found || v != tc.want {
			t.Errorf("batch Get(%q) = %q, %v; want %q, %v", tc.key, v, ok, tc.want, tc.found)
		}
	}
	// The engine does not see them until commit.
	if v, _ := mustGet(t, e, "a"); v != "engine-a" {
		t.Errorf("engine sees uncommitted batch write: a=%q", v)
	}
	must(t, b.Commit(false))
	if v, _ := mustGet(t, e, "a"); v != "batch-a" {
		t.Errorf("after commit a=%q", v)
	}
}

func TestGetReturnsCopy(t *testing.T) {
	e, _ := openNew(t)
	put(t, e, "k", "value")
	v, _, err := e.Get([]byte("k"))
	must(t, err)
	v[0] = 'X'
	if v2, _ := mustGet(t, e, "k"); v2 != "value" {
		t.Fatalf("mutating a returned value changed the engine: %q", v2)
	}
}

// collect walks it from its start position in the given direction.
func collect(t *testing.T, it *Iterator, reverse bool) []string {
	t.Helper()
	var out []string
	valid, step := it.First(), it.Next
	if reverse {
		valid, step = it.Last(), it.Prev
	}
	for ; valid; valid = step() {
		out = append(out, string(it.Key())+"="+string(it.Value()))
	}
	must(t, it.Error())
	return out
}

func TestIteratorBounds(t *testing.T) {
	e, _ := openNew(t)
	put(t, e, "a", "1", "b", "2", "c", "3", "d", "4", "e", "5")
	for _, tc := range []struct {
		name         string
		lower, upper string
		want         []string // forward order
	}{
		{"unbounded", "", "", []string{"a=1", "b=2", "c=3", "d=4", "e=5"}},
		{"inner", "b", "d", []string{"b=2", "c=3"}},
		{"lower inclusive upper exclusive", "b", "e", []string{"b=2", "c=3", "d=4"}},
		{"between keys", "bb", "dd", []string{"c=3", "d=4"}},
		{"empty span", "c", "c", nil},
		{"past the end", "f", "z", nil},
		{"only lower", "d", "", []string{"d=4", "e=5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var lo, hi []byte
			if tc.lower != "" {
				lo = []byte(tc.lower)
			}
			if tc.upper != "" {
				hi = []byte(tc.upper)
			}
			it, err := e.NewIter(lo, hi)
			must(t, err)
			defer it.Close()
			if got := collect(t, it, false); !equalStrings(got, tc.want) {
				t.Errorf("forward = %v, want %v", got, tc.want)
			}
			rev := append([]string(nil), tc.want...)
			sort.Sort(sort.Reverse(sort.StringSlice(rev)))
			if got := collect(t, it, true); !equalStrings(got, rev) {
				t.Errorf("reverse = %v, want %v", got, rev)
			}
		})
	}

	t.Run("seek", func(t *testing.T) {
		it, err := e.NewIter([]byte("b"), []byte("e"))
		must(t, err)
		defer it.Close()
		if !it.SeekGE([]byte("bb")) || string(it.Key()) != "c" {
			t.Errorf("SeekGE(bb) at %q", it.Key())
		}
		if !it.SeekGE([]byte("a")) || string(it.Key()) != "b" {
			t.Errorf("SeekGE below lower bound at %q, want b", it.Key())
		}
		if it.SeekGE([]byte("e")) {
			t.Errorf("SeekGE(upper bound) valid at %q", it.Key())
		}
		if !it.SeekLT([]byte("d")) || string(it.Key()) != "c" {
			t.Errorf("SeekLT(d) at %q", it.Key())
		}
		if !it.SeekLT([]byte("z")) || string(it.Key()) != "d" {
			t.Errorf("SeekLT above upper bound at %q, want d", it.Key())
		}
		if it.SeekLT([]byte("b")) || it.Valid() {
			t.Errorf("SeekLT(lower bound) valid")
		}
	})
}

func equalStrings(a, b []string) bool {
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

func TestSnapshotIsolation(t *testing.T) {
	e, _ := openNew(t)
	put(t, e, "a", "1", "b", "2")
	snap := e.NewSnapshot()
	defer snap.Close()

	put(t, e, "a", "changed", "c", "3")
	b := e.NewBatch()
	must(t, b.Delete([]byte("b")))
	must(t, b.Commit(false))
	b.Close()

	for _, tc := range []struct {
		key, want string
		found     bool
	}{{"a", "1", true}, {"b", "2", true}, {"c", "", false}} {
		if v, ok := mustGet(t, snap, tc.key); ok != tc.found || v != tc.want {
			t.Errorf("snapshot Get(%q) = %q, %v; want %q, %v", tc.key, v, ok, tc.want, tc.found)
		}
	}
	it, err := snap.NewIter(nil, nil)
	must(t, err)
	if got, want := collect(t, it, false), []string{"a=1", "b=2"}; !equalStrings(got, want) {
		t.Errorf("snapshot scan = %v, want %v", got, want)
	}
	must(t, it.Close())
	it, err = e.NewIter(nil, nil)
	must(t, err)
	if got, want := collect(t, it, false), []string{"a=changed", "c=3"}; !equalStrings(got, want) {
		t.Errorf("live scan = %v, want %v", got, want)
	}
	must(t, it.Close())

	// Both views implement Reader.
	var _ Reader = e
	var _ Reader = snap
}

func TestStatsAndApproximateBytes(t *testing.T) {
	e, _ := openNew(t)
	for i := 0; i < 100; i++ {
		put(t, e, fmt.Sprintf("k%03d", i), strings.Repeat("v", 100))
	}
	must(t, e.DB().Flush())
	st := e.Stats()
	if st.FlushesDone < 1 {
		t.Errorf("FlushesDone = %d after Flush", st.FlushesDone)
	}
	if st.DiskBytes == 0 {
		t.Errorf("DiskBytes = 0 after a flush")
	}
	n := e.ApproximateBytes([]byte("k"), []byte("l"))
	if n == 0 {
		t.Errorf("ApproximateBytes of flushed data = 0")
	}
	// The estimate is remembered until the tables change: a flush of more data shows at once.
	for i := 100; i < 300; i++ {
		put(t, e, fmt.Sprintf("k%03d", i), strings.Repeat("v", 100))
	}
	if again := e.ApproximateBytes([]byte("k"), []byte("l")); again != n {
		t.Errorf("ApproximateBytes before the flush = %d, want the remembered %d (memtables are not counted)", again, n)
	}
	must(t, e.DB().Flush())
	if after := e.ApproximateBytes([]byte("k"), []byte("l")); after <= n {
		t.Errorf("ApproximateBytes after flushing 200 more keys = %d, not above %d", after, n)
	}
}

func TestDataSpan(t *testing.T) {
	for _, tc := range []struct {
		name       string
		meta       bool
		start, end string
		lo, hi     []byte
	}{
		{"user whole keyspace", false, "", "", []byte{prefixUser}, []byte{prefixUser + 1}},
		{"user open end", false, "m", "", []byte{prefixUser, 'm'}, []byte{prefixUser + 1}},
		{"user bounded", false, "a", "m", []byte{prefixUser, 'a'}, []byte{prefixUser, 'm'}},
		{"meta whole keyspace", true, "", "", []byte{prefixMeta}, []byte{prefixMeta + 1}},
		{"meta bounded", true, "d", "e", []byte{prefixMeta, 'd'}, []byte{prefixMeta, 'e'}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var end []byte
			if tc.end != "" {
				end = []byte(tc.end)
			}
			lo, hi := DataSpan(tc.meta, []byte(tc.start), end)
			if !bytes.Equal(lo, tc.lo) || !bytes.Equal(hi, tc.hi) {
				t.Errorf("DataSpan = [%x, %x), want [%x, %x)", lo, hi, tc.lo, tc.hi)
			}
			// Keys of the span map back to themselves, and stay inside it.
			k := []byte(tc.start + "x")
			ek := UserDataKey(k)
			if tc.meta {
				ek = MetaDataKey(k)
			}
			if !bytes.Equal(StripDataPrefix(ek), k) {
				t.Errorf("StripDataPrefix(%x) = %x", ek, StripDataPrefix(ek))
			}
			if bytes.Compare(ek, lo) < 0 || bytes.Compare(ek, hi) >= 0 {
				t.Errorf("data key %x outside its span [%x, %x)", ek, lo, hi)
			}
		})
	}
	// A user key with a 0xff prefix is still inside the open-ended user span, and never inside meta.
	k := UserDataKey([]byte{0xff, 0xff})
	lo, hi := DataSpan(false, nil, nil)
	if bytes.Compare(k, lo) < 0 || bytes.Compare(k, hi) >= 0 {
		t.Errorf("user key %x outside the full user span", k)
	}
	mlo, mhi := DataSpan(true, nil, nil)
	if bytes.Compare(k, mlo) >= 0 && bytes.Compare(k, mhi) < 0 {
		t.Errorf("user key %x inside the meta span", k)
	}
}

func TestRaftKeys(t *testing.T) {
	t.Run("log keys order by index (big-endian)", func(t *testing.T) {
		idx := []uint64{0, 1, 2, 9, 10, 255, 256, 257, 65535, 65536, 1 << 32, 1<<56 - 1, 1 << 56, math.MaxUint64 - 1, math.MaxUint64}
		for i := 1; i < len(idx); i++ {
			a, b := RaftLogKey(7, idx[i-1]), RaftLogKey(7, idx[i])
			if bytes.Compare(a, b) >= 0 {
				t.Errorf("RaftLogKey(7, %d)=%x does not sort before RaftLogKey(7, %d)=%x", idx[i-1], a, idx[i], b)
			}
		}
		for _, i := range idx {
			k := RaftLogKey(7, i)
			if got := RaftLogIndex(k); got != i {
				t.Errorf("RaftLogIndex(RaftLogKey(7, %d)) = %d", i, got)
			}
			if !bytes.HasPrefix(k, RaftLogPrefix(7)) {
				t.Errorf("RaftLogKey(7, %d) lacks the log prefix", i)
			}
			lo, hi := RaftLogSpan(7)
			if bytes.Compare(k, lo) < 0 || bytes.Compare(k, hi) >= 0 {
				t.Errorf("RaftLogKey(7, %d) outside RaftLogSpan", i)
			}
		}
	})

	t.Run("log span holds nothing but log entries", func(t *testing.T) {
		lo, hi := RaftLogSpan(7)
		for name, k := range map[string][]byte{
			"applied": AppliedStateKey(7), "hard": HardStateKey(7), "truncated": TruncatedStateKey(7),
			"desc": RangeDescKey(7), "conf": ConfStateKey(7),
		} {
			if bytes.Compare(k, lo) >= 0 && bytes.Compare(k, hi) < 0 {
				t.Errorf("%s state key %x inside the log span [%x, %x)", name, k, lo, hi)
			}
		}
	})

	t.Run("range id round trip", func(t *testing.T) {
		for _, id := range []uint64{1, 2, 255, 256, 1 << 40, math.MaxUint64 - 1} {
			for name, k := range map[string][]byte{
				"applied": AppliedStateKey(id), "hard": HardStateKey(id), "truncated": TruncatedStateKey(id),
				"desc": RangeDescKey(id), "conf": ConfStateKey(id), "log": RaftLogKey(id, 12345),
				"log prefix": RaftLogPrefix(id),
			} {
				if got := RangeIDFromRaftKey(k); got != id {
					t.Errorf("RangeIDFromRaftKey(%s key of %d) = %d", name, id, got)
				}
				lo, hi := RaftKeyspaceSpan()
				if bytes.Compare(k, lo) < 0 || bytes.Compare(k, hi) >= 0 {
					t.Errorf("%s key of range %d outside the raft keyspace", name, id)
				}
			}
		}
	})

	t.Run("range N's keys sort before range N+1's", func(t *testing.T) {
		keysOf := func(id uint64) [][]byte {
			return [][]byte{
				AppliedStateKey(id), HardStateKey(id), TruncatedStateKey(id), RangeDescKey(id), ConfStateKey(id),
				RaftLogPrefix(id), RaftLogKey(id, 0), RaftLogKey(id, 1), RaftLogKey(id, math.MaxUint64),
			}
		}
		for _, n := range []uint64{1, 2, 255, 256, 1<<32 - 1, 1 << 40, math.MaxUint64 - 2} {
			lo, hi := RaftStateSpan(n)
			next := keysOf(n + 1)
			for _, k := range keysOf(n) {
				if bytes.Compare(k, lo) < 0 || bytes.Compare(k, hi) >= 0 {
					t.Errorf("key %x of range %d outside RaftStateSpan(%d) = [%x, %x)", k, n, n, lo, hi)
				}
				for _, k2 := range next {
					if bytes.Compare(k, k2) >= 0 {
						t.Errorf("key %x of range %d does not sort before key %x of range %d", k, n, k2, n+1)
					}
				}
			}
			for _, k2 := range next {
				if bytes.Compare(k2, hi) < 0 {
					t.Errorf("key %x of range %d inside RaftStateSpan(%d)", k2, n+1, n)
				}
			}
		}
	})

	t.Run("keyspaces do not mix", func(t *testing.T) {
		rlo, rhi := RaftKeyspaceSpan()
		for name, k := range map[string][]byte{
			"local":     LocalKey("ident"),
			"tombstone": ReplicaTombstoneKey(3),
			"meta":      MetaDataKey([]byte{0}),
			"user":      UserDataKey(nil),
		} {
			if bytes.Compare(k, rlo) >= 0 && bytes.Compare(k, rhi) < 0 {
				t.Errorf("%s key %x inside the raft keyspace", name, k)
			}
		}
		if !bytes.Equal(ReplicaTombstoneKey(3), ReplicaTombstoneKey(3)) || bytes.Equal(ReplicaTombstoneKey(3), ReplicaTombstoneKey(4)) {
			t.Errorf("tombstone keys do not identify their range")
		}
	})

}

// TestRaftStateSpanMaxRangeID documents an edge: the span of the largest range id wraps around.
func TestRaftStateSpanMaxRangeID(t *testing.T) {
	lo, hi := RaftStateSpan(math.MaxUint64)
	if bytes.Compare(lo, hi) >= 0 {
		t.Skipf("BUG (edge, unreachable with counter-allocated ids): RaftStateSpan(MaxUint64) = [%x, %x) is inverted because the end wraps to range 0; Store.Load's SeekGE(end) would loop forever on such a key", lo, hi)
	}
}

// TestStreamReadsCountApart: a snapshot streamed out with NewStreamIter loads its blocks as the
// stream's in Stats, so the node's own reads keep a hit ratio of their own.
func TestStreamReadsCountApart(t *testing.T) {
	e, _ := openNew(t)
	b := e.NewBatch()
	for i := 0; i < 2000; i++ {
		must(t, b.Set([]byte(fmt.Sprintf("k%05d", i)), bytes.Repeat([]byte("v"), 200)))
	}
	must(t, b.Commit(true))
	must(t, e.DB().Flush()) // blocks are loaded from tables only
	scan := func(it *Iterator, err error) {
		t.Helper()
		must(t, err)
		n := 0
		for it.First(); it.Valid(); it.Next() {
			n++
		}
		must(t, it.Close())
		if n != 2000 {
			t.Fatalf("scanned %d keys, want 2000", n)
		}
	}
	before := e.Stats()
	snap := e.NewSnapshot()
	scan(snap.NewStreamIter(nil, nil))
	must(t, snap.Close())
	streamed := e.Stats()
	if streamed.StreamBlockBytes <= before.StreamBlockBytes {
		t.Fatalf("the stream's blocks were not counted: %+v", streamed)
	}
	if streamed.ServedBlockBytes != before.ServedBlockBytes {
		t.Fatalf("the stream's blocks counted as the node's own reads: %d -> %d bytes", before.ServedBlockBytes, streamed.ServedBlockBytes)
	}
	scan(e.NewIter(nil, nil))
	served := e.Stats()
	if served.ServedBlockBytes <= streamed.ServedBlockBytes || served.StreamBlockBytes != streamed.StreamBlockBytes {
		t.Fatalf("an ordinary scan: served %d -> %d, stream %d -> %d bytes", streamed.ServedBlockBytes, served.ServedBlockBytes,
			streamed.StreamBlockBytes, served.StreamBlockBytes)
	}
	// The stream left the blocks in the cache: the node's scan found them there.
	if got := served.ServedBlockBytesInCache - streamed.ServedBlockBytesInCache; got == 0 {
		t.Fatalf("the scan after the stream found none of its blocks in the cache")
	}
	// A compaction's reads are not the node's either: overwrite half the keys in a second table and
	// compact both into one.
	b = e.NewBatch()
	for i := 0; i < 2000; i += 2 {
		must(t, b.Set([]byte(fmt.Sprintf("k%05d", i)), bytes.Repeat([]byte("w"), 200)))
	}
	must(t, b.Commit(true))
	must(t, e.DB().Flush())
	must(t, e.CompactAll(context.Background()))
	compacted := e.Stats()
	if compacted.ServedBlockBytes != served.ServedBlockBytes || compacted.StreamBlockBytes != served.StreamBlockBytes {
		t.Fatalf("a compaction's reads counted as the node's or a stream's: served %d -> %d, stream %d -> %d bytes",
			served.ServedBlockBytes, compacted.ServedBlockBytes, served.StreamBlockBytes, compacted.StreamBlockBytes)
	}
	if compacted.CompactionsDone == served.CompactionsDone {
		t.Fatalf("no compaction ran")
	}
}

// LBaseMaxBytes reaches Pebble's options; a negative size is refused.
func TestLBaseMaxBytes(t *testing.T) {
	e, err := Open(t.TempDir(), Options{CreateIfMissing: true, LBaseMaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if e.po.LBaseMaxBytes != 1<<20 {
		t.Errorf("pebble LBaseMaxBytes %d, want %d", e.po.LBaseMaxBytes, 1<<20)
	}
	if e, err := Open(t.TempDir(), Options{CreateIfMissing: true, LBaseMaxBytes: -1}); err == nil {
		e.Close()
		t.Error("a negative base level size was accepted")
	}
}

func TestCompactedBetween(t *testing.T) {
	for _, tc := range []struct {
		name      string
		prev, cur Stats
		want      bool
	}{
		{"idle, with debt left", Stats{CompactionsDone: 3, CompactionDebtBytes: 1 << 20}, Stats{CompactionsDone: 3, CompactionDebtBytes: 1 << 20}, false},
		{"running now", Stats{CompactionsDone: 3}, Stats{CompactionsDone: 3, CompactionsRunning: 1}, true},
		{"was running", Stats{CompactionsDone: 3, CompactionsRunning: 1}, Stats{CompactionsDone: 3}, true},
		{"one began and ended between", Stats{CompactionsDone: 3}, Stats{CompactionsDone: 4}, true},
	} {
		if got := CompactedBetween(tc.prev, tc.cur); got != tc.want {
			t.Errorf("%s: CompactedBetween = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TargetFileBytes reaches Pebble (doubling below), a negative size is refused, and with a small
// base level it gives a small store of random writes compactions narrower than its key space.
func TestTargetFileBytes(t *testing.T) {
	if e, err := Open(t.TempDir(), Options{CreateIfMissing: true, TargetFileBytes: -1}); err == nil {
		e.Close()
		t.Fatal("a negative target file size was accepted")
	}
	// widest returns the largest share of the store's tables that one compaction out of a level
	// below L0 rewrote, after writing ~4 MB of incompressible values over the whole key space.
	widest := func(t *testing.T, opts Options) float64 {
		opts.CreateIfMissing, opts.CacheBytes, opts.MemTableBytes = true, 1<<20, 256<<10
		e, err := Open(t.TempDir(), opts)
		must(t, err)
		defer e.Close()
		if opts.TargetFileBytes > 0 && (e.po.TargetFileSizes[0] != opts.TargetFileBytes || e.po.TargetFileSizes[2] != 4*opts.TargetFileBytes) {
			t.Fatalf("pebble target file sizes %v for %d", e.po.TargetFileSizes, opts.TargetFileBytes)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		val := make([]byte, 200)
		start := time.Now()
		for round := 0; round < 20; round++ {
			b := e.NewBatch()
			for i := 0; i < 1000; i++ {
				for j := range val {
					val[j] = byte(rng.Uint32())
				}
				must(t, b.Set([]byte(fmt.Sprintf("k%06d", rng.IntN(20000))), val))
			}
			must(t, b.Commit(false))
		}
		must(t, e.DB().Flush())
		// Settled: no compaction for 300 ms (CompactedBetween).
		deadline := time.Now().Add(60 * time.Second)
		for last, quiet := e.Stats(), time.Now(); ; {
			time.Sleep(20 * time.Millisecond)
			cur := e.Stats()
			if CompactedBetween(last, cur) {
				quiet = time.Now()
			} else if time.Since(quiet) >= 300*time.Millisecond {
				break
			}
			last = cur
			if time.Now().After(deadline) {
				t.Fatal("compactions did not settle within 60 s")
			}
		}
		var store uint64
		for _, l := range e.db.Metrics().Levels {
			store += uint64(l.TablesSize)
		}
		share := 0.0
		for _, c := range e.CompactionsSince(start) {
			if c.FromLevel > 0 && rewritesData(c.Reason) && c.Err == "" {
				share = max(share, float64(c.InputBytes)/float64(store))
			}
		}
		return share
	}
	narrow := widest(t, Options{TargetFileBytes: 32 << 10, LBaseMaxBytes: 128 << 10})
	wide := widest(t, Options{LBaseMaxBytes: 128 << 10})
	t.Logf("widest compaction below L0: %.3f of the store with 32 KiB tables, %.3f with Pebble's", narrow, wide)
	if narrow == 0 || narrow > 0.5 {
		t.Fatalf("with 32 KiB tables and a 128 KiB base level the widest compaction below L0 rewrote %.0f %% of the store, want some and at most half", 100*narrow)
	}
	if wide < 2*narrow {
		t.Fatalf("Pebble's table sizes gave compactions as narrow (%.3f of the store) as 32 KiB tables (%.3f)", wide, narrow)
	}
}

// rewritingReasons are the compaction reasons (Pebble's) that write new tables from old ones: a copy
// writes a new table too, and blocks are cached per table. A move hands a table to another level as
// is and a delete-only compaction only drops tables: neither leaves a key's blocks uncached.
var rewritingReasons = map[string]bool{"default": true, "elision-only": true, "read": true, "tombstone-density": true,
	"rewrite": true, "copy": true}

// rewritesData reports whether a compaction of this reason (CompactionRecord.Reason, Pebble's)
// writes new tables, whose blocks the block cache does not hold when it ends.
func rewritesData(reason string) bool { return rewritingReasons[reason] }

// TestJobReadsCountApart: a scan job's iterator (ReadJobs, ReadPrefetch) loads its blocks as the node's own reads
// and also apart as the jobs', so the foreground's are the served bytes less the jobs'.
func TestJobReadsCountApart(t *testing.T) {
	e, _ := openNew(t)
	b := e.NewBatch()
	for i := 0; i < 2000; i++ {
		must(t, b.Set([]byte(fmt.Sprintf("k%05d", i)), bytes.Repeat([]byte("v"), 200)))
	}
	must(t, b.Commit(true))
	must(t, e.DB().Flush())
	scan := func(src ReadSource) {
		t.Helper()
		must(t, e.IterateFor(nil, nil, src, func(it *Iterator) error {
			for it.First(); it.Valid(); it.Next() {
			}
			return it.Error()
		}))
	}
	before := e.Stats()
	scan(ReadJobs)
	scan(ReadPrefetch)
	job := e.Stats()
	if job.JobBlockBytes <= before.JobBlockBytes {
		t.Fatalf("the job's blocks were not counted as the jobs': %+v", job)
	}
	if job.ServedBlockBytes-before.ServedBlockBytes != job.JobBlockBytes-before.JobBlockBytes {
		t.Fatalf("served grew by %d, the jobs' by %d: want the same", job.ServedBlockBytes-before.ServedBlockBytes, job.JobBlockBytes-before.JobBlockBytes)
	}
	scan(ReadForeground)
	fg := e.Stats()
	if fg.JobBlockBytes != job.JobBlockBytes || fg.JobBlockBytesInCache != job.JobBlockBytesInCache {
		t.Fatalf("a foreground scan counted as the jobs': %d -> %d bytes", job.JobBlockBytes, fg.JobBlockBytes)
	}
	if fg.ServedBlockBytes <= job.ServedBlockBytes || fg.ServedBlockBytesInCache <= job.ServedBlockBytesInCache {
		t.Fatalf("the foreground scan after the job's: served %d -> %d, in cache %d -> %d", job.ServedBlockBytes, fg.ServedBlockBytes,
			job.ServedBlockBytesInCache, fg.ServedBlockBytesInCache)
	}
}
