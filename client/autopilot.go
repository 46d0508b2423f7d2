package client

import (
	"context"
	"encoding/json"

	"github.com/shoaldb/shoal/pb"
)

// Decision is one entry of the autopilot's decision log (see DESIGN.md section 4).
type Decision struct {
	ID        uint64          `json:"id"`
	Time      string          `json:"time"`
	Policy    string          `json:"policy"`
	Operator  string          `json:"operator"`
	Range     uint64          `json:"range"`
	Reason    string          `json:"reason"`
	Predicted json.RawMessage `json:"predicted"`
	Measured  json.RawMessage `json:"measured"`
	Status    string          `json:"status"`
	// Throughput is the requests per second of the key span the operator changed, before and after it
	// (null when it changed no range or is not measured yet).
	Throughput json.RawMessage `json:"throughput"`
}

// admin runs an unrouted admin call on any node (it forwards to the autopilot's node).
func (c *Client) admin(ctx context.Context, name string, call func(context.Context, pb.ShoalClient) (*pb.Error, error)) error {
	return c.run(ctx, opKind{name: name}, nil, "", func(ctx context.Context, sc pb.ShoalClient, _ *pb.RequestHeader, _ target) (*pb.Error, error) {
		return call(ctx, sc)
	})
}

// Policies lists the autopilot's policies and whether each is on.
func (c *Client) Policies(ctx context.Context) ([]*pb.PolicyStatus, error) {
	var out []*pb.PolicyStatus
	err := c.admin(ctx, "policy list", func(ctx context.Context, sc pb.ShoalClient) (*pb.Error, error) {
		r, err := sc.PolicyList(ctx, &pb.PolicyListRequest{})
		out = r.GetPolicies()
		return r.GetError(), err
	})
	return out, err
}

// SetPolicy switches an autopilot policy on or off (stored in the cluster; survives restarts).
func (c *Client) SetPolicy(ctx context.Context, name string, on bool) error {
	return c.admin(ctx, "policy set", func(ctx context.Context, sc pb.ShoalClient) (*pb.Error, error) {
		r, err := sc.PolicySet(ctx, &pb.PolicySetRequest{Name: name, On: on})
		return r.GetError(), err
	})
}

// Decisions returns the autopilot's decision log, oldest first, and its raw JSON.
func (c *Client) Decisions(ctx context.Context) ([]Decision, json.RawMessage, error) {
	var raw []byte
	err := c.admin(ctx, "decisions", func(ctx context.Context, sc pb.ShoalClient) (*pb.Error, error) {
		r, err := sc.Decisions(ctx, &pb.DecisionsRequest{})
		raw = r.GetEntriesJson()
		return r.GetError(), err
	})
	if err != nil {
		return nil, nil, err
	}
	var out []Decision
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			return nil, nil, err
		}
	}
	return out, raw, nil
}

// SetNodeState drains a node, decommissions it, or makes it active again.
func (c *Client) SetNodeState(ctx context.Context, node uint64, state pb.NodeAdminState) error {
	return c.admin(ctx, "set node state", func(ctx context.Context, sc pb.ShoalClient) (*pb.Error, error) {
		r, err := sc.SetNodeState(ctx, &pb.SetNodeStateRequest{NodeId: node, State: state})
		return r.GetError(), err
	})
}

// PlaceLeaders asks the autopilot to move each range's leadership to its planned node
// (leaders[range] = node), as TransferLeader operators logged under policy with reason. It returns
// the response, whose counts and reasons say what was queued, already in place or refused.
func (c *Client) PlaceLeaders(ctx context.Context, policy, reason string, leaders map[uint64]uint64) (*pb.PlaceLeadersResponse, error) {
	req := &pb.PlaceLeadersRequest{Policy: policy, Reason: reason}
	for r, n := range leaders {
		req.Leaders = append(req.Leaders, &pb.LeaderPlacement{RangeId: r, NodeId: n})
	}
	var out *pb.PlaceLeadersResponse
	err := c.admin(ctx, "place leaders", func(ctx context.Context, sc pb.ShoalClient) (*pb.Error, error) {
		r, err := sc.PlaceLeaders(ctx, req)
		out = r
		return r.GetError(), err
	})
	return out, err
}
