package test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoaldb/shoal/autopilot"
	"github.com/shoaldb/shoal/autopilot/policy"
	"github.com/shoaldb/shoal/bgtask"
	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/node"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
	"github.com/shoaldb/shoal/test/testcluster"
)

// leaderCount is how many user ranges node n leads right now (shed_leadership leaves the meta range).
func leaderCount(n *node.Node) int {
	count := 0
	for _, r := range n.Store().Replicas() {
		if r.IsLeader() && r.RangeID() != replica.MetaRangeID {
			count++
		}
	}
	return count
}

// TestBackupShedsLeadershipThenRestores: a backup on the node that leads every range first moves its
// leaderships away (the backup runs on a follower), and under the preferred-primary ranking they come
// back once it is over; the backup, restored into a new cluster, holds exactly the keys written
// before it. A maintenance announcement sheds the same way and can be ended early.
func TestBackupShedsLeadershipThenRestores(t *testing.T) {
	c := testcluster.StartSafe(t, testcluster.Options{Nodes: 3, Node: node.Config{
		Autopilot: autopilot.Config{Interval: 200 * time.Millisecond,
			Policies: policy.Config{Shed: policy.ShedConfig{Ranking: policy.RankPreferred}}},
	}})
	cl := c.Client()
	testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(cl, 3) })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Only shed_leadership may move leaderships in this test.
	testcluster.SwitchOff(t, ctx, cl, policy.NameRebalance, policy.NameMerge, policy.NameLoadSplit)
	want := map[string]string{}
	for i := 0; i < 600; i++ {
		k, v := fmt.Sprintf("key%04d", i), fmt.Sprintf("value-%d-%s", i, strings.Repeat("x", i%50))
		if err := cl.Put(ctx, []byte(k), []byte(v)); err != nil {
			t.Fatal(err)
		}
		want[k] = v
	}
	for _, at := range []string{"key0200", "key0400"} {
		if _, _, err := cl.Split(ctx, []byte(at)); err != nil {
			t.Fatal(err)
		}
	}
	testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(cl, 3) })

	// Every range's leadership on node 1 (the meta range's too).
	target := c.Nodes[0].Node
	ranges, err := cl.Ranges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	users := len(ranges) - 1
	// A transfer can be dropped (an election under load); ask again until node 1 leads every range.
	testcluster.WaitFor(t, 60*time.Second, "node 1 leads every range", func() bool {
		if leaderCount(target) == users {
			return true
		}
		if rs, err := cl.Ranges(ctx); err == nil {
			for _, r := range rs {
				if r.LeaderNodeId != target.NodeID() {
					_ = cl.TransferLeader(ctx, r.Desc.RangeId, target.NodeID())
				}
			}
		}
		time.Sleep(500 * time.Millisecond)
		return leaderCount(target) == users
	})

	// Watch node 1: how many ranges it leads when its backup starts running.
	var ledWhenRunning atomic.Int64
	ledWhenRunning.Store(-1)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			led := leaderCount(target)
			for _, task := range target.Background().Status().Tasks {
				if task.Kind == bgtask.KindBackup && task.State == bgtask.Running && ledWhenRunning.Load() < 0 {
					ledWhenRunning.Store(int64(led))
				}
			}
		}
	}()
	dir := filepath.Join(t.TempDir(), "backup")
	res, err := cl.Backup(ctx, target.NodeID(), dir, 0)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("backup: %s in %s", res.Outcome, res.Duration)
	if strings.Contains(res.Outcome, "ran anyway") || ledWhenRunning.Load() != 0 {
		t.Fatalf("the backup must start only once node 1 leads nothing: it led %d ranges when it started (%s)",
			ledWhenRunning.Load(), res.Outcome)
	}
	// Preferred primary: the leaderships come back once the backup is over.
	testcluster.WaitFor(t, 60*time.Second, "node 1 leads every range again", func() bool { return leaderCount(target) == users })
	var shed, back int
	testcluster.WaitFor(t, 30*time.Second, "the decision log shows every shed and give-back", func() bool {
		ds, _, err := cl.Decisions(ctx)
		if err != nil {
			return false
		}
		shed, back = 0, 0
		for _, d := range ds {
			if d.Policy == policy.NameShed && d.Status == "succeeded" {
				if strings.Contains(d.Reason, "give the leadership back") {
					back++
				} else if strings.Contains(d.Reason, "pending backup") {
					shed++
				}
			}
		}
		return shed == users && back == users
	})

	// Writes after the backup are not in it.
	if err := cl.Put(ctx, []byte("key9999"), []byte("late")); err != nil {
		t.Fatal(err)
	}

	// Restore into a new one-node cluster and compare every key.
	fresh := testcluster.StartSafe(t, testcluster.Options{Nodes: 1, Node: node.Config{Autopilot: autopilot.Config{Policies: policy.Config{Replicate: policy.ReplicateConfig{Factor: 1}}}}})
	fcl := fresh.Client()
	m, rres, err := fcl.Restore(ctx, dir, client.RestoreOptions{Verify: true, Batch: 64})
	if err != nil {
		t.Fatal(err)
	}
	if !rres.Verified || rres.Keys != uint64(len(want)) || m.TotalKeys != uint64(len(want)) || len(m.Ranges) != len(ranges)-1 {
		t.Fatalf("restore: %+v, manifest %d keys in %d ranges; want %d keys in %d ranges", rres, m.TotalKeys, len(m.Ranges), len(want), len(ranges)-1)
	}
	kvs, err := fcl.Scan(ctx, nil, nil, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(kvs) != len(want) {
		t.Fatalf("restored cluster holds %d keys, want %d", len(kvs), len(want))
	}
	for _, kv := range kvs {
		if w, ok := want[string(kv.Key)]; !ok || !bytes.Equal(kv.Value, []byte(w)) {
			t.Fatalf("restored key %q = %q, want %q (present %v)", kv.Key, kv.Value, w, ok)
		}
	}

	// A maintenance announcement on node 2 sheds what it leads, shows in admin nodes, and ends early.
	second := c.Nodes[1].Node
	r0 := ranges[len(ranges)-1].Desc.RangeId
	if err := cl.TransferLeader(ctx, r0, second.NodeID()); err != nil {
		t.Fatal(err)
	}
	mres, err := cl.Maintenance(ctx, second.NodeID(), "fsck", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if leaderCount(second) != 0 || strings.Contains(mres.Outcome, "ran anyway") {
		t.Fatalf("maintenance may start with node 2 leading %d ranges (%s)", leaderCount(second), mres.Outcome)
	}
	nodes, err := cl.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !hasTask(nodes, second.NodeID(), "announced") {
		t.Fatalf("admin nodes does not show node 2's announced task: %v", nodes)
	}
	if err := cl.EndMaintenance(ctx, second.NodeID(), "fsck"); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndMaintenance(ctx, second.NodeID(), "fsck"); err == nil {
		t.Fatal("ending an announcement twice must be refused")
	}
	if len(second.Background().Status().Tasks) != 0 {
		t.Fatalf("tasks left after the end: %+v", second.Background().Status().Tasks)
	}
	// Bad input is refused with a clear error.
	if _, err := cl.Backup(ctx, target.NodeID(), dir, 0); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("a backup into a used directory must be refused, got %v", err)
	}
	if _, err := cl.Backup(ctx, 99, filepath.Join(t.TempDir(), "x"), 0); err == nil || !strings.Contains(err.Error(), "unknown node") {
		t.Fatalf("a backup on an unknown node must be refused, got %v", err)
	}
}

func hasTask(nodes []*pb.NodeStatus, id uint64, kind string) bool {
	for _, n := range nodes {
		if n.GetDesc().GetNodeId() != id {
			continue
		}
		for _, t := range n.GetStats().GetTasks() {
			if t.Kind == kind {
				return true
			}
		}
	}
	return false
}
