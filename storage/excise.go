package storage

import (
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// ExciseSpan removes everything in [lo, hi) from the engine without a compaction: the tables that
// straddle a bound become virtual tables over the same files (so the blocks cached from them stay
// valid) and the tables inside the span are dropped; when a memtable holds keys in the span, Pebble
// queues the excise behind it and applies it to the tables when that memtable flushes. A range deletion of the same span, by contrast, is only applied as compactions
// carry it down, rewriting every table it overlaps — mostly other spans' data, whose cached blocks
// that rewrite throws away (docs/design/excise-removed-replicas.md).
//
// The data also disappears from open Snapshots (not from open iterators): a caller must not excise
// a span a snapshot it still reads from covers.
func (e *Engine) ExciseSpan(ctx context.Context, lo, hi []byte) error {
	if err := e.db.Excise(ctx, pebble.KeyRange{Start: lo, End: hi}); err != nil {
		return fmt.Errorf("excise [%q, %q): %w", lo, hi, err)
	}
	e.excises.Add(1)
	return nil
}

// Excises counts the ExciseSpan calls that succeeded since the engine opened.
func (e *Engine) Excises() int64 { return e.excises.Load() }
