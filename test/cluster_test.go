package test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/test/testcluster"
)

func TestThreeNodeClusterReplicatesAndSurvivesLeaderLoss(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Nodes: 3})
	cl := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := cl.Put(ctx, []byte("hello"), []byte("world")); err != nil {
		t.Fatalf("put: %v", err)
	}
	v, found, err := cl.Get(ctx, []byte("hello"))
	if err != nil || !found || string(v) != "world" {
		t.Fatalf("get = %q %v %v", v, found, err)
	}
	testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(cl, 3) })
	for i := 0; i < 100; i++ {
		if err := cl.Put(ctx, []byte(fmt.Sprintf("k%03d", i)), []byte(fmt.Sprint(i))); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	// Kill the node leading the user range.
	rs, err := cl.Ranges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	leader := rs[len(rs)-1].LeaderNodeId
	t.Logf("killing node %d (leader of range %d)", leader, rs[len(rs)-1].Desc.RangeId)
	c.Kill(int(leader - 1))
	for i := 0; i < 100; i++ {
		v, found, err := cl.Get(ctx, []byte(fmt.Sprintf("k%03d", i)))
		if err != nil || !found || string(v) != fmt.Sprint(i) {
			t.Fatalf("after leader loss: get k%03d = %q %v %v", i, v, found, err)
		}
	}
	if err := cl.Put(ctx, []byte("after"), []byte("kill")); err != nil {
		t.Fatalf("put after kill: %v", err)
	}
	c.Restart(int(leader - 1))
	testcluster.WaitFor(t, 30*time.Second, "restarted node catches up", func() bool {
		n := c.Nodes[leader-1]
		for _, r := range n.Node.Store().Replicas() {
			if r.IsMeta() {
				continue
			}
			v, found, err := r.Get([]byte("after"))
			if err == nil && found && string(v) == "kill" {
				return true
			}
		}
		return false
	})

	// With two of three nodes gone no range has a quorum: requests fail with a retryable code, never
	// INTERNAL (which would claim a server bug and, for a write, an unknown outcome).
	c.Kill(int(leader - 1))
	c.Kill(int(leader % 3))
	short, cancelShort := context.WithTimeout(ctx, 5*time.Second)
	defer cancelShort()
	err = cl.Put(short, []byte("no"), []byte("quorum"))
	var ce *client.Error
	if err == nil || !errors.As(err, &ce) || ce.Code == pb.ErrorCode_INTERNAL {
		t.Errorf("put without a quorum: %v, want a typed retryable error (unavailable or timeout)", err)
	} else {
		t.Logf("put without a quorum: %v", err)
	}
}
