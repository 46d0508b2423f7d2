package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/shoaldb/shoal/backup"
	"github.com/shoaldb/shoal/bench/scenario/shape"
	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/pb"
)

// Action is what an event does (shape's vocabulary, shared with the simulator).
type Action = shape.Action

// The actions a scenario's events can take (shape documents each).
const (
	TransferLeader   = shape.TransferLeader
	KillLeader       = shape.KillLeader
	Restart          = shape.Restart
	CompactBusiest   = shape.CompactBusiest
	BackupBusiest    = shape.BackupBusiest
	Gather           = shape.Gather
	MoveLeaders      = shape.MoveLeaders
	BalanceLeaders   = shape.BalanceLeaders
	JoinNode         = shape.JoinNode
	StartController  = shape.StartController
	LoadSurge        = shape.LoadSurge
	MoveReplica      = shape.MoveReplica
	DecommissionLast = shape.DecommissionLast
	PolicyOn         = shape.PolicyOn
	PolicyOff        = shape.PolicyOff
)

// actions maps each action to what it does; a task action's event is a task window (ScoreTask).
var actions = map[Action]struct {
	do   func(ctx context.Context, e *env) (string, error)
	task bool
}{
	TransferLeader:   {do: transferLeader},
	KillLeader:       {do: killLeader},
	Restart:          {do: restartKilled},
	CompactBusiest:   {do: compactBusiest, task: true},
	BackupBusiest:    {do: backupBusiest, task: true},
	Gather:           {do: gather},
	MoveLeaders:      {do: moveLeaders},
	BalanceLeaders:   {do: balanceLeaders},
	JoinNode:         {do: joinNode, task: true},
	StartController:  {do: startController},
	LoadSurge:        {do: loadSurge},
	MoveReplica:      {do: moveReplica, task: true},
	DecommissionLast: {do: decommissionLast, task: true},
	PolicyOn:         {do: func(ctx context.Context, e *env) (string, error) { return "", e.cl.SetPolicy(ctx, e.sc.Policy, true) }},
	PolicyOff:        {do: func(ctx context.Context, e *env) (string, error) { return "", e.cl.SetPolicy(ctx, e.sc.Policy, false) }},
}

// sortedUserRanges are the user ranges in key order.
func sortedUserRanges(ctx context.Context, cl *client.Client) ([]*pb.RangeStatus, error) {
	rs, err := cl.UserRanges(ctx)
	sort.Slice(rs, func(i, j int) bool {
		return bytes.Compare(rs[i].GetDesc().GetStartKey(), rs[j].GetDesc().GetStartKey()) < 0
	})
	return rs, err
}

func transferLeader(ctx context.Context, e *env) (string, error) {
	rs, err := sortedUserRanges(ctx, e.cl)
	if err != nil || len(rs) == 0 {
		return "", fmt.Errorf("no user range (%v)", err)
	}
	r := rs[0]
	for _, rd := range r.GetDesc().GetReplicas() {
		if !rd.Learner && rd.NodeId != r.LeaderNodeId && e.c.IndexOf(rd.NodeId) >= 0 {
			id := r.GetDesc().GetRangeId()
			return fmt.Sprintf("r%d n%d->n%d", id, r.LeaderNodeId, rd.NodeId), e.cl.TransferLeader(ctx, id, rd.NodeId)
		}
	}
	return "", fmt.Errorf("no voter to transfer range %d to", r.GetDesc().GetRangeId())
}

func killLeader(ctx context.Context, e *env) (string, error) {
	rs, err := sortedUserRanges(ctx, e.cl)
	if err != nil || len(rs) == 0 {
		return "", fmt.Errorf("no user range (%v)", err)
	}
	id := rs[0].LeaderNodeId
	i := e.c.IndexOf(id)
	if i < 0 {
		return "", fmt.Errorf("leader n%d of range %d is not a live local node", id, rs[0].GetDesc().GetRangeId())
	}
	e.c.Kill(i)
	e.killed = append(e.killed, i)
	return fmt.Sprintf("n%d", id), nil
}

func restartKilled(ctx context.Context, e *env) (string, error) {
	var done []string
	for _, i := range e.killed {
		if err := e.c.Restart(ctx, i); err != nil {
			return strings.Join(done, ","), err
		}
		done = append(done, fmt.Sprintf("n%d", e.c.Node(i).KV.NodeID()))
	}
	e.killed = nil
	return strings.Join(done, ","), nil
}

// busiestNode is the node leading most user ranges (lowest id on a tie).
func busiestNode(ctx context.Context, cl *client.Client) (uint64, int, error) {
	rs, err := cl.UserRanges(ctx)
	if err != nil {
		return 0, 0, err
	}
	count := map[uint64]int{}
	var best uint64
	for _, r := range rs {
		if id := r.LeaderNodeId; id != 0 {
			count[id]++
			if best == 0 || count[id] > count[best] || count[id] == count[best] && id < best {
				best = id
			}
		}
	}
	if best == 0 {
		return 0, 0, fmt.Errorf("no user range has a leader")
	}
	return best, count[best], nil
}

func compactBusiest(ctx context.Context, e *env) (string, error) {
	node, led, err := busiestNode(ctx, e.cl)
	if err != nil {
		return "", err
	}
	e.busy = node
	res, err := e.cl.Compact(ctx, node)
	return fmt.Sprintf("n%d (led %d ranges) in %.1fs: %s", node, led, res.Duration.Seconds(), res.Outcome), err
}

