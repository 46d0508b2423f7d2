package stream

import (
	"context"
	"fmt"
	"sort"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/pb"
)

// NodeStatus asks every live node for its stream tasks and counters, by node id.
func NodeStatus(ctx context.Context, cl *client.Client, dialOpts []grpc.DialOption, authToken string) ([]*pb.StreamStatusResponse, error) {
	nodes, err := cl.Nodes(ctx)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	if len(dialOpts) == 0 {
		dialOpts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	if authToken != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+authToken)
	}
	var out []*pb.StreamStatusResponse
	for _, n := range nodes {
		if !n.GetLive() {
			continue
		}
		conn, err := grpc.NewClient(n.GetDesc().GetAddr(), dialOpts...)
		if err != nil {
			return nil, fmt.Errorf("dial node %d: %w", n.GetDesc().GetNodeId(), err)
		}
		st, err := pb.NewStreamsClient(conn).StreamStatus(ctx, &pb.StreamStatusRequest{})
		_ = conn.Close()
		if err != nil {
			return nil, fmt.Errorf("stream status of node %d at %s: %w", n.GetDesc().GetNodeId(), n.GetDesc().GetAddr(), err)
		}
		sort.Slice(st.Tasks, func(i, j int) bool {
			a, b := st.Tasks[i], st.Tasks[j]
			return a.Job < b.Job || a.Job == b.Job && a.RangeId < b.RangeId
		})
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NodeId < out[j].NodeId })
	return out, nil
}
