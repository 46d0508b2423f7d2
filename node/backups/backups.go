// Package backups writes one node's backup from a checkpoint of its engine: every user range the node
// holds, either in full or — against a parent backup — only the keys put and deleted since the parent.
// An incremental finds them in the node's change journal (storage/journal.go: the user keys written
// under each epoch, one epoch per backup) when the parent was taken on this node and the journal still
// reaches back to it; it reads those keys only. Otherwise it diffs the checkpoint against the key
// index the parent implies (every key with a hash of its value), reading every key.
//
// Why a journal and not a Pebble sequence number or a raft index: Pebble zeroes the sequence numbers
// of keys compacted into its bottom level, so "written after sequence S" cannot be read back from the
// engine, and sequence numbers mean nothing on another node (the parent may come from a different
// replica after leaderships moved); raft logs are truncated, so the entries since a parent's applied
// index are usually gone. The raft applied index still serves as a shortcut: a range whose id,
// generation, span and applied index equal the parent's has not changed, and is not read at all.
//
// It owns the per-range choice (full, journal, diff, unchanged), reading the journal and the diff;
// package backup owns the format, node/background the task around it (catch-up, checkpoint, shedding,
// pacing). It never writes to the engine except the journal's epoch and trim, and never reads the
// parent's data files.
package backups

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"google.golang.org/protobuf/proto"

	"github.com/shoaldb/shoal/backup"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/storage"
	"github.com/shoaldb/shoal/storage/emudisk"
)

// Source is the checkpoint a backup reads.
type Source interface {
	Get(key []byte) ([]byte, bool, error)
	NewIter(lower, upper []byte) (*storage.Iterator, error)
}

// Parent is a backup an incremental can be taken against, checked by OpenParent.
type Parent struct {
	Dir      string
	Manifest *backup.Manifest
	crc      uint32
}

// OpenParent checks that dir holds a backup an incremental can be taken against: a readable manifest,
// a key index, and every file the manifest names present at its size. It reads no file whole: an
// incremental that reads the journal needs nothing of the parent but its manifest, and one that diffs
// checks the indexes it merges before it writes anything (backup.OpenImpliedIndex); `shoal backup
// verify` reads the whole chain.
func OpenParent(dir string) (*Parent, error) {
	m, err := backup.ReadManifest(dir)
	if err != nil {
		return nil, fmt.Errorf("parent backup: %w", err)
	}
	if m.Index == nil {
		return nil, fmt.Errorf("parent backup %s has no key index (written by an older version): take a full backup first", dir)
	}
	files := []backup.FileInfo{*m.Index}
	for _, e := range m.Ranges {
		files = append(files, backup.FileInfo{File: e.File, Bytes: e.Bytes})
	}
	for _, f := range files {
		st, err := os.Stat(filepath.Join(dir, f.File))
		if err != nil {
			return nil, fmt.Errorf("parent backup %s: %w", dir, err)
		}
		if uint64(st.Size()) != f.Bytes {
			return nil, fmt.Errorf("%w: parent backup %s: %s has %d bytes, its manifest says %d", backup.ErrCorrupt, dir, f.File, st.Size(), f.Bytes)
		}
	}
	crc, err := backup.ManifestCRC(dir)
	if err != nil {
		return nil, fmt.Errorf("parent backup: %w", err)
	}
	return &Parent{Dir: dir, Manifest: m, crc: crc}, nil
}

// Request is one backup to write.
type Request struct {
	Dir    string  // exists and is empty
	Parent *Parent // nil: a full backup
	Ranges []uint64
	// Lagging names the ranges whose replica could not confirm it had caught up with its leader.
	Lagging map[uint64]bool
	// Pace is called after every key read with the bytes read so far (keys and values): the reads are
	// what load the node, full or incremental. Its error stops the backup.
	Pace func(read uint64) error
	// OnRange, if set, is told of ranges backed up in a way worth a log line.
	OnRange func(rangeID uint64, what string)
	// Mark is the journal mark BeginEpoch returned before the checkpoint (nil: journaling is off).
	Mark *storage.JournalMark
	// Disk is the node's emulated device (storage.Engine.Device; nil: none). The checkpoint's reads
	// go through it already; the backup's files, which package backup writes with the OS's own
	// calls, are charged to it too, as the buffered writes and syncs they are, so that a backup
	// costs the node's disk what it writes and contends with the foreground's I/O there.
	Disk *emudisk.Device
}

