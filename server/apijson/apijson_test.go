package apijson

import (
	"encoding/json"
	"testing"

	"github.com/shoaldb/shoal/pb"
)

func TestNodesJSON(t *testing.T) {
	got, err := json.Marshal(NodesJSON([]*pb.NodeStatus{
		{Desc: &pb.NodeDescriptor{NodeId: 3, Addr: "h:3", HttpAddr: "h:83", RespAddr: "h:63"}, Draining: true, State: "draining", RangeCount: 7},
		nil,
		{Desc: &pb.NodeDescriptor{NodeId: 1, Addr: "h:1"}, Live: true, State: "live", RangeCount: 5, LeaderCount: 4,
			Stats: &pb.NodeStats{Tasks: []*pb.BackgroundTask{{Kind: "backup", Heavy: true}, {Kind: "compaction", Running: true}}}},
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"id":1,"addr":"h:1","http_addr":"","live":true,"draining":false,"state":"live","range_count":5,"leader_count":4,` +
		`"tasks":["backup pending (heavy)","compaction running"]},` +
		`{"id":3,"addr":"h:3","http_addr":"h:83","live":false,"draining":true,"state":"draining","range_count":7,"leader_count":0,"tasks":[]}]`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestRangesJSON(t *testing.T) {
	got, err := json.Marshal(RangesJSON([]*pb.RangeStatus{
		{Desc: &pb.RangeDescriptor{RangeId: 5, StartKey: []byte("m"), EndKey: []byte{0xff, 0x00}, Generation: 2,
			Replicas: []*pb.ReplicaDescriptor{{NodeId: 2, ReplicaId: 1}, {NodeId: 3, ReplicaId: 2, Learner: true}, {NodeId: 1, ReplicaId: 3}}},
			LeaderNodeId: 2},
		{Desc: &pb.RangeDescriptor{RangeId: 2, EndKey: []byte("m")}},
		{Desc: &pb.RangeDescriptor{RangeId: 1}},
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"id":1,"start":"","end":"","replicas":[],"learners":[],"leader":0,"generation":0},` +
		`{"id":2,"start":"","end":"6d","replicas":[],"learners":[],"leader":0,"generation":0},` +
		`{"id":5,"start":"6d","end":"ff00","replicas":[2,1],"learners":[3],"leader":2,"generation":2}]`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestEmptyListsEncodeAsArrays(t *testing.T) {
	for _, v := range []any{NodesJSON(nil), RangesJSON(nil)} {
		if b, _ := json.Marshal(v); string(b) != "[]" {
			t.Fatalf("empty list encodes as %s, want []", b)
		}
	}
}
