package autopilothost

import (
	"context"
	"fmt"

	"github.com/shoaldb/shoal/autopilot"
	"github.com/shoaldb/shoal/autopilot/policy"
	"github.com/shoaldb/shoal/kv"
	"github.com/shoaldb/shoal/pb"
)

// PlaceLeaders serves the PlaceLeaders RPC: a re-key's plan for its new ranges' leaderships goes to
// the rekey policy, which proposes the transfers (or moves) over the next rounds like any policy's
// operators — in the decision log, beside the others' rather than racing them, and switchable.
func (h *Host) PlaceLeaders(ctx context.Context, req *pb.PlaceLeadersRequest) (*pb.PlaceLeadersResponse, error) {
	ctx, cancel := kv.WithTimeout(ctx)
	defer cancel()
	if req.Policy != policy.NameRekey {
		return &pb.PlaceLeadersResponse{Error: h.deps.Ranges.PBError(kv.Errorf(pb.ErrorCode_INVALID_ARGUMENT,
			"place leaders: policy %q; planned leaderships are the %s policy's", req.Policy, policy.NameRekey))}, nil
	}
	resp := &pb.PlaceLeadersResponse{}
	err := h.onAutopilot(ctx, func(ap *autopilot.Autopilot) error {
		resp.Submitted, resp.InPlace, resp.Refused, resp.Reasons = 0, 0, 0, nil
		rk, ok := ap.Policies().Policy(policy.NameRekey).(*policy.Rekey)
		if !ok || !ap.Policies().Enabled(policy.NameRekey) {
			resp.Refused = uint32(len(req.Leaders))
			resp.Reasons = []string{fmt.Sprintf("policy %s is off (`shoal admin policy set %s on`)", policy.NameRekey, policy.NameRekey)}
			return nil
		}
		ls := make([]policy.Placement, len(req.Leaders))
		for i, p := range req.Leaders {
			ls[i] = policy.Placement{Range: p.RangeId, Node: p.NodeId}
		}
		queued, inPlace, refused := rk.Request(h.Snapshot(), ls, req.Reason)
		resp.Submitted, resp.InPlace, resp.Refused, resp.Reasons = uint32(queued), uint32(inPlace), uint32(len(refused)), refused
		return nil
	}, func(ctx context.Context, c pb.ShoalClient) (*pb.Error, error) {
		out, err := c.PlaceLeaders(ctx, req)
		if err != nil {
			return nil, err
		}
		resp = out
		return out.Error, nil
	})
	resp.Error = h.deps.Ranges.PBError(err)
	return resp, nil
}
