package backups

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"

	"github.com/shoaldb/shoal/backup"
	"github.com/shoaldb/shoal/storage"
)

// Config configures a node's backups; the zero value is the default.
type Config struct {
	// NoJournal keeps the node from journaling its writes for incremental backups: every incremental
	// then diffs the whole store against its parent, and the write path writes no journal keys. Set on
	// a node with a journal, it deletes the journal at the next backup.
	NoJournal bool
}

// BeginEpoch closes the journal's epoch for a backup about to take its checkpoint of eng (starting
// the journal on the node's first backup) and returns the mark the backup records; nil when
// journaling is off, after deleting a journal left from when it was on.
func BeginEpoch(eng *storage.Engine, cfg Config) (*storage.JournalMark, error) {
	if cfg.NoJournal {
		if st, err := eng.JournalState(); err != nil || !st.On {
			return nil, err
		}
		return nil, eng.DisableJournal()
	}
	m, err := eng.BeginBackupEpoch()
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	return &m, nil
}

// Finish trims the journal once the backup with mark m is complete: the next incremental is taken
// against it (or a newer one), so epochs up to its mark are no longer read.
func Finish(eng *storage.Engine, m *storage.JournalMark) error {
	if m == nil {
		return nil
	}
	if err := eng.TrimJournal(m.Epoch); err != nil {
		return fmt.Errorf("backup complete, but: %w", err)
	}
	return nil
}

// journalReader reads the journal's entries of the epochs after a parent's mark from a checkpoint.
type journalReader struct {
	src      Source
	from, to uint64      // epochs read, inclusive
	spans    [][2][]byte // span markers (end empty: to the end of the keyspace)
}

// JournalServes says whether the journal in state st (read after mark's bump) can say what changed
// since parent (nil: a full backup), and if not, why.
func JournalServes(st storage.JournalState, parent *Parent, mark *storage.JournalMark) (bool, string) {
	if parent == nil {
		return false, ""
	}
	if mark == nil {
		return false, "journaling is off on this node"
	}
	pm := parent.Manifest.Journal
	switch {
	case pm == nil:
		return false, "the parent backup has no journal mark (taken before the node journaled, or by an older version)"
	case !st.On || st.ID != pm.ID:
		return false, fmt.Sprintf("the parent backup was taken on another node or store (journal %s, this node's %s)", pm.ID, st.ID)
	case pm.Epoch < st.Start:
		return false, fmt.Sprintf("the journal was trimmed past the parent (its epoch %d; the journal keeps epochs after %d, the newest backup's): "+
			"an incremental reads the journal only against the node's newest backup", pm.Epoch, st.Start)
	case pm.Epoch >= st.Epoch:
		return false, fmt.Sprintf("the parent's journal epoch %d is unknown to this node (current %d)", pm.Epoch, st.Epoch)
	}
	return true, ""
}

// openJournal returns a reader of the journal since parent's mark, or nil and why the journal cannot
// say what changed since the parent (the incremental then diffs).
func openJournal(src Source, parent *Parent, mark *storage.JournalMark) (*journalReader, string, error) {
	st, err := storage.ReadJournalState(src.Get)
	if err != nil {
		return nil, "", fmt.Errorf("backup: journal: %w", err)
	}
	if ok, why := JournalServes(st, parent, mark); !ok {
		return nil, why, nil
	}
	j := &journalReader{src: src, from: parent.Manifest.Journal.Epoch + 1, to: st.Epoch}
	for ep := j.from; ep <= j.to; ep++ {
		lo, hi := storage.JournalSpanMarkers(ep)
		it, err := src.NewIter(lo, hi)
		if err != nil {
			return nil, "", fmt.Errorf("backup: journal: %w", err)
		}
		for ok := it.First(); ok; ok = it.Next() {
			j.spans = append(j.spans, [2][]byte{slices.Clone(storage.JournalUserKey(it.Key())), slices.Clone(it.Value())})
		}
		err = it.Error()
		it.Close()
		if err != nil {
			return nil, "", fmt.Errorf("backup: journal: %w", err)
		}
	}
	return j, "", nil
}

// replaced says whether a span marker overlaps [start, end).
func (j *journalReader) replaced(start, end []byte) bool {
	for _, s := range j.spans {
		if (len(end) == 0 || bytes.Compare(s[0], end) < 0) && (len(s[1]) == 0 || bytes.Compare(start, s[1]) < 0) {
			return true
		}
	}
	return false
}