func backupBusiest(ctx context.Context, e *env) (string, error) {
	node, led, err := busiestNode(ctx, e.cl)
	if err != nil {
		return "", err
	}
	e.busy = node
	res, err := e.cl.Backup(ctx, node, filepath.Join(e.dir, fmt.Sprintf("backup-n%d-%d", node, time.Now().UnixNano())), 0)
	var m backup.Manifest
	_ = json.Unmarshal([]byte(res.Manifest), &m)
	return fmt.Sprintf("n%d (led %d ranges) in %.1fs (writing %.1fs, %d keys, %.1f MiB): %s", node, led, res.Duration.Seconds(),
		float64(m.DurationMS)/1000, m.TotalKeys, float64(m.TotalBytes)/(1<<20), res.Outcome), err
}

func gather(ctx context.Context, e *env) (string, error) {
	node, _, err := busiestNode(ctx, e.cl)
	if err != nil {
		return "", err
	}
	return transferAll(ctx, e.cl, func(uint64) bool { return true }, node)
}

func moveLeaders(ctx context.Context, e *env) (string, error) {
	from, _, err := busiestNode(ctx, e.cl)
	if err != nil {
		return "", err
	}
	nodes, err := e.cl.Nodes(ctx)
	if err != nil {
		return "", err
	}
	var ids []uint64
	for _, n := range nodes {
		if n.GetLive() && n.GetDesc().GetNodeId() != from {
			ids = append(ids, n.GetDesc().GetNodeId())
		}
	}
	slices.Sort(ids)
	if len(ids) == 0 {
		return "", fmt.Errorf("no node to move n%d's leaderships to", from)
	}
	to := ids[0]
	for _, id := range ids {
		if id > from {
			to = id
			break
		}
	}
	return transferAll(ctx, e.cl, func(leader uint64) bool { return leader == from }, to)
}

// transferAll moves to node to, in parallel, the leadership of every user range whose leader move
// selects.
func transferAll(ctx context.Context, cl *client.Client, move func(leader uint64) bool, to uint64) (string, error) {
	rs, err := cl.UserRanges(ctx)
	if err != nil {
		return "", err
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		moved int
		errs  []string
		from  = map[uint64]bool{}
	)
	for _, r := range rs {
		if r.LeaderNodeId == to || !move(r.LeaderNodeId) {
			continue
		}
		from[r.LeaderNodeId] = true
		wg.Add(1)
		go func(id uint64) {
			defer wg.Done()
			err := cl.TransferLeader(ctx, id, to)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Sprintf("r%d: %v", id, err))
				return
			}
			moved++
		}(r.GetDesc().GetRangeId())
	}
	wg.Wait()
	var ids []string
	for id := range from {
		ids = append(ids, fmt.Sprintf("n%d", id))
	}
	sort.Strings(ids)
	desc := fmt.Sprintf("%d of %d ranges %s->n%d", moved, len(rs), strings.Join(ids, ","), to)
	if len(errs) > 0 {
		return desc, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return desc, nil
}

// balanceFor bounds balanceLeaders: well inside the join scenarios' 30 s before the join.
const balanceFor = 25 * time.Second

// balanceLeaders moves leaderships in rounds until every range is led by its node or balanceFor has
// passed: just after the load a transfer can fail while its target catches up. A cluster still
// unbalanced at the end is an error, so that the run's report says so.
func balanceLeaders(ctx context.Context, e *env) (string, error) {
	deadline := time.Now().Add(balanceFor)
	moved, failed := 0, 0
	var lastErr error
	for round := 1; ; round++ {
		rs, err := sortedUserRanges(ctx, e.cl)
		if err != nil {
			return "", err
		}
		var todo [][2]uint64 // range, node
		for i, r := range rs {
			var voters []uint64
			for _, rd := range r.GetDesc().GetReplicas() {
				if !rd.Learner {
					voters = append(voters, rd.NodeId)
				}
			}
			slices.Sort(voters)
			if len(voters) > 0 && voters[i%len(voters)] != r.LeaderNodeId {
				todo = append(todo, [2]uint64{r.GetDesc().GetRangeId(), voters[i%len(voters)]})
			}
		}
		perNode, _ := e.userReplicas()
		if len(todo) == 0 {
			return fmt.Sprintf("%d leaderships moved in %d rounds (%d transfers failed); leaders per node %v", moved, round, failed, perNode), nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return "", fmt.Errorf("leaders not balanced after %v: %d ranges not on their node, leaders per node %v; %d transfers failed, the last: %v",
				balanceFor, len(todo), perNode, failed, lastErr)
		}
		for _, m := range todo {
			if err := e.cl.TransferLeader(ctx, m[0], m[1]); err != nil {
				failed++
				lastErr = err
				continue
			}
			moved++
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func decommissionLast(ctx context.Context, e *env) (string, error) {
	nodes, i, held := e.c.Nodes(), -1, 0
	for j, n := range nodes {
		if n == nil {
			continue
		}
		if _, r := userReplicas(n); r > 0 {
			i, held = j, r
		}
	}
	if i < 0 {
		return "", fmt.Errorf("no live node holds a user replica")
	}
	id := nodes[i].KV.NodeID()
	start := time.Now()
	if err := e.cl.SetNodeState(ctx, id, pb.NodeAdminState_NODE_DECOMMISSIONING); err != nil {
		return fmt.Sprintf("n%d", id), err
	}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, r := userReplicas(nodes[i]); r == 0 {
			return fmt.Sprintf("n%d: %d replicas moved off in %.1fs", id, held, time.Since(start).Seconds()), nil
		}
		select {
		case <-ctx.Done():
			return fmt.Sprintf("n%d", id), fmt.Errorf("n%d still holds replicas: %w", id, ctx.Err())
		case <-tick.C:
		}
	}
}
