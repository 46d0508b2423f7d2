package node

import (
	"context"

	"github.com/shoaldb/shoal/kv"
	"github.com/shoaldb/shoal/pb"
)

// AddJob implements pb.ShoalServer (package node/jobs).
func (n *Node) AddJob(ctx context.Context, req *pb.AddJobRequest) (*pb.AddJobResponse, error) {
	if pe := n.notReady(); pe != nil {
		return &pb.AddJobResponse{Error: pe}, nil
	}
	job, warning, err := n.scanJobs.Add(ctx, req.Job)
	return &pb.AddJobResponse{Job: job, Warning: warning, Error: kv.ToPBError(err)}, nil
}

// RemoveJob implements pb.ShoalServer (package node/jobs).
func (n *Node) RemoveJob(ctx context.Context, req *pb.RemoveJobRequest) (*pb.RemoveJobResponse, error) {
	if pe := n.notReady(); pe != nil {
		return &pb.RemoveJobResponse{Error: pe}, nil
	}
	found, err := n.scanJobs.Remove(ctx, req.Name)
	return &pb.RemoveJobResponse{Found: found, Error: kv.ToPBError(err)}, nil
}

// Jobs implements pb.ShoalServer (package node/jobs).
func (n *Node) Jobs(ctx context.Context, req *pb.JobsRequest) (*pb.JobsResponse, error) {
	if pe := n.notReady(); pe != nil {
		return &pb.JobsResponse{Error: pe}, nil
	}
	jobs, err := n.scanJobs.Jobs(ctx, req.Name)
	return &pb.JobsResponse{Jobs: jobs, Error: kv.ToPBError(err)}, nil
}
