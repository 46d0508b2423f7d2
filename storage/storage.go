// Package storage owns a node's single Pebble engine: the key layout of its keyspaces (store identity,
// raft state per range, meta-range data, user data, the change journal incremental backups read),
// write batches, iterators, snapshots, the data directory lock and engine statistics.
//
// It must never interpret raft or range semantics: it stores bytes under keys that the replica and kv
// layers build with the helpers in keys.go.
package storage

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/sstable/block"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/shoaldb/shoal/storage/emudisk"
)

// ErrNoStore is returned by Open when the directory holds no Shoal store and CreateIfMissing is false.
var ErrNoStore = errors.New("no shoal store")

// Options configures an Engine. The zero value is valid: defaults are applied by Open.
type Options struct {
	// CreateIfMissing creates a new, empty store. Without it a missing store is an error: a node must
	// never silently re-initialize (and so forget acknowledged writes).
	CreateIfMissing bool
	// CacheBytes is the size of the block cache (default 128 MiB).
	CacheBytes int64
	// MemTableBytes is the size of one memtable (default 32 MiB).
	MemTableBytes uint64
	// LBaseMaxBytes is the target size of the LSM's base level (0: Pebble's 64 MiB). A store smaller
	// than it keeps all its data in the bottom level, and then every compaction out of L0 rewrites
	// the bottom-level tables its span overlaps: for writes spread over the key space, most of them.
	// A smaller base level gives a small store more levels; in the one run measured (1 MiB,
	// Pebble's 2 MiB tables), the compactions into the bottom level still spanned every key; with
	// small tables too (TargetFileBytes) they span a slice of it.
	LBaseMaxBytes int64
	// TargetFileBytes is the target size of an L0 table (0: Pebble's 2 MiB); each level from the
	// base level down targets twice the one above it, and flushes split L0 into sublevels of about
	// twice this. With LBaseMaxBytes it scales the LSM's shape to a small store: a store of a few
	// tables a level has every compaction span its whole key space, so each one's end leaves the
	// node's block cache with none of its blocks; with tables a fraction of a level, a compaction
	// below the base level rewrites only the key span of the table it picked.
	TargetFileBytes int64
	// Profile names an engine preset for a workload (read, write, readwrite, scan; default or empty:
	// none): it sizes the block cache and the memtables from MemoryBytes and sets BlockBytes, each
	// unless set explicitly (profile.go).
	Profile string
	// MemoryBytes is the engine's memory budget a profile divides (0: DefaultMemoryBytes).
	MemoryBytes int64
	// BlockBytes is the target size of a data block (0: Pebble's 4 KiB, or the profile's).
	BlockBytes int
	// FS overrides the filesystem (tests, fault injection, emulated devices). Default: the OS.
	FS vfs.FS `json:"-"`
	// Device, if set, puts the engine's files on an emulated device of its own (page-cache bypass, a
	// bandwidth/IOPS budget, added latency; see package emudisk) on top of FS. Nil: off.
	Device *emudisk.Options
}

// Defaults of Options.
const (
	DefaultCacheBytes    = 128 << 20
	DefaultMemTableBytes = 32 << 20
)

// WithDefaults returns o with the cache and memtable sizes at their defaults when zero.
func (o Options) WithDefaults() Options {
	o = o.withProfile()
	if o.CacheBytes == 0 {
		o.CacheBytes = DefaultCacheBytes
	}
	if o.MemTableBytes == 0 {
		o.MemTableBytes = DefaultMemTableBytes
	}
	return o
}