// fileChunk is the buffer of package backup's file writers and readers: the size of the writes and
// reads it issues.
const fileChunk = 256 << 10

// meter charges the node's disk for one backup file as its writer's byte count grows.
type meter struct {
	s    *emudisk.Stream
	seen uint64
}

func newMeter(d *emudisk.Device) *meter { return &meter{s: d.WriteStream(fileChunk)} }

// to charges the bytes written since the last call, total being the file's bytes so far.
func (m *meter) to(total uint64) {
	m.s.Add(int64(total - m.seen))
	m.seen = total
}

// synced charges the file's last bytes and its sync, once it is closed.
func (m *meter) synced(total uint64) {
	m.to(total)
	m.s.Sync()
}

// rangeState is one range as the checkpoint holds it.
type rangeState struct {
	entry backup.RangeEntry
	lo    []byte
	hi    []byte
}

// Write writes the backup req describes from src into req.Dir: range files, the key index and the
// manifest (last). It returns the manifest.
func Write(ctx context.Context, src Source, req Request) (*backup.Manifest, error) {
	ranges, err := readRanges(src, req)
	if err != nil {
		return nil, err
	}
	w := &writer{src: src, req: req, idxOut: newMeter(req.Disk)}
	m := &backup.Manifest{}
	if req.Mark != nil {
		m.Journal = &backup.JournalMark{ID: req.Mark.ID, Epoch: req.Mark.Epoch}
	}
	create := backup.CreateIndex
	if p := req.Parent; p != nil {
		m.Parent = &backup.Parent{ID: p.Manifest.ID, Dir: p.Dir, ManifestCRC32C: p.crc}
		w.parentRanges = map[uint64]backup.RangeEntry{}
		for _, e := range p.Manifest.Ranges {
			w.parentRanges[e.RangeID] = e
		}
		w.cover = coverage(p.Manifest.Ranges)
		var why string
		if w.journal, why, err = openJournal(src, p, req.Mark); err != nil {
			return nil, err
		}
		if w.journal != nil {
			m.Method, create = "journal", backup.CreateDeltaIndex
		} else {
			m.Method, m.Fallback = "diff", why
			x, err := backup.OpenImpliedIndex(p.Dir)
			if err != nil {
				return nil, fmt.Errorf("parent backup %s: %w", p.Dir, err)
			}
			defer x.Close()
			chargeParentIndexes(req.Disk, p.Dir)
			w.parent = &cursor{r: x}
			w.parent.advance()
		}
	}
	if w.idx, err = create(req.Dir); err != nil {
		return nil, err
	}
	for _, rs := range ranges {
		e, err := w.writeRange(ctx, rs)
		if err != nil {
			w.idx.Abort()
			return nil, fmt.Errorf("backup: range %d: %w", rs.entry.RangeID, err)
		}
		m.Ranges = append(m.Ranges, e)
		m.TotalKeys += e.Keys
		m.TotalDeletes += e.Deletes
		m.TotalBytes += e.Bytes
	}
	if w.parent != nil && w.parent.err != nil {
		w.idx.Abort()
		return nil, fmt.Errorf("backup: parent index: %w", w.parent.err)
	}
	if m.Index, err = w.idx.Close(); err != nil {
		return nil, err
	}
	w.idxOut.synced(m.Index.Bytes)
	return m, nil
}

// chargeParentIndexes charges the node's disk for reading the key indexes a diff merges, the
// parent's and its chain's back to the newest full one: backup.OpenImpliedIndex reads each through
// once to check it, then again as the diff walks it. Both reads are charged when it opens them.
func chargeParentIndexes(d *emudisk.Device, dir string) {
	if d == nil {
		return
	}
	c, err := backup.OpenChain(dir)
	if err != nil {
		return // OpenImpliedIndex read it a moment ago; nothing to charge if it is gone
	}
	for _, l := range slices.Backward(c.Links) {
		idx := l.Manifest.Index
		if idx == nil {
			break
		}
		for range 2 {
			s := d.ReadStream(fileChunk)
			s.Add(int64(idx.Bytes))
			s.Flush()
		}
		if !idx.Delta {
			break
		}
	}
}

