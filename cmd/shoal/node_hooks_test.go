package main

import (
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/pb"
)

func nodeStatus(id uint64, addr string, live bool, state string, join *pb.JoinStatus) *pb.NodeStatus {
	return &pb.NodeStatus{Desc: &pb.NodeDescriptor{NodeId: id, Addr: addr}, Live: live, State: state,
		Decommissioned: state == "decommissioned", Join: join}
}

func TestClassifyStart(t *testing.T) {
	now := time.Unix(10_000, 0)
	recent := &pb.JoinStatus{StartedUnixNanos: now.Add(-time.Minute).UnixNano(), DoneUnixNanos: now.UnixNano()}
	long := &pb.JoinStatus{StartedUnixNanos: now.Add(-time.Hour).UnixNano(), DoneUnixNanos: now.Add(-50 * time.Minute).UnixNano()}
	running := &pb.JoinStatus{StartedUnixNanos: now.Add(-time.Hour).UnixNano()}
	for _, tc := range []struct {
		name  string
		nodes []*pb.NodeStatus
		kind  string
		gone  []uint64
	}{
		{"restart with its store", []*pb.NodeStatus{nodeStatus(1, "a", true, "live", nil), nodeStatus(2, "b", true, "live", nil)}, "restart", nil},
		{"joined long ago, restarted", []*pb.NodeStatus{nodeStatus(1, "a", true, "live", nil), nodeStatus(4, "d", true, "live", long)}, "restart", nil},
		{"replacement of a dead node at its address", []*pb.NodeStatus{nodeStatus(1, "a", true, "live", nil), nodeStatus(2, "d", false, "dead", nil),
			nodeStatus(4, "d", true, "live", recent)}, "replacement", []uint64{2}},
		{"an old id already decommissioned", []*pb.NodeStatus{nodeStatus(2, "d", false, "decommissioned", nil), nodeStatus(4, "d", true, "live", long)}, "restart", nil},
		{"an old id being decommissioned", []*pb.NodeStatus{nodeStatus(2, "d", false, "decommissioning", nil), nodeStatus(4, "d", true, "live", long)}, "restart", nil},
		{"growth, join done a minute ago", []*pb.NodeStatus{nodeStatus(1, "a", true, "live", nil), nodeStatus(4, "d", true, "live", recent)}, "growth", nil},
		{"growth, join under way", []*pb.NodeStatus{nodeStatus(1, "a", true, "live", nil), nodeStatus(4, "d", true, "joining", running)}, "growth", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			self := tc.nodes[len(tc.nodes)-1].Desc.NodeId
			kind, gone := classifyStart(tc.nodes, self, now)
			if kind != tc.kind || len(gone) != len(tc.gone) || (len(gone) > 0 && gone[0] != tc.gone[0]) {
				t.Fatalf("classifyStart = %s %v, want %s %v", kind, gone, tc.kind, tc.gone)
			}
		})
	}
}

// The hooks against real nodes: poststart leaves a node waiting for init alone, then names a
// restart; prestop drains and exits 0, and exits 0 too with a clear line when the node is gone.
func TestNodeHooks(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real nodes")
	}
	addrs, started := joinOnlyCluster(t, 3)
	code, out, errOut := shoal(t, "--host", addrs[0], "node", "poststart", "--wait", "2s")
	if code != 0 || !strings.Contains(out, "waiting for shoal init; nothing to do") {
		t.Fatalf("poststart before init: %d %q %q", code, out, errOut)
	}
	if code, out, errOut := shoal(t, "--host", addrs[0], "init"); code != 0 {
		t.Fatalf("init: %d %q %q", code, out, errOut)
	}
	for range addrs {
		<-started
	}
	code, out, errOut = shoal(t, "--host", addrs[0], "node", "poststart")
	if code != 0 || !strings.HasPrefix(out, "node 1: ") {
		t.Fatalf("poststart: %d %q %q", code, out, errOut)
	}
	code, out, errOut = shoal(t, "--host", addrs[1], "--format", "json", "node", "prestop", "--grace", "10s")
	if code != 0 || !strings.Contains(out, `"outcome":"every leadership moved`) {
		t.Fatalf("prestop: %d %q %q", code, out, errOut)
	}
	code, out, errOut = shoal(t, "--host", "127.0.0.1:1", "--timeout", "2s", "node", "prestop", "--grace", "1s")
	if code != 0 || !strings.Contains(out, "not drained") {
		t.Fatalf("prestop of no node: %d %q %q", code, out, errOut)
	}
	if code, _, errOut := shoal(t, "--host", addrs[0], "node", "prestop", "--grace", "0s"); code != 2 || !strings.Contains(errOut, "--grace must be positive") {
		t.Fatalf("prestop --grace 0: %d %q", code, errOut)
	}
}
