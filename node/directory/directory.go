// Package directory owns one node's view of the cluster's nodes: their descriptors, when each was last
// heard from, what each last reported (stats, leaderships, block-cache readings), and pooled gRPC
// connections to them.
//
// It learns only what it is told (heartbeats, joins, the meta range, this node's own transfers); it must
// never send a heartbeat or read the meta range itself.
package directory

import (
	"sort"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/shoaldb/shoal/pb"
)

// Directory is this node's view of the cluster's nodes: descriptors (from the meta range, joins and
// heartbeats), when each was last heard from, and what each reported.
type Directory struct {
	mu     sync.RWMutex
	nodes  map[uint64]*pb.NodeDescriptor
	last   map[uint64]time.Time
	stats  map[uint64]*pb.NodeStats
	drain  map[uint64]bool
	leader map[uint64]leaderMark // range id → leader, from heartbeats and this node's transfers
	// metaLeader is the node leading the meta range as last reported.
	metaLeader uint64
	// metaDescCache is the meta range descriptor as last reported by a node holding a replica.
	metaDescCache *pb.RangeDescriptor
	// cache holds each node's recent block-cache counter readings (oldest first), for hit ratios
	// over a window rather than since the node started.
	cache map[uint64][]cacheMark
}

// leaderMark is who leads a range as this node knows it. term is the leader's term as its heartbeat
// reported it (0: unknown). moved marks a leadership this node saw move (a TransferLeader it made
// returned): the term's leader handed over, so a heartbeat claiming the leadership in a term at or
// below term, sent before the transfer and delivered after it, is stale.
type leaderMark struct {
	node, term uint64
	moved      bool
}

// cacheMark is one reading of a node's cumulative block-cache counters.
type cacheMark struct {
	at           time.Time
	hits, misses uint64
	// served and servedInCache: block bytes of the node's own reads, and the part the cache held.
	served, servedInCache uint64
}

// cacheMarks is how many readings are kept per node (one per heartbeat).
const cacheMarks = 32

// New returns an empty directory.
func New() *Directory {
	return &Directory{nodes: map[uint64]*pb.NodeDescriptor{}, last: map[uint64]time.Time{},
		stats: map[uint64]*pb.NodeStats{}, drain: map[uint64]bool{}, leader: map[uint64]leaderMark{},
		cache: map[uint64][]cacheMark{}}
}

// Upsert records d and reports whether it changed anything.
func (d *Directory) Upsert(nd *pb.NodeDescriptor) bool {
	if nd == nil || nd.NodeId == 0 || nd.Addr == "" {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if old, ok := d.nodes[nd.NodeId]; ok && proto.Equal(old, nd) {
		return false
	}
	d.nodes[nd.NodeId] = proto.Clone(nd).(*pb.NodeDescriptor)
	return true
}

// Heard records that nodeID was heard from at t.
func (d *Directory) Heard(nodeID uint64, t time.Time) {
	d.mu.Lock()
	d.last[nodeID] = t
	d.mu.Unlock()
}

// Resolve returns nodeID's gRPC address.
func (d *Directory) Resolve(nodeID uint64) (string, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	nd, ok := d.nodes[nodeID]
	if !ok {
		return "", false
	}
	return nd.Addr, true
}

// Get returns nodeID's descriptor, nil when unknown.
func (d *Directory) Get(nodeID uint64) *pb.NodeDescriptor {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.nodes[nodeID]
}

// All returns every known node's descriptor by ascending id.
func (d *Directory) All() []*pb.NodeDescriptor {
	d.mu.RLock()
	defer d.mu.RUnlock()
	out := make([]*pb.NodeDescriptor, 0, len(d.nodes))
	for _, nd := range d.nodes {
		out = append(out, nd)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NodeId < out[j].NodeId })
	return out
}

// LastHeard is when nodeID was last heard from (zero: never).
func (d *Directory) LastHeard(nodeID uint64) time.Time {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.last[nodeID]
}

