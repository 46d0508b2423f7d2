package backups

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/shoaldb/shoal/backup"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/plan/mergeplan"
	"github.com/shoaldb/shoal/storage"
)

// store is an engine holding ranges as a node's replicas would, and the state it should hold.
type store struct {
	t      *testing.T
	eng    *storage.Engine
	ranges map[uint64]*pb.RangeDescriptor
	// applied counts writes per range, standing in for the raft applied index.
	applied map[uint64]uint64
	data    map[string]string
	cfg     Config
	// last is the manifest of the newest backup; ckState the user data of its checkpoint.
	last    *backup.Manifest
	ckState map[string]string
}

func newStore(t *testing.T) *store {
	eng, err := storage.Open(filepath.Join(t.TempDir(), "engine"), storage.Options{CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return &store{t: t, eng: eng, ranges: map[uint64]*pb.RangeDescriptor{}, applied: map[uint64]uint64{}, data: map[string]string{}}
}

func (s *store) batch(fn func(b *storage.Batch) error) {
	b := s.eng.NewBatch()
	if err := fn(b); err != nil {
		s.t.Fatal(err)
	}
	if err := b.Commit(false); err != nil {
		s.t.Fatal(err)
	}
}

// setRange writes (or rewrites, as a split does) a range's descriptor.
func (s *store) setRange(id uint64, start, end string, gen uint64) {
	d := &pb.RangeDescriptor{RangeId: id, StartKey: []byte(start), EndKey: []byte(end), Generation: gen}
	s.ranges[id] = d
	data, _ := proto.Marshal(d)
	s.batch(func(b *storage.Batch) error { return b.Set(storage.RangeDescKey(id), data) })
	s.bump(id)
}

func (s *store) dropRange(id uint64) {
	delete(s.ranges, id)
	s.batch(func(b *storage.Batch) error { return b.Delete(storage.RangeDescKey(id)) })
}

func (s *store) rangeOf(key string) uint64 {
	for id, d := range s.ranges {
		if key >= string(d.StartKey) && (len(d.EndKey) == 0 || key < string(d.EndKey)) {
			return id
		}
	}
	s.t.Fatalf("no range holds %q", key)
	return 0
}

func (s *store) bump(id uint64) {
	s.applied[id]++
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], s.applied[id])
	s.batch(func(b *storage.Batch) error { return b.Set(storage.AppliedStateKey(id), v[:]) })
}

func (s *store) put(k, v string) {
	s.data[k] = v
	s.batch(func(b *storage.Batch) error { return b.Set(storage.UserDataKey([]byte(k)), []byte(v)) })
	s.bump(s.rangeOf(k))
}

func (s *store) del(k string) {
	delete(s.data, k)
	s.batch(func(b *storage.Batch) error { return b.Delete(storage.UserDataKey([]byte(k))) })
	s.bump(s.rangeOf(k))
}

// held is the state inside the ranges the store holds now.
func (s *store) held() map[string]string {
	out := map[string]string{}
	for k, v := range s.data {
		for _, d := range s.ranges {
			if k >= string(d.StartKey) && (len(d.EndKey) == 0 || k < string(d.EndKey)) {
				out[k] = v
			}
		}
	}
	return out
}

// backup writes a backup of the store's ranges from a checkpoint into dir, against parent ("": full).
func (s *store) backup(dir, parent string) *backup.Manifest {
	s.t.Helper()
	ckDir := filepath.Join(s.t.TempDir(), "ck")
	mark, err := BeginEpoch(s.eng, s.cfg)
	if err != nil {
		s.t.Fatal(err)
	}
	req := Request{Dir: dir, Ranges: slices.Sorted(maps.Keys(s.ranges)), Mark: mark}
	if parent != "" {
		if req.Parent, err = OpenParent(parent); err != nil {
			s.t.Fatal(err)
		}
	}
	ck, release, err := OpenSource(s.eng, ckDir, req.Parent, mark)
	if err != nil {
		s.t.Fatal(err)
	}
	defer release()
	s.ckState = userData(s.t, ck)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		s.t.Fatal(err)
	}
	m, err := Write(context.Background(), ck, req)
	if err != nil {
		s.t.Fatal(err)
	}
	m.CreatedAt = time.Now().UTC()
	if err := backup.WriteManifest(dir, m); err != nil {
		s.t.Fatal(err)
	}
	if err := Finish(s.eng, mark); err != nil {
		s.t.Fatal(err)
	}
	s.last = m
	return m
}

