package test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/test/testcluster"
)

// TestLinearizableUnderDecommission runs the linearizability workload on four nodes while a nemesis
// drains a node (its leaderships move off, its replicas stay), makes it active again, and then
// decommissions a node (its replicas move to the other nodes and it ends marked decommissioned) —
// all of it done by the autopilot's drain and decommission policies while the clients run. After the
// porcupine check, the decommissioned node must hold no replica in any range descriptor and be marked
// decommissioned.
func TestLinearizableUnderDecommission(t *testing.T) {
	var d decommissionNemesis
	runLinearizable(t, 4, "drains, activations and decommissions", d.run)

	// runLinearizable has returned (and passed); the cluster runs until the test's cleanups.
	if d.victim == 0 {
		t.Fatal("the nemesis decommissioned no node")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var last string
	testcluster.WaitFor(t, 60*time.Second, fmt.Sprintf("n%d out of every range descriptor and marked decommissioned", d.victim), func() bool {
		var ok bool
		ok, last = decommissioned(ctx, d.admin, d.victim)
		return ok
	})
	t.Logf("n%d: %s", d.victim, last)
	if i := d.c.NodeIndex(d.victim); i >= 0 && d.c.Alive(i) {
		t.Logf("n%d's store still has %d replicas", d.victim, len(d.c.Nodes[i].Node.Store().Replicas()))
	}
	rs, err := d.admin.Ranges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		t.Logf("r%d [%q, %q): replicas %s, leader n%d", r.GetDesc().GetRangeId(), r.GetDesc().GetStartKey(),
			r.GetDesc().GetEndKey(), replicaList(r.GetDesc()), r.GetLeaderNodeId())
	}
}

// decommissionNemesis drains a node, re-activates it, then decommissions a node, and remembers which
// (and the admin client) for the checks after the run.
type decommissionNemesis struct {
	victim uint64
	c      *testcluster.Cluster
	admin  *client.Client
}

func (d *decommissionNemesis) run(e *nemesisEnv) (actions int, err error) {
	d.c, d.admin = e.c, e.admin
	e.sleep(2 * time.Second)

	// Split the key space between the workload's keys, so the drain and the decommission have several
	// ranges to move.
	{
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		_, _, serr := e.admin.Split(ctx, []byte(e.keys[len(e.keys)/2]))
		cancel()
		e.logf("split at %s: %v", e.keys[len(e.keys)/2], serr)
		if serr == nil {
			actions++
		}
	}
	e.sleep(time.Second)

	// Let the autopilot finish what it is doing (replica moves onto the fourth node, say), so that
	// whatever happens to the drained node's replicas afterwards is the drain's doing.
	if err := waitUntil(e, 10*time.Second, func() (bool, string) { return autopilotIdle(e.admin) }); err != nil {
		e.logf("the autopilot is still busy (%v); draining anyway", err)
	}

	// Drain the leader of the first key's range: its leaderships move off, its replicas stay.
	drained, err := leaderOfKey(e, []byte(e.keys[0]))
	if err != nil {
		return actions, err
	}
	before, _ := replicaCount(e.admin, drained)
	if err := setNodeState(e.admin, drained, pb.NodeAdminState_NODE_DRAINING); err != nil {
		return actions, fmt.Errorf("drain n%d: %w", drained, err)
	}
	e.logf("drain n%d (%d replicas)", drained, before)
	actions++
	if err := waitUntil(e, 12*time.Second, func() (bool, string) {
		leaders, replicas, err := nodeLoad(e.admin, drained)
		if err != nil {
			return false, err.Error()
		}
		return leaders == 0, fmt.Sprintf("%d leaderships, %d replicas", leaders, replicas)
	}); err != nil {
		return actions, fmt.Errorf("drain of n%d: %w", drained, err)
	}
	after, _ := replicaCount(e.admin, drained)
	e.logf("n%d drained: no leaderships; replicas %d before, %d after", drained, before, after)
	if after < before {
		logDecisions(e)
		return actions, fmt.Errorf("draining n%d removed replicas (%d before, %d after): a drain keeps them", drained, before, after)
	}
	e.sleep(time.Second)
	if err := setNodeState(e.admin, drained, pb.NodeAdminState_NODE_ACTIVE); err != nil {
		return actions, fmt.Errorf("activate n%d: %w", drained, err)
	}
	e.logf("activate n%d", drained)
	actions++
	e.sleep(2 * time.Second)

	// Decommission the node now leading the first key's range: its replicas, and leaderships, move.
	victim, err := leaderOfKey(e, []byte(e.keys[0]))
	if err != nil {
		return actions, err
	}
	if err := setNodeState(e.admin, victim, pb.NodeAdminState_NODE_DECOMMISSIONING); err != nil {
		return actions, fmt.Errorf("decommission n%d: %w", victim, err)
	}
	d.victim = victim
	n, _ := replicaCount(e.admin, victim)
	e.logf("decommission n%d (%d replicas)", victim, n)
	actions++
	// Watch it while the workload runs; the test checks the end state after the run.
	for time.Now().Before(e.deadline.Add(-time.Second)) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ok, what := decommissioned(ctx, e.admin, victim)
		cancel()
		if ok {
			e.logf("n%d decommissioned: %s", victim, what)
			break
		}
		e.sleep(500 * time.Millisecond)
	}

	// For the rest of the run, drain and re-activate the remaining nodes in turn.
	for time.Now().Before(e.deadline.Add(-3 * time.Second)) {
		node := uint64(e.rng.IntN(len(e.c.Nodes)) + 1)
		if node == victim {
			continue
		}
		if err := setNodeState(e.admin, node, pb.NodeAdminState_NODE_DRAINING); err != nil {
			return actions, fmt.Errorf("drain n%d: %w", node, err)
		}
		actions++
		werr := waitUntil(e, 8*time.Second, func() (bool, string) {
			leaders, replicas, err := nodeLoad(e.admin, node)
			if err != nil {
				return false, err.Error()
			}
			return leaders == 0, fmt.Sprintf("%d leaderships, %d replicas", leaders, replicas)
		})
		e.logf("drain n%d: %v", node, werr)
		if err := setNodeState(e.admin, node, pb.NodeAdminState_NODE_ACTIVE); err != nil {
			return actions, fmt.Errorf("activate n%d: %w", node, err)
		}
		e.logf("activate n%d", node)
		actions++
		e.sleep(time.Duration(500+e.rng.IntN(1500)) * time.Millisecond)
	}
	return actions, nil
}

