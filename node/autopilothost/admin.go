package autopilothost

import (
	"context"
	"encoding/json"

	"github.com/shoaldb/shoal/autopilot"
	"github.com/shoaldb/shoal/kv"
	"github.com/shoaldb/shoal/node/records"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
)

// The admin RPCs of the autopilot are forwarded to the meta leader, where the autopilot runs.

func (h *Host) onAutopilot(ctx context.Context, local func(*autopilot.Autopilot) error, remote func(context.Context, pb.ShoalClient) (*pb.Error, error)) error {
	return h.deps.Ranges.OnLeader(ctx, replica.MetaRangeID, func(*replica.Replica) error {
		ap := h.running()
		if ap == nil {
			return kv.Errorf(pb.ErrorCode_UNAVAILABLE, "the autopilot is starting on this node; retry")
		}
		return local(ap)
	}, remote)
}

// PolicyList serves the PolicyList RPC.
func (h *Host) PolicyList(ctx context.Context, req *pb.PolicyListRequest) (*pb.PolicyListResponse, error) {
	ctx, cancel := kv.WithTimeout(ctx)
	defer cancel()
	resp := &pb.PolicyListResponse{}
	err := h.onAutopilot(ctx, func(ap *autopilot.Autopilot) error {
		for _, st := range ap.Policies().List() {
			resp.Policies = append(resp.Policies, &pb.PolicyStatus{Name: st.Name, On: st.On})
		}
		return nil
	}, func(ctx context.Context, c pb.ShoalClient) (*pb.Error, error) {
		out, err := c.PolicyList(ctx, req)
		if err != nil {
			return nil, err
		}
		resp.Policies = out.Policies
		return out.Error, nil
	})
	resp.Error = h.deps.Ranges.PBError(err)
	return resp, nil
}

// PolicySet serves the PolicySet RPC: the switch is stored in the meta range and applied at once.
func (h *Host) PolicySet(ctx context.Context, req *pb.PolicySetRequest) (*pb.PolicySetResponse, error) {
	ctx, cancel := kv.WithTimeout(ctx)
	defer cancel()
	err := h.onAutopilot(ctx, func(ap *autopilot.Autopilot) error {
		if err := ap.SetPolicy(req.Name, req.On); err != nil {
			return kv.Errorf(pb.ErrorCode_INVALID_ARGUMENT, "%v", err)
		}
		return records.SetSwitch(ctx, h.deps.Ranges, req.Name, req.On)
	}, func(ctx context.Context, c pb.ShoalClient) (*pb.Error, error) {
		out, err := c.PolicySet(ctx, req)
		if err != nil {
			return nil, err
		}
		return out.Error, nil
	})
	return &pb.PolicySetResponse{Error: h.deps.Ranges.PBError(err)}, nil
}

// Decisions serves the Decisions RPC.
func (h *Host) Decisions(ctx context.Context, req *pb.DecisionsRequest) (*pb.DecisionsResponse, error) {
	ctx, cancel := kv.WithTimeout(ctx)
	defer cancel()
	resp := &pb.DecisionsResponse{}
	err := h.onAutopilot(ctx, func(ap *autopilot.Autopilot) error {
		b, err := json.Marshal(ap.Decisions().Entries())
		resp.EntriesJson = b
		return err
	}, func(ctx context.Context, c pb.ShoalClient) (*pb.Error, error) {
		out, err := c.Decisions(ctx, req)
		if err != nil {
			return nil, err
		}
		resp.EntriesJson = out.EntriesJson
		return out.Error, nil
	})
	resp.Error = h.deps.Ranges.PBError(err)
	return resp, nil
}