// Validate reports every setting that cannot work.
func (o Options) Validate() error {
	var errs []error
	if o.CacheBytes < 0 {
		errs = append(errs, fmt.Errorf("storage: cache size must not be negative (got %d)", o.CacheBytes))
	}
	if o.TargetFileBytes < 0 {
		errs = append(errs, fmt.Errorf("storage: target file size %d must not be negative (0: the default)", o.TargetFileBytes))
	}
	if o.LBaseMaxBytes < 0 {
		errs = append(errs, fmt.Errorf("storage: base level size %d must not be negative (0: the default)", o.LBaseMaxBytes))
	}
	if err := validateProfile(o); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// CompactedBetween reports whether the engine compacted between two reads of its Stats: a
// compaction ran at either read, or one ended between them. Pebble's debt estimate
// (CompactionDebtBytes) is no test of being done: with a small base level it can stay above zero
// while no compaction is worth picking, and nothing runs.
func CompactedBetween(prev, cur Stats) bool {
	return prev.CompactionsRunning > 0 || cur.CompactionsRunning > 0 || cur.CompactionsDone != prev.CompactionsDone
}

// Stats are the engine counters reported in heartbeats and metrics.
type Stats struct {
	BlockCacheHits      int64
	BlockCacheMisses    int64
	CompactionsRunning  int64
	CompactionsDone     int64
	FlushesDone         int64
	WriteStalls         int64
	L0Files             int64
	MemtableBytes       uint64
	DiskBytes           uint64
	CompactionDebtBytes uint64
	// CompactedBytes are the bytes compactions have written since the engine opened, counted when
	// each ends; CompactingBytes the bytes the compactions running have written so far. Their sum
	// grows as compactions write (a long compaction's bytes fall in the seconds that wrote them).
	CompactedBytes  uint64
	CompactingBytes int64
	// ServedBlockBytes is the bytes of the blocks the engine's reads loaded (Pebble's per-category
	// stats: index, filter and point data blocks), ServedBlockBytesInCache the part found in the block
	// cache, both without the streams' reads (NewStreamIter) and Pebble's compactions': their ratio is
	// the cache's hit ratio for the node's own reads (clients', replays', raft's), which neither a
	// range streamed out of the engine nor a compaction counts into.
	ServedBlockBytes        uint64
	ServedBlockBytesInCache uint64
	// StreamBlockBytes is the bytes of the blocks the streams' reads loaded.
	StreamBlockBytes uint64
	// JobBlockBytes and JobBlockBytesInCache are the part of ServedBlockBytes and
	// ServedBlockBytesInCache that the scan jobs' reads (NewIterFor with ReadJobs: their runs and
	// prefetches) loaded: the served bytes less them are the foreground's alone.
	JobBlockBytes        uint64
	JobBlockBytesInCache uint64
	// IOPrioErrors counts the failed calls that put a scan job's reading thread in the kernel's idle
	// I/O class or back (IterateFor; best-effort: the read goes on).
	IOPrioErrors int64
	// BlockCacheCapacity is the block cache's room for blocks: its size less what the memtables
	// reserve in it. Pebble charges every memtable's arena to the block cache — the one filling, those
	// flushing, and the one it keeps for reuse — so a cache of 4 MiB beside 1-MiB memtables holds
	// about 2 MiB of blocks; a hit ratio predicted from the nominal size comes out high.
	BlockCacheCapacity uint64
}

// CompactionWritten is the bytes the engine's compactions have written, those running included: a
// compaction of tens of megabytes runs for seconds, and counted only when it ends its bytes would
// fall in one short window at many times the rate they were written at and leave the others at none.
func (st Stats) CompactionWritten() float64 {
	return float64(st.CompactedBytes) + float64(st.CompactingBytes)
}

// Engine is one node's storage engine.
type Engine struct {
	dir    string
	db     *pebble.DB
	lock   *os.File
	device *emudisk.Device // nil when Options.Device was nil
	disk   diskMeter       // DiskUtilization

	fs       vfs.FS // what the engine's files live on (device-wrapped when emulated)
	po       *pebble.Options
	profile  string // Options.Profile
	listener atomic.Pointer[BackgroundListener]
	ingestN  atomic.Uint64 // names the sstables IngestSpan writes
	// ingests counts IngestSpan calls; ingestedL0Bytes the bytes Pebble could not place below L0.
	ingests, ingestedBytes, ingestedL0Bytes atomic.Int64

	closed             atomic.Bool
	compactionsRunning atomic.Int64
	compactionsDone    atomic.Int64
	flushesDone        atomic.Int64
	writeStalls        atomic.Int64
	// ioprioErrors counts the failed calls that set or restored a thread's kernel I/O class (IterateFor).
	ioprioErrors atomic.Int64
	// lsmChanges counts the flushes, compactions and ingests that ended: the tables changed.
	lsmChanges atomic.Int64
	sizes      sizeMemo // ApproximateBytes' estimates since the last change of the tables
	offsets    sizeMemo // Offset's estimates, apart: sampled keys would crowd the ranges' sizes out

	compLog compactionLog

	journal journal // the change journal incremental backups read (journal.go)
}

const markerFile = "SHOAL_STORE"

// Open opens (or with CreateIfMissing creates) the store in dir. It takes an exclusive lock on the
// directory: a second process on the same directory is refused.
func Open(dir string, opts Options) (*Engine, error) {
	opts = opts.WithDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	marker := filepath.Join(dir, markerFile)
	exists, err := prepareDir(dir, marker, opts.CreateIfMissing)
	if err != nil {
		return nil, err
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	e := &Engine{dir: dir, lock: lock}
	fs := opts.FS
	if opts.Device != nil {
		if fs == nil {
			fs = vfs.Default
		}
		e.device = emudisk.NewDevice(*opts.Device, nil)
		fs = e.device.Wrap(fs)
	}
	if fs == nil {
		fs = vfs.Default
	}
	e.fs = fs
	if e.device == nil {
		e.disk.ticks = blockDeviceTicks(dir)
	}
	cache := pebble.NewCache(opts.CacheBytes)
	defer cache.Unref()
	po := pebbleOptions(opts, cache, fs, exists)
	po.EventListener = e.eventListener()
	db, err := pebble.Open(dir, po)
	if err != nil {
		lock.Close()
		if exists {
			return nil, fmt.Errorf("store in %s cannot be opened (corrupt or missing files?): %w; refusing to start, nothing was changed", dir, err)
		}
		return nil, fmt.Errorf("create store in %s: %w", dir, err)
	}
	e.db, e.po, e.profile = db, po.Clone(), opts.Profile
	e.po.EnsureDefaults() // for MakeWriterOptions (IngestSpan)
	if err := e.loadJournal(); err != nil {
		db.Close()
		lock.Close()
		return nil, fmt.Errorf("store in %s: %w", dir, err)
	}
	if !exists {
		if err := writeMarker(marker); err != nil {
			db.Close()
			lock.Close()
			return nil, err
		}
	}
	return e, nil
}

// prepareDir says whether dir holds a store (its marker file exists); when it does not, it refuses
// a directory with other files in it, and creates dir if create is set.
func prepareDir(dir, marker string, create bool) (exists bool, err error) {
	if _, err := os.Stat(marker); err == nil {
		return true, nil
	}
	if !create {
		if entries, _ := os.ReadDir(dir); len(entries) > 0 {
			return false, fmt.Errorf("data directory %s is not empty but has no %s marker: it is not a Shoal store or it is corrupt; refusing to start (move it away to start fresh)", dir, markerFile)
		}
		return false, fmt.Errorf("%w in %s: start with --bootstrap (new cluster) or --join (an existing cluster, or a new one that `shoal init` creates) to create one", ErrNoStore, dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, fmt.Errorf("create data directory %s: %w", dir, err)
	}
	return false, nil
}

// pebbleOptions are the engine's Pebble options for opts, without the event listener.
func pebbleOptions(opts Options, cache *pebble.Cache, fs vfs.FS, exists bool) *pebble.Options {
	po := &pebble.Options{
		Cache:                       cache,
		MemTableSize:                opts.MemTableBytes,
		L0CompactionThreshold:       4,
		L0StopWritesThreshold:       24,
		CompactionConcurrencyRange:  func() (int, int) { return 1, 2 },
		ErrorIfNotExists:            exists,
		FS:                          fs,
		Logger:                      quietLogger{},
		FormatMajorVersion:          pebble.FormatNewest,
		MemTableStopWritesThreshold: 4,
		LBaseMaxBytes:               opts.LBaseMaxBytes,
	}
	// Pebble fills the levels below from the first (doubling) and FlushSplitBytes from it (2×).
	po.TargetFileSizes[0] = opts.TargetFileBytes
	// Bloom filters on every level: a point read (a GET, a raft-log lookup) then skips the tables
	// that cannot hold its key, instead of searching each L0 file's index.
	for i := range po.Levels {
		po.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		if opts.BlockBytes > 0 {
			po.Levels[i].BlockSize = opts.BlockBytes
		}
	}
	return po
}

func writeMarker(path string) error {
	b, _ := json.Marshal(map[string]int{"format": 1})
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("write store marker: %w", err)
	}
	f, err := os.Open(tmp)
	if err == nil {
		f.Sync()
		f.Close()
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write store marker: %w", err)
	}
	return nil
}

// lockFile is the file in a data directory whose flock marks the directory in use; it holds the PID
// of the process holding the lock, so that a refused start can name it.
const lockFile = "shoal.lock"

func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, lockFile)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock data directory %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if pid := lockHolder(path); pid > 0 {
			return nil, fmt.Errorf("data directory %s is in use by another shoal process, PID %d (it holds %s): stop that process first (kill %d), or use another --data-dir", dir, pid, path, pid)
		}
		return nil, fmt.Errorf("data directory %s is in use by another shoal process (lock held on %s): stop it first or use another --data-dir", dir, path)
	}
	// The PID is a message for people, not part of the lock: failing to write it is harmless.
	if f.Truncate(0) == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// lockHolder reads the PID the holder of the lock file at path wrote (0 when unknown: the holder has
