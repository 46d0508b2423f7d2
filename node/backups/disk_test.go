package backups

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/shoaldb/shoal/backup"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/storage"
	"github.com/shoaldb/shoal/storage/emudisk"
)

// TestBackupChargesNodeDisk checks that a backup's files cost the node's emulated disk what they
// hold: every byte of the range files and the key index written in buffer-sized writes with a sync
// per file, the checkpoint's reads on the same device, and a diff's reads of its parent's index.
func TestBackupChargesNodeDisk(t *testing.T) {
	eng, err := storage.Open(filepath.Join(t.TempDir(), "engine"), storage.Options{CreateIfMissing: true,
		Device: &emudisk.Options{NoPageCache: true}})
	must(t, err)
	t.Cleanup(func() { eng.Close() })
	s := &store{t: t, eng: eng, ranges: map[uint64]*pb.RangeDescriptor{}, applied: map[uint64]uint64{}, data: map[string]string{},
		cfg: Config{NoJournal: true}} // the incremental below diffs, reading its parent's index
	s.setRange(1, "", "k05000", 1)
	s.setRange(2, "k05000", "", 1)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 4000 {
		val := make([]byte, 200) // incompressible: the tables hold what the backup writes
		for j := range val {
			val[j] = byte('a' + rng.IntN(26))
		}
		s.put(fmt.Sprintf("k%05d", i*2), string(val))
	}
	must(t, eng.CompactAll(context.Background())) // on disk: the checkpoint's reads go to the device

	full := filepath.Join(t.TempDir(), "full")
	m, before, after := backupMeasured(t, s, full, nil)
	if m.TotalBytes < 2*fileChunk {
		t.Fatalf("full: %d bytes in range files: too few to span several buffers", m.TotalBytes)
	}
	checkCharged(t, "full", m, before, after)
	if after.ReadBytes-before.ReadBytes < int64(m.TotalBytes) {
		t.Errorf("full: the device read %d bytes, less than the %d backed up", after.ReadBytes-before.ReadBytes, m.TotalBytes)
	}
	// The checkpoint's tables are read ahead: a few windows, not an operation per 4-KiB block.
	reads, windows := after.ReadOps-before.ReadOps, after.ReadaheadOps-before.ReadaheadOps
	t.Logf("full: %d bytes backed up, %d read in %d operations (%d windows)", m.TotalBytes, after.ReadBytes-before.ReadBytes, reads, windows)
	if windows == 0 || reads > int64(m.TotalBytes)/(32<<10) {
		t.Errorf("full: %d read operations (%d windows) for %d bytes: want the tables read ahead", reads, windows, m.TotalBytes)
	}

	for i := range 100 {
		s.put(fmt.Sprintf("k%05d", i*7), "changed")
	}
	parent, err := OpenParent(full)
	must(t, err)
	m2, before, after := backupMeasured(t, s, filepath.Join(t.TempDir(), "incr"), parent)
	if m2.Method != "diff" {
		t.Fatalf("incremental method %q, want diff", m2.Method)
	}
	checkCharged(t, "incremental", m2, before, after)
	// The diff's reads of its parent's index, alone on a device of their own.
	d := emudisk.NewDevice(emudisk.Options{}, nil)
	chargeParentIndexes(d, full)
	if got, want := d.Stats().ReadBytes, 2*int64(m.Index.Bytes); got != want {
		t.Errorf("a diff against the full backup charged %d bytes read, want its index twice (%d)", got, want)
	}
}

// backupMeasured writes a backup of s into dir (against parent, or full) with the node's device
// given, and returns its manifest and the device's counters around Write.
func backupMeasured(t *testing.T, s *store, dir string, parent *Parent) (*backup.Manifest, emudisk.Stats, emudisk.Stats) {
	t.Helper()
	must(t, os.MkdirAll(dir, 0o755))
	req := Request{Dir: dir, Parent: parent, Ranges: slices.Sorted(maps.Keys(s.ranges)), Disk: s.eng.Device()}
	src, release, err := OpenSource(s.eng, filepath.Join(t.TempDir(), "ck"), parent, nil)
	must(t, err)
	defer release()
	before := s.eng.DeviceStats()
	m, err := Write(context.Background(), src, req)
	must(t, err)
	after := s.eng.DeviceStats()
	must(t, backup.WriteManifest(dir, m))
	return m, before, after
}

// checkCharged checks that the device's writes between before and after are m's files: their bytes,
// one write per full 256-KiB buffer and one for the rest, and a sync each.
func checkCharged(t *testing.T, what string, m *backup.Manifest, before, after emudisk.Stats) {
	t.Helper()
	files := []uint64{m.Index.Bytes}
	for _, e := range m.Ranges {
		files = append(files, e.Bytes)
	}
	var bytes, ops int64
	for _, b := range files {
		bytes += int64(b)
		ops += int64(b) / fileChunk
		if b%fileChunk != 0 {
			ops++
		}
	}
	syncs := int64(len(files))
	got := emudisk.Stats{WriteBytes: after.WriteBytes - before.WriteBytes, WriteOps: after.WriteOps - before.WriteOps,
		Syncs: after.Syncs - before.Syncs}
	if got.WriteBytes != bytes || got.WriteOps != ops+syncs || got.Syncs != syncs {
		t.Errorf("%s: the device wrote %d bytes in %d operations with %d syncs; the files hold %d bytes: want %d writes and %d syncs",
			what, got.WriteBytes, got.WriteOps, got.Syncs, bytes, ops, syncs)
	}
}
