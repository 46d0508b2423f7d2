package storage

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/cockroachdb/pebble/v2/objstorage"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// IngestStats are the counters of IngestSpan since the engine opened.
type IngestStats struct {
	Ingests int64 `json:"ingests"`
	Bytes   int64 `json:"bytes"`
	// L0Bytes is the part of Bytes Pebble had to place in L0 (the span overlapped the memtable or
	// L0), where compactions will rewrite it; the rest went straight to a lower level.
	L0Bytes int64 `json:"l0_bytes"`
}

// IngestStats returns the IngestSpan counters.
func (e *Engine) IngestStats() IngestStats {
	return IngestStats{Ingests: e.ingests.Load(), Bytes: e.ingestedBytes.Load(), L0Bytes: e.ingestedL0Bytes.Load()}
}

// IngestSpan replaces everything in [lo, hi) with the pairs next yields (in ascending key order, all
// inside the span), atomically: it writes them to an sstable that also carries a range deletion of
// the span, and ingests the table. Pebble places an ingested table in the lowest level it overlaps
// nothing in, usually the bottom one: the data skips the WAL, the memtable and the compactions a
// batch would go through, and the tables of other spans are not rewritten, so the blocks cached
// from them stay valid. (A range deletion in an ingested table does not delete the table's own
// keys: they share one sequence number and a deletion covers only older ones.)
//
// It is for large writes of a whole span whose keys nothing else writes meanwhile, such as a
// replica's snapshot; the caller orders it with its other writes (an ingest is durable once
// IngestSpan returns).
func (e *Engine) IngestSpan(ctx context.Context, lo, hi []byte, next func() (key, value []byte, ok bool)) error {
	release, err := e.journalIngest(lo, hi)
	if err != nil {
		return fmt.Errorf("ingest [%q, %q): %w", lo, hi, err)
	}
	defer release()
	path := filepath.Join(e.dir, fmt.Sprintf("ingest-%d.sst", e.ingestN.Add(1)))
	f, err := e.fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("ingest [%q, %q): create sstable: %w", lo, hi, err)
	}
	defer func() {
		// Pebble links the table into the store (or copies it); the name written here is ours.
		if err := e.fs.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			quietLogger{}.Errorf("ingest: remove %s: %v", path, err)
		}
	}()
	w := sstable.NewWriter(newBufferedWritable(f), e.po.MakeWriterOptions(len(e.po.Levels)-1,
		e.db.FormatMajorVersion().MaxTableFormat()))
	werr := w.DeleteRange(lo, hi)
	for werr == nil {
		k, v, ok := next()
		if !ok {
			break
		}
		werr = w.Set(k, v)
	}
	if cerr := w.Close(); werr == nil {
		werr = cerr // Close syncs and closes the file
	}
	if werr != nil {
		return fmt.Errorf("ingest [%q, %q): write sstable: %w", lo, hi, werr)
	}
	st, err := e.db.IngestWithStats(ctx, []string{path})
	if err != nil {
		return fmt.Errorf("ingest [%q, %q): %w", lo, hi, err)
	}
	e.ingests.Add(1)
	e.ingestedBytes.Add(int64(st.Bytes))
	e.ingestedL0Bytes.Add(int64(st.ApproxIngestedIntoL0Bytes))
	return nil
}

// ingestWriteBuffer is the size of the writes IngestSpan's sstables reach the disk in: a table is
// written once, front to back, so one large write per buffer costs the device (and an emulated one,
// which charges every write call as an operation) a few operations per table instead of one per
// 4 KiB block, as Pebble's own default buffer would.
const ingestWriteBuffer = 1 << 20

// bufferedWritable is an objstorage.Writable over a file with a large write buffer.
type bufferedWritable struct {
	f  vfs.File
	bw *bufio.Writer
}

var _ objstorage.Writable = (*bufferedWritable)(nil)

func newBufferedWritable(f vfs.File) *bufferedWritable {
	return &bufferedWritable{f: f, bw: bufio.NewWriterSize(f, ingestWriteBuffer)}
}

// Write buffers p.
func (w *bufferedWritable) Write(p []byte) error {
	_, err := w.bw.Write(p)
	return err
}

// Finish flushes, syncs and closes the file.
func (w *bufferedWritable) Finish() error {
	err := w.bw.Flush()
	if err == nil {
		err = w.f.Sync()
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Abort closes the file; the caller removes it.
func (w *bufferedWritable) Abort() { _ = w.f.Close() }