// not written it yet, or is older than the PID in the file).
func lockHolder(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// Dir is the engine's data directory.
func (e *Engine) Dir() string { return e.dir }

// Profile is the engine profile the engine was opened with (ProfileDefault when none).
func (e *Engine) Profile() string {
	if e.profile == "" {
		return ProfileDefault
	}
	return e.profile
}

// DB exposes the underlying Pebble database for the few callers that need engine-specific features
// (checkpoints, manual compaction, metrics).
func (e *Engine) DB() *pebble.DB { return e.db }

// Close flushes nothing extra (every acknowledged write was synced) and releases the directory lock.
// It is idempotent.
func (e *Engine) Close() error {
	if !e.closed.CompareAndSwap(false, true) {
		return nil
	}
	err := e.db.Close()
	if e.lock != nil {
		e.lock.Close()
	}
	return err
}

// Get returns a copy of the value at key, or found=false.
func (e *Engine) Get(key []byte) (value []byte, found bool, err error) {
	return getFrom(e.db, key)
}

type getter interface {
	Get(key []byte) ([]byte, io.Closer, error)
}

func getFrom(g getter, key []byte) ([]byte, bool, error) {
	v, closer, err := g.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("engine get %q: %w", key, err)
	}
	out := append([]byte(nil), v...)
	closer.Close()
	return out, true, nil
}