// readRanges reads the descriptors and applied indexes of req's ranges from the checkpoint, in key
// order (the order of the key index).
func readRanges(src Source, req Request) ([]rangeState, error) {
	var out []rangeState
	for _, id := range req.Ranges {
		dd, ok, err := src.Get(storage.RangeDescKey(id))
		if err != nil {
			return nil, fmt.Errorf("backup: range %d descriptor: %w", id, err)
		}
		if !ok {
			continue // created after the checkpoint
		}
		desc := &pb.RangeDescriptor{}
		if err := proto.Unmarshal(dd, desc); err != nil {
			return nil, fmt.Errorf("backup: range %d descriptor is corrupt: %w", id, err)
		}
		if desc.MergingInto != 0 && req.OnRange != nil {
			// Frozen for a merge: its span is still its own in this checkpoint; back it up as it stands.
			req.OnRange(id, "frozen for a merge, backed up as it stands")
		}
		e := backup.RangeEntry{RangeID: id, StartKey: desc.StartKey, EndKey: desc.EndKey, Generation: desc.Generation,
			CaughtUp: !req.Lagging[id]}
		if v, ok, err := src.Get(storage.AppliedStateKey(id)); err == nil && ok && len(v) == 8 {
			e.AppliedIndex = binary.BigEndian.Uint64(v)
		}
		lo, hi := storage.DataSpan(false, desc.StartKey, desc.EndKey)
		out = append(out, rangeState{entry: e, lo: lo, hi: hi})
	}
	sort.Slice(out, func(i, j int) bool { return bytes.Compare(out[i].entry.StartKey, out[j].entry.StartKey) < 0 })
	return out, nil
}

// writer carries one backup's state across its ranges.
type writer struct {
	src          Source
	req          Request
	idx          *backup.IndexWriter
	idxOut       *meter // the index's writes, charged to the node's disk
	out          *meter // the current range file's
	read         uint64 // bytes of keys and values read from the checkpoint
	parent       *cursor
	parentRanges map[uint64]backup.RangeEntry
	cover        []span
	journal      *journalReader // the journal since the parent's mark; nil: diff against parent
}

// writeRange writes one range: unchanged since the parent (index copied, nothing read), a diff
// against the parent's index, or in full.
func (w *writer) writeRange(ctx context.Context, rs rangeState) (backup.RangeEntry, error) {
	e := rs.entry
	incremental := w.req.Parent != nil
	delta := incremental && covered(w.cover, e.StartKey, e.EndKey)
	if incremental && !delta && w.req.OnRange != nil {
		w.req.OnRange(e.RangeID, "not held at the parent backup: written in full")
	}
	if delta && w.journal != nil && w.journal.replaced(e.StartKey, e.EndKey) && !unchanged(w.parentRanges[e.RangeID], e) {
		// A snapshot or a range deletion replaced keys the journal does not list one by one.
		delta = false
		if w.req.OnRange != nil {
			w.req.OnRange(e.RangeID, "replaced since the parent backup (a snapshot or a range deletion): written in full")
		}
	}
	create := backup.Create
	if delta {
		create = backup.CreateDelta
	}
	f, err := create(w.req.Dir, e.RangeID)
	if err != nil {
		return e, err
	}
	w.out = newMeter(w.req.Disk)
	switch {
	case delta && unchanged(w.parentRanges[e.RangeID], e):
		if w.journal == nil {
			err = w.copyIndex(e) // a delta index lists no unchanged key
		}
	case delta && w.journal != nil:
		err = w.readJournaled(ctx, rs, f)
	default:
		err = w.scan(ctx, rs, f, delta)
	}
	if err != nil {
		f.Abort()
		return e, err
	}
	if err := f.Close(&e); err != nil {
		return e, err
	}
	w.out.synced(e.Bytes)
	w.idxOut.to(w.idx.Bytes())
	return e, nil
}

// unchanged says whether the parent's entry p shows the same replica state as e: same range, same
// descriptor generation and span, same applied raft index — so the same data.
func unchanged(p, e backup.RangeEntry) bool {
	return p.RangeID == e.RangeID && p.Generation == e.Generation && p.AppliedIndex == e.AppliedIndex && e.AppliedIndex > 0 &&
		bytes.Equal(p.StartKey, e.StartKey) && bytes.Equal(p.EndKey, e.EndKey)
}

