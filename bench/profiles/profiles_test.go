package profiles

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/pingcap/go-ycsb/pkg/util"

	"github.com/shoaldb/shoal/bench/ycsb"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/storage"
	"github.com/shoaldb/shoal/storage/emudisk"
)

// TestSplitKeysCutRecordsEvenly checks that the split keys cut a tenant's hashed record keys (all of
// which begin "user6" for twenty thousand records) into ranges of as many records, and ordered keys
// alike.
func TestSplitKeysCutRecordsEvenly(t *testing.T) {
	const records = 20000
	for _, order := range []string{"hashed", "ordered"} {
		ts, err := ycsb.ParseTenants("a:hotspot", ycsb.Config{Records: records, Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		ts[0].Config.Props["insertorder"] = order
		keys, err := splitKeys(ts[0], records, 4)
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) != 3 {
			t.Fatalf("%s: %d split keys, want 3", order, len(keys))
		}
		counts := make([]int, len(keys)+1)
		for n := range int64(records) {
			k := n
			if order == "hashed" {
				k = util.Hash64(n)
			}
			name, r := fmt.Sprintf("user%d", k), 0
			for r < len(keys) && name >= keys[r] {
				r++
			}
			counts[r]++
		}
		for r, c := range counts {
			if c != records/4 {
				t.Errorf("%s: range %d holds %d records, want %d (split keys %q)", order, r, c, records/4, keys)
			}
		}
	}
}

// TestRandomPlacementEvensCounts checks that the random leaders are voters of their ranges and no
// node leads more than ⌈ranges/nodes⌉, whatever the draw, and that two seeds draw differently.
func TestRandomPlacementEvensCounts(t *testing.T) {
	var rs []*pb.RangeStatus
	for i := range uint64(13) {
		d := &pb.RangeDescriptor{RangeId: i + 2}
		for _, n := range []uint64{1 + i%5, 1 + (i+1)%5, 1 + (i+3)%5} {
			d.Replicas = append(d.Replicas, &pb.ReplicaDescriptor{NodeId: n})
		}
		rs = append(rs, &pb.RangeStatus{Desc: d})
	}
	draws := map[string]bool{}
	for seed := range uint64(20) {
		place := randomPlacement(rs, 5, rand.New(rand.NewPCG(seed, 0)))
		led := map[uint64]int{}
		for _, r := range rs {
			to, ok := place[r.Desc.RangeId]
			if !ok || !slices.Contains(voters(r), to) {
				t.Fatalf("seed %d: r%d led by n%d, not one of its voters %v", seed, r.Desc.RangeId, to, voters(r))
			}
			led[to]++
		}
		for n, k := range led {
			if k > 3 {
				t.Errorf("seed %d: n%d leads %d of 13 ranges, more than ⌈13/5⌉ = 3", seed, n, k)
			}
		}
		draws[fmt.Sprint(place)] = true
	}
	if len(draws) < 2 {
		t.Errorf("20 seeds drew %d placement(s)", len(draws))
	}
}

// TestScanProfileTradesOperationsForBytes measures what a YCSB-E scan (1–100 rows of 1 KB from a
// hashed key) reads from an uncached disk under the read and the scan profile of the experiment's
// 8 MiB budget: the scan profile's 128 KiB blocks take about half the disk reads and twice the
// bytes. Which wins depends on the disk's cost of an operation against a byte (the emulated Disk:
// 32 KiB an operation at break-even; a 7200-rpm disk: about 1 MB). -v prints the figures.
func TestScanProfileTradesOperationsForBytes(t *testing.T) {
	type per struct{ bytes, ops float64 }
	measure := func(profile string) per {
		d := emudisk.Options{NoPageCache: true}
		e, err := storage.Open(t.TempDir(), storage.Options{Profile: profile, MemoryBytes: 8 << 20, Device: &d, CreateIfMissing: true})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		rng := rand.New(rand.NewPCG(1, 2))
		val := make([]byte, 1000)
		var keys []string
		for n := range int64(10000) {
			for i := range val {
				val[i] = byte('a' + rng.IntN(26)) // YCSB's fields: random letters, not compressible away
			}
			k := fmt.Sprintf("user%d", util.Hash64(n))
			keys = append(keys, k)
			b := e.NewBatch()
			if err := b.Set([]byte(k), val); err != nil {
				t.Fatal(err)
			}
			if err := b.Commit(false); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.CompactAll(t.Context()); err != nil {
			t.Fatal(err)
		}
		before := e.DeviceStats()
		const scans = 300
		for range scans {
			it, err := e.NewIter(nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			n := 1 + rng.IntN(100)
			for ok := it.SeekGE([]byte(keys[rng.IntN(len(keys))])); ok && n > 0; ok = it.Next() {
				_ = it.Value()
				n--
			}
			if err := it.Close(); err != nil {
				t.Fatal(err)
			}
		}
		after := e.DeviceStats()
		return per{float64(after.ReadBytes-before.ReadBytes) / scans, float64(after.ReadOps-before.ReadOps) / scans}
	}
	read, scan := measure("read"), measure("scan")
	t.Logf("a scan from disk: read profile (32 KiB blocks) %.1f KiB in %.2f reads; scan profile (128 KiB) %.1f KiB in %.2f reads",
		read.bytes/1024, read.ops, scan.bytes/1024, scan.ops)
	if scan.ops >= read.ops*0.75 || scan.bytes <= read.bytes*1.5 {
		t.Fatalf("scan profile %.2f reads and %.0f bytes a scan, read profile %.2f and %.0f: want about half the reads and twice the bytes",
			scan.ops, scan.bytes, read.ops, read.bytes)
	}
}