// Batch is an atomic set of writes.
type Batch struct {
	b         *pebble.Batch
	e         *Engine
	rangeDels bool // the batch holds a range deletion (the journal records its span)
	// user: the batch writes a user key or deletes a span. Only such a batch is journaled and ordered
	// against a backup's epoch bump; the rest (raft log appends above all) commit without the lock.
	user bool
}

// NewBatch starts a write-only batch.
func (e *Engine) NewBatch() *Batch { return &Batch{b: e.db.NewBatch(), e: e} }

// NewIndexedBatch starts a batch whose Get sees its own writes over the engine's state.
func (e *Engine) NewIndexedBatch() *Batch { return &Batch{b: e.db.NewIndexedBatch(), e: e} }

// Get reads key through an indexed batch: the batch's own writes first, then the engine.
func (b *Batch) Get(key []byte) ([]byte, bool, error) { return getFrom(b.b, key) }

// Set writes key=value in the batch.
func (b *Batch) Set(key, value []byte) error {
	b.user = b.user || isUserKey(key)
	return b.b.Set(key, value, nil)
}

// Delete deletes key in the batch.
func (b *Batch) Delete(key []byte) error {
	b.user = b.user || isUserKey(key)
	return b.b.Delete(key, nil)
}

func isUserKey(key []byte) bool { return len(key) > 0 && key[0] == prefixUser }

// DeleteRange deletes [start, end) in the batch.
func (b *Batch) DeleteRange(start, end []byte) error {
	b.rangeDels, b.user = true, true
	return b.b.DeleteRange(start, end, nil)
}

// Empty reports whether the batch has no writes.
func (b *Batch) Empty() bool { return b.b.Empty() }

// Len is the batch's encoded size in bytes.
func (b *Batch) Len() int { return b.b.Len() }

// Commit applies the batch; with sync it is durable (fsync'd WAL) when Commit returns. Writes to user
// keys are journaled in the same batch once the node has taken a backup (journal.go).
func (b *Batch) Commit(sync bool) error {
	o := pebble.NoSync
	if sync {
		o = pebble.Sync
	}
	if err := b.e.commit(b, o); err != nil {
		return fmt.Errorf("engine commit: %w", err)
	}
	return nil
}

