package kv

import (
	"context"
	"fmt"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/storage"
	"github.com/shoaldb/shoal/pb"
	"google.golang.org/protobuf/proto"
)

func TestZZProbe(t *testing.T) {
	eng, err := storage.Open(t.TempDir(), storage.Options{CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	for _, s := range []struct {
		method string
		req    proto.Message
	}{
		{"Scan", &pb.ScanRequest{Reverse: true}},
		{"Scan", &pb.ScanRequest{Reverse: true, Header: &pb.RequestHeader{RangeId: 2}}},
		{"Split", &pb.SplitRequest{Key: []byte("m")}},
		{"MetaCommand", &pb.MetaCommandRequest{Command: &pb.Command{}}},
		{"RelocateReplica", &pb.RelocateReplicaRequest{RangeId: 2, RemoveNodeId: 3}},
		{"TransferLeader", &pb.TransferLeaderRequest{RangeId: 2, NodeId: 1}},
	} {
		func() {
			n := newUnstartedNode(t, eng)
			defer n.Stop()
			m := fuzzMethods[fuzzMethod(s.method)]
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			defer func() {
				if r := recover(); r != nil {
					st := string(debug.Stack())
					lines := strings.Split(st, "\n")
					var frames []string
					for i, l := range lines {
						if strings.Contains(l, "shoal/kv.") || strings.Contains(l, "shoal/replica.") {
							frames = append(frames, strings.TrimSpace(l)+" @ "+strings.TrimSpace(lines[i+1]))
						}
					}
					fmt.Printf("PANIC %s %x: %v\n   %s\n", s.method, mustMarshal(s.req), r, strings.Join(frames, "\n   "))
				}
			}()
			resp, err := m.call(n, ctx, proto.Clone(s.req))
			fmt.Printf("ok %s -> %v %v\n", s.method, resp, err)
		}()
	}
}
