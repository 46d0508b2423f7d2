package backup

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/shoaldb/shoal/plan/mergeplan"
)

// CompactResult says what Compact did.
type CompactResult struct {
	Manifest *Manifest   `json:"manifest"`
	Merges   []MergeStat `json:"merges"`
}

// Compact rolls the chain up into a full backup in out (which must not exist or be empty): the state
// the newest link implies, in the newest link's ranges, with a key index, so later incrementals can be
// taken against it. The chain must have been verified; plan p orders the merges (intermediate runs are
// written under out and removed). On an error everything written into out is removed.
func Compact(c *Chain, p mergeplan.Plan, out string) (res CompactResult, err error) {
	if entries, err := os.ReadDir(out); err == nil && len(entries) > 0 {
		return res, fmt.Errorf("backup: %s is not empty; choose a new directory", out)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return res, fmt.Errorf("backup: %w", err)
	}
	defer func() {
		if err != nil {
			clearDir(out)
		}
	}()
	newest := c.Newest().Manifest
	ranges := append([]RangeEntry(nil), newest.Ranges...)
	sort.Slice(ranges, func(i, j int) bool { return bytes.Compare(ranges[i].StartKey, ranges[j].StartKey) < 0 })
	// The roll-up holds the newest link's state, so the newest link's journal mark holds for it: the
	// node's next incremental against it can read the journal.
	m := &Manifest{ClusterID: newest.ClusterID, NodeID: newest.NodeID, CreatedAt: newest.CreatedAt, Journal: newest.Journal}
	idx, err := CreateIndex(out)
	if err != nil {
		return res, err
	}
	defer func() {
		if err != nil {
			idx.Abort()
		}
	}()
	start := time.Now()
	cur := -1
	var w *Writer
	finish := func() error {
		if w == nil {
			return nil
		}
		e := ranges[cur]
		e.Delta, e.Deletes = false, 0
		if err := w.Close(&e); err != nil {
			return err
		}
		w = nil
		m.Ranges = append(m.Ranges, e)
		m.TotalKeys += e.Keys
		m.TotalBytes += e.Bytes
		return nil
	}
	// open starts the files of every range up to and including i (empty ranges get an empty file).
	open := func(i int) error {
		for cur < i {
			if err := finish(); err != nil {
				return err
			}
			cur++
			var err error
			if w, err = Create(out, ranges[cur].RangeID); err != nil {
				return err
			}
		}
		return nil
	}
	res.Merges, err = c.Merge(p, filepath.Join(out, ".merge"), func(key, value []byte) error {
		i := max(cur, 0)
		for !ranges[i].Contains(key) {
			i++ // the merge emits keys inside the newest link's ranges only, in order
		}
		if err := open(i); err != nil {
			return err
		}
		if err := w.Add(key, value); err != nil {
			return err
		}
		return idx.Add(key, ValueHash(value))
	})
	os.RemoveAll(filepath.Join(out, ".merge"))
	if err == nil {
		err = open(len(ranges) - 1)
	}
	if err == nil {
		err = finish()
	}
	if err != nil {
		if w != nil {
			w.Abort()
		}
		return res, err
	}
	if m.Index, err = idx.Close(); err != nil {
		return res, err
	}
	m.DurationMS = time.Since(start).Milliseconds()
	for _, l := range c.Links {
		m.RolledUp = append(m.RolledUp, l.Manifest.ID)
	}
	if err = WriteManifest(out, m); err != nil {
		return res, err
	}
	res.Manifest = m
	return res, nil
}

// clearDir removes what a failed compaction wrote into dir.
func clearDir(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		os.RemoveAll(filepath.Join(dir, e.Name()))
	}
}