// Close releases the batch.
func (b *Batch) Close() { b.b.Close() }

// Reader is a consistent read view: the live engine or a snapshot.
type Reader interface {
	Get(key []byte) (value []byte, found bool, err error)
	NewIter(lower, upper []byte) (*Iterator, error)
}

// Iterator walks keys in [lower, upper).
type Iterator struct{ it *pebble.Iterator }

// NewIter returns an iterator over [lower, upper) of the live engine.
func (e *Engine) NewIter(lower, upper []byte) (*Iterator, error) {
	return e.NewIterFor(lower, upper, ReadForeground)
}

// ReadSource says whom a read serves, so that Stats can tell the scan jobs' block reads from the
// rest of the node's own.
type ReadSource uint8

const (
	// ReadForeground is every read but the scan jobs': clients', replays', raft's.
	ReadForeground ReadSource = iota
	// ReadJobs is a scan job's run (and its scheduler's reads): counted apart, the foreground's
	// class at the disk.
	ReadJobs
	// ReadPrefetch is a scan job's prefetch: counted with the jobs' reads, and read in the disk's
	// idle class (IterateFor).
	ReadPrefetch
)

// jobs reports whether src's block reads count as the scan jobs'.
func (src ReadSource) jobs() bool { return src == ReadJobs || src == ReadPrefetch }

// NewIterFor is NewIter for reads of src: a scan job's iterator (ReadJobs, ReadPrefetch) loads its
// blocks under a category of its own (still counted in ServedBlockBytes, and apart in
// JobBlockBytes). Its reads are the foreground's to the disk: a prefetch reads through IterateFor,
// which also puts them in the idle I/O class.
func (e *Engine) NewIterFor(lower, upper []byte, src ReadSource) (*Iterator, error) {
	o := &pebble.IterOptions{LowerBound: lower, UpperBound: upper}
	if src.jobs() {
		o.Category = jobsCategory
	}
	it, err := e.db.NewIter(o)
	if err != nil {
		return nil, fmt.Errorf("engine iterator: %w", err)
	}
	return &Iterator{it: it}, nil
}

// First positions at the first key; reports validity.
func (i *Iterator) First() bool { return i.it.First() }

// Last positions at the last key; reports validity.
func (i *Iterator) Last() bool { return i.it.Last() }

// Next moves forward.
func (i *Iterator) Next() bool { return i.it.Next() }

// Prev moves backward.
func (i *Iterator) Prev() bool { return i.it.Prev() }

// SeekGE positions at the first key >= k.
func (i *Iterator) SeekGE(k []byte) bool { return i.it.SeekGE(k) }

// SeekLT positions at the last key < k.
func (i *Iterator) SeekLT(k []byte) bool { return i.it.SeekLT(k) }

// Valid reports whether the iterator is positioned at a key.
func (i *Iterator) Valid() bool { return i.it.Valid() }

// Key is the current key; valid until the iterator moves.
func (i *Iterator) Key() []byte { return i.it.Key() }

// Value is the current value; valid until the iterator moves.
func (i *Iterator) Value() []byte {
	v, _ := i.it.ValueAndErr()
	return v
}

// Error is the iterator's accumulated error.
func (i *Iterator) Error() error { return i.it.Error() }

// Close releases the iterator.
func (i *Iterator) Close() error { return i.it.Close() }

// Snapshot is a consistent point-in-time view of the engine.
type Snapshot struct{ s *pebble.Snapshot }

// NewSnapshot captures the engine's current state.
func (e *Engine) NewSnapshot() *Snapshot { return &Snapshot{s: e.db.NewSnapshot()} }

// Get reads key from the snapshot.
func (s *Snapshot) Get(key []byte) ([]byte, bool, error) { return getFrom(s.s, key) }

// NewIter iterates [lower, upper) of the snapshot.
func (s *Snapshot) NewIter(lower, upper []byte) (*Iterator, error) {
	it, err := s.s.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, fmt.Errorf("snapshot iterator: %w", err)
	}
	return &Iterator{it: it}, nil
}

