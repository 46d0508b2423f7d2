package readreplicas

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/shoaldb/shoal/bench/benchutil"
	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/stopper"
)

// The placement every arm measures on: a split's ranges keep their parent's three nodes, so
// without it every range would have its voters on the same three nodes and one leader. Range i (in
// key order) has its voters on nodes i+1, i+2, i+3 (mod Nodes) and its leader on the middle one:
// with 16 ranges on 5 nodes each node holds 9 or 10 voters and leads 3 or 4 ranges, n1 (which also
// leads the meta range and runs the autopilot) 3. It is the same in every arm, whatever the
// rebalancer would have chosen on a fresh cluster, and nothing moves it while an arm runs but the
// arm's learners.

// placedVoters is where range i's voters go, its leader first.
func placedVoters(i, nodes int) []uint64 {
	vs := make([]uint64, 0, 3)
	for k := range min(3, nodes) {
		vs = append(vs, uint64((i+k)%nodes+1))
	}
	if len(vs) > 1 {
		vs[0], vs[1] = vs[1], vs[0]
	}
	return vs
}

// rangeIndex is the workload range d starts, or −1 for another range.
func rangeIndex(o Options, d *pb.RangeDescriptor) int {
	for i := range o.Ranges {
		if bytes.Equal(d.GetStartKey(), rangeStart(i)) {
			return i
		}
	}
	return -1
}

// place moves every workload range's voters and leadership to placedVoters.
func place(ctx context.Context, c *benchutil.Cluster, cl *client.Client, o Options) error {
	rs, err := cl.UserRanges(ctx)
	if err != nil {
		return fmt.Errorf("list ranges: %w", err)
	}
	for _, r := range rs {
		i := rangeIndex(o, r.GetDesc())
		if i < 0 {
			continue
		}
		id := r.GetDesc().GetRangeId()
		if err := placeRange(ctx, c, cl, id, placedVoters(i, c.Len())); err != nil {
			return fmt.Errorf("place r%d: %w", id, err)
		}
	}
	return placeLeaders(ctx, cl, o)
}

// placeRange moves range id's voters to want, one step at a time, each from the range's state as
// it is then (a step that timed out may have been half done): a learner left by an interrupted
// step goes, a leader on a node to leave hands its leadership to a voter that stays, then one
// voter moves.
func placeRange(ctx context.Context, c *benchutil.Cluster, cl *client.Client, id uint64, want []uint64) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		r, err := rangeStatus(ctx, cl, id)
		if err != nil {
			return err
		}
		have := voterNodes(r.GetDesc())
		add, remove := missing(want, have), missing(have, want)
		learners := learnerNodes(r.GetDesc())
		if len(add) == 0 && len(remove) == 0 && len(learners) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("voters %v, learners %v, want voters %v", have, learners, want)
		}
		req := &pb.RelocateReplicaRequest{RangeId: id, Step: pb.RelocateStep_RELOCATE_ALL}
		switch {
		case len(learners) > 0:
			req.RemoveNodeId, req.Step = learners[0], pb.RelocateStep_RELOCATE_REMOVE
		case len(add) != len(remove):
			return fmt.Errorf("voters %v, want %v", have, want)
		case slices.Contains(remove, r.GetLeaderNodeId()):
			_ = cl.TransferLeader(ctx, id, missing(have, remove)[0]) // checked on the next round
			if err := stopper.SleepContext(ctx, 200*time.Millisecond); err != nil {
				return err
			}
			continue
		default:
			req.AddNodeId, req.RemoveNodeId = add[0], remove[0]
		}
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		resp, err := c.Node(0).KV.RelocateReplica(sctx, req)
		cancel()
		if err == nil && resp.GetError() == nil {
			continue
		}
		if err := stopper.SleepContext(ctx, 500*time.Millisecond); err != nil { // a step refused: the next round sees why
			return err
		}
	}
}

// rangeStatus is range id's status.
func rangeStatus(ctx context.Context, cl *client.Client, id uint64) (*pb.RangeStatus, error) {
	rs, err := cl.UserRanges(ctx)
	if err != nil {
		return nil, fmt.Errorf("list ranges: %w", err)
	}
	for _, r := range rs {
		if r.GetDesc().GetRangeId() == id {
			return r, nil
		}
	}
	return nil, fmt.Errorf("r%d not found", id)
}

// missing lists the nodes of a that b lacks.
func missing(a, b []uint64) []uint64 {
	var out []uint64
	for _, n := range a {
		if !slices.Contains(b, n) {
			out = append(out, n)
		}
	}
	return out
}

// placeLeaders moves each workload range's leadership to the first of placedVoters, where it is
// not, and waits until every one is there.
func placeLeaders(ctx context.Context, cl *client.Client, o Options) error {
	return benchutil.WaitFor(ctx, 2*time.Minute, func() bool {
		rs, err := cl.UserRanges(ctx)
		if err != nil {
			return false
		}
		placed := true
		for _, r := range rs {
			i := rangeIndex(o, r.GetDesc())
			if i < 0 {
				continue
			}
			want := placedVoters(i, o.Nodes)
			if !slices.Equal(sorted(voterNodes(r.GetDesc())), sorted(want)) {
				return false // a relocation not yet visible
			}
			if r.GetLeaderNodeId() != want[0] {
				placed = false
				_ = cl.TransferLeader(ctx, r.GetDesc().GetRangeId(), want[0]) // checked on the next poll
			}
		}
		return placed
	})
}

func voterNodes(d *pb.RangeDescriptor) []uint64 {
	var out []uint64
	for _, rd := range d.GetReplicas() {
		if !rd.GetLearner() {
			out = append(out, rd.GetNodeId())
		}
	}
	return out
}

func sorted(s []uint64) []uint64 {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// leadersPerNode counts the workload ranges each node leads, in node order.
func leadersPerNode(ctx context.Context, cl *client.Client, o Options) ([]int, error) {
	rs, err := cl.UserRanges(ctx)
	if err != nil {
		return nil, fmt.Errorf("list ranges: %w", err)
	}
	out := make([]int, o.Nodes)
	for _, r := range rs {
		if l := r.GetLeaderNodeId(); rangeIndex(o, r.GetDesc()) >= 0 && l >= 1 && int(l) <= o.Nodes {
			out[l-1]++
		}
	}
	return out, nil
}
