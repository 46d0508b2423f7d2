package kv

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
)

// Join records (docs/design/incremental-join.md): the autopilot's incremental_join policy decides when
// a node's join starts, when it first serves a range and when it is complete; the records live in the
// meta range under 'j' <node id>, so the next autopilot resumes the join, and `shoal admin nodes` /
// `join-status` show it.

func metaJoinKey(node uint64) []byte { return append([]byte("j"), strconv.FormatUint(node, 10)...) }

// RecordJoin implements autopilot.JoinRecorder.
func (h *autopilotHost) RecordJoin(ctx context.Context, node uint64, j model.Join) error {
	b, err := json.Marshal(j)
	if err != nil {
		return err
	}
	_, err = h.n.metaCommand(ctx, &pb.Command{Mutations: []*pb.Mutation{{Key: metaJoinKey(node), Value: b}}})
	if err != nil {
		return fmt.Errorf("record join of node %d: %w", node, err)
	}
	return nil
}

// joinRecords reads every node's join record from the meta range.
func (n *Node) joinRecords(ctx context.Context) (map[uint64]*model.Join, error) {
	out := map[uint64]*model.Join{}
	kvs, err := n.metaScan(ctx, []byte("j"), []byte("k"), 0)
	if err != nil {
		return nil, fmt.Errorf("read the join records from the meta range: %w", err)
	}
	for _, kv := range kvs {
		id, err := strconv.ParseUint(string(kv.Key[1:]), 10, 64)
		if err != nil {
			continue
		}
		j := &model.Join{}
		if json.Unmarshal(kv.Value, j) == nil {
			out[id] = j
		}
	}
	return out, nil
}

// joinStatus describes node's join for the Nodes RPC; st is the node's last reported stats.
func joinStatus(j *model.Join, st *pb.NodeStats) *pb.JoinStatus {
	if j == nil {
		return nil
	}
	js := &pb.JoinStatus{Strategy: j.Strategy, StartedUnixNanos: j.Started.UnixNano(), Target: uint32(j.Target)}
	if !j.FirstServed.IsZero() {
		js.FirstServedUnixNanos = j.FirstServed.UnixNano()
	}
	if !j.Done.IsZero() {
		js.DoneUnixNanos = j.Done.UnixNano()
	}
	for _, rl := range st.GetRanges() {
		if rl.RangeId == replica.MetaRangeID {
			continue
		}
		js.Held++
		if rl.Leader {
			js.Leading++
		}
	}
	return js
}

// joinState is the node state shown while a join is under way: "joining" until the node serves a
// range, then "partially-joined" until the join is complete.
func joinState(j *model.Join) string {
	switch {
	case j == nil || !j.Active():
		return ""
	case j.FirstServed.IsZero():
		return "joining"
	}
	return "partially-joined"
}
