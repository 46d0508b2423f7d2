package resp

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
	"github.com/shoaldb/shoal/server/resp/wire"
)

// slotMapMaxAge is how old a slot map CLUSTER commands may answer from; concurrent requests share one
// rebuild. MOVED replies mark the map stale when it disagrees with them.
const slotMapMaxAge = 250 * time.Millisecond

// nodeInfo is one node as the RESP layer shows it.
type nodeInfo struct {
	id   uint64
	resp string // advertised RESP address; "" when the node runs no RESP listener
	live bool
}

// shard is a slot interval [first, last] with the node serving it (owner) and the other voters of
// its range that have a RESP address (replicas).
type shard struct {
	first, last int
	owner       uint64
	replicas    []uint64
	rangeIDs    []uint64
}

// slotMap is the cluster's slot → node map as this node sees it.
type slotMap struct {
	built  time.Time
	self   uint64
	shards []shard // in slot order, covering [0, NumSlots) without gaps
	nodes  map[uint64]*nodeInfo
}

// ownerOf is the node serving slot s.
func (m *slotMap) ownerOf(s int) uint64 {
	i, _ := slices.BinarySearchFunc(m.shards, s, func(sh shard, s int) int {
		switch {
		case sh.last < s:
			return -1
		case sh.first > s:
			return 1
		}
		return 0
	})
	if i < len(m.shards) && m.shards[i].first <= s && s <= m.shards[i].last {
		return m.shards[i].owner
	}
	return m.self
}

// ownedBy lists the slot intervals owned by node id.
func (m *slotMap) ownedBy(id uint64) [][2]int {
	var out [][2]int
	for _, sh := range m.shards {
		if sh.owner == id {
			if n := len(out); n > 0 && out[n-1][1]+1 == sh.first {
				out[n-1][1] = sh.last
			} else {
				out = append(out, [2]int{sh.first, sh.last})
			}
		}
	}
	return out
}

type slotCache struct {
	mu       sync.Mutex
	cur      *slotMap
	stale    bool
	building chan struct{}
	err      error
}

// slotMap returns a slot map at most maxAge old, building one if needed.
func (s *Server) slotMap(ctx context.Context, maxAge time.Duration) (*slotMap, error) {
	c := &s.slots
	for {
		c.mu.Lock()
		if m := c.cur; m != nil && !c.stale && time.Since(m.built) <= maxAge {
			c.mu.Unlock()
			return m, nil
		}
		if ch := c.building; ch != nil {
			c.mu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			c.mu.Lock()
			m, err := c.cur, c.err
			c.mu.Unlock()
			if err != nil {
				return nil, err
			}
			if m != nil {
				return m, nil
			}
			continue
		}
		ch := make(chan struct{})
		c.building = ch
		c.mu.Unlock()
		m, err := s.buildSlotMap(ctx)
		c.mu.Lock()
		c.building, c.err = nil, err
		if err == nil {
			c.cur, c.stale = m, false
		}
		c.mu.Unlock()
		close(ch)
		return m, err
	}
}

// markStale makes the next CLUSTER command rebuild the map.
func (s *Server) markStale() {
	s.slots.mu.Lock()
	s.slots.stale = true
	s.slots.mu.Unlock()
}

// cachedSlotMap returns the last map, whatever its age (nil if none yet).
func (s *Server) cachedSlotMap() *slotMap {
	s.slots.mu.Lock()
	defer s.slots.mu.Unlock()
	return s.slots.cur
}