// userData reads every user key of a checkpoint.
func userData(t testing.TB, ck Source) map[string]string {
	lo, hi := storage.DataSpan(false, nil, nil)
	it, err := ck.NewIter(lo, hi)
	must(t, err)
	defer it.Close()
	out := map[string]string{}
	for ok := it.First(); ok; ok = it.Next() {
		out[string(storage.StripDataPrefix(it.Key()))] = string(it.Value())
	}
	must(t, it.Error())
	return out
}

// restored merges the chain ending in dir with every strategy and fan-in and checks each gives want.
func restored(t *testing.T, dir string, want map[string]string) {
	t.Helper()
	c, err := backup.OpenChain(dir)
	if err != nil {
		t.Fatal(err)
	}
	sets, err := c.Verify(true)
	if err != nil {
		t.Fatal(err)
	}
	for _, fanin := range []int{2, 3, 16} {
		for _, s := range mergeplan.Strategies {
			p, err := mergeplan.Make(sets, s, mergeplan.Options{Fanin: fanin, Seed: 7})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			if _, err := c.Merge(p, t.TempDir(), func(k, v []byte) error {
				got[string(k)] = string(v)
				return nil
			}); err != nil {
				t.Fatalf("%s fan-in %d: %v", s, fanin, err)
			}
			if !maps.Equal(got, want) {
				t.Fatalf("%s fan-in %d: chain of %d restores %d keys, want %d", s, fanin, len(c.Links), len(got), len(want))
			}
		}
	}
}

func TestIncrementalChain(t *testing.T) {
	for _, cfg := range []Config{{}, {NoJournal: true}} {
		t.Run(fmt.Sprintf("journal=%v", !cfg.NoJournal), func(t *testing.T) { testIncrementalChain(t, cfg) })
	}
}

func testIncrementalChain(t *testing.T, cfg Config) {
	s := newStore(t)
	s.cfg = cfg
	wantMethod := "journal"
	if cfg.NoJournal {
		wantMethod = "diff"
	}
	method := func(m *backup.Manifest) {
		t.Helper()
		if m.Method != wantMethod {
			t.Fatalf("incremental taken by %q (%s), want %q", m.Method, m.Fallback, wantMethod)
		}
	}
	rng := rand.New(rand.NewPCG(1, 1))
	key := func() string { return fmt.Sprintf("k%04d", rng.IntN(2000)) }
	s.setRange(1, "", "k1", 1)
	s.setRange(2, "k1", "", 1)
	for i := range 1500 {
		s.put(key(), fmt.Sprint("v0-", i))
	}
	root := t.TempDir()
	b := func(i int) string { return filepath.Join(root, fmt.Sprintf("b%d", i)) }
	m0 := s.backup(b(0), "")
	if m0.Incremental() || m0.TotalKeys != uint64(len(s.data)) {
		t.Fatalf("full backup: %d keys, want %d", m0.TotalKeys, len(s.data))
	}
	restored(t, b(0), s.held())

	// Changes in range 1 only: range 2 is not read (same applied index) and writes nothing.
	changed := map[string]bool{}
	for i := range 60 {
		k := fmt.Sprintf("k0%03d", rng.IntN(1000))
		if i%3 == 0 {
			if _, ok := s.data[k]; ok {
				s.del(k)
				changed[k] = true
			}
			continue
		}
		s.put(k, fmt.Sprint("v1-", i))
		changed[k] = true
	}
	m1 := s.backup(b(1), b(0))
	method(m1)
	if got := m1.TotalKeys + m1.TotalDeletes; got != uint64(len(changed)) {
		t.Errorf("incremental holds %d changes, want %d", got, len(changed))
	}
	for _, e := range m1.Ranges {
		if e.RangeID == 2 && (e.Keys != 0 || e.Deletes != 0 || !e.Delta) {
			t.Errorf("unchanged range 2: %+v", e)
		}
	}
	restored(t, b(1), s.held())

	// A split of range 1 and writes everywhere: both halves are diffed against the parent's index.
	s.setRange(1, "", "k05", 2)
	s.setRange(3, "k05", "k1", 2)
	for i := range 200 {
		if k := key(); i%4 == 0 {
			if _, ok := s.data[k]; ok {
				s.del(k)
			}
		} else {
			s.put(k, fmt.Sprint("v2-", i))
		}
	}
	m2 := s.backup(b(2), b(1))
	method(m2)
	for _, e := range m2.Ranges {
		if !e.Delta {
			t.Errorf("range %d inside the parent's ranges was written in full", e.RangeID)
		}
	}
	restored(t, b(2), s.held())

	// The node loses range 2; keys deleted there meanwhile must not come back when it holds it again.
	s.dropRange(2)
	s.backup(b(3), b(2))
	restored(t, b(3), s.held())
	var gone []string
	for k := range s.data {
		if k >= "k1" && len(gone) < 50 {
			gone = append(gone, k)
		}
	}
	s.setRange(2, "k1", "", 3)
	for _, k := range gone {
		s.del(k)
	}
	m4 := s.backup(b(4), b(3))
	for _, e := range m4.Ranges {
		if e.RangeID == 2 && e.Delta {
			t.Error("range 2, not held at the parent, must be written in full")
		}
	}
	restored(t, b(4), s.held())

	// Roll the chain up, then take an incremental against the roll-up.
	c, err := backup.OpenChain(b(4))
	if err != nil {
		t.Fatal(err)
	}
	sets, _ := c.Verify(true)
	p, _ := mergeplan.Make(sets, mergeplan.SmallestInput, mergeplan.Options{})
	res, err := backup.Compact(c, p, b(5))
	if err != nil {
		t.Fatal(err)
	}
	if res.Manifest.Incremental() || len(res.Manifest.RolledUp) != 5 {
		t.Fatalf("roll-up manifest %+v", res.Manifest)
	}
	restored(t, b(5), s.held())
	s.put("k0001", "after the roll-up")
	method(s.backup(b(6), b(5)))
	restored(t, b(6), s.held())
}