// NewStreamIter iterates [lower, upper) of the snapshot to stream it out (a raft snapshot): its
// block reads count as the stream's in Stats, not as the node's own reads.
func (s *Snapshot) NewStreamIter(lower, upper []byte) (*Iterator, error) {
	it, err := s.s.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper, Category: streamCategory})
	if err != nil {
		return nil, fmt.Errorf("snapshot iterator: %w", err)
	}
	return &Iterator{it: it}, nil
}

// Close releases the snapshot.
func (s *Snapshot) Close() error { return s.s.Close() }

// pebbleBackgroundCategory names Pebble's own categories of background reads (compactions, and an
// ingest's overlap checks), which are not the node's reads either.
var pebbleBackgroundCategory = map[string]bool{"pebble-compaction": true, "pebble-ingest": true}

// streamCategory labels the block reads of iterators that stream a range out of the engine in
// Pebble's per-category stats.
var streamCategory = block.RegisterCategory("stream", block.NonLatencySensitiveQoSLevel)

// jobsCategory labels the block reads of the scan jobs' iterators (ReadJobs, ReadPrefetch).
var jobsCategory = block.RegisterCategory("jobs", block.NonLatencySensitiveQoSLevel)

// Stats reads the engine's counters.
func (e *Engine) Stats() Stats {
	m := e.db.Metrics()
	var disk, compacted uint64
	for _, l := range m.Levels {
		disk += uint64(l.TablesSize)
		compacted += l.TableBytesCompacted + l.BlobBytesCompacted
	}
	st := Stats{
		BlockCacheHits:      m.BlockCache.Hits,
		BlockCacheMisses:    m.BlockCache.Misses,
		CompactionsRunning:  e.compactionsRunning.Load(),
		CompactionsDone:     e.compactionsDone.Load(),
		FlushesDone:         e.flushesDone.Load(),
		WriteStalls:         e.writeStalls.Load(),
		IOPrioErrors:        e.ioprioErrors.Load(),
		L0Files:             m.Levels[0].TablesCount,
		MemtableBytes:       m.MemTable.Size,
		DiskBytes:           disk + m.WAL.PhysicalSize,
		CompactionDebtBytes: m.Compact.EstimatedDebt,
		CompactedBytes:      compacted,
		CompactingBytes:     m.Compact.InProgressBytes,
		BlockCacheCapacity:  blockRoom(e.po.Cache.MaxSize(), m.MemTable.Size+m.MemTable.ZombieSize),
	}
	for _, c := range m.CategoryStats {
		switch {
		case c.Category == streamCategory:
			st.StreamBlockBytes += c.CategoryStats.BlockBytes
		case !pebbleBackgroundCategory[c.Category.String()]:
			st.ServedBlockBytes += c.CategoryStats.BlockBytes
			st.ServedBlockBytesInCache += c.CategoryStats.BlockBytesInCache
			if c.Category == jobsCategory {
				st.JobBlockBytes += c.CategoryStats.BlockBytes
				st.JobBlockBytesInCache += c.CategoryStats.BlockBytesInCache
			}
		}
	}
	return st
}

// BlockRoomBytes is what of the block cache is left for blocks once Pebble has charged the
// memtables to it — the one filling and the one flushing or kept for reuse — in steady state:
// Stats.BlockCacheCapacity measures it. A cache of two memtables or less holds no blocks at all.
func (o Options) BlockRoomBytes() int64 {
	o = o.WithDefaults()
	return max(o.CacheBytes-memTablesCharged(o.MemTableBytes), 0)
}

// CacheBytesFor is the block cache that leaves room bytes for blocks beside memtables of memTable
// bytes (the inverse of BlockRoomBytes).
func CacheBytesFor(room int64, memTable uint64) int64 { return room + memTablesCharged(memTable) }

// memTablesCharged is what Pebble charges to the block cache for memtables of memTable bytes: the
// one filling and the one flushing or kept for reuse.
func memTablesCharged(memTable uint64) int64 { return 2 * int64(memTable) }

// blockRoom is a cache of size bytes less reserved bytes, never below zero.
func blockRoom(size int64, reserved uint64) uint64 {
	if size <= 0 || reserved >= uint64(size) {
		return 0
	}
	return uint64(size) - reserved
}

// DeviceStats are the counters of the engine's emulated device (zero when it has none).
func (e *Engine) DeviceStats() emudisk.Stats {
	if e.device == nil {
		return emudisk.Stats{}
	}
	return e.device.Stats()
}

