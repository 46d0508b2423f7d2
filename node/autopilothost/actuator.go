package autopilothost

import (
	"context"
	"fmt"
	"time"

	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/autopilot/policy"
	"github.com/shoaldb/shoal/hints"
	"github.com/shoaldb/shoal/kv"
	"github.com/shoaldb/shoal/node/records"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
)

func (h *Host) relocate(ctx context.Context, rangeID, add, remove uint64, step pb.RelocateStep) error {
	resp, err := h.deps.Ranges.RelocateReplica(ctx, &pb.RelocateReplicaRequest{RangeId: rangeID, AddNodeId: add, RemoveNodeId: remove, Step: step})
	if err != nil {
		return err
	}
	return kv.FromPB(resp.Error)
}

// AddLearner implements executor.Actuator.
func (h *Host) AddLearner(ctx context.Context, rangeID, node uint64) error {
	return h.relocate(ctx, rangeID, node, 0, pb.RelocateStep_RELOCATE_ADD_LEARNER)
}

// PromoteVoter implements executor.Actuator.
func (h *Host) PromoteVoter(ctx context.Context, rangeID, node, remove uint64) error {
	return h.relocate(ctx, rangeID, node, remove, pb.RelocateStep_RELOCATE_PROMOTE)
}

// RemoveReplica implements executor.Actuator.
func (h *Host) RemoveReplica(ctx context.Context, rangeID, node uint64) error {
	return h.relocate(ctx, rangeID, 0, node, pb.RelocateStep_RELOCATE_REMOVE)
}

// TransferLeader implements executor.Actuator.
func (h *Host) TransferLeader(ctx context.Context, rangeID, to uint64) error {
	if rangeID == replica.MetaRangeID {
		// The autopilot stops on this node once the meta leadership leaves it: save its decision
		// log first, so that the next autopilot restores the outcomes recorded up to now.
		if ap := h.running(); ap != nil {
			h.saveDecisions(ctx, ap)
		}
	}
	resp, err := h.deps.Ranges.TransferLeader(ctx, &pb.TransferLeaderRequest{RangeId: rangeID, NodeId: to})
	if err != nil {
		return err
	}
	return kv.FromPB(resp.Error)
}

// Split implements executor.Actuator.
func (h *Host) Split(ctx context.Context, rangeID uint64, key []byte) error {
	resp, err := h.deps.Ranges.Split(ctx, &pb.SplitRequest{Key: key})
	if err != nil {
		return err
	}
	if resp.Error != nil {
		return kv.FromPB(resp.Error)
	}
	if resp.Left != nil && resp.Left.RangeId != rangeID {
		return fmt.Errorf("split at %q landed in range %d, not %d", key, resp.Left.RangeId, rangeID)
	}
	return nil
}

// Merge implements executor.Actuator.
func (h *Host) Merge(ctx context.Context, leftRangeID uint64) error {
	resp, err := h.deps.Ranges.Merge(ctx, &pb.MergeRequest{LeftRangeId: leftRangeID})
	if err != nil {
		return err
	}
	return kv.FromPB(resp.Error)
}

// SetProfile implements executor.ProfileSetter: it asks node to change its engine profile (a
// rolling restart in process, package node/supervisor) and returns once the node accepted; the step
// is done when the node's heartbeats report the profile.
func (h *Host) SetProfile(ctx context.Context, node uint64, profile string) error {
	cc, err := h.deps.Conn(node)
	if err != nil {
		return fmt.Errorf("set profile on n%d: %w", node, err)
	}
	resp, err := pb.NewShoalClient(cc).SetProfile(ctx, &pb.SetProfileRequest{NodeId: node, Profile: profile})
	if err != nil {
		return fmt.Errorf("set profile on n%d: %w", node, err)
	}
	return kv.FromPB(resp.Error)
}

// MarkDecommissioned implements autopilot.Decommissioner.
func (h *Host) MarkDecommissioned(ctx context.Context, node uint64) error {
	return records.SetNodeState(ctx, h.deps.Ranges, node, records.Decommissioned)
}

