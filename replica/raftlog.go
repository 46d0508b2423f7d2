package replica

import (
	"encoding/binary"
	"fmt"
	"sync"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/shoaldb/shoal/storage"
)

// raftLog implements raft.Storage for one replica on the node's engine (not raft.MemoryStorage): the
// log, hard state and truncation point live under the range's raft keyspace.
//
// Invariant: truncIndex <= applied <= lastIndex once initialized; the entry at truncIndex is gone but
// its term is kept (truncTerm), so Term(truncIndex) and the snapshot metadata stay answerable.
//
// All methods are called with the owning replica's mutex held (raft calls them from inside RawNode),
// except that the in-memory cache has its own lock because the store loop trims it.
type raftLog struct {
	eng     *storage.Engine
	rangeID uint64

	hardState *raftpb.HardState
	confState *raftpb.ConfState

	truncIndex, truncTerm uint64
	lastIndex, lastTerm   uint64

	// snapshot builds the metadata of a snapshot at the applied index (set by the replica).
	snapshot func() (*raftpb.Snapshot, error)

	cacheMu sync.Mutex
	// cache holds recently appended entries so that apply rarely reads the engine.
	cache map[uint64]*raftpb.Entry
}

const (
	// initialIndex and initialTerm are where a range created by bootstrap or split starts its log, as
	// if a snapshot at that point had been applied: every replica of the new range starts identical.
	initialIndex = 10
	initialTerm  = 5
)

// newRaftLog loads a range's raft state. The state is read from rd, which must be one consistent view (a snapshot) when the range's state
// can change concurrently: a split committing between two reads would pair an old hard state (commit
// 0) with the new applied index, which raft refuses with a panic.
func newRaftLog(eng *storage.Engine, rd storage.Reader, rangeID uint64) (*raftLog, error) {
	l := &raftLog{eng: eng, rangeID: rangeID, cache: make(map[uint64]*raftpb.Entry),
		hardState: &raftpb.HardState{}, confState: &raftpb.ConfState{}}
	if v, ok, err := rd.Get(storage.HardStateKey(rangeID)); err != nil {
		return nil, err
	} else if ok {
		if err := proto.Unmarshal(v, l.hardState); err != nil {
			return nil, fmt.Errorf("range %d: decode hard state: %w", rangeID, err)
		}
	}
	if v, ok, err := rd.Get(storage.TruncatedStateKey(rangeID)); err != nil {
		return nil, err
	} else if ok {
		if len(v) != 16 {
			return nil, fmt.Errorf("range %d: corrupt truncated state (%d bytes)", rangeID, len(v))
		}
		l.truncIndex = binary.BigEndian.Uint64(v)
		l.truncTerm = binary.BigEndian.Uint64(v[8:])
	}
	l.lastIndex, l.lastTerm = l.truncIndex, l.truncTerm
	lo, hi := storage.RaftLogSpan(rangeID)
	it, err := rd.NewIter(lo, hi)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	if it.Last() {
		e := &raftpb.Entry{}
		if err := proto.Unmarshal(it.Value(), e); err != nil {
			return nil, fmt.Errorf("range %d: decode last log entry: %w", rangeID, err)
		}
		l.lastIndex, l.lastTerm = e.GetIndex(), e.GetTerm()
	}
	return l, nil
}

func encodeTruncated(index, term uint64) []byte {
	v := make([]byte, 16)
	binary.BigEndian.PutUint64(v, index)
	binary.BigEndian.PutUint64(v[8:], term)
	return v
}

// InitialState implements raft.Storage.
func (l *raftLog) InitialState() (*raftpb.HardState, *raftpb.ConfState, error) {
	return l.hardState, l.confState, nil
}

// Entries implements raft.Storage.
func (l *raftLog) Entries(lo, hi, maxSize uint64) ([]*raftpb.Entry, error) {
	if lo <= l.truncIndex {
		return nil, raft.ErrCompacted
	}
	if hi > l.lastIndex+1 {
		return nil, fmt.Errorf("range %d: entries [%d,%d) past last index %d: %w", l.rangeID, lo, hi, l.lastIndex, raft.ErrUnavailable)
	}
	var out []*raftpb.Entry
	var size uint64
	l.cacheMu.Lock()
	for i := lo; i < hi; i++ {
		e, ok := l.cache[i]
		if !ok {
			break
		}
		size += uint64(proto.Size(e))
		if len(out) > 0 && size > maxSize {
			l.cacheMu.Unlock()
			return out, nil
		}
		out = append(out, e)
	}
	l.cacheMu.Unlock()
	if uint64(len(out)) == hi-lo {
		return out, nil
	}
	// Cache miss: read the rest from the engine.
	start := lo + uint64(len(out))
	it, err := l.eng.NewIter(storage.RaftLogKey(l.rangeID, start), storage.RaftLogKey(l.rangeID, hi))
	if err != nil {
		return nil, err
	}
	defer it.Close()
	next := start
	for ok := it.First(); ok; ok = it.Next() {
		e := &raftpb.Entry{}
		if err := proto.Unmarshal(it.Value(), e); err != nil {
			return nil, fmt.Errorf("range %d: decode log entry: %w", l.rangeID, err)
		}
		if e.GetIndex() != next {
			return nil, fmt.Errorf("range %d: log gap at %d (found %d)", l.rangeID, next, e.GetIndex())
		}
		size += uint64(proto.Size(e))
		if len(out) > 0 && size > maxSize {
			break
		}
		out = append(out, e)
		next++
	}
	if err := it.Error(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("range %d: entry %d missing: %w", l.rangeID, lo, raft.ErrUnavailable)
	}
	return out, nil
}

