package catchup

import (
	"context"
	"fmt"
	"time"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
)

// targets remembers, per range, the applied index this node's replica must reach: the leader's when
// it answered, else the highest of the other voters' (an idle range's restarted replica may not have
// heard of its leader yet; a peer's applied index still bounds what it missed).
type targets map[uint64]uint64

// pending lists the replicas that have not reached their target, asking for the targets it lacks.
// A replica this node leads, or one with no other voter, has nothing to catch up.
func (tg targets) pending(ctx context.Context, self uint64, rs []Replica, ask AppliedAsker) (behind []uint64) {
	for _, r := range rs {
		target, ok := tg[r.RangeID]
		if !ok {
			target, ok = askTarget(ctx, self, r, ask)
			if ok {
				tg[r.RangeID] = target
			}
		}
		if !ok || r.Applied < target {
			behind = append(behind, r.RangeID)
		}
	}
	return behind
}

// askTarget finds one replica's target: 0 when this node leads it or it has no other voter.
func askTarget(ctx context.Context, self uint64, r Replica, ask AppliedAsker) (uint64, bool) {
	if r.Leader == self || len(r.Voters) == 0 {
		return 0, true
	}
	if r.Leader != 0 {
		if a, err := ask(ctx, r.Leader, r.RangeID); err == nil {
			return a, true
		}
	}
	var best uint64
	answered := false
	for _, v := range r.Voters {
		if v == r.Leader {
			continue // asked above
		}
		if a, err := ask(ctx, v, r.RangeID); err == nil {
			best, answered = max(best, a), true
		}
	}
	return best, answered
}

// FromStore lists st's voter replicas of node self with their other voters (none while st is nil).
func FromStore(st *replica.Store, self uint64) []Replica {
	if st == nil {
		return nil
	}
	var out []Replica
	for _, r := range st.Replicas() {
		d := r.Desc()
		if d == nil {
			continue
		}
		cr := Replica{RangeID: r.RangeID(), Applied: r.Applied(), Leader: r.LeaderNode()}
		voter := false
		for _, rd := range d.Replicas {
			switch {
			case rd.NodeId == self:
				voter = !rd.Learner
			case !rd.Learner:
				cr.Voters = append(cr.Voters, rd.NodeId)
			}
		}
		if voter {
			out = append(out, cr)
		}
	}
	return out
}

// OverRPC is an AppliedAsker over the peers' WaitApplied RPC (index 0 answers at once), each ask
// bounded by a second.
func OverRPC(peer func(node uint64) (pb.ShoalClient, error)) AppliedAsker {
	return func(ctx context.Context, node, rangeID uint64) (uint64, error) {
		c, err := peer(node)
		if err != nil {
			return 0, err
		}
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		resp, err := c.WaitApplied(ctx, &pb.WaitAppliedRequest{RangeId: rangeID})
		if err == nil && resp.GetError() != nil {
			err = fmt.Errorf("node %d: %s", node, resp.GetError().GetMessage())
		}
		return resp.GetApplied(), err
	}
}