// LiveNodes returns the nodes heard from within window.
func (d *Directory) LiveNodes(window time.Duration) []uint64 {
	now := time.Now()
	d.mu.RLock()
	defer d.mu.RUnlock()
	var out []uint64
	for id := range d.nodes {
		if now.Sub(d.last[id]) <= window {
			out = append(out, id)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// ShowStats takes a status call's fresh report of this node: it replaces the node's stats and notes
// its leaderships, as RecordStats does, but adds no cache reading. Readings come from heartbeats
// alone, one loop's, in order; a report computed just before a heartbeat's and recorded after it has
// lower counters, which RecordStats takes for a restart and clears the readings (a transfer's warmth
// check then found the leader's ratio unknown 30 s into a run).
func (d *Directory) ShowStats(nodeID uint64, st *pb.NodeStats, draining bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.setStatsLocked(nodeID, st)
	d.drain[nodeID] = draining
}

// setStatsLocked replaces node's stats and notes the leaderships they report (d.mu held).
func (d *Directory) setStatsLocked(nodeID uint64, st *pb.NodeStats) {
	d.stats[nodeID] = st
	for _, rl := range st.GetRanges() {
		d.noteLeaderLocked(nodeID, rl)
	}
}

// RecordStats takes a heartbeat's report of nodeID: its stats (nil: none), drain flag, the meta
// leader it knows and the meta descriptor it holds; each stats report adds a cache reading.
func (d *Directory) RecordStats(nodeID uint64, st *pb.NodeStats, draining bool, metaLeader uint64, metaDesc *pb.RangeDescriptor) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if metaDesc != nil && (d.metaDescCache == nil || metaDesc.Generation >= d.metaDescCache.Generation) {
		d.metaDescCache = metaDesc
	}
	if st != nil {
		d.setStatsLocked(nodeID, st)
		marks := d.cache[nodeID]
		if n := len(marks); n > 0 && (st.BlockCacheHits < marks[n-1].hits || st.BlockCacheMisses < marks[n-1].misses ||
			st.ServedBlockBytes < marks[n-1].served) {
			marks = marks[:0] // the node restarted: its counters began again
		}
		if len(marks) == cacheMarks {
			marks = append(marks[:0], marks[1:]...)
		}
		d.cache[nodeID] = append(marks, cacheMark{at: time.Now(), hits: st.BlockCacheHits, misses: st.BlockCacheMisses,
			served: st.ServedBlockBytes, servedInCache: st.ServedBlockBytesInCache})
	}
	d.drain[nodeID] = draining
	if metaLeader != 0 {
		d.metaLeader = metaLeader
	}
}

// CacheHitRatio is node's block-cache hit ratio over about the last window (from its heartbeats:
// the newest reading against the oldest one within window), and false when there are not two
// readings or the cache saw no lookups in between.
func (d *Directory) CacheHitRatio(nodeID uint64, window time.Duration) (float64, bool) {
	first, last, ok := d.cacheWindow(nodeID, window)
	if !ok || last.hits+last.misses == first.hits+first.misses {
		return 0, false
	}
	h, m := last.hits-first.hits, last.misses-first.misses
	return float64(h) / float64(h+m), true
}

// ServedHitRatio is node's block-cache hit ratio for its own reads over about the last window, by
// block bytes: without the snapshots it streamed out and its compactions, which miss by design (on a
// disk-bound node in the join-long scenario they put the whole-cache ratio at 0.57–0.72 while the
// clients' reads hit at 0.98–0.99). False as for CacheHitRatio.
func (d *Directory) ServedHitRatio(nodeID uint64, window time.Duration) (float64, bool) {
	first, last, ok := d.cacheWindow(nodeID, window)
	if !ok || last.served == first.served {
		return 0, false
	}
	return float64(last.servedInCache-first.servedInCache) / float64(last.served-first.served), true
}

// cacheWindow returns node's newest cache reading and the oldest within window of it (at least the
// one before it), and false when there are fewer than two.
func (d *Directory) cacheWindow(nodeID uint64, window time.Duration) (first, last cacheMark, ok bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	marks := d.cache[nodeID]
	if len(marks) < 2 {
		return cacheMark{}, cacheMark{}, false
	}
	last = marks[len(marks)-1]
	first = marks[len(marks)-2]
	for i := len(marks) - 2; i >= 0 && last.at.Sub(marks[i].at) <= window; i-- {
		first = marks[i]
	}
	return first, last, true
}

// noteLeaderLocked takes node's report on one range (d.mu held). Reports arrive a heartbeat late:
// without the terms, a report made just before a transfer and delivered after it put the old leader
// back, and the autopilot, seeing the new node lead one range fewer, moved one more leadership to it
// (a parallel join ended at 7 leaderships for a share of 6, measured).
func (d *Directory) noteLeaderLocked(node uint64, rl *pb.RangeLoad) {
	m, ok := d.leader[rl.RangeId]
	t := rl.Term // 0: a report without a term, compared with nothing
	if rl.Leader {
		switch {
		case !ok, t == 0:
			d.leader[rl.RangeId] = leaderMark{node: node, term: t}
		case m.moved && node != m.node && t <= m.term:
			// Led in the term that handed over, or earlier: sent before the transfer.
		case t >= m.term:
			d.leader[rl.RangeId] = leaderMark{node: node, term: t}
		}
		return
	}
	if !ok || m.node != node {
		return
	}
	// Not leading: forget it as the leader, unless the report predates the transfer to it (a
	// follower in the term that handed over) or comes from a term before the one it leads in.
	if t == 0 || t > m.term || (!m.moved && t == m.term) {
		delete(d.leader, rl.RangeId)
	}
}

// LeaderOf is the node believed to lead rangeID (0: unknown).
func (d *Directory) LeaderOf(rangeID uint64) uint64 {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.leader[rangeID].node
}

// SetLeader records a leader learned without its term (a NOT_LEADER hint, a split or merge this
// node made): the next report of any term replaces it.
func (d *Directory) SetLeader(rangeID, nodeID uint64) {
	d.mu.Lock()
	d.leader[rangeID] = leaderMark{node: nodeID, term: d.leader[rangeID].term}
	d.mu.Unlock()
}

// MovedLeader records that a leadership transfer to nodeID, made by this node, happened: reports
// from the previous term's leader sent before it are stale (see leaderMark).
func (d *Directory) MovedLeader(rangeID, nodeID uint64) {
	d.mu.Lock()
	d.leader[rangeID] = leaderMark{node: nodeID, term: d.leader[rangeID].term, moved: true}
	d.mu.Unlock()
}

// StatsOf returns nodeID's last reported stats and drain flag.
func (d *Directory) StatsOf(nodeID uint64) (*pb.NodeStats, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.stats[nodeID], d.drain[nodeID]
}

// MetaLeader is the node leading the meta range as last reported (0: unknown).
func (d *Directory) MetaLeader() uint64 {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.metaLeader
}

// MetaDesc is a copy of the newest meta range descriptor a node holding a replica reported (nil: none).
func (d *Directory) MetaDesc() *pb.RangeDescriptor {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.metaDescCache == nil {
		return nil
	}
	return proto.Clone(d.metaDescCache).(*pb.RangeDescriptor)
}
