package scenario

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/shoaldb/shoal/bench/benchutil"
	"github.com/shoaldb/shoal/bench/report"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
)

// MoveReport is a replica move under load (the move scenario): the move's time against the time one
// snapshot of the range takes at the configured rate, what the nodes sent, and every voter's copy
// of the range checksummed afterwards. The foreground's throughput and p99 during the move against
// the steady state before it are the run's task window.
type MoveReport struct {
	Range    uint64   `json:"range"`
	Leader   uint64   `json:"leader"`
	From     uint64   `json:"from"`
	To       uint64   `json:"to"`
	Voters   []uint64 `json:"voters_after"`
	Done     bool     `json:"done"`
	Attempts int      `json:"attempts"`
	// RetryErrors are the answers of the attempts that failed.
	RetryErrors []string `json:"retry_errors,omitempty"`
	DurationS   float64  `json:"duration_s"`
	// RangeBytes are the range's keys plus values, what one snapshot carries; ExpectedS is the time
	// it takes at the configured rate, and MoveTimeRatio DurationS over it.
	RangeBytes      int64   `json:"range_bytes"`
	RateBytesPerSec int64   `json:"configured_rate_bytes_per_sec"`
	ExpectedS       float64 `json:"expected_s_at_configured_rate"`
	MoveTimeRatio   float64 `json:"move_time_ratio"`
	// SnapshotBytes are the snapshot bytes every node sent in the move's seconds, SendingS the
	// seconds in which any flowed; SendRateRatio is their mean rate over the configured one (the
	// first and the last of three or more seconds left out: partly idle), and PeakSendRateRatio the
	// busiest second's. SnapshotsApplied counts the snapshots the new node
	// installed: more than one means its learner fell behind the leader's truncated log again.
	SnapshotBytes     uint64  `json:"snapshot_bytes"`
	SendingS          float64 `json:"sending_s"`
	SendRateRatio     float64 `json:"send_rate_ratio"`
	PeakSendRateRatio float64 `json:"peak_send_rate_ratio"`
	SnapshotsApplied  uint64  `json:"snapshots_applied_by_new_node"`
	// LogTruncateThreshold is the leader's: a learner further behind needs another snapshot.
	LogTruncateThreshold uint64 `json:"log_truncate_threshold"`
	// Replicas are the voters' copies once all applied the same index; Verified says they are equal,
	// each holds every record, and the old replica is gone.
	Replicas []benchutil.ReplicaDigest `json:"replicas"`
	Verified bool                      `json:"verified"`
}