func TestDamagedLinksAreRefused(t *testing.T) {
	s := newStore(t)
	s.setRange(1, "", "", 1)
	for i := range 300 {
		s.put(fmt.Sprintf("k%03d", i), "v")
	}
	root := t.TempDir()
	dirs := []string{}
	for i := range 3 {
		d := filepath.Join(root, fmt.Sprintf("b%d", i))
		parent := ""
		if i > 0 {
			parent = dirs[i-1]
		}
		s.put(fmt.Sprintf("k%03d", i), fmt.Sprint("changed ", i))
		s.backup(d, parent)
		dirs = append(dirs, d)
	}
	// An interrupted backup (files, no manifest) is listed as such; a directory of something else is not.
	must(t, os.MkdirAll(filepath.Join(root, "interrupted"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "interrupted", backup.RangeFile(1)), nil, 0o644))
	must(t, os.MkdirAll(filepath.Join(root, "other"), 0o755))
	list, err := backup.List(root)
	must(t, err)
	var got []string
	for _, l := range list {
		got = append(got, fmt.Sprintf("%s:%s:%d", filepath.Base(l.Dir), l.Kind, l.Chain))
	}
	if want := "[b0:full:1 b1:incremental:2 b2:incremental:3 interrupted:incomplete:0]"; fmt.Sprint(got) != want {
		t.Fatalf("list: %v, want %s", got, want)
	}
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T) (undo func())
		want   error
	}{
		{"missing parent", func(t *testing.T) func() {
			moved := dirs[1] + ".away"
			must(t, os.Rename(dirs[1], moved))
			return func() { must(t, os.Rename(moved, dirs[1])) }
		}, backup.ErrBrokenChain},
		{"altered parent manifest", func(t *testing.T) func() {
			path := filepath.Join(dirs[0], backup.ManifestFile)
			data, err := os.ReadFile(path)
			must(t, err)
			must(t, os.WriteFile(path, append(data, ' '), 0o644))
			return func() { must(t, os.WriteFile(path, data, 0o644)) }
		}, backup.ErrBrokenChain},
		{"damaged range file", func(t *testing.T) func() {
			path := filepath.Join(dirs[1], backup.RangeFile(1))
			data, err := os.ReadFile(path)
			must(t, err)
			bad := slices.Clone(data)
			bad[len(bad)/2] ^= 0xff
			must(t, os.WriteFile(path, bad, 0o644))
			return func() { must(t, os.WriteFile(path, data, 0o644)) }
		}, backup.ErrCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			undo := tc.damage(t)
			defer undo()
			c, err := backup.OpenChain(dirs[2])
			if err == nil {
				_, err = c.Verify(true)
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			t.Log(err)
		})
	}
	// Undamaged again: the chain restores.
	restored(t, dirs[2], s.held())
	// A parent without a readable index is refused before anything is written.
	must(t, os.Remove(filepath.Join(dirs[2], backup.IndexFile)))
	if _, err := OpenParent(dirs[2]); err == nil {
		t.Fatal("a parent without its index was accepted")
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