// Device is the engine's emulated device, nil without one: I/O the node does beside the engine, on
// files of its own (a backup's), is charged to it (emudisk.Stream).
func (e *Engine) Device() *emudisk.Device { return e.device }

// SetDeviceUnthrottled lifts (true) or restores the budget of the engine's emulated device
// (emudisk.Device.SetUnthrottled); a no-op without one.
func (e *Engine) SetDeviceUnthrottled(on bool) {
	if e.device != nil {
		e.device.SetUnthrottled(on)
	}
}

// ApproximateBytes estimates the on-disk size of [start, end): its tables' bytes, remembered until
// the tables change (sizeMemo).
func (e *Engine) ApproximateBytes(start, end []byte) uint64 {
	version, now := e.lsmChanges.Load(), time.Now()
	if n, ok := e.sizes.get(version, start, end, now); ok {
		return n
	}
	n, err := e.db.EstimateDiskUsage(start, end)
	if err != nil {
		return 0
	}
	e.sizes.put(version, start, end, n, now)
	return n
}

func (e *Engine) eventListener() *pebble.EventListener {
	return &pebble.EventListener{
		CompactionBegin: func(info pebble.CompactionInfo) {
			e.compactionsRunning.Add(1)
			if l := e.listener.Load(); l != nil {
				(*l).CompactionBegin(info.JobID, inputBytes(info), info.Reason)
			}
		},
		CompactionEnd: func(info pebble.CompactionInfo) {
			e.compactionsRunning.Add(-1)
			e.compactionsDone.Add(1)
			e.lsmChanges.Add(1)
			e.compLog.add(info)
			if l := e.listener.Load(); l != nil {
				(*l).CompactionEnd(info.JobID)
			}
		},
		FlushBegin: func(info pebble.FlushInfo) {
			if l := e.listener.Load(); l != nil {
				(*l).FlushBegin(info.JobID, info.InputBytes)
			}
		},
		FlushEnd: func(info pebble.FlushInfo) {
			e.flushesDone.Add(1)
			e.lsmChanges.Add(1)
			if l := e.listener.Load(); l != nil {
				(*l).FlushEnd(info.JobID)
			}
		},
		WriteStallBegin: func(pebble.WriteStallBeginInfo) { e.writeStalls.Add(1) },
		TableIngested:   func(pebble.TableIngestInfo) { e.lsmChanges.Add(1) },
		DownloadEnd:     func(pebble.DownloadInfo) { e.lsmChanges.Add(1) },
	}
}

// BackgroundListener hears about the engine's background work as it begins and ends (the node's
// background-task tracker, package bgtask, through the node). Calls come from Pebble's goroutines
// and must not block.
type BackgroundListener interface {
	// CompactionBegin gives the size of the compaction's input tables and its reason (Pebble's,
	// as CompactionRecord.Reason).
	CompactionBegin(job int, inputBytes uint64, reason string)
	CompactionEnd(job int)
	FlushBegin(job int, bytes uint64)
	FlushEnd(job int)
}

// SetBackgroundListener installs l (nil removes it).
func (e *Engine) SetBackgroundListener(l BackgroundListener) {
	if l == nil {
		e.listener.Store(nil)
		return
	}
	e.listener.Store(&l)
}

// CompactAll compacts the whole key space down to the bottom level: a manual full compaction, which
// rewrites every table (heavy: the node should not lead while it runs). It is not parallelized: a
// node's full compaction should take one core, not all of the host's.
func (e *Engine) CompactAll(ctx context.Context) error {
	if err := e.db.Compact(ctx, []byte{0x00}, []byte{0xff}, false); err != nil {
		return fmt.Errorf("full compaction: %w", err)
	}
	return nil
}

// BottomTableStarts are the first keys, strictly inside [lo, hi) and in order, of the tables of
// the lowest level holding any of the span: the places a manual compaction of the span can be cut
// at, each piece rewriting whole tables of that level (CompactSpan takes whole tables).
func (e *Engine) BottomTableStarts(lo, hi []byte) ([][]byte, error) {
	levels, err := e.db.SSTables(pebble.WithKeyRangeFilter(lo, hi))
	if err != nil {
		return nil, fmt.Errorf("tables of [%q, %q): %w", lo, hi, err)
	}
	var cuts [][]byte
	for l := len(levels) - 1; l >= 0; l-- {
		if len(levels[l]) == 0 {
			continue
		}
		for _, t := range levels[l] {
			if k := t.Smallest.UserKey; bytes.Compare(k, lo) > 0 && bytes.Compare(k, hi) < 0 {
				cuts = append(cuts, slices.Clone(k))
			}
		}
		break
	}
	slices.SortFunc(cuts, bytes.Compare)
	return slices.CompactFunc(cuts, bytes.Equal), nil
}

