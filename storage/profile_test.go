package storage

import (
	"strings"
	"testing"
)

func TestProfiles(t *testing.T) {
	budget, gib := float64(DefaultMemoryBytes), float64(1<<30)
	for _, tc := range []struct {
		name  string
		o     Options
		cache int64
		mem   uint64
		block int
	}{
		// The cache holds the two memtables Pebble reserves in it beside the profile's share for blocks.
		{"read", Options{Profile: "read", MemoryBytes: 1 << 30}, int64(0.55*gib) + 2*int64(0.10*gib/2), uint64(0.10 * gib / 2), 32 << 10},
		{"write", Options{Profile: "write", MemoryBytes: 1 << 30}, int64(0.10*gib) + 2*int64(0.55*gib/2), uint64(0.55 * gib / 2), 64 << 10},
		{"scan, default budget", Options{Profile: "scan"}, int64(0.55*budget) + 2*int64(0.10*budget/2), uint64(0.10 * budget / 2), 128 << 10},
		{"an explicit memtable size", Options{Profile: "read", MemTableBytes: 4 << 20}, int64(0.55*budget) + 8<<20, 4 << 20, 32 << 10},
		{"an explicit cache wins", Options{Profile: "readwrite", CacheBytes: 8 << 20}, 8 << 20, uint64(0.20 * budget / 2), 32 << 10},
		{"default", Options{Profile: ProfileDefault}, DefaultCacheBytes, DefaultMemTableBytes, 0},
	} {
		got := tc.o.WithDefaults()
		if got.CacheBytes != tc.cache || got.MemTableBytes != tc.mem || got.BlockBytes != tc.block {
			t.Errorf("%s: cache %d memtable %d block %d, want %d %d %d", tc.name, got.CacheBytes, got.MemTableBytes, got.BlockBytes, tc.cache, tc.mem, tc.block)
		}
	}
	if err := (Options{Profile: "fast"}).Validate(); err == nil || !strings.Contains(err.Error(), "one of default, read, readwrite, scan, write") {
		t.Errorf("unknown profile: %v", err)
	}
}

// An engine opened with a profile writes blocks of the profile's size.
func TestOpenWithProfile(t *testing.T) {
	e, err := Open(t.TempDir(), Options{CreateIfMissing: true, Profile: "scan", MemoryBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if bs := e.po.Levels[0].BlockSize; bs != 128<<10 {
		t.Fatalf("block size %d, want 128 KiB", bs)
	}
}
