package autopilothost

import (
	"context"
	"fmt"
	"time"

	"github.com/shoaldb/shoal/autopilot"
	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/autopilot/operator"
	"github.com/shoaldb/shoal/kv"
	"github.com/shoaldb/shoal/pb"
)

// PlaceLeaders serves the PlaceLeaders RPC: leaderships planned outside the policies (a re-key's
// placement of its new ranges) run as TransferLeader operators of the executor, so they take their
// turn beside the policies' operators (one per range, in the decision log) rather than racing them.
func (h *Host) PlaceLeaders(ctx context.Context, req *pb.PlaceLeadersRequest) (*pb.PlaceLeadersResponse, error) {
	ctx, cancel := kv.WithTimeout(ctx)
	defer cancel()
	if req.Policy == "" {
		return &pb.PlaceLeadersResponse{Error: h.deps.Ranges.PBError(kv.Errorf(pb.ErrorCode_INVALID_ARGUMENT, "place leaders: no policy named"))}, nil
	}
	resp := &pb.PlaceLeadersResponse{}
	err := h.onAutopilot(ctx, func(ap *autopilot.Autopilot) error {
		resp.Submitted, resp.InPlace, resp.Refused, resp.Reasons = 0, 0, 0, nil
		c := h.Snapshot()
		now := time.Now()
		for _, p := range req.Leaders {
			r := c.Range(p.RangeId)
			refuse := ""
			switch {
			case r == nil:
				refuse = fmt.Sprintf("r%d: unknown", p.RangeId)
			case r.Leader == p.NodeId:
				resp.InPlace++
				continue
			case !r.IsVoter(p.NodeId):
				refuse = fmt.Sprintf("r%d: n%d holds no voter of it", p.RangeId, p.NodeId)
			case !canLead(c.Node(p.NodeId)):
				// The drain and decommission policies would take it away again.
				refuse = fmt.Sprintf("r%d: n%d is not live, or is draining or leaving", p.RangeId, p.NodeId)
			default:
				if err := ap.Executor().Submit(operator.NewTransferLeader(req.Policy, now, r, p.NodeId, req.Reason)); err != nil {
					refuse = fmt.Sprintf("r%d: %v", p.RangeId, err)
				}
			}
			if refuse != "" {
				resp.Refused++
				resp.Reasons = append(resp.Reasons, refuse)
				continue
			}
			resp.Submitted++
		}
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

// canLead reports whether n may receive a leadership: live, neither draining nor leaving.
func canLead(n *model.Node) bool {
	return n != nil && n.Live && !n.Draining && !n.Decommissioning && !n.Decommissioned
}