// Term implements raft.Storage.
func (l *raftLog) Term(i uint64) (uint64, error) {
	switch {
	case i == l.truncIndex:
		return l.truncTerm, nil
	case i < l.truncIndex:
		return 0, raft.ErrCompacted
	case i > l.lastIndex:
		return 0, raft.ErrUnavailable
	case i == l.lastIndex:
		return l.lastTerm, nil
	}
	l.cacheMu.Lock()
	e, ok := l.cache[i]
	l.cacheMu.Unlock()
	if ok {
		return e.GetTerm(), nil
	}
	v, found, err := l.eng.Get(storage.RaftLogKey(l.rangeID, i))
	if err != nil {
		return 0, err
	}
	if !found {
		return 0, raft.ErrUnavailable
	}
	ent := &raftpb.Entry{}
	if err := proto.Unmarshal(v, ent); err != nil {
		return 0, fmt.Errorf("range %d: decode entry %d: %w", l.rangeID, i, err)
	}
	return ent.GetTerm(), nil
}

// LastIndex implements raft.Storage.
func (l *raftLog) LastIndex() (uint64, error) { return l.lastIndex, nil }

// FirstIndex implements raft.Storage.
func (l *raftLog) FirstIndex() (uint64, error) { return l.truncIndex + 1, nil }

// Snapshot implements raft.Storage: a snapshot at the applied index. Its data (the range's key-value
// pairs) is streamed separately by the store when raft emits the MsgSnap.
func (l *raftLog) Snapshot() (*raftpb.Snapshot, error) {
	if l.snapshot == nil {
		return nil, raft.ErrSnapshotTemporarilyUnavailable
	}
	return l.snapshot()
}

// append writes entries to b, deleting any conflicting suffix of the old log beyond the new last
// entry (raft may overwrite an uncommitted tail after a leader change).
func (l *raftLog) append(b *storage.Batch, ents []*raftpb.Entry) error {
	if len(ents) == 0 {
		return nil
	}
	first, last := ents[0].GetIndex(), ents[len(ents)-1].GetIndex()
	if first > l.lastIndex+1 {
		return fmt.Errorf("range %d: append at %d leaves a gap after last index %d", l.rangeID, first, l.lastIndex)
	}
	if first <= l.truncIndex {
		return fmt.Errorf("range %d: append at %d overwrites truncated entries (truncated at %d)", l.rangeID, first, l.truncIndex)
	}
	l.cacheMu.Lock()
	defer l.cacheMu.Unlock()
	for _, e := range ents {
		data, err := proto.Marshal(e)
		if err != nil {
			return err
		}
		if err := b.Set(storage.RaftLogKey(l.rangeID, e.GetIndex()), data); err != nil {
			return err
		}
		l.cache[e.GetIndex()] = e
	}
	for i := last + 1; i <= l.lastIndex; i++ {
		if err := b.Delete(storage.RaftLogKey(l.rangeID, i)); err != nil {
			return err
		}
		delete(l.cache, i)
	}
	l.lastIndex, l.lastTerm = last, ents[len(ents)-1].GetTerm()
	return nil
}

func (l *raftLog) setHardState(b *storage.Batch, hs *raftpb.HardState) error {
	data, err := proto.Marshal(hs)
	if err != nil {
		return err
	}
	l.hardState = hs
	return b.Set(storage.HardStateKey(l.rangeID), data)
}

// truncate drops entries up to and including index (index must be applied).
func (l *raftLog) truncate(b *storage.Batch, index uint64) error {
	if index <= l.truncIndex || index > l.lastIndex {
		return nil
	}
	term, err := l.Term(index)
	if err != nil {
		return err
	}
	if err := b.DeleteRange(storage.RaftLogKey(l.rangeID, l.truncIndex+1), storage.RaftLogKey(l.rangeID, index+1)); err != nil {
		return err
	}
	if err := b.Set(storage.TruncatedStateKey(l.rangeID), encodeTruncated(index, term)); err != nil {
		return err
	}
	l.cacheMu.Lock()
	for i := l.truncIndex + 1; i <= index; i++ {
		delete(l.cache, i)
	}
	l.cacheMu.Unlock()
	l.truncIndex, l.truncTerm = index, term
	return nil
}

// resetTo empties the log and sets its start as if a snapshot at (index, term) was applied.
func (l *raftLog) resetTo(b *storage.Batch, index, term uint64) error {
	lo, hi := storage.RaftLogSpan(l.rangeID)
	if err := b.DeleteRange(lo, hi); err != nil {
		return err
	}
	if err := b.Set(storage.TruncatedStateKey(l.rangeID), encodeTruncated(index, term)); err != nil {
		return err
	}
	l.cacheMu.Lock()
	l.cache = make(map[uint64]*raftpb.Entry)
	l.cacheMu.Unlock()
	l.truncIndex, l.truncTerm = index, term
	l.lastIndex, l.lastTerm = index, term
	return nil
}

// forgetApplied drops cached entries up to index: they are applied and will rarely be read again.
func (l *raftLog) forgetApplied(index uint64) {
	l.cacheMu.Lock()
	for i := range l.cache {
		if i <= index {
			delete(l.cache, i)
		}
	}
	l.cacheMu.Unlock()
}
