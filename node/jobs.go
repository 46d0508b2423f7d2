package node

import (
	"context"

	"github.com/shoaldb/shoal/kv"
	"github.com/shoaldb/shoal/node/jobs"
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

// jobLoads is the scan jobs' view of the live nodes for their prefetch plan: the block bytes each
// one's reads loaded from disk and the ranges it leads with their sizes, from the nodes' last load
// reports.
func (n *Node) jobLoads() []jobs.NodeLoad {
	var out []jobs.NodeLoad
	for _, id := range n.dir.LiveNodes(n.liveWindow()) {
		st, _ := n.dir.StatsOf(id)
		if st == nil {
			continue
		}
		l := jobs.NodeLoad{ID: id, ReadBytes: st.ServedBlockBytes - min(st.ServedBlockBytes, st.ServedBlockBytesInCache), Leads: map[uint64]int64{}}
		for _, rl := range st.Ranges {
			if rl.Leader {
				l.Leads[rl.RangeId] = int64(rl.Bytes)
			}
		}
		out = append(out, l)
	}
	return out
}

// ScanJobs is the node's scan jobs (package node/jobs): their counters, for samplers that read them
// more often than the metrics endpoint does.
func (n *Node) ScanJobs() *jobs.Service { return n.scanJobs }
