package client

import (
	"bytes"
	"sort"
	"sync"
	"time"

	"github.com/shoaldb/shoal/pb"
)

// rangeEntry is one cached range: its descriptor and what the client believes about its leader.
// Descriptors are shared and never modified.
type rangeEntry struct {
	desc       *pb.RangeDescriptor
	at         time.Time // when the descriptor was looked up
	leaderID   uint64    // 0: unknown
	leaderAddr string    // set by a NOT_LEADER hint; overrides the node table for leaderID
}

// contains reports whether key is in [start, end) of d (an empty end is +inf).
func contains(d *pb.RangeDescriptor, key []byte) bool {
	return bytes.Compare(d.GetStartKey(), key) <= 0 && (len(d.GetEndKey()) == 0 || bytes.Compare(key, d.GetEndKey()) < 0)
}

// rangeCache maps keys to ranges, and node ids to addresses.
//
// Invariant: entries are sorted by start key and do not overlap. The cache is only a hint: the server
// checks every request's range id and key, so a stale entry costs a retry, never correctness.
type rangeCache struct {
	mu      sync.RWMutex
	entries []*rangeEntry
	nodes   map[uint64]string // node id → gRPC address
}

func newRangeCache() *rangeCache {
	return &rangeCache{nodes: make(map[uint64]string)}
}

// get returns the cached range containing key.
func (rc *rangeCache) get(key []byte) (rangeEntry, bool) {
	rc.mu.RLock()
	defer rc.mu.RUnlock()
	i := sort.Search(len(rc.entries), func(i int) bool {
		return bytes.Compare(rc.entries[i].desc.GetStartKey(), key) > 0
	}) - 1
	if i < 0 || !contains(rc.entries[i].desc, key) {
		return rangeEntry{}, false
	}
	return *rc.entries[i], true
}

// getBefore returns the cached range holding the keys just below end (an empty end is +inf): the range
// with start < end <= its end.
func (rc *rangeCache) getBefore(end []byte) (rangeEntry, bool) {
	rc.mu.RLock()
	defer rc.mu.RUnlock()
	if len(end) == 0 {
		if n := len(rc.entries); n > 0 && len(rc.entries[n-1].desc.GetEndKey()) == 0 {
			return *rc.entries[n-1], true
		}
		return rangeEntry{}, false
	}
	i := sort.Search(len(rc.entries), func(i int) bool {
		return bytes.Compare(rc.entries[i].desc.GetStartKey(), end) >= 0
	}) - 1
	if i < 0 {
		return rangeEntry{}, false
	}
	e := rc.entries[i]
	if ek := e.desc.GetEndKey(); len(ek) != 0 && bytes.Compare(ek, end) < 0 {
		return rangeEntry{}, false
	}
	return *e, true
}

// overlaps reports whether a and b share a key.
func overlaps(a, b *pb.RangeDescriptor) bool {
	aEndOK := len(a.GetEndKey()) == 0 || bytes.Compare(b.GetStartKey(), a.GetEndKey()) < 0
	bEndOK := len(b.GetEndKey()) == 0 || bytes.Compare(a.GetStartKey(), b.GetEndKey()) < 0
	return aEndOK && bEndOK
}

// insert caches d with the given leader (0 if unknown), replacing every entry it overlaps, unless the
// cache already holds a newer generation of the same range. It returns the entry now cached for d.
func (rc *rangeCache) insert(d *pb.RangeDescriptor, leaderID uint64, nodes []*pb.NodeDescriptor) rangeEntry {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, n := range nodes {
		if n.GetNodeId() != 0 && n.GetAddr() != "" {
			rc.nodes[n.GetNodeId()] = n.GetAddr()
		}
	}
	ne := &rangeEntry{desc: d, leaderID: leaderID, at: time.Now()}
	kept := rc.entries[:0:0]
	for _, e := range rc.entries {
		if !overlaps(e.desc, d) {
			kept = append(kept, e)
			continue
		}
		if e.desc.GetRangeId() == d.GetRangeId() && e.desc.GetGeneration() > d.GetGeneration() {
			return *e // ours is stale; keep the newer one and everything else
		}
		if e.desc.GetRangeId() == d.GetRangeId() && e.desc.GetGeneration() == d.GetGeneration() && leaderID == 0 {
			ne.leaderID, ne.leaderAddr = e.leaderID, e.leaderAddr // same range, keep what we know of its leader
		}
	}
	i := sort.Search(len(kept), func(i int) bool {
		return bytes.Compare(kept[i].desc.GetStartKey(), d.GetStartKey()) > 0
	})
	kept = append(kept, nil)
	copy(kept[i+1:], kept[i:])
	kept[i] = ne
	rc.entries = kept
	return *ne
}

// evict drops the entry for d if it is still the one cached (a newer descriptor inserted meanwhile is
// kept).
func (rc *rangeCache) evict(d *pb.RangeDescriptor) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for i, e := range rc.entries {
		if e.desc == d {
			rc.entries = append(rc.entries[:i:i], rc.entries[i+1:]...)
			return
		}
	}
}

// setLeader records the leader of range rangeID (addr may be empty, leaderID may be 0 if unknown).
func (rc *rangeCache) setLeader(rangeID, leaderID uint64, addr string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if leaderID != 0 && addr != "" {
		rc.nodes[leaderID] = addr
	}
	for i, e := range rc.entries {
		if e.desc.GetRangeId() == rangeID {
			ne := *e
			ne.leaderID, ne.leaderAddr = leaderID, addr
			rc.entries[i] = &ne
			return
		}
	}
}

// byID returns the cached entry of range rangeID.
func (rc *rangeCache) byID(rangeID uint64) (rangeEntry, bool) {
	rc.mu.RLock()
	defer rc.mu.RUnlock()
	for _, e := range rc.entries {
		if e.desc.GetRangeId() == rangeID {
			return *e, true
		}
	}
	return rangeEntry{}, false
}

// nodeAddr returns the gRPC address of node id, or "".
func (rc *rangeCache) nodeAddr(id uint64) string {
	rc.mu.RLock()
	defer rc.mu.RUnlock()
	return rc.nodes[id]
}

// nodeAddrs returns every known node address.
func (rc *rangeCache) nodeAddrs() []string {
	rc.mu.RLock()
	defer rc.mu.RUnlock()
	out := make([]string, 0, len(rc.nodes))
	for _, a := range rc.nodes {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// leaderAddrOf returns the address of e's leader, or "" if unknown.
func (rc *rangeCache) leaderAddrOf(e rangeEntry) string {
	if e.leaderAddr != "" {
		return e.leaderAddr
	}
	if e.leaderID == 0 {
		return ""
	}
	return rc.nodeAddr(e.leaderID)
}
