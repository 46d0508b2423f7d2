package stream

import (
	"context"
	"errors"
	"fmt"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/pb"
)

// maxAttempts bounds the runs of one event's handler whose commit found its reads changed.
const maxAttempts = 8

// Entry is a key's stored value as a task read it (Raw in the envelope, Version as kv counts writes:
// 0 for an absent key).
type Entry struct {
	Raw     []byte
	Found   bool
	Version uint64
}

// Store is where a task's state lives, as the node's host serves it: locally when the node leads the
// key's range, else (unaligned, or a key outside the event's range) at the leader.
type Store interface {
	// Get reads key linearizably. primary is set for the event's own key: a host that serves only
	// aligned events answers *Misrouted when it does not lead that key's range.
	Get(ctx context.Context, key []byte, primary bool) (Entry, error)
	// Commit runs the event's transaction in the range of its first compare's key (the primary).
	Commit(ctx context.Context, req *pb.TxnRequest) (succeeded bool, err error)
}

// Misrouted says an event reached a node that does not lead its key's range (or has no replica of
// it): the producer looks the range up again and sends the event, with the same position, there.
type Misrouted struct{ Err *pb.Error }

func (m *Misrouted) Error() string { return "misrouted: " + m.Err.GetMessage() }

// Apply applies one event exactly once (ApplyRun of one event).
func Apply(ctx context.Context, job *Job, st Store, ev Event) *pb.IngestResult {
	return ApplyRun(ctx, job, st, []Event{ev})[0]
}

// ApplyRun applies evs, events of one key in the producer's order, to job's state in st exactly once.
// It reads the key's applied position; an event the state holds is DUPLICATE; the events that follow
// it without a gap run the handler one after another on one view of the state (each sees the
// writes of those before it) and are committed together, with the last one's position, in one
// transaction conditioned on the versions read. An event after a gap, and every event after one not
// applied, is answered RETRY (sent again, in order). An event the handler refuses is FAILED but its
// position is committed with the run, so that it does not hold up its key. A commit whose outcome is
// unknown is settled by reading the position again.
func ApplyRun(ctx context.Context, job *Job, st Store, evs []Event) []*pb.IngestResult {
	pending := map[uint64][]byte{} // outputs of a commit whose outcome is unknown, by position
	maxRun := len(evs)
	for attempt := 0; attempt < maxAttempts; attempt++ {
		res, a, err := runOnce(ctx, job, st, evs, maxRun, pending)
		switch {
		case err == nil && a == nil: // nothing to commit, or committed
			return res
		case err == nil: // a read changed under the handler: run it again on the new state
		case isUnknownOutcome(err):
			for j, i := range a.run {
				if res[i] == nil { // refused events settle as DUPLICATE
					pending[evs[i].Position] = a.outs[j]
				}
			}
		case codeOf(err) == pb.ErrorCode_CROSS_RANGE && maxRun > 1:
			maxRun = 1 // find the event whose writes span ranges
		case codeOf(err) == pb.ErrorCode_CROSS_RANGE:
			f := failed(fmt.Errorf("the handler's writes for key %q span ranges: %w", evs[a.run[0]].Key, err))
			return block(res, a.run[0], f)
		default:
			return block(res, a.run[0], retryResult(err))
		}
	}
	res := make([]*pb.IngestResult, len(evs))
	return block(res, 0, &pb.IngestResult{Status: pb.IngestResult_RETRY, Error: &pb.Error{Code: pb.ErrorCode_UNAVAILABLE,
		Message: fmt.Sprintf("key %q: state changed under the handler %d times", evs[0].Key, maxAttempts)}})
}

// attempt is a run of events whose commit did not succeed: their indexes and outputs.
type attempt struct {
	run  []int
	outs [][]byte
}

