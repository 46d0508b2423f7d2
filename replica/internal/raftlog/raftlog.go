// Package raftlog keeps one range's raft log and hard state on the node's engine and serves them to
// etcd raft as its raft.Storage. It owns the log's keys (entries, hard state, truncated state) under
// the range's raft keyspace and nothing else: the range's descriptor, applied index and data belong
// to package replica, which writes every change the log makes through the batch it passes in.
//
// It must never commit a batch itself: the node's Ready loop commits the log with every other
// range's in one fsync.
package raftlog

import (
	"encoding/binary"
	"fmt"
	"sync"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/shoaldb/shoal/storage"
)

// Log implements raft.Storage for one replica on the node's engine (not raft.MemoryStorage): the
// log, hard state and truncation point live under the range's raft keyspace.
//
// Invariant: truncIndex <= applied <= lastIndex once initialized; the entry at truncIndex is gone but
// its term is kept (truncTerm), so Term(truncIndex) and the snapshot metadata stay answerable.
//
// All methods are called with the owning replica's mutex held (raft calls them from inside RawNode),
// except that the in-memory cache has its own lock because the store loop trims it.
type Log struct {
	eng     *storage.Engine
	rangeID uint64

	hardState *raftpb.HardState
	confState *raftpb.ConfState

	truncIndex, truncTerm uint64
	lastIndex, lastTerm   uint64

	// snapshot builds the metadata of a snapshot at the applied index (SetSnapshotFunc).
	snapshot func() (*raftpb.Snapshot, error)

	cacheMu sync.Mutex
	// cache holds recently appended entries so that apply rarely reads the engine.
	cache map[uint64]*raftpb.Entry

	buf []byte // Append's encoding buffer (a batch copies what it is given)
}

const (
	// InitialIndex and InitialTerm are where a range created by bootstrap or split starts its log, as
	// if a snapshot at that point had been applied: every replica of the new range starts identical.
	InitialIndex = 10
	InitialTerm  = 5
)

