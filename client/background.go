package client

import (
	"context"
	"time"

	"github.com/shoaldb/shoal/pb"
)

// Background work on one node (docs/design/shed-leadership.md). Each call may go to any node; it is
// forwarded to node (0: the node the call reaches). The heavy task first waits while the autopilot
// moves the node's leaderships away (bounded by the node's maximum postponement), then runs; Compact
// and Backup return when the task is done, so give them a generous ctx. They are not retried once
// sent (a retry would run the task twice).

// TaskResult is how a heavy task went: how it passed the node's gate, and how long it took.
type TaskResult struct {
	Node     uint64
	Outcome  string
	Duration time.Duration
	// Manifest is the backup's manifest as JSON (Backup only).
	Manifest string
}

func (c *Client) longAdmin(ctx context.Context, name string, call func(context.Context, pb.ShoalClient) (*pb.Error, error)) error {
	return c.run(ctx, opKind{name: name, write: true, long: true}, nil, "", func(ctx context.Context, sc pb.ShoalClient, _ *pb.RequestHeader, _ target) (*pb.Error, error) {
		return call(ctx, sc)
	})
}

// Compact runs a full manual compaction of node's storage engine.
func (c *Client) Compact(ctx context.Context, node uint64) (TaskResult, error) {
	var res TaskResult
	err := c.longAdmin(ctx, "compact", func(ctx context.Context, sc pb.ShoalClient) (*pb.Error, error) {
		r, err := sc.Compact(ctx, &pb.CompactRequest{NodeId: node})
		res = TaskResult{Node: r.GetNodeId(), Outcome: r.GetOutcome(), Duration: time.Duration(r.GetDurationMs()) * time.Millisecond}
		return r.GetError(), err
	})
	return res, err
}

// Backup writes a backup of every range with a replica on node into dir, an absolute path on that
// node's host that must not exist or be empty; rate limits its reads (bytes/s, 0: unlimited).
func (c *Client) Backup(ctx context.Context, node uint64, dir string, rate int64) (TaskResult, error) {
	return c.BackupIncremental(ctx, node, dir, "", rate)
}

// BackupIncremental is Backup of only the keys put and deleted since the backup in parent, a directory
// on the node's host ("": a full backup). A damaged or missing parent is refused before anything is
// written.
func (c *Client) BackupIncremental(ctx context.Context, node uint64, dir, parent string, rate int64) (TaskResult, error) {
	var res TaskResult
	err := c.longAdmin(ctx, "backup", func(ctx context.Context, sc pb.ShoalClient) (*pb.Error, error) {
		r, err := sc.Backup(ctx, &pb.BackupRequest{NodeId: node, Dir: dir, RateBytesPerSec: rate, IncrementalFrom: parent})
		res = TaskResult{Node: r.GetNodeId(), Outcome: r.GetOutcome(), Duration: time.Duration(r.GetDurationMs()) * time.Millisecond,
			Manifest: r.GetManifestJson()}
		return r.GetError(), err
	})
	return res, err
}

// Maintenance announces that an operator's job named task is about to load node for d. It returns once
// the job may start; the announcement ends after d, or earlier with EndMaintenance.
func (c *Client) Maintenance(ctx context.Context, node uint64, task string, d time.Duration) (TaskResult, error) {
	var res TaskResult
	start := time.Now()
	err := c.longAdmin(ctx, "maintenance", func(ctx context.Context, sc pb.ShoalClient) (*pb.Error, error) {
		r, err := sc.Maintenance(ctx, &pb.MaintenanceRequest{NodeId: node, Task: task, DurationMs: d.Milliseconds()})
		res = TaskResult{Node: r.GetNodeId(), Outcome: r.GetOutcome(), Duration: time.Since(start)}
		return r.GetError(), err
	})
	return res, err
}

// EndMaintenance ends the announcement task on node before its duration is over.
func (c *Client) EndMaintenance(ctx context.Context, node uint64, task string) error {
	return c.admin(ctx, "maintenance end", func(ctx context.Context, sc pb.ShoalClient) (*pb.Error, error) {
		r, err := sc.Maintenance(ctx, &pb.MaintenanceRequest{NodeId: node, Task: task, End: true})
		return r.GetError(), err
	})
}
