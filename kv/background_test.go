package kv

import (
	"slices"
	"testing"

	"github.com/shoaldb/shoal/storage"
)

// A compaction's span names the ranges whose data it rewrites: user ranges by their keys, the meta
// range by its keyspace, none for raft state alone.
func TestRangesInSpan(t *testing.T) {
	var spans []replicaSpan
	add := func(id uint64, meta bool, start, end string) {
		var s, e []byte
		if start != "" {
			s = []byte(start)
		}
		if end != "" {
			e = []byte(end)
		}
		lo, hi := storage.DataSpan(meta, s, e)
		spans = append(spans, replicaSpan{rangeID: id, lo: lo, hi: hi})
	}
	add(1, true, "", "") // by range ID, as replicaSpans lists them
	add(2, false, "", "g")
	add(3, false, "g", "m")
	add(4, false, "m", "")
	user := func(k string) []byte { return storage.UserDataKey([]byte(k)) }
	raftLo, raftHi := storage.RaftKeyspaceSpan()
	for _, tc := range []struct {
		name string
		span storage.Span
		want []uint64
	}{
		{"one range", storage.Span{Smallest: user("h"), Largest: user("k")}, []uint64{3}},
		{"across a boundary", storage.Span{Smallest: user("f"), Largest: user("g")}, []uint64{2, 3}},
		{"to the end", storage.Span{Smallest: user("a"), Largest: user("zz")}, []uint64{2, 3, 4}},
		{"raft state only", storage.Span{Smallest: raftLo, Largest: append(raftHi[:0:0], raftHi[0]-1, 0xff)}, nil},
		{"raft state into user data", storage.Span{Smallest: raftLo, Largest: user("b")}, []uint64{1, 2}},
		{"meta data", storage.Span{Smallest: storage.MetaDataKey([]byte("x")), Largest: storage.MetaDataKey([]byte("y"))}, []uint64{1}},
	} {
		if got := rangesInSpan(spans, tc.span); !slices.Equal(got, tc.want) {
			t.Errorf("%s: ranges %v, want %v", tc.name, got, tc.want)
		}
	}
}
