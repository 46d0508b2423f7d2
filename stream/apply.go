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

// Apply applies ev to job's state in st exactly once: it reads the key's applied position, skips the
// event if the state holds it (DUPLICATE), refuses to run ahead of a missing earlier position (RETRY),
// runs the handler and commits its writes with the position in one transaction conditioned on the
// versions it read. A commit whose outcome is unknown is settled by reading the position again.
func Apply(ctx context.Context, job *Job, st Store, ev Event) *pb.IngestResult {
	var ambiguous []byte // the output of an attempt whose commit may have applied
	tried := false
	for attempt := 0; attempt < maxAttempts; attempt++ {
		prim, err := st.Get(ctx, ev.Key, true)
		if err != nil {
			return retryResult(err)
		}
		applied, data, present, err := decodeEntry(prim)
		if err != nil {
			return failed(fmt.Errorf("key %q: %w", ev.Key, err))
		}
		if ev.Position <= applied {
			if tried && ev.Position == applied {
				return &pb.IngestResult{Status: pb.IngestResult_APPLIED, Output: ambiguous}
			}
			return &pb.IngestResult{Status: pb.IngestResult_DUPLICATE}
		}
		if ev.Position != applied+1 {
			return &pb.IngestResult{Status: pb.IngestResult_RETRY, Error: &pb.Error{Code: pb.ErrorCode_UNAVAILABLE,
				Message: fmt.Sprintf("position %d of key %q follows %d: an earlier event is not applied yet", ev.Position, ev.Key, applied)}}
		}
		s := newState(st, ev, slot{pos: applied, data: data, present: present, version: prim.Version})
		out, err := job.Handle(ctx, s, ev)
		if errors.Is(err, ErrRefused) {
			return failed(err)
		}
		if err != nil {
			return retryResult(err)
		}
		req, err := s.txn(ctx)
		if err != nil {
			return retryResult(err)
		}
		ok, err := st.Commit(ctx, req)
		switch {
		case err == nil && ok:
			return &pb.IngestResult{Status: pb.IngestResult_APPLIED, Output: out}
		case err == nil: // a read changed under the handler: run it again on the new state
		case isUnknownOutcome(err):
			ambiguous, tried = out, true
		case codeOf(err) == pb.ErrorCode_CROSS_RANGE:
			return failed(fmt.Errorf("the handler's writes for key %q span ranges: %w", ev.Key, err))
		default:
			return retryResult(err)
		}
	}
	return &pb.IngestResult{Status: pb.IngestResult_RETRY, Error: &pb.Error{Code: pb.ErrorCode_UNAVAILABLE,
		Message: fmt.Sprintf("key %q: state changed under the handler %d times", ev.Key, maxAttempts)}}
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
