package hint

import (
	"hash/fnv"
	"testing"
)

// Hash64 hashes identity's bytes in place: the same value as FNV-1a over identity's output (the
// value receivers select on, so it must not change between versions).
func TestHash64MatchesIdentity(t *testing.T) {
	for _, d := range []Descriptor{
		Point([]byte("usertable/user6284781860667377211")),
		Point(nil),
		ScanOf([]byte("a"), []byte("zz"), 7, true),
		ScanOf([]byte("ab"), []byte("c"), 0, false),
		ScanOf([]byte("a"), []byte("bc"), 1<<31, false),
	} {
		h := fnv.New64a()
		h.Write(d.identity(nil))
		x := h.Sum64()
		x ^= x >> 33
		x *= 0xff51afd7ed558ccd
		x ^= x >> 33
		x *= 0xc4ceb9fe1a85ec53
		x ^= x >> 33
		if got := d.Hash64(); got != x {
			t.Errorf("%v: Hash64 %x, FNV-1a of identity %x", d, got, x)
		}
	}
}
