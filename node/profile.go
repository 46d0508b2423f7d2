package node

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/storage"
)

// SetProfile implements pb.ShoalServer: the node changes its engine profile through the restart
// hook its supervisor set (Config.Reprofile, package node/supervisor). The call returns once the
// restart is under way; the node's heartbeats report the profile once it runs with it. A node
// started without a supervisor (shoal start) refuses: its engine can only take new options when it
// is restarted with --profile.
func (n *Node) SetProfile(ctx context.Context, req *pb.SetProfileRequest) (*pb.SetProfileResponse, error) {
	if pe := n.notReady(); pe != nil {
		return &pb.SetProfileResponse{Error: pe}, nil
	}
	current := n.eng.Profile()
	invalid := func(format string, args ...any) (*pb.SetProfileResponse, error) {
		return &pb.SetProfileResponse{Current: current, Error: &pb.Error{Code: pb.ErrorCode_INVALID_ARGUMENT,
			Message: fmt.Sprintf(format, args...)}}, nil
	}
	switch {
	case req.NodeId != 0 && req.NodeId != n.NodeID():
		return invalid("set profile: sent to n%d for n%d; send it to the node itself", n.NodeID(), req.NodeId)
	case !slices.Contains(storage.Profiles(), req.Profile):
		return invalid("set profile: unknown profile %q (one of %s)", req.Profile, strings.Join(storage.Profiles(), ", "))
	case req.Profile == current:
		return &pb.SetProfileResponse{Current: current}, nil
	case n.cfg.Reprofile == nil:
		return invalid("set profile: n%d runs without an in-process supervisor; restart it with --profile %s", n.NodeID(), req.Profile)
	}
	if err := n.cfg.Reprofile(req.Profile); err != nil {
		return &pb.SetProfileResponse{Current: current, Error: &pb.Error{Code: pb.ErrorCode_UNAVAILABLE,
			Message: fmt.Sprintf("set profile on n%d: %v", n.NodeID(), err)}}, nil
	}
	return &pb.SetProfileResponse{Accepted: true, Current: current}, nil
}

// LedRanges are the ranges this node leads now (none before Start).
func (n *Node) LedRanges() []uint64 {
	st := n.Store()
	if st == nil || n.notReady() != nil {
		return nil
	}
	var ids []uint64
	for _, r := range st.Replicas() {
		if r.IsLeader() {
			ids = append(ids, r.RangeID())
		}
	}
	return ids
}
