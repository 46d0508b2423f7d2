package node

import (
	"context"

	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/kv"
	"github.com/shoaldb/shoal/node/records"
	"github.com/shoaldb/shoal/pb"
)

// ZoneConfig implements pb.ShoalServer: it stores a leadership zone preference in the meta range
// (package records), where the autopilot's next snapshot reads it, and lists them all.
func (n *Node) ZoneConfig(ctx context.Context, req *pb.ZoneConfigRequest) (*pb.ZoneConfigResponse, error) {
	if pe := n.notReady(); pe != nil {
		return &pb.ZoneConfigResponse{Error: pe}, nil
	}
	ctx, cancel := kv.WithTimeout(ctx)
	defer cancel()
	if req.Set {
		l := req.GetLead()
		if len(l.GetEndKey()) > 0 && string(l.GetStartKey()) >= string(l.GetEndKey()) {
			return &pb.ZoneConfigResponse{Error: kv.InvalidArgument("empty span %s: the start must sort before the end",
				model.FormatSpan(l.GetStartKey(), l.GetEndKey()))}, nil
		}
		z := model.LeadZone{Start: l.GetStartKey(), End: l.GetEndKey(), Zone: l.GetZone()}
		if err := records.SetLeadZone(ctx, n.Service, z); err != nil {
			return &pb.ZoneConfigResponse{Error: n.PBError(err)}, nil
		}
	}
	zones, err := records.LeadZones(ctx, n.Service)
	if err != nil {
		return &pb.ZoneConfigResponse{Error: n.PBError(err)}, nil
	}
	resp := &pb.ZoneConfigResponse{}
	for _, z := range zones {
		resp.Leads = append(resp.Leads, &pb.LeadZone{StartKey: z.Start, EndKey: z.End, Zone: z.Zone})
	}
	return resp, nil
}
