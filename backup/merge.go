package backup

import (
	"bytes"
	"container/heap"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/shoaldb/shoal/plan/mergeplan"
)

// A chain is merged as sorted runs: each link is one run (its range files in key order), and a merge
// of runs writes an intermediate run whose records carry the link they came from. The newest record of
// a key wins whatever order the runs are merged in, so any merge tree the planner picks gives the same
// result; a deletion is kept until no older record it must hide can still come in, and a range held
// in full by a newer link (one the node did not hold at the parent) hides every older record in its
// span.

// record is one key of a run.
type record struct {
	key, value []byte
	deleted    bool
	layer      int // index of the link the record comes from
}

// span is a range some link holds in full: older links say nothing inside it.
type span struct {
	start, end []byte
	layer      int
}

func (s span) contains(key []byte) bool {
	return bytes.Compare(key, s.start) >= 0 && (len(s.end) == 0 || bytes.Compare(key, s.end) < 0)
}

// run is a link or an intermediate merge output.
type run struct {
	layers []bool // the links it holds
	spans  []span // ranges held in full by a link it holds (newer than the chain's first link)
	link   int    // the link's index, or -1 for an intermediate file
	path   string
	info   FileInfo // an intermediate file's description, checked when read back
}

// iter reads a run's records in key order.
type iter interface {
	next() (bool, error)
	rec() *record
	close()
}

// linkIter reads a link's range files in key order.
type linkIter struct {
	dir     string
	entries []RangeEntry
	layer   int
	i       int
	fr      *fileReader
	keys    uint64
	deletes uint64
	r       record
}

func newLinkIter(l Link, layer int) *linkIter {
	entries := append([]RangeEntry(nil), l.Manifest.Ranges...)
	sort.Slice(entries, func(i, j int) bool { return bytes.Compare(entries[i].StartKey, entries[j].StartKey) < 0 })
	return &linkIter{dir: l.Dir, entries: entries, layer: layer, r: record{layer: layer}}
}

func (it *linkIter) next() (bool, error) {
	for it.i < len(it.entries) {
		e := it.entries[it.i]
		if it.fr == nil {
			fr, err := openFile(filepath.Join(it.dir, e.File))
			if err != nil {
				return false, err
			}
			it.fr, it.keys, it.deletes = fr, 0, 0
		}
		var ok bool
		var err error
		it.r.key, it.r.value, it.r.deleted, ok, err = it.fr.record(it.r.key, it.r.value, e.Delta, nil)
		if err != nil {
			return false, fmt.Errorf("%w: %s/%s: %v", ErrCorrupt, it.dir, e.File, err)
		}
		if ok {
			if it.r.deleted {
				it.deletes++
			} else {
				it.keys++
			}
			return true, nil
		}
		// The file changed since it was verified: refuse rather than merge it.
		if it.keys != e.Keys || it.deletes != e.Deletes || it.fr.r.crc != e.CRC32C {
			return false, fmt.Errorf("%w: %s/%s changed while it was merged", ErrCorrupt, it.dir, e.File)
		}
		it.fr.close()
		it.fr = nil
		it.i++
	}
	return false, nil
}

func (it *linkIter) rec() *record { return &it.r }

func (it *linkIter) close() {
	if it.fr != nil {
		it.fr.close()
	}
}

// runIter reads an intermediate run file: key, link index, then 0 for a deletion or the value's
// length plus one and the value.
type runIter struct {
	fr   *fileReader
	info FileInfo
	n    uint64
	r    record
}

func (it *runIter) next() (bool, error) {
	var ok bool
	var err error
	it.r.key, it.r.value, it.r.deleted, ok, err = it.fr.record(it.r.key, it.r.value, true, &it.r.layer)
	if err != nil {
		return false, fmt.Errorf("%w: intermediate run %s: %v", ErrCorrupt, it.info.File, err)
	}
	if !ok {
		if it.n != it.info.Keys || it.fr.r.crc != it.info.CRC32C {
			return false, fmt.Errorf("%w: intermediate run %s changed while it was merged", ErrCorrupt, it.info.File)
		}
		return false, nil
	}
	it.n++
	return true, nil
}