func (s *Server) buildSlotMap(ctx context.Context) (*slotMap, error) {
	nresp, err := s.node.Nodes(ctx, &pb.NodesRequest{})
	if err == nil && nresp.GetError() != nil {
		err = pbReply(nresp.GetError(), false)
	}
	if err != nil {
		return nil, err
	}
	rresp, err := s.node.Ranges(ctx, &pb.RangesRequest{})
	if err == nil && rresp.GetError() != nil {
		err = pbReply(rresp.GetError(), false)
	}
	if err != nil {
		return nil, err
	}
	m := &slotMap{built: time.Now(), self: s.node.NodeID(), nodes: map[uint64]*nodeInfo{}}
	for _, ns := range nresp.GetNodes() {
		d := ns.GetDesc()
		if d == nil || d.NodeId == 0 {
			continue
		}
		m.nodes[d.NodeId] = &nodeInfo{id: d.NodeId, resp: d.RespAddr, live: ns.Live}
	}
	self := m.nodes[m.self]
	if self == nil {
		self = &nodeInfo{id: m.self, live: true}
		m.nodes[m.self] = self
	}
	if self.resp == "" {
		self.resp = s.advertised()
	}
	self.live = true
	hasRESP := func(id uint64) bool { n := m.nodes[id]; return n != nil && n.resp != "" }

	type rng struct {
		first, last int
		d           *pb.RangeDescriptor
		leader      uint64
	}
	var rs []rng
	for _, r := range rresp.GetRanges() {
		d := r.GetDesc()
		if d == nil || d.RangeId == replica.MetaRangeID {
			continue
		}
		if first, last, ok := SlotsOf(d.StartKey, d.EndKey); ok {
			rs = append(rs, rng{first, last, d, r.LeaderNodeId})
		}
	}
	slices.SortFunc(rs, func(a, b rng) int { return a.first - b.first })
	next := 0
	add := func(sh shard) {
		if n := len(m.shards); n > 0 {
			p := &m.shards[n-1]
			if p.owner == sh.owner && slices.Equal(p.replicas, sh.replicas) && p.last+1 == sh.first {
				p.last = sh.last
				p.rangeIDs = append(p.rangeIDs, sh.rangeIDs...)
				return
			}
		}
		m.shards = append(m.shards, sh)
	}
	for _, r := range rs {
		if r.first < next {
			continue // overlapping descriptors (a split's meta update in flight): keep the first
		}
		if r.first > next {
			add(shard{first: next, last: r.first - 1, owner: m.self}) // a gap: this node forwards
		}
		owner := r.leader
		if owner == 0 || !hasRESP(owner) {
			owner = m.self // no known leader, or one without RESP: this node serves (by forwarding)
		}
		var reps []uint64
		for _, rd := range r.d.Replicas {
			if !rd.Learner && rd.NodeId != owner && hasRESP(rd.NodeId) {
				reps = append(reps, rd.NodeId)
			}
		}
		slices.Sort(reps)
		add(shard{first: r.first, last: r.last, owner: owner, replicas: reps, rangeIDs: []uint64{r.d.RangeId}})
		next = r.last + 1
	}
	if next < NumSlots {
		add(shard{first: next, last: NumSlots - 1, owner: m.self})
	}
	return m, nil
}

func descContains(d *pb.RangeDescriptor, k []byte) bool {
	return bytes.Compare(k, d.StartKey) >= 0 && (len(d.EndKey) == 0 || bytes.Compare(k, d.EndKey) < 0)
}

// movedTarget decides whether a cluster client should be redirected for slot after a local call
// failed with pe: it returns the RESP address of the slot's owner when that is another node with a
// RESP listener. The owner is the leader of the range holding the slot's first key (the same rule as
// CLUSTER SLOTS), taken from the failed call's leader hint when it concerns that range, else from the
// slot map.
func (s *Server) movedTarget(ctx context.Context, slot int, pe *pb.Error) (string, bool) {
	var owner uint64
	if d := pe.GetRange(); d != nil && descContains(d, SlotStart(slot)) {
		owner = pe.GetLeaderNodeId()
	} else if m, err := s.slotMap(ctx, 2*time.Second); err == nil {
		owner = m.ownerOf(slot)
	}
	self := s.node.NodeID()
	if owner == 0 || owner == self {
		return "", false
	}
	m := s.cachedSlotMap()
	if m == nil || m.nodes[owner] == nil {
		var err error
		if m, err = s.slotMap(ctx, 0); err != nil {
			return "", false
		}
	}
	n := m.nodes[owner]
	if n == nil || n.resp == "" {
		return "", false
	}
	if m.ownerOf(slot) != owner {
		s.markStale() // the map is behind: let the client's CLUSTER SLOTS see the new owner
	}
	return n.resp, true
}

// redisNodeID is the 40-hex-digit node id Redis Cluster clients expect, derived from the cluster id
// and the Shoal node id (stable across restarts).
func (s *Server) redisNodeID(id uint64) string {
	h := sha1.Sum([]byte(s.node.ClusterID() + "/" + strconv.FormatUint(id, 10)))
	return hex.EncodeToString(h[:])
}

func splitHostPort(addr string) (string, int) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, 0
	}
	port, _ := strconv.Atoi(p)
	return h, port
}

// writeNode writes a CLUSTER SLOTS node entry: ip, port, id.
func (s *Server) writeSlotsNode(w *wire.Writer, n *nodeInfo) {
	host, port := splitHostPort(n.resp)
	w.Array(3)
	w.BulkString(host)
	w.Int(int64(port))
	w.BulkString(s.redisNodeID(n.id))
}

func (s *Server) clusterSlots(w *wire.Writer, m *slotMap) {
	w.Array(len(m.shards))
	for _, sh := range m.shards {
		reps := 0
		for _, r := range sh.replicas {
			if m.nodes[r] != nil {
				reps++
			}
		}
		w.Array(3 + reps)
		w.Int(int64(sh.first))
		w.Int(int64(sh.last))
		s.writeSlotsNode(w, m.nodes[sh.owner])
		for _, r := range sh.replicas {
			if n := m.nodes[r]; n != nil {
				s.writeSlotsNode(w, n)
			}
		}
	}
}

