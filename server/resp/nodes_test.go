package resp

import (
	"strings"
	"testing"
)

// clusterIDNode is the part of a node CLUSTER NODES reads (the cluster id, for Redis node ids).
type clusterIDNode struct{ Node }

func (clusterIDNode) ClusterID() string { return "c1" }

// TestClusterNodesRoles: CLUSTER NODES calls a node that leads no slots a replica of the master whose
// slots it holds the most of, as CLUSTER SLOTS lists it; a node that leads slots is a master.
func TestClusterNodesRoles(t *testing.T) {
	s := &Server{node: clusterIDNode{}}
	nodes := map[uint64]*nodeInfo{}
	for id := uint64(1); id <= 5; id++ {
		nodes[id] = &nodeInfo{id: id, resp: "127.0.0.1:" + string(rune('0'+id)) + "379", live: true}
	}
	m := &slotMap{self: 2, nodes: nodes, shards: []shard{
		{first: 0, last: 99, owner: 1, replicas: []uint64{2, 3}},
		{first: 100, last: 16383, owner: 4, replicas: []uint64{1, 3}},
	}}
	// 1 and 4 lead slots: masters. 2 holds replicas of 1's slots only; 3 holds more of 4's than of 1's.
	// 5 holds nothing: a master without slots.
	want := map[uint64]struct {
		flags  string
		master uint64
		slots  string
	}{
		1: {"master", 0, "0-99"},
		2: {"myself,slave", 1, ""},
		3: {"slave", 4, ""},
		4: {"master", 0, "100-16383"},
		5: {"master", 0, ""},
	}
	out := s.clusterNodes(m)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d lines:\n%s", len(lines), out)
	}
	for id, w := range want {
		var line []string
		for _, l := range lines {
			if f := strings.Fields(l); f[0] == s.redisNodeID(id) {
				line = f
			}
		}
		if line == nil {
			t.Fatalf("node %d missing:\n%s", id, out)
		}
		master := "-"
		if w.master != 0 {
			master = s.redisNodeID(w.master)
		}
		if line[2] != w.flags || line[3] != master || strings.Join(line[8:], " ") != w.slots {
			t.Errorf("node %d: flags %s master %s slots %q; want %s %s %q", id, line[2], line[3], line[8:], w.flags, master, w.slots)
		}
	}
	m.self = 4
	if got := m.roleInfo(); got[0] != "role:master" || got[1] != "connected_slaves:1" {
		t.Errorf("INFO replication of node 4: %q", got)
	}
	m.self = 3
	if got := m.roleInfo(); got[0] != "role:slave" || got[1] != "master_host:127.0.0.1" || got[2] != "master_port:4379" {
		t.Errorf("INFO replication of node 3: %q", got)
	}
}