// leaderOfKey returns the node leading the user range holding key (retrying briefly).
func leaderOfKey(e *nemesisEnv, key []byte) (uint64, error) {
	var last error
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		rs, err := testcluster.RangeOf(ctx, e.admin, key)
		cancel()
		if err == nil && rs.GetLeaderNodeId() != 0 {
			return rs.GetLeaderNodeId(), nil
		}
		last = err
	}
	return 0, fmt.Errorf("no leader known for the range of %q: %v", key, last)
}

// setNodeState retries transient errors (the autopilot's node may be changing).
func setNodeState(cl *client.Client, node uint64, st pb.NodeAdminState) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var err error
	for ctx.Err() == nil {
		if err = cl.SetNodeState(ctx, node, st); err == nil {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return err
}

// waitUntil polls cond every 200ms for at most timeout (and not past the nemesis's deadline).
func waitUntil(e *nemesisEnv, timeout time.Duration, cond func() (bool, string)) error {
	end := time.Now().Add(timeout)
	var what string
	for {
		var ok bool
		if ok, what = cond(); ok {
			return nil
		}
		if time.Now().After(end) || time.Now().After(e.deadline) {
			return fmt.Errorf("not done after %v: %s", timeout, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// nodeLoad counts the leaderships and replicas node holds according to the range descriptors and the
// leaders the cluster reports.
func nodeLoad(cl *client.Client, node uint64) (leaders, replicas int, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rs, err := cl.Ranges(ctx)
	if err != nil {
		return 0, 0, err
	}
	for _, r := range rs {
		if r.GetLeaderNodeId() == node {
			leaders++
		}
		if hasReplica(r.GetDesc(), node) {
			replicas++
		}
	}
	return leaders, replicas, nil
}

func replicaCount(cl *client.Client, node uint64) (int, error) {
	_, n, err := nodeLoad(cl, node)
	return n, err
}

// decommissioned reports whether node is in no range descriptor and the cluster marks it
// decommissioned, with a description of where it stands.
func decommissioned(ctx context.Context, cl *client.Client, node uint64) (bool, string) {
	rs, err := cl.Ranges(ctx)
	if err != nil {
		return false, err.Error()
	}
	var in []string
	for _, r := range rs {
		if hasReplica(r.GetDesc(), node) {
			in = append(in, fmt.Sprintf("r%d", r.GetDesc().GetRangeId()))
		}
	}
	ns, err := cl.Nodes(ctx)
	if err != nil {
		return false, err.Error()
	}
	state := "unknown to the cluster"
	marked := false
	for _, n := range ns {
		if n.GetDesc().GetNodeId() == node {
			state, marked = n.GetState(), n.GetDecommissioned()
		}
	}
	return len(in) == 0 && marked, fmt.Sprintf("state %q, replicas in [%s]", state, strings.Join(in, " "))
}

func replicaList(d *pb.RangeDescriptor) string {
	var out []string
	for _, rd := range d.GetReplicas() {
		s := fmt.Sprintf("n%d", rd.GetNodeId())
		if rd.GetLearner() {
			s += "(learner)"
		}
		out = append(out, s)
	}
	return "[" + strings.Join(out, " ") + "]"
}

// logDecisions writes the autopilot's decision log to the nemesis log.
func logDecisions(e *nemesisEnv) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ds, _, err := e.admin.Decisions(ctx)
	if err != nil {
		e.logf("decisions: %v", err)
		return
	}
	e.logf("decisions:%s", formatDecisions(ds))
}

// autopilotIdle reports whether no operator of the autopilot is running and every range has three
// voters and a leader.
func autopilotIdle(cl *client.Client) (bool, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ds, _, err := cl.Decisions(ctx)
	if err != nil {
		return false, err.Error()
	}
	for _, d := range ds {
		if d.Status == "running" {
			return false, fmt.Sprintf("running: %s r%d %s", d.Policy, d.Range, d.Operator)
		}
	}
	rs, err := cl.Ranges(ctx)
	if err != nil {
		return false, err.Error()
	}
	for _, r := range rs {
		voters := 0
		for _, rd := range r.GetDesc().GetReplicas() {
			if !rd.GetLearner() {
				voters++
			}
		}
		if voters != 3 || len(r.GetDesc().GetReplicas()) != 3 || r.GetLeaderNodeId() == 0 {
			return false, fmt.Sprintf("r%d: replicas %s, leader n%d", r.GetDesc().GetRangeId(), replicaList(r.GetDesc()), r.GetLeaderNodeId())
		}
	}
	return true, "idle"
}
