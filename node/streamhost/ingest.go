package streamhost

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
	"github.com/shoaldb/shoal/stream"
)

// maxRun bounds the events of one key committed in one transaction.
const maxRun = 64

// Ingest implements pb.StreamsServer: it applies a batch's events, each key's in order (in runs of
// up to maxRun committed together, stream.ApplyRun) and keys in parallel. After an event of a key is
// not applied, the key's later events in the batch are answered RETRY too, so that a producer
// resending them keeps their order.
func (h *Host) Ingest(ctx context.Context, req *pb.IngestRequest) (*pb.IngestResponse, error) {
	job, ok := stream.Lookup(req.GetJob())
	if !ok {
		return &pb.IngestResponse{Error: &pb.Error{Code: pb.ErrorCode_INVALID_ARGUMENT,
			Message: fmt.Sprintf("no stream job %q on node %d (jobs: %v)", req.GetJob(), h.deps.NodeID(), stream.Names())}}, nil
	}
	if h.deps.Store() == nil || h.ctx.Err() != nil {
		return &pb.IngestResponse{Error: &pb.Error{Code: pb.ErrorCode_UNAVAILABLE, Message: "node is not serving stream tasks"}}, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(h.ctx, cancel)()

	byKey := map[string][]int{}
	var keys []string
	for i, ev := range req.GetEvents() {
		k := string(ev.GetKey())
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], i)
	}
	results := make([]*pb.IngestResult, len(req.GetEvents()))
	sem := make(chan struct{}, maxParallel)
	var wg sync.WaitGroup
	for _, k := range keys {
		sem <- struct{}{}
		wg.Add(1)
		go func(idx []int) {
			defer func() { <-sem; wg.Done() }()
			var blocked *pb.Error
			for len(idx) > 0 {
				run := idx[:min(len(idx), maxRun)]
				idx = idx[len(run):]
				if blocked != nil {
					for _, i := range run {
						results[i] = &pb.IngestResult{Status: pb.IngestResult_RETRY, Error: blocked}
					}
					continue
				}
				for j, r := range h.apply(ctx, job, req.Events, run, req.GetUnaligned()) {
					if results[run[j]] = r; r.GetStatus() == pb.IngestResult_RETRY {
						blocked = r.GetError()
					}
				}
			}
		}(byKey[k])
	}
	wg.Wait()
	h.count(results)
	return &pb.IngestResponse{Results: results}, nil
}

func (h *Host) count(results []*pb.IngestResult) {
	for _, r := range results {
		switch r.GetStatus() {
		case pb.IngestResult_APPLIED:
			h.applied.Add(1)
		case pb.IngestResult_DUPLICATE:
			h.dups.Add(1)
		case pb.IngestResult_RETRY:
			h.retries.Add(1)
		default:
			h.failed.Add(1)
		}
	}
}

// apply runs events idx of one key at its task: aligned, only if this node leads the key's range.
func (h *Host) apply(ctx context.Context, job *stream.Job, all []*pb.StreamEvent, idx []int, unaligned bool) []*pb.IngestResult {
	same := func(r *pb.IngestResult) []*pb.IngestResult {
		out := make([]*pb.IngestResult, len(idx))
		for i := range out {
			out[i] = r
		}
		return out
	}
	evs := make([]stream.Event, len(idx))
	for j, i := range idx {
		pe := all[i]
		evs[j] = stream.Event{Key: pe.GetKey(), Position: pe.GetPosition(), Value: pe.GetValue()}
		if bytes.Compare(evs[j].Key, job.Start) < 0 || bytes.Compare(evs[j].Key, job.End) >= 0 || evs[j].Position == 0 {
			return same(&pb.IngestResult{Status: pb.IngestResult_FAILED, Error: &pb.Error{Code: pb.ErrorCode_INVALID_ARGUMENT,
				Message: fmt.Sprintf("event key %q outside job %s's span, or position 0", evs[j].Key, job.Name)}})
		}
	}
	var rangeID uint64 // unaligned: one task per job on the node, wherever its keys live
	if !unaligned {
		r, misrouted := h.leading(evs[0].Key)
		if misrouted != nil {
			return same(&pb.IngestResult{Status: pb.IngestResult_RETRY, Error: misrouted})
		}
		rangeID = r.RangeID()
	}
	t := h.task(job.Name, rangeID)
	res := stream.ApplyRun(ctx, job, &nodeState{h: h, aligned: !unaligned}, evs)
	applied := 0
	for _, r := range res {
		if r.GetStatus() == pb.IngestResult_APPLIED {
			applied++
			t.events.Add(1)
			t.last.Store(time.Now().UnixNano())
		}
	}
	if rangeID != 0 && applied > 0 {
		h.record(rangeID, evs[0].Key, applied)
	}
	return res
}

// leading returns the local replica of key's range if it leads, else the error that sends the
// producer to the leader (NOT_LEADER with its address) or to a fresh lookup (RANGE_MOVED).
func (h *Host) leading(key []byte) (*replica.Replica, *pb.Error) {
	st := h.deps.Store()
	var r *replica.Replica
	if st != nil {
		r = st.ReplicaForKey(key)
	}
	if r == nil {
		return nil, &pb.Error{Code: pb.ErrorCode_RANGE_MOVED, Message: fmt.Sprintf("node %d has no replica of the range of %q", h.deps.NodeID(), key)}
	}
	if !r.IsLeader() {
		pe := &pb.Error{Code: pb.ErrorCode_NOT_LEADER, Message: fmt.Sprintf("node %d does not lead range %d", h.deps.NodeID(), r.RangeID())}
		if l := r.LeaderNode(); l != 0 {
			pe.LeaderNodeId = l
			pe.LeaderAddr, _ = h.deps.Resolve(l)
		}
		return nil, pe
	}
	return r, nil
}

func (h *Host) task(job string, rangeID uint64) *task {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := taskKey{job, rangeID}
	t, ok := h.tasks[k]
	if !ok {
		t = &task{}
		h.tasks[k] = t
	}
	return t
}
