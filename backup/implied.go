package backup

import (
	"bytes"
	"fmt"
	"sort"
)

// ImpliedIndex reads the key index a backup implies: its own when it is full, else the delta indexes
// of its chain merged over the newest link with a full index — each key's newest record wins, a
// deletion or a newer link holding the key's range in full hides older records, and only keys in the
// backup's own ranges are kept (the rules Merge applies to the data).
type ImpliedIndex struct {
	its   []*IndexReader // oldest first: a reader's position is its layer
	live  []bool
	spans []span
	cover []RangeEntry
	cur   int
	key   []byte
	hash  uint64
	err   error
}

// OpenImpliedIndex opens the index the backup in dir implies, after checking the chain's links and
// reading every index it merges against its manifest: a damaged one is refused before anything reads
// from it.
func OpenImpliedIndex(dir string) (*ImpliedIndex, error) {
	c, err := OpenChain(dir)
	if err != nil {
		return nil, err
	}
	base := -1
	for i := len(c.Links) - 1; i >= 0; i-- {
		idx := c.Links[i].Manifest.Index
		if idx == nil {
			return nil, fmt.Errorf("backup %s has no key index (written by an older version): take a full backup first", c.Links[i].Dir)
		}
		if !idx.Delta {
			base = i
			break
		}
	}
	if base < 0 {
		return nil, fmt.Errorf("%w: no backup of the chain of %s has a full key index", ErrBrokenChain, dir)
	}
	links := c.Links[base:]
	for _, l := range links {
		if err := ReadIndex(l.Dir, *l.Manifest.Index, nil); err != nil {
			return nil, fmt.Errorf("%s: %w", l.Dir, err)
		}
	}
	x := &ImpliedIndex{live: make([]bool, len(links))}
	for i, l := range links {
		r, err := OpenIndex(l.Dir, *l.Manifest.Index)
		if err != nil {
			x.Close()
			return nil, err
		}
		x.its = append(x.its, r)
		if i > 0 {
			for _, e := range l.Manifest.Ranges {
				if !e.Delta {
					x.spans = append(x.spans, span{start: e.StartKey, end: e.EndKey, layer: i})
				}
			}
		}
		if x.live[i], err = r.Next(); err != nil {
			x.Close()
			return nil, err
		}
	}
	x.cover = append([]RangeEntry(nil), c.Newest().Manifest.Ranges...)
	sort.Slice(x.cover, func(i, j int) bool { return bytes.Compare(x.cover[i].StartKey, x.cover[j].StartKey) < 0 })
	return x, nil
}

// Next moves to the next key the backup implies; false at the end or on an error (Err).
func (x *ImpliedIndex) Next() bool {
	for x.err == nil {
		min := -1
		for i, ok := range x.live {
			if ok && (min < 0 || bytes.Compare(x.its[i].Key(), x.its[min].Key()) < 0) {
				min = i
			}
		}
		if min < 0 {
			return false
		}
		x.key = append(x.key[:0], x.its[min].Key()...)
		win, deleted := -1, false
		for i, ok := range x.live {
			if !ok || !bytes.Equal(x.its[i].Key(), x.key) {
				continue
			}
			win, deleted, x.hash = i, x.its[i].Deleted(), x.its[i].Hash() // later readers are newer
			if x.live[i], x.err = x.its[i].Next(); x.err != nil {
				return false
			}
		}
		if deleted || hidden(x.spans, x.key, win) || !x.covered() {
			continue
		}
		return true
	}
	return false
}

// covered says whether the current key is in one of the backup's ranges.
func (x *ImpliedIndex) covered() bool {
	for x.cur < len(x.cover) && len(x.cover[x.cur].EndKey) > 0 && bytes.Compare(x.key, x.cover[x.cur].EndKey) >= 0 {
		x.cur++
	}
	return x.cur < len(x.cover) && x.cover[x.cur].Contains(x.key)
}

// Key is the current key (valid until Next).
func (x *ImpliedIndex) Key() []byte { return x.key }

// Hash is the current key's value hash.
func (x *ImpliedIndex) Hash() uint64 { return x.hash }

// Err is the error that stopped Next.
func (x *ImpliedIndex) Err() error { return x.err }

// Close closes the index files.
func (x *ImpliedIndex) Close() {
	for _, r := range x.its {
		r.Close()
	}
}