// keys returns the user keys in [start, end) journaled since the parent, sorted, each once.
func (j *journalReader) keys(start, end []byte) ([][]byte, error) {
	var out [][]byte
	for ep := j.from; ep <= j.to; ep++ {
		lo, hi := storage.JournalPointSpan(ep, start, end)
		it, err := j.src.NewIter(lo, hi)
		if err != nil {
			return nil, err
		}
		for ok := it.First(); ok; ok = it.Next() {
			out = append(out, slices.Clone(storage.JournalUserKey(it.Key())))
		}
		err = it.Error()
		it.Close()
		if err != nil {
			return nil, fmt.Errorf("journal: %w", err)
		}
	}
	if j.to > j.from {
		slices.SortFunc(out, bytes.Compare)
		out = slices.CompactFunc(out, bytes.Equal)
	}
	return out, nil
}

// readJournaled writes the range's changes since the parent from the journal: each journaled key's
// value in the checkpoint, or its deletion when the checkpoint lacks it. A deletion of a key the
// parent never held (written and deleted between the two) is recorded too: it hides nothing.
//
// Each key is a point read, not a seek of one iterator: a key written since the last backup is most
// likely in the memtable or an upper level, where a point read stops (bloom filters skip the tables
// that cannot hold it), while a seek positions every level down to the bottom one.
func (w *writer) readJournaled(ctx context.Context, rs rangeState, f *backup.Writer) error {
	e := rs.entry
	keys, err := w.journal.keys(e.StartKey, e.EndKey)
	if err != nil || len(keys) == 0 {
		return err
	}
	var dk []byte
	for _, key := range keys {
		dk = append(append(dk[:0], rs.lo[0]), key...)
		value, found, err := w.src.Get(dk)
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		if found {
			w.read += uint64(len(key) + len(value))
			if err := f.Add(key, value); err != nil {
				return err
			}
			if err := w.idx.Add(key, backup.ValueHash(value)); err != nil {
				return err
			}
		} else {
			w.read += uint64(len(key))
			if err := f.Delete(key); err != nil {
				return err
			}
			if err := w.idx.AddDeletion(key); err != nil {
				return err
			}
		}
		if err := w.pace(ctx, f); err != nil {
			return err
		}
	}
	return nil
}

// OpenSource opens what a backup reads once BeginEpoch returned mark: a snapshot of the live engine
// when the journal serves the incremental, else a checkpoint taken into ckDir (on the engine's
// filesystem; removed by release). An incremental that reads the journal reads a few keys for a
// moment, so a snapshot costs it nothing, where a checkpoint copies the WAL and its opening replays
// it — on a store with a full memtable, longer than the incremental itself. A backup that reads
// every key reads from a checkpoint: it pins no version in the live engine for its whole length and
// reads through a block cache of its own.
func OpenSource(eng *storage.Engine, ckDir string, parent *Parent, mark *storage.JournalMark) (src Source, release func(), err error) {
	if parent != nil && mark != nil {
		st, err := eng.JournalState()
		if err != nil {
			return nil, nil, fmt.Errorf("backup: journal: %w", err)
		}
		if ok, _ := JournalServes(st, parent, mark); ok {
			snap := eng.NewSnapshot()
			return snap, func() { snap.Close() }, nil
		}
	}
	if err := eng.Checkpoint(ckDir); err != nil {
		return nil, nil, fmt.Errorf("backup: %w", err)
	}
	// The backup reads the checkpoint's tables start to end, as a real disk's readahead serves it:
	// one operation per window, where a block at a time would take an operation from the
	// foreground's for every 4 KiB and bound the backup's rate by the device's latency.
	undo := eng.Device().ReadAheadUnder(ckDir, checkpointReadahead)
	ck, err := eng.OpenCheckpoint(ckDir)
	if err != nil {
		undo()
		os.RemoveAll(ckDir)
		return nil, nil, fmt.Errorf("backup: %w", err)
	}
	return ck, func() { ck.Close(true); undo() }, nil
}

// checkpointReadahead is the readahead a backup's reads of its checkpoint get on the node's
// emulated disk: Pebble's largest iterator readahead, the size of the files' own buffers.
const checkpointReadahead = fileChunk
