package test

import (
	"context"

	"testing"
	"time"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/test/testcluster"
)

// TestLinearizableUnderReconfiguration runs the linearizability workload on four nodes while a nemesis
// moves replicas (learner, snapshot, promotion and removal in one joint change), transfers
// leaderships and splits the key space — with the autopilot running and free to react.
func TestLinearizableUnderReconfiguration(t *testing.T) {
	runLinearizable(t, 4, "reconfigurations", reconfigure)
}

// reconfigure is a nemesis of replica moves, leadership transfers and splits on the workload's keys.
func reconfigure(e *nemesisEnv) (actions int, err error) {
	splitAt := append([]string(nil), e.keys[1:]...)
	e.sleep(2 * time.Second)
	for time.Now().Before(e.deadline.Add(-time.Second)) {
		key := []byte(e.keys[e.rng.IntN(len(e.keys))])
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		rs, lerr := testcluster.RangeOf(ctx, e.admin, key)
		if lerr != nil {
			cancel()
			e.logf("lookup of %s: %v; retrying", key, lerr)
			time.Sleep(200 * time.Millisecond)
			continue
		}
		d := rs.GetDesc()
		node := e.c.Nodes[0].Node // any node forwards to the range's leader
		switch p := e.rng.IntN(10); {
		case p < 4: // move a non-leader replica to the node that has none
			var add, remove uint64
			for i := range e.c.Nodes {
				id := uint64(i + 1)
				if !hasReplica(d, id) {
					add = id
				} else if id != rs.GetLeaderNodeId() && remove == 0 {
					remove = id
				}
			}
			if add == 0 || remove == 0 {
				break
			}
			resp, rerr := node.RelocateReplica(ctx, &pb.RelocateReplicaRequest{RangeId: d.RangeId, AddNodeId: add, RemoveNodeId: remove})
			e.logf("move r%d: n%d -> n%d: %v %v", d.RangeId, remove, add, rerr, resp.GetError())
			actions++
		case p < 8: // transfer the leadership to another voter
			var to uint64
			for _, rd := range d.Replicas {
				if rd.NodeId != rs.GetLeaderNodeId() && !rd.Learner && e.rng.IntN(2) == 0 {
					to = rd.NodeId
				}
			}
			if to == 0 {
				break
			}
			terr := e.admin.TransferLeader(ctx, d.RangeId, to)
			e.logf("transfer r%d to n%d: %v", d.RangeId, to, terr)
			actions++
		default:
			if len(splitAt) == 0 {
				break
			}
			k := splitAt[0]
			splitAt = splitAt[1:]
			_, _, serr := e.admin.Split(ctx, []byte(k))
			e.logf("split at %s: %v", k, serr)
			actions++
		}
		cancel()
		e.sleep(time.Duration(300+e.rng.IntN(700)) * time.Millisecond)
	}
	return actions, nil
}

func hasReplica(d *pb.RangeDescriptor, node uint64) bool {
	for _, rd := range d.Replicas {
		if rd.NodeId == node {
			return true
		}
	}
	return false
}
