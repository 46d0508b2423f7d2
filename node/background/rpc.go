package background

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/shoaldb/shoal/bgtask"
	"github.com/shoaldb/shoal/node/backups"
	"github.com/shoaldb/shoal/pb"
)

// peerFor returns a client for nodeID when the request is for another node (nil: this one).
func (s *Service) peerFor(nodeID uint64) (pb.ShoalClient, *pb.Error) {
	if nodeID == 0 || nodeID == s.nodeID.Load() {
		return nil, nil
	}
	if s.deps.Dir.Get(nodeID) == nil {
		return nil, &pb.Error{Code: pb.ErrorCode_INVALID_ARGUMENT, Message: fmt.Sprintf("unknown node %d", nodeID)}
	}
	c, err := s.deps.Peer(nodeID)
	if err != nil {
		return nil, &pb.Error{Code: pb.ErrorCode_UNAVAILABLE, Message: fmt.Sprintf("node %d: %v", nodeID, err)}
	}
	return c, nil
}

// Compact serves the Compact RPC: a full manual compaction of node_id's engine, after shedding its
// leaderships. It returns when the compaction is done.
func (s *Service) Compact(ctx context.Context, req *pb.CompactRequest) (*pb.CompactResponse, error) {
	if c, pe := s.peerFor(req.NodeId); pe != nil {
		return &pb.CompactResponse{Error: pe}, nil
	} else if c != nil {
		return c.Compact(ctx, req)
	}
	start := time.Now()
	out, err := s.runCompaction(ctx)
	resp := &pb.CompactResponse{Outcome: out, DurationMs: time.Since(start).Milliseconds(), NodeId: s.nodeID.Load()}
	if err != nil {
		resp.Error = &pb.Error{Code: pb.ErrorCode_INTERNAL, Message: err.Error()}
	}
	return resp, nil
}

// Backup serves the Backup RPC: a backup of every range with a replica on node_id into dir on that
// node's host (backup.go). It returns when the backup is complete.
func (s *Service) Backup(ctx context.Context, req *pb.BackupRequest) (*pb.BackupResponse, error) {
	if c, pe := s.peerFor(req.NodeId); pe != nil {
		return &pb.BackupResponse{Error: pe}, nil
	} else if c != nil {
		return c.Backup(ctx, req)
	}
	if req.Dir == "" || !filepath.IsAbs(req.Dir) {
		return &pb.BackupResponse{Error: &pb.Error{Code: pb.ErrorCode_INVALID_ARGUMENT,
			Message: fmt.Sprintf("backup directory %q must be an absolute path on the node's host", req.Dir)}}, nil
	}
	if err := checkEmptyDir(req.Dir); err != nil {
		return &pb.BackupResponse{Error: &pb.Error{Code: pb.ErrorCode_INVALID_ARGUMENT, Message: err.Error()}}, nil
	}
	var parent *backups.Parent
	if req.IncrementalFrom != "" {
		// Checked before anything is written: a damaged or missing parent is refused.
		if !filepath.IsAbs(req.IncrementalFrom) {
			return &pb.BackupResponse{Error: &pb.Error{Code: pb.ErrorCode_INVALID_ARGUMENT,
				Message: fmt.Sprintf("parent backup %q must be an absolute path on the node's host", req.IncrementalFrom)}}, nil
		}
		var err error
		if parent, err = backups.OpenParent(req.IncrementalFrom); err != nil {
			return &pb.BackupResponse{Error: &pb.Error{Code: pb.ErrorCode_INVALID_ARGUMENT, Message: err.Error()}}, nil
		}
	}
	start := time.Now()
	out, m, err := s.runBackup(ctx, req.Dir, parent, req.RateBytesPerSec)
	resp := &pb.BackupResponse{Outcome: out, DurationMs: time.Since(start).Milliseconds(), NodeId: s.nodeID.Load(), ManifestJson: m}
	if err != nil {
		resp.Error = &pb.Error{Code: pb.ErrorCode_INTERNAL, Message: err.Error()}
	}
	return resp, nil
}

func checkEmptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("backup directory %s: %w", dir, err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("backup directory %s is not empty; choose a new one", dir)
	}
	return nil
}