// RecordJoin implements autopilot.JoinRecorder.
func (h *Host) RecordJoin(ctx context.Context, node uint64, j model.Join) error {
	return records.RecordJoin(ctx, h.deps.Ranges, node, j)
}

// transferMinReplays is how many recent replays a transfer target's hit ratio must rest on.
const transferMinReplays = 8

// minReadQPSForWarmth: below this read rate a range gets too few hints for its warmth to be measured,
// so a transfer does not wait for it.
const minReadQPSForWarmth = 1.0

// WarmBeforeTransfer implements executor.Warmer: before the autopilot moves rangeID's leadership to
// node to, it asks the target how warm its cache is for the range (read hints) and waits for it, at
// most readhints.Config.TransferWait (and never more than half the step's remaining time). Warm means
// hints flowing with a small apply lag and a replay hit ratio of at least 90 % of the current
// leader's block-cache hit ratio over the last 10 s. It returns the note for the decision log; the
// transfer follows either way. Ranges that serve almost no reads get no hints, so they are not
// checked (they would always wait the full time).
func (h *Host) WarmBeforeTransfer(ctx context.Context, rangeID, to uint64, readQPS float64) string {
	wait := h.deps.Hints.Config().TransferWait
	ap := h.running()
	if h.deps.Hints == nil || wait < 0 || ap == nil || !ap.Policies().Enabled(policy.NameReadHints) {
		return ""
	}
	if readQPS < minReadQPSForWarmth {
		return fmt.Sprintf("read hints: warmth of n%d not checked (r%d serves %.1f reads/s; an idle range gets no hints)", to, rangeID, readQPS)
	}
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl)/2)
	}
	crit := hints.DefaultWarmCriteria()
	// Fewer replays than the package default: a receiver now replays a recurring read at most once a
	// second, and one whose disk is saturated applies about a third of its hints (hintLoad), so a
	// range's last few batches hold 8–11 replays. Requiring 16 made every hand-over to a new node wait
	// its full TransferWait with a replay hit ratio of 0.94–1.00 already measured.
	crit.MinReplays = transferMinReplays
	leader := h.deps.Ranges.LeaderNodeOf(rangeID)
	ref := "leader's hit ratio unknown"
	// The leader's own reads' ratio, not its whole cache's: the snapshot of this very move streams
	// out of the leader and its compactions read too, all misses, and counting them let a node whose
	// replays hit 0.57 of the time take a range whose clients hit 0.99.
	if ratio, ok := h.deps.Dir.ServedHitRatio(leader, 10*time.Second); ok {
		crit = crit.RelativeTo(ratio, 0.9)
		ref = fmt.Sprintf("leader n%d own reads' hit ratio %.2f, required %.2f", leader, ratio, crit.MinHitRatio)
	} else if ratio, ok := h.deps.Dir.CacheHitRatio(leader, 10*time.Second); ok {
		crit = crit.RelativeTo(ratio, 0.9)
		ref = fmt.Sprintf("leader n%d block-cache hit ratio %.2f, required %.2f", leader, ratio, crit.MinHitRatio)
	}
	cc, err := h.deps.Conn(to)
	if err != nil {
		return fmt.Sprintf("read hints: warmth of n%d unknown (%v); transferred without waiting", to, err)
	}
	start := time.Now()
	w, warm, err := hints.NewClient(cc, h.deps.ClusterID()).WaitWarm(ctx, rangeID, crit, wait)
	took := time.Since(start).Round(10 * time.Millisecond)
	switch {
	case err != nil:
		return fmt.Sprintf("read hints: warmth of n%d unknown after %v (%v); transferred anyway", to, took, err)
	case warm:
		return fmt.Sprintf("read hints: n%d warm after %v (%s; %s)", to, took, w, ref)
	}
	why := "not warm"
	if cerr := crit.Check(w); cerr != nil {
		why = cerr.Error()
	}
	return fmt.Sprintf("read hints: n%d not warm after %v (%s; %s: %s); transferred anyway", to, took, w, ref, why)
}
