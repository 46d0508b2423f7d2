package autopilothost

import (
	"context"
	"encoding/json"
	"time"

	"github.com/shoaldb/shoal/autopilot"
	"github.com/shoaldb/shoal/autopilot/decisions"
	"github.com/shoaldb/shoal/node/records"
	"github.com/shoaldb/shoal/pb"
)

// The decision log lives in the autopilot's memory on the meta leader; a copy is kept in the meta
// range (keys 'D' <id:8>, values the entries' JSON) so that it survives the autopilot moving to
// another node or a restart: the next autopilot restores it before its first round.

// loadDecisions reads the saved decision log into ap's log.
func (h *Host) loadDecisions(ctx context.Context, ap *autopilot.Autopilot) {
	start, end := records.DecisionSpan()
	kvs, err := h.deps.Ranges.ScanMeta(ctx, start, end, 0)
	if err != nil {
		h.log.Warn("autopilot: could not load the saved decision log; starting with an empty one", "err", err)
		return
	}
	entries := make([]decisions.Entry, 0, len(kvs))
	saved := make(map[uint64]string, len(kvs))
	for _, kv := range kvs {
		var e decisions.Entry
		if err := json.Unmarshal(kv.Value, &e); err != nil || e.ID == 0 {
			h.log.Warn("autopilot: skipping an unreadable saved decision", "key", kv.Key, "err", err)
			continue
		}
		entries = append(entries, e)
		saved[e.ID] = string(kv.Value)
	}
	ap.Decisions().Restore(entries, time.Now())
	h.decMu.Lock()
	h.savedDecisions = saved
	h.decMu.Unlock()
}

// saveDecisions writes the entries that changed since the last save and deletes those the bounded
// log has dropped, in one meta command.
func (h *Host) saveDecisions(ctx context.Context, ap *autopilot.Autopilot) {
	entries := ap.Decisions().Entries()
	h.decMu.Lock()
	defer h.decMu.Unlock()
	if h.savedDecisions == nil {
		h.savedDecisions = map[uint64]string{}
	}
	var muts []*pb.Mutation
	now := make(map[uint64]string, len(entries))
	for _, e := range entries {
		b, err := json.Marshal(e)
		if err != nil {
			continue
		}
		now[e.ID] = string(b)
		if h.savedDecisions[e.ID] != string(b) {
			muts = append(muts, &pb.Mutation{Key: records.DecisionKey(e.ID), Value: b})
		}
	}
	for id := range h.savedDecisions {
		if _, ok := now[id]; !ok {
			muts = append(muts, &pb.Mutation{Key: records.DecisionKey(id), Delete: true})
		}
	}
	if len(muts) == 0 {
		return
	}
	if _, err := h.deps.Ranges.ProposeMeta(ctx, &pb.Command{Mutations: muts}); err != nil {
		h.log.Debug("autopilot: saving the decision log failed; will retry", "err", err)
		return
	}
	h.savedDecisions = now
}