// copyIndex copies the parent's index records of e's span into the new index.
func (w *writer) copyIndex(e backup.RangeEntry) error {
	if err := w.parent.skipBefore(e.StartKey, nil); err != nil {
		return err
	}
	for w.parent.ok && e.Contains(w.parent.r.Key()) {
		if err := w.idx.Add(w.parent.r.Key(), w.parent.r.Hash()); err != nil {
			return err
		}
		w.parent.advance()
	}
	return w.parent.err
}

// pace charges the node's disk for what the key took in the files, then waits as the backup's rate
// asks (or only checks ctx without a rate).
func (w *writer) pace(ctx context.Context, f *backup.Writer) error {
	w.out.to(f.Bytes())
	w.idxOut.to(w.idx.Bytes())
	if w.req.Pace != nil {
		return w.req.Pace(w.read)
	}
	return ctx.Err()
}

// scan reads the range from the checkpoint into f and the index; for a delta, only keys whose value
// hash differs from the parent's, and deletions of the parent's keys the checkpoint no longer has.
func (w *writer) scan(ctx context.Context, rs rangeState, f *backup.Writer, delta bool) error {
	e := rs.entry
	if delta {
		if err := w.parent.skipBefore(e.StartKey, nil); err != nil {
			return err
		}
	}
	it, err := w.src.NewIter(rs.lo, rs.hi)
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		key, value := storage.StripDataPrefix(it.Key()), it.Value()
		w.read += uint64(len(key) + len(value))
		h := backup.ValueHash(value)
		if err := w.idx.Add(key, h); err != nil {
			return err
		}
		write := true
		if delta {
			if err := w.parent.skipBefore(key, f.Delete); err != nil {
				return err
			}
			if w.parent.ok && bytes.Equal(w.parent.r.Key(), key) {
				write = w.parent.r.Hash() != h
				w.parent.advance()
			}
		}
		if write {
			if err := f.Add(key, value); err != nil {
				return err
			}
		}
		if err := w.pace(ctx, f); err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("read: %w", err)
	}
	if delta {
		// The parent's keys left in the span were deleted since.
		for w.parent.ok && e.Contains(w.parent.r.Key()) {
			if err := f.Delete(w.parent.r.Key()); err != nil {
				return err
			}
			w.parent.advance()
		}
	}
	return w.parent.errIfAny()
}

// cursor walks the parent's key index forward.
type cursor struct {
	r   *backup.ImpliedIndex
	ok  bool
	err error
}

func (c *cursor) advance() {
	if c.err == nil {
		c.ok, c.err = c.r.Next(), c.r.Err()
		if c.err != nil {
			c.ok = false
		}
	}
}

func (c *cursor) errIfAny() error {
	if c == nil {
		return nil
	}
	return c.err
}

// skipBefore moves past the parent's keys below key, passing each to fn (nil: dropped silently).
func (c *cursor) skipBefore(key []byte, fn func([]byte) error) error {
	for c.ok && bytes.Compare(c.r.Key(), key) < 0 {
		if fn != nil {
			if err := fn(c.r.Key()); err != nil {
				return err
			}
		}
		c.advance()
	}
	return c.err
}

// span is a contiguous stretch of keys the parent held (end nil: to the end of the key space).
type span struct{ start, end []byte }

// coverage merges the parent's ranges into contiguous spans.
func coverage(entries []backup.RangeEntry) []span {
	es := append([]backup.RangeEntry(nil), entries...)
	sort.Slice(es, func(i, j int) bool { return bytes.Compare(es[i].StartKey, es[j].StartKey) < 0 })
	var out []span
	for _, e := range es {
		if n := len(out); n > 0 && out[n-1].end != nil && bytes.Equal(out[n-1].end, e.StartKey) {
			out[n-1].end = e.EndKey
			if len(e.EndKey) == 0 {
				out[n-1].end = nil
			}
			continue
		}
		s := span{start: e.StartKey, end: e.EndKey}
		if len(e.EndKey) == 0 {
			s.end = nil
		}
		out = append(out, s)
	}
	return out
}

// covered says whether [start, end) lies inside one of the spans.
func covered(spans []span, start, end []byte) bool {
	for _, s := range spans {
		if bytes.Compare(start, s.start) < 0 {
			continue
		}
		if s.end == nil || (len(end) > 0 && bytes.Compare(end, s.end) <= 0) {
			return true
		}
	}
	return false
}