// runOnce reads the key, runs the handler over the events that follow its position (at most maxRun)
// and commits them. It returns the results and, when the commit did not succeed, the run and the
// commit's error (nil for a failed condition).
func runOnce(ctx context.Context, job *Job, st Store, evs []Event, maxRun int, pending map[uint64][]byte) ([]*pb.IngestResult, *attempt, error) {
	res := make([]*pb.IngestResult, len(evs))
	prim, err := st.Get(ctx, evs[0].Key, true)
	if err != nil {
		return block(res, 0, retryResult(err)), nil, nil
	}
	applied, data, present, err := decodeEntry(prim)
	if err != nil {
		return block(res, 0, failed(fmt.Errorf("key %q: %w", evs[0].Key, err))), nil, nil
	}
	s := newState(st, evs[0], slot{pos: applied, data: data, present: present, version: prim.Version})
	var a attempt
	next, stop := applied+1, len(evs)
	var repeats []int // events repeating a position of this run: DUPLICATE once it commits
	for i, ev := range evs {
		if ev.Position < next && ev.Position > applied {
			repeats = append(repeats, i)
			continue
		}
		if ev.Position < next {
			res[i] = &pb.IngestResult{Status: pb.IngestResult_DUPLICATE}
			if out, ok := pending[ev.Position]; ok && ev.Position <= applied {
				res[i] = &pb.IngestResult{Status: pb.IngestResult_APPLIED, Output: out}
			}
			continue
		}
		if ev.Position > next || len(a.run) == maxRun {
			res[i] = &pb.IngestResult{Status: pb.IngestResult_RETRY, Error: &pb.Error{Code: pb.ErrorCode_UNAVAILABLE,
				Message: fmt.Sprintf("position %d of key %q follows %d: an earlier event is not applied yet", ev.Position, ev.Key, next-1)}}
			if ev.Position == next {
				res[i].Error.Message = fmt.Sprintf("key %q: a run of %d events is committed first", ev.Key, maxRun)
			}
			stop = i
			break
		}
		mark := s.mark()
		out, err := job.Handle(ctx, s, ev)
		if errors.Is(err, ErrRefused) {
			s.reset(mark)
			res[i] = failed(err) // its position is consumed with the run
		} else if err != nil {
			res[i], stop = retryResult(err), i
			break
		}
		a.run, a.outs, next = append(a.run, i), append(a.outs, out), next+1
	}
	if stop < len(evs) {
		block(res, stop, res[stop])
	}
	if len(a.run) == 0 {
		return res, nil, nil
	}
	s.ev.Position = next - 1
	req, err := s.txn(ctx)
	if err != nil {
		return block(res, a.run[0], retryResult(err)), nil, nil
	}
	ok, err := st.Commit(ctx, req)
	if err != nil || !ok {
		return res, &a, err
	}
	for j, i := range a.run {
		if res[i] == nil {
			res[i] = &pb.IngestResult{Status: pb.IngestResult_APPLIED, Output: a.outs[j]}
		}
	}
	for _, i := range repeats {
		if res[i] == nil {
			res[i] = &pb.IngestResult{Status: pb.IngestResult_DUPLICATE}
		}
	}
	return res, nil, nil
}

// block answers event from with r and every later event not answered yet RETRY with r's error.
func block(res []*pb.IngestResult, from int, r *pb.IngestResult) []*pb.IngestResult {
	res[from] = r
	for i := from + 1; i < len(res); i++ {
		if res[i] == nil || res[i].Status == pb.IngestResult_APPLIED || res[i].Status == pb.IngestResult_FAILED {
			res[i] = &pb.IngestResult{Status: pb.IngestResult_RETRY, Error: r.GetError()}
		}
	}
	return res
}

func decodeEntry(e Entry) (pos uint64, data []byte, present bool, err error) {
	if !e.Found {
		return 0, nil, false, nil
	}
	return DecodeValue(e.Raw)
}

func failed(err error) *pb.IngestResult {
	return &pb.IngestResult{Status: pb.IngestResult_FAILED, Error: &pb.Error{Code: pb.ErrorCode_INVALID_ARGUMENT, Message: err.Error()}}
}

// retryResult reports an event not applied, with where to send it (misrouted) or why.
func retryResult(err error) *pb.IngestResult {
	var m *Misrouted
	if errors.As(err, &m) {
		return &pb.IngestResult{Status: pb.IngestResult_RETRY, Error: m.Err}
	}
	code := codeOf(err)
	if code == pb.ErrorCode_OK || code == pb.ErrorCode_INTERNAL {
		code = pb.ErrorCode_UNAVAILABLE
	}
	return &pb.IngestResult{Status: pb.IngestResult_RETRY, Error: &pb.Error{Code: code, Message: err.Error()}}
}

// codeOf is the kv error code behind err (OK if none).
func codeOf(err error) pb.ErrorCode {
	var ce *client.Error
	if errors.As(err, &ce) {
		return ce.Code
	}
	return pb.ErrorCode_OK
}

// isUnknownOutcome reports a commit that may or may not have applied.
func isUnknownOutcome(err error) bool {
	c := codeOf(err)
	return c == pb.ErrorCode_AMBIGUOUS || c == pb.ErrorCode_TIMEOUT || errors.Is(err, context.DeadlineExceeded)
}
