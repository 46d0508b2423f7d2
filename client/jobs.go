package client

import (
	"context"

	"github.com/shoaldb/shoal/pb"
)

// AddJob stores a scan job in the cluster; the node leading the meta range runs it, the first time at
// once. It returns the job as stored (a table's span resolved, its creation time set) and a warning
// for a setting that is allowed but likely not meant. A retry after a lost answer may find the job
// stored already and fail with INVALID_ARGUMENT: `Jobs` tells.
func (c *Client) AddJob(ctx context.Context, job *pb.ScanJob) (*pb.ScanJob, string, error) {
	var resp *pb.AddJobResponse
	err := c.admin(ctx, "job add", func(ctx context.Context, sc pb.ShoalClient) (*pb.Error, error) {
		r, err := sc.AddJob(ctx, &pb.AddJobRequest{Job: job})
		resp = r
		return r.GetError(), err
	})
	return resp.GetJob(), resp.GetWarning(), err
}

// RemoveJob removes a scan job and its recorded runs; a run going on stops. It reports whether the
// job existed.
func (c *Client) RemoveJob(ctx context.Context, name string) (bool, error) {
	var found bool
	err := c.admin(ctx, "job remove", func(ctx context.Context, sc pb.ShoalClient) (*pb.Error, error) {
		r, err := sc.RemoveJob(ctx, &pb.RemoveJobRequest{Name: name})
		found = r.GetFound()
		return r.GetError(), err
	})
	return found, err
}

// Jobs returns the scan jobs with their run in progress and last outcomes, by name; with a name, only
// that job (none if it does not exist).
func (c *Client) Jobs(ctx context.Context, name string) ([]*pb.JobState, error) {
	var out []*pb.JobState
	err := c.admin(ctx, "job list", func(ctx context.Context, sc pb.ShoalClient) (*pb.Error, error) {
		r, err := sc.Jobs(ctx, &pb.JobsRequest{Name: name})
		out = r.GetJobs()
		return r.GetError(), err
	})
	return out, err
}
