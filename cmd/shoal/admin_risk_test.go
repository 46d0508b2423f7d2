package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/pb"
)

// On 3 nodes with every range on all three, one busy node takes no majority and two always do; a
// node down and another busy leave every range without a free majority, which is listed.
func TestQuorumRisk(t *testing.T) {
	desc := func(id uint64) *pb.RangeStatus {
		return &pb.RangeStatus{Desc: &pb.RangeDescriptor{RangeId: id, Replicas: []*pb.ReplicaDescriptor{{NodeId: 1}, {NodeId: 2}, {NodeId: 3}}}}
	}
	node := func(id uint64, live, busy bool) *pb.NodeStatus {
		st := &pb.NodeStats{}
		if busy {
			st.Tasks = []*pb.BackgroundTask{{Heavy: true, Running: true}}
		}
		return &pb.NodeStatus{Desc: &pb.NodeDescriptor{NodeId: id}, Live: live, Stats: st}
	}
	ranges := []*pb.RangeStatus{desc(1), desc(2)}
	var out bytes.Buffer
	cmd := &cobra.Command{}
	cmd.SetOut(&out)
	if err := printQuorumRisk(cmd, []*pb.NodeStatus{node(1, true, false), node(2, true, false), node(3, true, false)}, ranges); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "H=1      0.0 %") || !strings.Contains(s, "H=2    100.0 %") || !strings.Contains(s, "no node busy or down") {
		t.Fatalf("idle cluster:\n%s", s)
	}
	out.Reset()
	if err := printQuorumRisk(cmd, []*pb.NodeStatus{node(1, true, false), node(2, false, false), node(3, true, true)}, ranges); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "now: n2 down, n3 busy") || !strings.Contains(s, "range 1 (2 of 3 voters busy or down); range 2") {
		t.Fatalf("a node down, another busy:\n%s", s)
	}
}
