package storage

import "encoding/binary"

// Key layout. Every key starts with a one-byte keyspace prefix; ranges of one keyspace never mix with
// another, so a range's data can be cleared or iterated with one span.
//
//	0x01 <name>                       store-local metadata (identity)
//	0x02 <range id:8> <suffix>        raft state of one replica:
//	     'a'                          applied state (applied index, conf state, descriptor)
//	     'h'                          raft hard state
//	     't'                          truncated state (index and term of the last compacted entry)
//	     'l' <index:8>                raft log entry
//	0x03 <meta key>                   data of the meta range
//	0x04 <user key>                   user data
//	0x06 <epoch:8> …                  the change journal of user keys written (journal.go)
const (
	prefixLocal = 0x01
	prefixRaft  = 0x02
	prefixMeta  = 0x03
	prefixUser  = 0x04
	prefixEnd   = 0x05
)

// LocalKey is the key of a store-local metadata item.
func LocalKey(name string) []byte { return append([]byte{prefixLocal}, name...) }

func raftPrefix(rangeID uint64) []byte {
	k := make([]byte, 9, 18)
	k[0] = prefixRaft
	binary.BigEndian.PutUint64(k[1:], rangeID)
	return k
}

// RaftStateSpan is the span holding every raft key of one range on this node.
func RaftStateSpan(rangeID uint64) (start, end []byte) {
	return raftPrefix(rangeID), raftPrefix(rangeID + 1)
}

// AppliedStateKey is the key of a replica's applied state.
func AppliedStateKey(rangeID uint64) []byte { return append(raftPrefix(rangeID), 'a') }

// HardStateKey is the key of a replica's raft hard state.
func HardStateKey(rangeID uint64) []byte { return append(raftPrefix(rangeID), 'h') }

// TruncatedStateKey is the key of a replica's log truncation point.
func TruncatedStateKey(rangeID uint64) []byte { return append(raftPrefix(rangeID), 't') }

// RaftLogKey is the key of one raft log entry.
func RaftLogKey(rangeID, index uint64) []byte {
	k := append(raftPrefix(rangeID), 'l', 0, 0, 0, 0, 0, 0, 0, 0)
	binary.BigEndian.PutUint64(k[10:], index)
	return k
}

// RaftLogPrefix is the first key of a range's log; RaftLogKey(id, i) for all i sort after it.
func RaftLogPrefix(rangeID uint64) []byte { return append(raftPrefix(rangeID), 'l') }

// RaftLogIndex decodes the index of a RaftLogKey.
func RaftLogIndex(key []byte) uint64 { return binary.BigEndian.Uint64(key[10:]) }

// MetaDataKey maps a key of the meta range's keyspace to its engine key.
func MetaDataKey(k []byte) []byte { return append([]byte{prefixMeta}, k...) }

// UserDataKey maps a user key to its engine key.
func UserDataKey(k []byte) []byte { return append([]byte{prefixUser}, k...) }

// DataSpan returns the engine span of a range's data. meta selects the meta keyspace; an empty end is
// the end of the keyspace.
func DataSpan(meta bool, start, end []byte) (lo, hi []byte) {
	p := byte(prefixUser)
	if meta {
		p = prefixMeta
	}
	lo = append([]byte{p}, start...)
	if len(end) == 0 {
		hi = []byte{p + 1}
	} else {
		hi = append([]byte{p}, end...)
	}
	return lo, hi
}

// StripDataPrefix turns an engine data key back into the key of its keyspace.
func StripDataPrefix(k []byte) []byte { return k[1:] }

// RangeDescKey is the key of the descriptor of the local replica of a range.
func RangeDescKey(rangeID uint64) []byte { return append(raftPrefix(rangeID), 'd') }

// ConfStateKey is the key of a replica's applied raft configuration.
func ConfStateKey(rangeID uint64) []byte { return append(raftPrefix(rangeID), 'c') }

// ReplicaTombstoneKey marks a range whose replica was removed from this node: messages addressed to
// an older replica id are then ignored instead of resurrecting it.
func ReplicaTombstoneKey(rangeID uint64) []byte {
	return append(LocalKey("tombstone/"), raftPrefix(rangeID)[1:]...)
}

// RaftKeyspaceSpan is the span of every raft key of every range (used to list local replicas).
func RaftKeyspaceSpan() (start, end []byte) { return []byte{prefixRaft}, []byte{prefixRaft + 1} }

// RangeIDFromRaftKey decodes the range id of any key in the raft keyspace.
func RangeIDFromRaftKey(k []byte) uint64 { return binary.BigEndian.Uint64(k[1:9]) }

// RaftLogSpan is the span of a range's raft log entries (and nothing else).
func RaftLogSpan(rangeID uint64) (start, end []byte) {
	return append(raftPrefix(rangeID), 'l'), append(raftPrefix(rangeID), 'm')
}
