package storage

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// NewIter returns an iterator over [lower, upper) of an indexed batch: its own writes over the
// engine's state (a write-only batch cannot be read).
func (b *Batch) NewIter(lower, upper []byte) (*Iterator, error) {
	it, err := b.b.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, fmt.Errorf("batch iterator: %w", err)
	}
	return &Iterator{it: it}, nil
}