// Maintenance serves the Maintenance RPC: an operator's job announces that it is about to load
// node_id for duration_ms. The call returns once the job may start (the node's leaderships have
// moved, or the postponement bound passed); the announcement ends after the duration or when the job
// calls again with end set.
func (s *Service) Maintenance(ctx context.Context, req *pb.MaintenanceRequest) (*pb.MaintenanceResponse, error) {
	if c, pe := s.peerFor(req.NodeId); pe != nil {
		return &pb.MaintenanceResponse{Error: pe}, nil
	} else if c != nil {
		return c.Maintenance(ctx, req)
	}
	self := s.nodeID.Load()
	bad := func(msg string) (*pb.MaintenanceResponse, error) {
		return &pb.MaintenanceResponse{Error: &pb.Error{Code: pb.ErrorCode_INVALID_ARGUMENT, Message: msg}}, nil
	}
	if req.Task == "" {
		return bad("maintenance: a task name is required")
	}
	s.annMu.Lock()
	h, exists := s.announced[req.Task]
	if req.End {
		delete(s.announced, req.Task)
	}
	s.annMu.Unlock()
	if req.End {
		if !exists {
			return bad(fmt.Sprintf("maintenance: no announced task %q on node %d", req.Task, self))
		}
		h.End()
		return &pb.MaintenanceResponse{Outcome: "ended", NodeId: self}, nil
	}
	d := time.Duration(req.DurationMs) * time.Millisecond
	if d <= 0 || d > 24*time.Hour {
		return bad(fmt.Sprintf("maintenance: duration %s must be in (0, 24h]", d))
	}
	if req.Task == PreStopTask {
		return s.preStop(ctx, d), nil
	}
	if exists {
		return bad(fmt.Sprintf("maintenance: task %q is already announced on node %d", req.Task, self))
	}
	h, out, err := s.acquireHeavy(ctx, bgtask.KindAnnounced, req.Task, time.Now().Add(d))
	if err != nil {
		return &pb.MaintenanceResponse{Error: &pb.Error{Code: pb.ErrorCode_TIMEOUT, Message: err.Error()}}, nil
	}
	s.annMu.Lock()
	s.announced[req.Task] = h
	s.annMu.Unlock()
	time.AfterFunc(d, func() {
		s.annMu.Lock()
		if s.announced[req.Task] == h {
			delete(s.announced, req.Task)
		}
		s.annMu.Unlock()
		h.End()
	})
	return &pb.MaintenanceResponse{Outcome: out.String(), NodeId: self}, nil
}

// PreStopTask is the announcement an orchestrator makes before it stops the node (`shoal node
// prestop`, a Kubernetes preStop hook): unlike other maintenance it does not end. The node hands its
// leaderships to peers at once, as on SIGTERM, stays draining until the process stops (so the
// autopilot gives it none back), and reports not ready, so load balancers stop sending it clients.
const PreStopTask = "prestop"

// PostStartTask is what `shoal node poststart` (a Kubernetes postStart hook) asks a restarted node:
// it answers once the node's replicas have caught up with their peers, or after the announcement's
// duration. The node answers it itself (node.Maintenance): it starts no task.
const PostStartTask = "poststart"

// preStop drains the node's leaderships for at most d and says how it went. Running out of time is
// not an error: the stop goes ahead, and the leaderships left are handed over on SIGTERM or lost to an
// election.
func (s *Service) preStop(ctx context.Context, d time.Duration) *pb.MaintenanceResponse {
	self := s.nodeID.Load()
	if s.deps.DrainLeaderships == nil {
		return &pb.MaintenanceResponse{Error: &pb.Error{Code: pb.ErrorCode_INTERNAL, Message: "prestop: this node cannot drain"}}
	}
	s.preStopped.Store(true)
	s.deps.Kick() // peers learn at once that the node takes no leaderships
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	start := time.Now()
	left := s.deps.DrainLeaderships(ctx)
	took := time.Since(start).Round(time.Millisecond)
	out := fmt.Sprintf("every leadership moved to a peer in %s; the node reports not ready until it stops", took)
	switch {
	case left > 0 && ctx.Err() != nil:
		out = fmt.Sprintf("%d leaderships still here after %s; stopping now costs their ranges an election", left, took)
	case left > 0:
		out = fmt.Sprintf("%d leaderships have no live peer to move to (a single node, or all stopping at once)", left)
	}
	return &pb.MaintenanceResponse{Outcome: out, NodeId: self}
}

// PreStopped reports whether an orchestrator announced that it is about to stop this node.
func (s *Service) PreStopped() bool { return s.preStopped.Load() }