// clusterShards answers CLUSTER SHARDS: slot intervals grouped by their owner and replicas.
func (s *Server) clusterShards(w *wire.Writer, m *slotMap) {
	type group struct {
		owner    uint64
		replicas []uint64
		slots    []int
	}
	var groups []*group
outer:
	for _, sh := range m.shards {
		for _, g := range groups {
			if g.owner == sh.owner && slices.Equal(g.replicas, sh.replicas) {
				g.slots = append(g.slots, sh.first, sh.last)
				continue outer
			}
		}
		groups = append(groups, &group{owner: sh.owner, replicas: sh.replicas, slots: []int{sh.first, sh.last}})
	}
	w.Array(len(groups))
	for _, g := range groups {
		w.Array(4)
		w.BulkString("slots")
		w.Array(len(g.slots))
		for _, x := range g.slots {
			w.Int(int64(x))
		}
		w.BulkString("nodes")
		members := append([]uint64{g.owner}, g.replicas...)
		w.Array(len(members))
		for i, id := range members {
			n := m.nodes[id]
			host, port := splitHostPort(n.resp)
			role, health := "master", "online"
			if i > 0 {
				role = "replica"
			}
			if !n.live {
				health = "failed"
			}
			w.Array(14)
			w.BulkString("id")
			w.BulkString(s.redisNodeID(id))
			w.BulkString("port")
			w.Int(int64(port))
			w.BulkString("ip")
			w.BulkString(host)
			w.BulkString("endpoint")
			w.BulkString(host)
			w.BulkString("role")
			w.BulkString(role)
			w.BulkString("replication-offset")
			w.Int(0)
			w.BulkString("health")
			w.BulkString(health)
		}
	}
}

// masterOf is the role CLUSTER NODES gives node id, consistent with CLUSTER SLOTS: a node that owns
// slots (leads their ranges) is a master (0); a node that owns none but is listed as a replica of some
// slot intervals is a replica of the owner whose slots it holds the most of (ties: the lower node id);
// any other node is a master without slots. Shoal's replicas are per range, so a master may also hold
// replicas of other masters' slots: CLUSTER SLOTS lists those, CLUSTER NODES cannot.
func (m *slotMap) masterOf(id uint64) uint64 {
	held := map[uint64]int{}
	for _, sh := range m.shards {
		if sh.owner == id {
			return 0
		}
		if slices.Contains(sh.replicas, id) {
			held[sh.owner] += sh.last - sh.first + 1
		}
	}
	var master uint64
	for owner, n := range held {
		if n > held[master] || n == held[master] && owner < master {
			master = owner
		}
	}
	return master
}

// clusterNodes renders CLUSTER NODES: every node with a RESP address, with the role masterOf gives it
// and, for a master, the slots it owns.
func (s *Server) clusterNodes(m *slotMap) string {
	ids := make([]uint64, 0, len(m.nodes))
	for id, n := range m.nodes {
		if n.resp != "" {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var b strings.Builder
	now := time.Now().UnixMilli()
	for _, id := range ids {
		n := m.nodes[id]
		host, port := splitHostPort(n.resp)
		cport := port + 10000
		if cport > 65535 {
			cport = 0
		}
		flags, master, epoch := "master", "-", id
		if mid := m.masterOf(id); mid != 0 {
			flags, master, epoch = "slave", s.redisNodeID(mid), mid
		}
		if id == m.self {
			flags = "myself," + flags
		}
		link := "connected"
		if !n.live {
			flags += ",fail"
			link = "disconnected"
		}
		fmt.Fprintf(&b, "%s %s@%d %s %s 0 %d %d %s", s.redisNodeID(id), net.JoinHostPort(host, strconv.Itoa(port)), cport, flags, master, now, epoch, link)
		for _, iv := range m.ownedBy(id) {
			if iv[0] == iv[1] {
				fmt.Fprintf(&b, " %d", iv[0])
			} else {
				fmt.Fprintf(&b, " %d-%d", iv[0], iv[1])
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func (s *Server) clusterInfo(m *slotMap) string {
	owners := map[uint64]bool{}
	known := 0
	for _, sh := range m.shards {
		owners[sh.owner] = true
	}
	for _, n := range m.nodes {
		if n.resp != "" {
			known++
		}
	}
	lines := []string{
		"cluster_enabled:1",
		"cluster_state:ok",
		"cluster_slots_assigned:16384",
		"cluster_slots_ok:16384",
		"cluster_slots_pfail:0",
		"cluster_slots_fail:0",
		fmt.Sprintf("cluster_known_nodes:%d", known),
		fmt.Sprintf("cluster_size:%d", len(owners)),
		fmt.Sprintf("cluster_current_epoch:%d", len(m.nodes)),
		fmt.Sprintf("cluster_my_epoch:%d", m.self),
		fmt.Sprintf("shoal_slot_intervals:%d", len(m.shards)),
	}
	return strings.Join(lines, "\r\n") + "\r\n"
}