// moveReplica moves a voter other than the leader of the first user range to a node without a
// replica of it with RelocateReplica (a learner caught up by a snapshot, then promoted and the old
// replica removed in one joint change), retrying retryable answers, and returns once it is done.
func moveReplica(ctx context.Context, e *env) (string, error) {
	if !e.c.local() {
		return "", errNotLocal
	}
	rs, err := sortedUserRanges(ctx, e.cl)
	if err != nil || len(rs) == 0 {
		return "", fmt.Errorf("no user range (%v)", err)
	}
	d := rs[0].GetDesc()
	mv := &MoveReport{Range: d.GetRangeId(), Leader: rs[0].LeaderNodeId, Attempts: 1}
	held := map[uint64]bool{}
	for _, rd := range d.GetReplicas() {
		held[rd.NodeId] = true
		if !rd.Learner && rd.NodeId != mv.Leader && mv.From == 0 {
			mv.From = rd.NodeId
		}
	}
	for _, n := range e.c.Nodes() {
		if id := n.KV.NodeID(); !held[id] {
			mv.To = id
		}
	}
	via, to := e.c.nodeByID(mv.Leader), e.c.nodeByID(mv.To)
	if mv.From == 0 || mv.To == 0 || via == nil || to == nil {
		return "", fmt.Errorf("no move to make: range %d has replicas on %v, led by n%d", mv.Range, d.GetReplicas(), mv.Leader)
	}
	e.mu.Lock()
	e.move = mv
	e.mu.Unlock()
	e.c.track.Store(mv.Range)
	applied0 := to.KV.Metrics().Loop.SnapshotsApplied
	desc := fmt.Sprintf("r%d n%d->n%d", mv.Range, mv.From, mv.To)
	for ; ; mv.Attempts++ {
		// Through the leader's node; any node forwards the request to the leader.
		resp, err := via.KV.RelocateReplica(ctx, &pb.RelocateReplicaRequest{RangeId: mv.Range, AddNodeId: mv.To,
			RemoveNodeId: mv.From, Step: pb.RelocateStep_RELOCATE_ALL})
		if err == nil && resp.GetError() == nil {
			for _, rd := range resp.GetRange().GetReplicas() {
				if !rd.Learner {
					mv.Voters = append(mv.Voters, rd.NodeId)
				}
			}
			break
		}
		retry := true
		if err == nil {
			err = fmt.Errorf("%s: %s", resp.GetError().GetCode(), resp.GetError().GetMessage())
			retry = resp.GetError().GetCode() != pb.ErrorCode_INVALID_ARGUMENT
		}
		mv.RetryErrors = append(mv.RetryErrors, err.Error())
		if !retry || ctx.Err() != nil {
			return desc, fmt.Errorf("after %d attempt(s): %w", mv.Attempts, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	mv.SnapshotsApplied = to.KV.Metrics().Loop.SnapshotsApplied - applied0
	mv.Done = slices.Contains(mv.Voters, mv.To) && !slices.Contains(mv.Voters, mv.From)
	if !mv.Done {
		return desc, fmt.Errorf("voters after the move: %v", mv.Voters)
	}
	return fmt.Sprintf("%s in %d attempt(s)", desc, mv.Attempts), nil
}

// scoreMove fills in the move's figures from the run's seconds and, the workload stopped, checks the
// voters' copies (nil when nothing moved).
func scoreMove(ctx context.Context, rr *RunReport, e *env) *MoveReport {
	mv := e.move
	i := slices.IndexFunc(rr.Events, func(ev EventMark) bool { return ev.Label == string(MoveReplica) })
	if mv == nil || i < 0 {
		return nil
	}
	ev := rr.Events[i]
	mv.DurationS = ev.EndT - ev.T
	mv.RangeBytes = int64(e.sc.Records) * int64(len(key(0))+e.sc.ValueBytes)
	mv.RateBytesPerSec = e.cfg.Transport.WithDefaults().SnapshotRateBytesPerSec
	mv.LogTruncateThreshold = e.cfg.Raft.WithDefaults().LogTruncateThreshold
	rate := float64(mv.RateBytesPerSec)
	mv.ExpectedS = float64(mv.RangeBytes) / rate
	mv.MoveTimeRatio = mv.DurationS / mv.ExpectedS
	// The bytes of each second in which any flowed; a second later than the move's end too, since a
	// loaded machine can sample a second late, and nothing else sends snapshots in this scenario.
	var sent []float64
	for _, p := range rr.Series {
		if mid := p.T - 0.5; mid < ev.T-0.5 || mid > ev.EndT+1.5 {
			continue
		}
		var b uint64
		for _, n := range p.Nodes {
			b += n.SnapshotBytes
		}
		if b > 0 {
			mv.SnapshotBytes, sent = mv.SnapshotBytes+b, append(sent, float64(b))
		}
	}
	if mv.SendingS = float64(len(sent)); len(sent) > 0 {
		if len(sent) >= 3 {
			sent = sent[1 : len(sent)-1] // the first and the last second are partly idle
		}
		m, _ := report.MeanSD(sent)
		mv.SendRateRatio, mv.PeakSendRateRatio = m/rate, slices.Max(sent)/rate
	}
	if mv.Done {
		verifyMove(ctx, e, mv)
	}
	return mv
}

// verifyMove checksums every voter's copy of the moved range once all applied the same index (a
// write cut short when the workload stopped may still commit), and waits for the old replica's
// removal.
func verifyMove(ctx context.Context, e *env, mv *MoveReport) {
	replicaOn := func(id uint64) *replica.Replica {
		if n := e.c.nodeByID(id); n != nil && n.KV.Store() != nil {
			return n.KV.Store().Replica(mv.Range)
		}
		return nil
	}
	same := false
	for try := 0; try < 20 && !same && ctx.Err() == nil; try++ {
		if try > 0 {
			time.Sleep(500 * time.Millisecond)
		}
		mv.Replicas, same = nil, true
		for _, id := range mv.Voters {
			d := benchutil.ReplicaDigest{Node: id, Error: "no local replica"}
			if r := replicaOn(id); r != nil {
				d = benchutil.Digest(id, r)
			}
			mv.Replicas = append(mv.Replicas, d)
			same = same && d.Error == "" && d.Applied == mv.Replicas[0].Applied
		}
	}
	for try := 0; try < 40 && replicaOn(mv.From) != nil; try++ {
		time.Sleep(500 * time.Millisecond) // the removed replica's node collects it once it learns of the change
	}
	mv.Verified = same && len(mv.Replicas) == len(mv.Voters) && replicaOn(mv.From) == nil
	for _, d := range mv.Replicas {
		mv.Verified = mv.Verified && d.Keys == int64(e.sc.Records) && d.CRC64 == mv.Replicas[0].CRC64
	}
}
