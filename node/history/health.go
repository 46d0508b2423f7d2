package history

import (
	"github.com/shoaldb/shoal/replica"
)

// Replica is what the health counts need of one replica on this node.
type Replica struct {
	RangeID uint64
	Voters  []uint64 // nodes holding the range's voting replicas
	Leader  bool     // this node's replica leads the range
	// LeaderNode is the leader this replica knows (0: none).
	LeaderNode uint64
}

// Health is the state of the ranges a node answers for, as shoal_ranges_* report it. A range is
// under-replicated when fewer of its voters are on live nodes than the replication factor (or the
// number of nodes, when the cluster is smaller), and unavailable when they are not a quorum of its
// voters. The node that answers for a range is its leader, or, while it has none, its first voter
// on a live node: summed over the nodes, every range counts once, as long as one of its voters lives.
type Health struct {
	Replicas        int `json:"replicas"`
	Leaders         int `json:"leaders"`
	Quiesced        int `json:"quiesced"`
	UnderReplicated int `json:"under_replicated"`
	Unavailable     int `json:"unavailable"`
}

// RangeHealth is one range's state.
type RangeHealth int

// The states of a range.
const (
	Healthy RangeHealth = iota
	UnderReplicated
	Unavailable // also under-replicated
)

// String is the state's name in the API ("ok", "under-replicated", "unavailable").
func (h RangeHealth) String() string {
	switch h {
	case UnderReplicated:
		return "under-replicated"
	case Unavailable:
		return "unavailable"
	}
	return "ok"
}

// Check is the state of a range whose voters are on the given nodes: live says which nodes are live,
// target is the number of voters it should have.
func Check(voters []uint64, live func(uint64) bool, target int) RangeHealth {
	n := 0
	for _, v := range voters {
		if live(v) {
			n++
		}
	}
	switch {
	case n < len(voters)/2+1:
		return Unavailable
	case n < target:
		return UnderReplicated
	}
	return Healthy
}

// Target is the number of voters a range should have: the replication factor, or the number of
// nodes when the cluster is smaller (as CockroachDB clamps its zone configs).
func Target(factor, nodes int) int {
	if nodes > 0 && nodes < factor {
		return nodes
	}
	return factor
}

// Health counts this node's replicas and the ranges it answers for.
func (r *Recorder) Health() Health {
	if r.deps.Replicas == nil {
		return Health{}
	}
	reps, awake := r.deps.Replicas()
	if len(reps) == 0 {
		return Health{} // not started: the node may not know its own id yet
	}
	liveSet := map[uint64]bool{}
	if r.deps.Live != nil {
		for _, id := range r.deps.Live() {
			liveSet[id] = true
		}
	}
	live := func(id uint64) bool { return liveSet[id] }
	nodes := 0
	if r.deps.Nodes != nil {
		nodes = r.deps.Nodes()
	}
	target := Target(r.deps.Factor, nodes)
	var self uint64
	if r.deps.Self != nil {
		self = r.deps.Self()
	}
	h := Health{Replicas: len(reps), Quiesced: max(0, len(reps)-awake)}
	for _, rp := range reps {
		if rp.Leader {
			h.Leaders++
		}
		if !answersFor(rp, self, live) {
			continue
		}
		switch Check(rp.Voters, live, target) {
		case Unavailable:
			h.Unavailable++
			h.UnderReplicated++
		case UnderReplicated:
			h.UnderReplicated++
		}
	}
	return h
}

// answersFor reports whether this node counts rp's range: it leads it, or the range has no leader
// and this node holds its first voter on a live node.
func answersFor(rp Replica, self uint64, live func(uint64) bool) bool {
	if rp.Leader {
		return true
	}
	if rp.LeaderNode != 0 && live(rp.LeaderNode) {
		return false // the leader counts it
	}
	for _, v := range rp.Voters {
		if live(v) {
			return v == self
		}
	}
	return false
}

// StoreReplicas lists st's replicas for the health counts (none when st is nil), with the number
// awake.
func StoreReplicas(st *replica.Store) ([]Replica, int) {
	if st == nil {
		return nil, 0
	}
	var out []Replica
	for _, r := range st.Replicas() {
		d := r.Desc()
		if d == nil {
			continue
		}
		leader, _ := r.LeaderTerm()
		rp := Replica{RangeID: r.RangeID(), Leader: leader, LeaderNode: r.LeaderNode()}
		for _, rd := range d.GetReplicas() {
			if !rd.GetLearner() {
				rp.Voters = append(rp.Voters, rd.GetNodeId())
			}
		}
		out = append(out, rp)
	}
	return out, st.ActiveReplicas()
}
