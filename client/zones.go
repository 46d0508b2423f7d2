package client

import (
	"context"

	"github.com/shoaldb/shoal/pb"
)

// LeadZones lists the leadership zone preferences (`shoal admin zone-config`).
func (c *Client) LeadZones(ctx context.Context) ([]*pb.LeadZone, error) {
	return c.zoneConfig(ctx, &pb.ZoneConfigRequest{})
}

// SetLeadZone asks that the ranges within [start, end) (both nil: every range) be led in zone, and
// returns every preference; an empty zone clears the span's preference. The autopilot's
// lease_preference policy moves the leaderships.
func (c *Client) SetLeadZone(ctx context.Context, start, end []byte, zone string) ([]*pb.LeadZone, error) {
	return c.zoneConfig(ctx, &pb.ZoneConfigRequest{Set: true, Lead: &pb.LeadZone{StartKey: start, EndKey: end, Zone: zone}})
}

func (c *Client) zoneConfig(ctx context.Context, req *pb.ZoneConfigRequest) ([]*pb.LeadZone, error) {
	var out []*pb.LeadZone
	err := c.admin(ctx, "zone-config", func(ctx context.Context, sc pb.ShoalClient) (*pb.Error, error) {
		r, err := sc.ZoneConfig(ctx, req)
		out = r.GetLeads()
		return r.GetError(), err
	})
	return out, err
}
