package backups

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/shoaldb/shoal/backup"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/plan/mergeplan"
	"github.com/shoaldb/shoal/storage"
)

var (
	benchStoreMiB  = flag.Int("backup-store-mib", 64, "MiB of values the backup benchmarks load (1024: the 1 GB store)")
	benchValue     = flag.Int("backup-value-bytes", 1000, "value size of the backup benchmarks")
	benchRanges    = flag.Int("backup-ranges", 16, "ranges the backup benchmarks' store is split into")
	benchNoJournal = flag.Bool("backup-no-journal", false, "backup benchmarks: incrementals diff every key instead of reading the journal")
	benchChainDir  = flag.String("backup-chain-dir", "", "where BenchmarkZipfChain leaves its chain (default: a temporary directory)")
)

// benchStore is an engine loaded with benchStoreMiB of values in benchRanges ranges, as a node's.
type benchStore struct {
	eng     *storage.Engine
	ids     []uint64
	keys    int
	applied uint64
	rng     *rand.Rand
}

func benchKey(i int) []byte { return fmt.Appendf(nil, "user%012d", i) }

func newBenchStore(b *testing.B) *benchStore {
	b.Helper()
	eng, err := storage.Open(filepath.Join(b.TempDir(), "engine"), storage.Options{CreateIfMissing: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { eng.Close() })
	s := &benchStore{eng: eng, keys: *benchStoreMiB << 20 / *benchValue, rng: rand.New(rand.NewPCG(1, 2))}
	batch := eng.NewBatch()
	per := s.keys / *benchRanges
	for r := 0; r < *benchRanges; r++ {
		id := uint64(r + 1)
		d := &pb.RangeDescriptor{RangeId: id, Generation: 1}
		if r > 0 {
			d.StartKey = benchKey(r * per)
		}
		if r < *benchRanges-1 {
			d.EndKey = benchKey((r + 1) * per)
		}
		data, _ := proto.Marshal(d)
		must(b, batch.Set(storage.RangeDescKey(id), data))
		s.ids = append(s.ids, id)
	}
	value := make([]byte, *benchValue)
	for i := 0; i < s.keys; i++ {
		s.fill(value) // incompressible, as the values of a real store
		must(b, batch.Set(storage.UserDataKey(benchKey(i)), value))
		if i%10_000 == 9_999 {
			must(b, batch.Commit(false))
			batch = eng.NewBatch()
		}
	}
	must(b, batch.Commit(false))
	s.bumpAll()
	return s
}

func (s *benchStore) fill(p []byte) {
	for i := 0; i < len(p); i += 8 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], s.rng.Uint64())
		copy(p[i:], w[:])
	}
}

// bumpAll advances every range's applied index, as writes everywhere would (no range is skipped).
func (s *benchStore) bumpAll() {
	s.applied++
	batch := s.eng.NewBatch()
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], s.applied)
	for _, id := range s.ids {
		batch.Set(storage.AppliedStateKey(id), v[:])
	}
	batch.Commit(false)
}

// update rewrites n keys chosen by pick.
func (s *benchStore) update(b *testing.B, n int, pick func() int) {
	batch := s.eng.NewBatch()
	value := make([]byte, *benchValue)
	for range n {
		s.fill(value)
		must(b, batch.Set(storage.UserDataKey(benchKey(pick())), value))
	}
	must(b, batch.Commit(false))
	s.bumpAll()
}

// backup writes a backup of the store into dir against parent ("": full) as a node does: the
// journal's epoch closes, the backup reads a snapshot or checkpoint (OpenSource), the journal is
// trimmed after the manifest. Timed from the epoch's bump to the trim.
func (s *benchStore) backup(b *testing.B, dir, parent string) *backup.Manifest {
	ckDir := filepath.Join(b.TempDir(), "ck")
	mark, err := BeginEpoch(s.eng, Config{NoJournal: *benchNoJournal})
	must(b, err)
	req := Request{Dir: dir, Ranges: s.ids, Mark: mark}
	if parent != "" {
		req.Parent, err = OpenParent(parent)
		must(b, err)
	}
	src, release, err := OpenSource(s.eng, ckDir, req.Parent, mark)
	must(b, err)
	defer release()
	must(b, os.MkdirAll(dir, 0o755))
	m, err := Write(context.Background(), src, req)
	must(b, err)
	must(b, backup.WriteManifest(dir, m))
	must(b, Finish(s.eng, mark))
	return m
}

func backupBytes(m *backup.Manifest) float64 { return float64(m.TotalBytes + m.Index.Bytes) }

