package node

import (
	"context"
	"time"

	"github.com/shoaldb/shoal/kv"
	"github.com/shoaldb/shoal/node/background"
	"github.com/shoaldb/shoal/node/records"
	"github.com/shoaldb/shoal/pb"
)

// The node-level admin RPCs: each answers UNAVAILABLE until the node serves, then hands the request
// to the part of the node that owns it.

// Compact implements pb.ShoalServer (package background).
func (n *Node) Compact(ctx context.Context, req *pb.CompactRequest) (*pb.CompactResponse, error) {
	if pe := n.notReady(); pe != nil {
		return &pb.CompactResponse{Error: pe}, nil
	}
	return n.bg.Compact(ctx, req)
}

// Backup implements pb.ShoalServer (package background).
func (n *Node) Backup(ctx context.Context, req *pb.BackupRequest) (*pb.BackupResponse, error) {
	if pe := n.notReady(); pe != nil {
		return &pb.BackupResponse{Error: pe}, nil
	}
	return n.bg.Backup(ctx, req)
}

// Maintenance implements pb.ShoalServer (package background).
func (n *Node) Maintenance(ctx context.Context, req *pb.MaintenanceRequest) (*pb.MaintenanceResponse, error) {
	if pe := n.notReady(); pe != nil {
		return &pb.MaintenanceResponse{Error: pe}, nil
	}
	if req.Task == background.PostStartTask && !req.End {
		return n.catchUp.PostStart(ctx, time.Duration(req.DurationMs)*time.Millisecond), nil
	}
	return n.bg.Maintenance(ctx, req)
}

// PolicyList implements pb.ShoalServer (package autopilothost).
func (n *Node) PolicyList(ctx context.Context, req *pb.PolicyListRequest) (*pb.PolicyListResponse, error) {
	if pe := n.notReady(); pe != nil {
		return &pb.PolicyListResponse{Error: pe}, nil
	}
	return n.ap.PolicyList(ctx, req)
}

// PolicySet implements pb.ShoalServer (package autopilothost).
func (n *Node) PolicySet(ctx context.Context, req *pb.PolicySetRequest) (*pb.PolicySetResponse, error) {
	if pe := n.notReady(); pe != nil {
		return &pb.PolicySetResponse{Error: pe}, nil
	}
	return n.ap.PolicySet(ctx, req)
}

// PlaceLeaders implements pb.ShoalServer (package autopilothost).
func (n *Node) PlaceLeaders(ctx context.Context, req *pb.PlaceLeadersRequest) (*pb.PlaceLeadersResponse, error) {
	if pe := n.notReady(); pe != nil {
		return &pb.PlaceLeadersResponse{Error: pe}, nil
	}
	return n.ap.PlaceLeaders(ctx, req)
}

// Decisions implements pb.ShoalServer (package autopilothost).
func (n *Node) Decisions(ctx context.Context, req *pb.DecisionsRequest) (*pb.DecisionsResponse, error) {
	if pe := n.notReady(); pe != nil {
		return &pb.DecisionsResponse{Error: pe}, nil
	}
	return n.ap.Decisions(ctx, req)
}

// SetNodeState implements pb.ShoalServer: drain, decommission, or back to active.
func (n *Node) SetNodeState(ctx context.Context, req *pb.SetNodeStateRequest) (*pb.SetNodeStateResponse, error) {
	if pe := n.notReady(); pe != nil {
		return &pb.SetNodeStateResponse{Error: pe}, nil
	}
	if n.dir.Get(req.NodeId) == nil {
		return &pb.SetNodeStateResponse{Error: kv.InvalidArgument("unknown node %d", req.NodeId)}, nil
	}
	if _, ok := pb.NodeAdminState_name[int32(req.State)]; !ok {
		return &pb.SetNodeStateResponse{Error: kv.InvalidArgument("unknown node state %d", req.State)}, nil
	}
	ctx, cancel := kv.WithTimeout(ctx)
	defer cancel()
	err := records.SetNodeState(ctx, n.Service, req.NodeId, req.State)
	return &pb.SetNodeStateResponse{Error: n.PBError(err)}, nil
}