// Load loads a range's raft state. The state is read from rd, which must be one consistent view (a
// snapshot) when the range's state can change concurrently: a split committing between two reads
// would pair an old hard state (commit 0) with the new applied index, which raft refuses with a
// panic. The conf state starts empty (SetConfState).
func Load(eng *storage.Engine, rd storage.Reader, rangeID uint64) (*Log, error) {
	l := &Log{eng: eng, rangeID: rangeID, cache: make(map[uint64]*raftpb.Entry),
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

// WriteInitialState writes the log of a range that starts at (InitialIndex, InitialTerm): no
// entries, truncated at the initial index, its hard state committed there. A hard state already on
// disk (a vote cast by a not-yet-initialized replica) keeps its term and vote if newer, so that the
// replica never votes twice in a term. b must be an indexed batch.
func WriteInitialState(b *storage.Batch, rangeID uint64) error {
	hs := &raftpb.HardState{Term: proto.Uint64(InitialTerm), Commit: proto.Uint64(InitialIndex)}
	if v, ok, err := b.Get(storage.HardStateKey(rangeID)); err != nil {
		return err
	} else if ok {
		old := &raftpb.HardState{}
		if err := proto.Unmarshal(v, old); err != nil {
			return err
		}
		if old.GetTerm() > InitialTerm {
			hs.Term, hs.Vote = proto.Uint64(old.GetTerm()), proto.Uint64(old.GetVote())
		}
	}
	hsData, err := proto.Marshal(hs)
	if err != nil {
		return err
	}
	lo, hi := storage.RaftLogSpan(rangeID)
	if err := b.DeleteRange(lo, hi); err != nil {
		return err
	}
	if err := b.Set(storage.HardStateKey(rangeID), hsData); err != nil {
		return err
	}
	return b.Set(storage.TruncatedStateKey(rangeID), encodeTruncated(InitialIndex, InitialTerm))
}

// HardState is the last hard state written (SetHardState) or loaded.
func (l *Log) HardState() *raftpb.HardState { return l.hardState }

// ConfState is the configuration the replica last applied, as raft's InitialState reports it.
func (l *Log) ConfState() *raftpb.ConfState { return l.confState }

// SetConfState records the configuration the replica applied (the replica persists it).
func (l *Log) SetConfState(cs *raftpb.ConfState) { l.confState = cs }

// Last is the index of the last entry (LastIndex, which cannot fail).
func (l *Log) Last() uint64 { return l.lastIndex }

// TruncatedIndex is the index of the last entry truncated away (FirstIndex - 1); its term is kept.
func (l *Log) TruncatedIndex() uint64 { return l.truncIndex }

// SetSnapshotFunc sets what Snapshot answers: the metadata of a snapshot at the replica's applied
// index, which only the replica knows.
func (l *Log) SetSnapshotFunc(fn func() (*raftpb.Snapshot, error)) { l.snapshot = fn }

// InitialState implements raft.Storage.
func (l *Log) InitialState() (*raftpb.HardState, *raftpb.ConfState, error) {
	return l.hardState, l.confState, nil
}

// EnsureCommit raises the loaded hard state's commit index to index, an index known to be committed
// (applied): raft refuses to start with an applied index above its commit index.
func (l *Log) EnsureCommit(index uint64) {
	if index > l.hardState.GetCommit() {
		hs := proto.Clone(l.hardState).(*raftpb.HardState)
		hs.Commit = proto.Uint64(index)
		l.hardState = hs
	}
}

// Entries implements raft.Storage.
func (l *Log) Entries(lo, hi, maxSize uint64) ([]*raftpb.Entry, error) {
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
func (l *Log) Term(i uint64) (uint64, error) {
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
func (l *Log) LastIndex() (uint64, error) { return l.lastIndex, nil }

// FirstIndex implements raft.Storage.
func (l *Log) FirstIndex() (uint64, error) { return l.truncIndex + 1, nil }

// Snapshot implements raft.Storage: a snapshot at the applied index (SetSnapshotFunc). Its data (the
// range's key-value pairs) is streamed separately by the store when raft emits the MsgSnap.
func (l *Log) Snapshot() (*raftpb.Snapshot, error) {
	if l.snapshot == nil {
		return nil, raft.ErrSnapshotTemporarilyUnavailable
	}
	return l.snapshot()
}

// Append writes entries to b, deleting any conflicting suffix of the old log beyond the new last
// entry (raft may overwrite an uncommitted tail after a leader change).
func (l *Log) Append(b *storage.Batch, ents []*raftpb.Entry) error {
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
		data, err := proto.MarshalOptions{}.MarshalAppend(l.buf[:0], e)
		if err != nil {
			return err
		}
		l.buf = data
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

// SetHardState writes hs to b.
func (l *Log) SetHardState(b *storage.Batch, hs *raftpb.HardState) error {
	data, err := proto.Marshal(hs)
	if err != nil {
		return err
	}
	l.hardState = hs
	return b.Set(storage.HardStateKey(l.rangeID), data)
}

// Truncate drops entries up to and including index (index must be applied).
func (l *Log) Truncate(b *storage.Batch, index uint64) error {
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

// ResetTo empties the log and sets its start as if a snapshot at (index, term) was applied.
func (l *Log) ResetTo(b *storage.Batch, index, term uint64) error {
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

// ForgetApplied drops cached entries up to index: they are applied and will rarely be read again.
func (l *Log) ForgetApplied(index uint64) {
	l.cacheMu.Lock()
	for i := range l.cache {
		if i <= index {
			delete(l.cache, i)
		}
	}
	l.cacheMu.Unlock()
}

// CheckMessage validates a message from the network against the log: etcd raft panics on a
// heartbeat that commits past the log's end, and a committed entry must never change.
func (l *Log) CheckMessage(m *raftpb.Message) error {
	// A message from an earlier term (a deposed leader's append or heartbeat, delayed in the network)
	// is never applied to the log: raft answers it at most with its own term. Its entries may well
	// differ from what a later leader committed here, which is no fault: checking them raised false
	// alarms of a rewritten committed entry under load, when elections and slow deliveries overlap.
	if m.GetTerm() < l.hardState.GetTerm() {
		return nil
	}
	commit := l.hardState.GetCommit()
	switch m.GetType() {
	case raftpb.MsgHeartbeat:
		if m.GetCommit() > l.lastIndex {
			return fmt.Errorf("heartbeat commits %d beyond last index %d", m.GetCommit(), l.lastIndex)
		}
	case raftpb.MsgApp:
		// A leader sends its own commit index with every append; a follower far behind gets one
		// beyond the entries carried, and raft clamps it to the last new entry (handleAppendEntries).
		// Refusing it would stall every lagging follower until a snapshot.
		// Entries at or below our commit index must match ours: a committed entry never changes.
		for _, e := range m.GetEntries() {
			if e.GetIndex() > commit {
				break
			}
			if e.GetIndex() <= l.truncIndex {
				continue
			}
			if t, err := l.Term(e.GetIndex()); err == nil && t != e.GetTerm() {
				return fmt.Errorf("append rewrites committed entry %d", e.GetIndex())
			}
		}
	}
	return nil
}