// BenchmarkBackup compares a full backup with an incremental one taken after 1 % of the keys changed
// (each incremental against the previous backup). Run it on the 1 GB store with
// -backup-store-mib 1024 -benchtime 3x.
func BenchmarkBackup(b *testing.B) {
	s := newBenchStore(b)
	root := b.TempDir()
	full := filepath.Join(root, "full")
	start := time.Now()
	fm := s.backup(b, full, "")
	fullTime := time.Since(start)
	b.Logf("store: %d keys of %d bytes in %d ranges; full backup %.1f MiB (index %.1f MiB) in %s", s.keys, *benchValue,
		len(s.ids), float64(fm.TotalBytes)/(1<<20), float64(fm.Index.Bytes)/(1<<20), fullTime.Round(time.Millisecond))
	b.Run("full", func(b *testing.B) {
		for i := range b.N {
			dir := filepath.Join(root, fmt.Sprint("f", i))
			start := time.Now()
			m := s.backup(b, dir, "")
			b.Logf("full %d: %.1f MiB in %s", i, backupBytes(m)/(1<<20), time.Since(start).Round(time.Millisecond))
			b.ReportMetric(backupBytes(m), "bytes/op")
			b.StopTimer()
			os.RemoveAll(dir)
			b.StartTimer()
		}
	})
	// The full runs above trimmed the journal past the first full backup: the chain starts at a new
	// one, and across the runs the framework makes each incremental follows the previous backup.
	parent := filepath.Join(root, "base")
	s.backup(b, parent, "")
	b.Run("incremental-1pct", func(b *testing.B) {
		var bytes float64
		for i := range b.N {
			b.StopTimer()
			s.update(b, s.keys/100, func() int { return s.rng.IntN(s.keys) })
			// The changes flushed to sstables and compacted, as hours of writes between backups
			// would be: a point read of a key still in the memtable costs less, and a compaction
			// the flush starts would compete with the backup.
			must(b, s.eng.DB().Flush())
			time.Sleep(500 * time.Millisecond) // for the compactions the flush schedules to start
			for deadline := time.Now().Add(time.Minute); s.eng.Stats().CompactionsRunning > 0 && time.Now().Before(deadline); {
				time.Sleep(50 * time.Millisecond)
			}
			dir, err := os.MkdirTemp(root, "incremental-")
			must(b, err)
			b.StartTimer()
			start := time.Now()
			m := s.backup(b, dir, parent)
			b.Logf("incremental %d (%s): %d keys put, %d deleted, %.2f MiB (index %.2f MiB) in %s", i, m.Method, m.TotalKeys, m.TotalDeletes,
				backupBytes(m)/(1<<20), float64(m.Index.Bytes)/(1<<20), time.Since(start).Round(time.Millisecond))
			bytes += backupBytes(m)
			parent = dir
		}
		b.ReportMetric(bytes/float64(b.N), "bytes/op")
		b.ReportMetric(bytes/float64(b.N)/backupBytes(fm), "of-full-bytes")
	})
}

// BenchmarkZipfChain builds the chain of the merge planner's measurement — a full backup and 20
// incrementals, each after zipfian updates of 1 % of the keys — and reports each strategy's binary
// merge cost against the lower bound Σ|A_i| (and Σ|A_i| + |∪A_i|). Run with -benchtime 1x; inspect
// the chain further with `shoal backup plan DIR/b20` (-backup-chain-dir DIR keeps it).
func BenchmarkZipfChain(b *testing.B) {
	for range b.N {
		s := newBenchStore(b)
		root := *benchChainDir
		if root == "" {
			root = b.TempDir()
		}
		// math/rand's Zipf needs s > 1: 1.01 is the closest to YCSB's 0.99; ranks are scattered over
		// the key space as YCSB's scrambled zipfian does.
		zipf := rand.NewZipf(s.rng, 1.01, 1, uint64(s.keys-1))
		pick := func() int {
			r := zipf.Uint64()
			return int(mergeplan.HashKey(binary.BigEndian.AppendUint64(nil, r)) % uint64(s.keys))
		}
		parent := ""
		var dir string
		for i := 0; i <= 20; i++ {
			if i > 0 {
				s.update(b, s.keys/100, pick)
			}
			dir = filepath.Join(root, fmt.Sprintf("b%02d", i))
			s.backup(b, dir, parent)
			parent = dir
		}
		c, err := backup.OpenChain(dir)
		must(b, err)
		sets, err := c.Verify(true)
		must(b, err)
		lb, rb := mergeplan.LowerBound(sets), mergeplan.RootBound(sets)
		b.Logf("chain of %d: lower bound %.0f keys, with the root %.0f", len(sets), lb, rb)
		for _, st := range mergeplan.Strategies {
			p, err := mergeplan.Make(sets, st, mergeplan.Options{Seed: 1})
			must(b, err)
			cost, _ := mergeplan.Cost(p, sets)
			b.Logf("%-20s cost %9.0f  cost/LB %.3f  cost/(LB+root) %.3f", st, cost, cost/lb, cost/rb)
			b.ReportMetric(cost/lb, st.String()+"/LB")
		}
	}
}
