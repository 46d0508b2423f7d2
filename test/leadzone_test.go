package test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shoaldb/shoal/node"
	"github.com/shoaldb/shoal/test/testcluster"
)

// TestLeadZonePreference: three nodes in zones a, b and c (the locality `start --locality` sets); a
// cluster-wide preference for zone c brings every user range's leadership to the node there, a
// narrower one for [k100, k200) takes that span's to zone a, and rebalance (on throughout) moves
// none back out. Clearing the narrow preference returns the span to zone c.
func TestLeadZonePreference(t *testing.T) {
	zones := []string{"a", "b", "c"}
	c := testcluster.StartSafe(t, testcluster.Options{Nodes: 3, PerNode: func(i int, cfg *node.Config) {
		cfg.Locality = "region=r1,zone=" + zones[i]
	}})
	cl := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(cl, 3) })
	for _, at := range []string{"k100", "k200", "k300"} {
		if _, _, err := cl.Split(ctx, []byte(at)); err != nil {
			t.Fatal(err)
		}
	}
	testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(cl, 3) })
	nodes, err := cl.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	zoneOf := map[uint64]string{}
	for _, n := range nodes {
		zoneOf[n.Desc.GetNodeId()] = n.Desc.GetLocality()
	}
	if len(zoneOf) != 3 || zoneOf[c.Nodes[2].Node.NodeID()] != "region=r1,zone=c" {
		t.Fatalf("localities %v: want each node's --locality", zoneOf)
	}

	// ledIn reports whether every user range within [start, end) is led by the node of zone want.
	ledIn := func(start, end, want string) func() bool {
		return func() bool {
			rs, err := cl.Ranges(ctx)
			if err != nil {
				return false
			}
			for _, r := range rs {
				s, e := string(r.Desc.StartKey), string(r.Desc.EndKey)
				if r.Desc.RangeId == 1 || s < start || (end != "" && (e == "" || e > end)) {
					continue
				}
				if zoneOf[r.LeaderNodeId] != "region=r1,zone="+want {
					return false
				}
			}
			return true
		}
	}
	if _, err := cl.SetLeadZone(ctx, nil, nil, "c"); err != nil {
		t.Fatal(err)
	}
	testcluster.WaitFor(t, 60*time.Second, "every user range led in zone c", ledIn("", "", "c"))
	leads, err := cl.SetLeadZone(ctx, []byte("k100"), []byte("k200"), "a")
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(len(leads)); got != "2" {
		t.Fatalf("preferences %v: want the cluster's and the span's", leads)
	}
	testcluster.WaitFor(t, 60*time.Second, "[k100, k200) led in zone a", ledIn("k100", "k200", "a"))
	// Held for several autopilot rounds: rebalance, on, sees one node lead almost everything and
	// must still leave the leaderships in their zones.
	for range 10 {
		time.Sleep(500 * time.Millisecond)
		if !ledIn("k100", "k200", "a")() || !ledIn("k200", "", "c")() || !ledIn("", "k100", "c")() {
			t.Fatal("a leadership left its preferred zone")
		}
	}
	if _, err := cl.SetLeadZone(ctx, []byte("k100"), []byte("k200"), ""); err != nil {
		t.Fatal(err)
	}
	testcluster.WaitFor(t, 60*time.Second, "[k100, k200) back in zone c", ledIn("k100", "k200", "c"))
}