func (it *runIter) rec() *record { return &it.r }
func (it *runIter) close()       { it.fr.close() }

func (r *run) open(c *Chain) (iter, error) {
	if r.link >= 0 {
		return newLinkIter(c.Links[r.link], r.link), nil
	}
	fr, err := openFile(r.path)
	if err != nil {
		return nil, err
	}
	return &runIter{fr: fr, info: r.info}, nil
}

// MergeStat is what one merge of a plan read and wrote, in records and bytes of records.
type MergeStat struct {
	Inputs       []int  `json:"inputs"`
	ReadKeys     uint64 `json:"read_keys"`
	WrittenKeys  uint64 `json:"written_keys"`
	ReadBytes    uint64 `json:"read_bytes"`
	WrittenBytes uint64 `json:"written_bytes"`
}

// Merge carries out plan p over the chain's links (p.Runs must be the number of links): intermediate
// merges write run files under tmp (removed once read), and the last one calls emit for every key of
// the state the newest link implies, in key order (emit's slices are valid during the call only).
// Callers verify the chain first: a file that changed since is refused, but emit has then seen part
// of the state.
func (c *Chain) Merge(p mergeplan.Plan, tmp string, emit func(key, value []byte) error) ([]MergeStat, error) {
	n := len(c.Links)
	if p.Runs != n {
		return nil, fmt.Errorf("backup: a plan of %d runs for a chain of %d backups", p.Runs, n)
	}
	if err := p.Validate(n); err != nil {
		return nil, err
	}
	runs := make([]*run, 0, n+len(p.Merges))
	for i, l := range c.Links {
		r := &run{layers: make([]bool, n), link: i}
		r.layers[i] = true
		if i > 0 {
			for _, e := range l.Manifest.Ranges {
				if !e.Delta {
					r.spans = append(r.spans, span{start: e.StartKey, end: e.EndKey, layer: i})
				}
			}
		}
		runs = append(runs, r)
	}
	if len(p.Merges) == 0 {
		st, err := c.mergeRuns([]*run{runs[0]}, nil, emit)
		return []MergeStat{st}, err
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, fmt.Errorf("backup: merge: %w", err)
	}
	var stats []MergeStat
	for j, m := range p.Merges {
		in := make([]*run, len(m.Inputs))
		for i, id := range m.Inputs {
			in[i] = runs[id]
		}
		var out *run
		var st MergeStat
		var err error
		if j == len(p.Merges)-1 {
			st, err = c.mergeRuns(in, nil, emit)
		} else {
			out = &run{link: -1, path: filepath.Join(tmp, fmt.Sprintf("run-%d.tmp", n+j))}
			st, err = c.mergeRuns(in, out, nil)
		}
		st.Inputs = m.Inputs
		stats = append(stats, st)
		for _, r := range in {
			if r.link < 0 {
				os.Remove(r.path)
			}
		}
		if err != nil {
			if out != nil {
				os.Remove(out.path)
			}
			return stats, err
		}
		runs = append(runs, out)
	}
	return stats, nil
}

// iterHeap orders the inputs of a merge by their current key.
type iterHeap struct {
	its []iter
	idx []int
}

func (h *iterHeap) Len() int { return len(h.idx) }
func (h *iterHeap) Less(i, j int) bool {
	return bytes.Compare(h.its[h.idx[i]].rec().key, h.its[h.idx[j]].rec().key) < 0
}
func (h *iterHeap) Swap(i, j int) { h.idx[i], h.idx[j] = h.idx[j], h.idx[i] }
func (h *iterHeap) Push(x any)    { h.idx = append(h.idx, x.(int)) }
func (h *iterHeap) Pop() any {
	x := h.idx[len(h.idx)-1]
	h.idx = h.idx[:len(h.idx)-1]
	return x
}