// CompactSpan compacts the engine keys [lo, hi) down to the bottom level, like CompactAll for one
// span (a range's data: DataSpan). Pebble rewrites only the tables that overlap newer data there.
func (e *Engine) CompactSpan(ctx context.Context, lo, hi []byte) error {
	if err := e.db.Compact(ctx, lo, hi, false); err != nil {
		return fmt.Errorf("compact [%q, %q): %w", lo, hi, err)
	}
	return nil
}

// Checkpoint writes a consistent point-in-time copy of the engine into dir (which must not exist),
// hard-linking tables where it can; the WAL is flushed first so the copy holds every committed write.
func (e *Engine) Checkpoint(dir string) error {
	if err := e.db.Checkpoint(dir, pebble.WithFlushedWAL()); err != nil {
		return fmt.Errorf("checkpoint into %s: %w", dir, err)
	}
	return nil
}

// OpenCheckpoint opens a checkpoint taken by Checkpoint read-only, on the engine's own filesystem
// (so reading it costs the node's emulated device what reading its data costs), with a small block
// cache of its own so that reading it does not evict the node's working set from the main cache.
func (e *Engine) OpenCheckpoint(dir string) (*Checkpoint, error) {
	cache := pebble.NewCache(8 << 20)
	defer cache.Unref()
	db, err := pebble.Open(dir, &pebble.Options{ReadOnly: true, FS: e.fs, Cache: cache, Logger: quietLogger{},
		ErrorIfNotExists: true})
	if err != nil {
		return nil, fmt.Errorf("open checkpoint %s: %w", dir, err)
	}
	return &Checkpoint{db: db, fs: e.fs, dir: dir}, nil
}

// Checkpoint is a read-only view of a checkpoint directory.
type Checkpoint struct {
	db  *pebble.DB
	fs  vfs.FS
	dir string
}

// NewIter iterates [lower, upper) of the checkpoint.
func (c *Checkpoint) NewIter(lower, upper []byte) (*Iterator, error) {
	it, err := c.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, err
	}
	return &Iterator{it: it}, nil
}

// Get reads one key of the checkpoint.
func (c *Checkpoint) Get(key []byte) ([]byte, bool, error) { return getFrom(c.db, key) }

// Close closes the checkpoint and, with remove, deletes its directory.
func (c *Checkpoint) Close(remove bool) error {
	err := c.db.Close()
	if remove {
		if rerr := c.fs.RemoveAll(c.dir); rerr != nil && err == nil {
			err = rerr
		}
	}
	return err
}

type quietLogger struct{}

// errorLog rate-limits Pebble's error lines: under a disk fault Pebble retries failed flushes and
// compactions in a loop and reports each failure, thousands of lines a second for as long as the
// fault lasts. One line a second gets through, with the count of those suppressed since.
var errorLog struct {
	mu         sync.Mutex
	out        io.Writer // nil: os.Stderr
	last       time.Time
	suppressed int
}

func (quietLogger) Infof(string, ...interface{}) {}
func (quietLogger) Errorf(format string, args ...interface{}) {
	errorLog.mu.Lock()
	defer errorLog.mu.Unlock()
	out := errorLog.out
	if out == nil {
		out = os.Stderr
	}
	if now := time.Now(); now.Sub(errorLog.last) >= time.Second {
		if errorLog.suppressed > 0 {
			fmt.Fprintf(out, "pebble: (%d similar lines suppressed)\n", errorLog.suppressed)
		}
		errorLog.last, errorLog.suppressed = now, 0
		fmt.Fprintf(out, "pebble: "+format+"\n", args...)
		return
	}
	errorLog.suppressed++
}
func (quietLogger) Fatalf(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "FATAL: storage engine failure (failing or full disk?): the node exits so that it acknowledges nothing that is not on disk; fix the cause and restart it: "+format+"\n", args...)
	os.Exit(2)
}
