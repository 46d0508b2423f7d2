package apijson

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/shoaldb/shoal/pb"
)

func TestNodesJSON(t *testing.T) {
	got, err := json.Marshal(NodesJSON([]*pb.NodeStatus{
		{Desc: &pb.NodeDescriptor{NodeId: 3, Addr: "h:3", HttpAddr: "h:83", RespAddr: "h:63"}, Draining: true, State: "draining", RangeCount: 7},
		nil,
		{Desc: &pb.NodeDescriptor{NodeId: 1, Addr: "h:1"}, Live: true, State: "live", RangeCount: 5, LeaderCount: 4,
			Stats: &pb.NodeStats{Profile: "scan", Tasks: []*pb.BackgroundTask{{Kind: "backup", Heavy: true}, {Kind: "compaction", Running: true}}}},
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"id":1,"addr":"h:1","http_addr":"","profile":"scan","live":true,"draining":false,"state":"live","range_count":5,"leader_count":4,` +
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
	want := `[{"id":1,"start":"","end":"","start_key":"","end_key":"","meta":true,"replicas":[],"learners":[],"generation":0,"leader":null},` +
		`{"id":2,"start":"","end":"6d","start_key":"","end_key":"m","meta":false,"replicas":[],"learners":[],"generation":0,"leader":null},` +
		`{"id":5,"start":"6d","end":"ff00","start_key":"m","end_key":"/wA=","end_key_encoding":"base64","meta":false,"replicas":[2,1],"learners":[3],"generation":2,"leader":2}]`
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

// TestKey holds the key convention: readable text as itself, anything else as base64 with its
// encoding named; the bytes come back exactly either way.
func TestKey(t *testing.T) {
	for _, tc := range []struct {
		in       string
		text     string
		encoding string
	}{
		{"", "", ""},
		{"user/0001", "user/0001", ""},
		{"caf\u00e9 \u6771\u4eac", "caf\u00e9 \u6771\u4eac", ""},
		{"line\tone\nline two\r\n", "line\tone\nline two\r\n", ""},
		{"\xfe\x52\x00\x01foo", "/lIAAWZvbw==", Base64},
		{"a\x00b", "YQBi", Base64},
		{"\x7f", "fw==", Base64},
	} {
		text, enc := Key([]byte(tc.in))
		if text != tc.text || enc != tc.encoding {
			t.Errorf("Key(%q) = %q, %q; want %q, %q", tc.in, text, enc, tc.text, tc.encoding)
		}
	}
	// An unknown leader is null, and a null leader decodes as 0.
	b, _ := json.Marshal(RangeJSON{ID: 7})
	var back RangeJSON
	if err := json.Unmarshal(b, &back); err != nil || back.ID != 7 || back.Leader != 0 || !strings.Contains(string(b), `"leader":null`) {
		t.Errorf("RangeJSON without a leader: %s -> %+v, %v", b, back, err)
	}
}