// mergeRuns merges in into out (an intermediate run) or, when out is nil, into emit (the final state).
func (c *Chain) mergeRuns(in []*run, out *run, emit func(key, value []byte) error) (MergeStat, error) {
	var st MergeStat
	n := len(c.Links)
	layers := make([]bool, n)
	var spans []span
	for _, r := range in {
		for i, ok := range r.layers {
			layers[i] = layers[i] || ok
		}
		spans = append(spans, r.spans...)
	}
	// A deletion from link L hides nothing still to come once every link older than L is merged in.
	olderAllIn := make([]bool, n+1)
	olderAllIn[0] = true
	for i := 0; i < n; i++ {
		olderAllIn[i+1] = olderAllIn[i] && layers[i]
	}
	h := &iterHeap{}
	defer func() {
		for _, it := range h.its {
			it.close()
		}
	}()
	for i, r := range in {
		it, err := r.open(c)
		if err != nil {
			return st, err
		}
		h.its = append(h.its, it)
		ok, err := it.next()
		if err != nil {
			return st, err
		}
		if ok {
			h.idx = append(h.idx, i)
		}
	}
	heap.Init(h)
	var w *fileWriter
	if out != nil {
		var err error
		if w, err = createFile(out.path); err != nil {
			return st, err
		}
		out.layers, out.spans = layers, spans
	}
	cover := append([]RangeEntry(nil), c.Newest().Manifest.Ranges...)
	sort.Slice(cover, func(i, j int) bool { return bytes.Compare(cover[i].StartKey, cover[j].StartKey) < 0 })
	cur := 0
	var key []byte
	var win record
	for h.Len() > 0 {
		// Gather every input's record of the smallest key; the newest link's wins.
		key = append(key[:0], h.its[h.idx[0]].rec().key...)
		win.layer = -1
		for h.Len() > 0 && bytes.Equal(h.its[h.idx[0]].rec().key, key) {
			i := h.idx[0]
			r := h.its[i].rec()
			st.ReadKeys++
			st.ReadBytes += uint64(len(r.key) + len(r.value))
			if r.layer > win.layer {
				win.layer, win.deleted = r.layer, r.deleted
				win.value = append(win.value[:0], r.value...)
			}
			ok, err := h.its[i].next()
			if err != nil {
				return st, err
			}
			if ok {
				heap.Fix(h, 0)
			} else {
				heap.Pop(h)
			}
		}
		if hidden(spans, key, win.layer) {
			continue
		}
		if out != nil {
			if win.deleted && olderAllIn[win.layer] {
				continue
			}
			if err := writeLayered(w, key, win); err != nil {
				w.abort()
				return st, err
			}
			st.WrittenKeys++
			st.WrittenBytes += uint64(len(key) + len(win.value))
			continue
		}
		if win.deleted {
			continue
		}
		for cur < len(cover) && len(cover[cur].EndKey) > 0 && bytes.Compare(key, cover[cur].EndKey) >= 0 {
			cur++
		}
		if cur == len(cover) || !cover[cur].Contains(key) {
			continue // outside every range the newest backup holds
		}
		if err := emit(key, win.value); err != nil {
			return st, err
		}
		st.WrittenKeys++
		st.WrittenBytes += uint64(len(key) + len(win.value))
	}
	if w != nil {
		if err := w.close(); err != nil {
			return st, err
		}
		out.info = FileInfo{File: filepath.Base(out.path), Keys: st.WrittenKeys, Bytes: w.bytes, CRC32C: w.crc}
	}
	return st, nil
}

// hidden says whether a link newer than layer holds key's range in full (so its silence is a deletion).
func hidden(spans []span, key []byte, layer int) bool {
	for _, s := range spans {
		if s.layer > layer && s.contains(key) {
			return true
		}
	}
	return false
}

func writeLayered(w *fileWriter, key []byte, r record) error {
	if err := w.bytesField(key); err != nil {
		return err
	}
	if err := w.uvarint(uint64(r.layer)); err != nil {
		return err
	}
	if r.deleted {
		return w.uvarint(0)
	}
	if err := w.uvarint(uint64(len(r.value)) + 1); err != nil {
		return err
	}
	return w.put(r.value)
}
