package client

import (
	"errors"
	"strings"

	"github.com/shoaldb/shoal/pb"
)

// Error is a typed error returned by the client. Code says what happened and, above all, whether a
// write may have taken effect:
//
//   - NOT_LEADER, RANGE_MOVED, UNAVAILABLE, OVERLOADED, INVALID_ARGUMENT and UNAUTHENTICATED are
//     definite: the server did not propose the request, so a write did not happen.
//   - AMBIGUOUS and TIMEOUT are indefinite for writes: the write may or may not have been applied, and
//     the client never retries it on its own. Read it back, or make the write idempotent (for example
//     with CompareAndSwap), before trying again.
//   - INTERNAL is a server bug; for a write its outcome is unknown.
//
// Match an Error against the sentinels with errors.Is, which compares codes only:
//
//	if errors.Is(err, client.ErrAmbiguous) { ... }
type Error struct {
	// Code is the server's (or the client's) classification of the failure.
	Code pb.ErrorCode
	// Message says what failed: the range, node and key it concerns, where known.
	Message string
	// LeaderAddr is the gRPC address of the range's leader if the server named one (with NOT_LEADER).
	LeaderAddr string

	cause error // the underlying transport or context error, if any
}

// Error renders the code in lower case followed by the message, e.g. "invalid argument: key is empty".
func (e *Error) Error() string {
	code := codeText(e.Code)
	switch {
	case e.Message == "":
		return code
	case strings.HasPrefix(e.Message, code):
		return e.Message
	default:
		return code + ": " + e.Message
	}
}

// Is reports whether target is an *Error with the same Code, so that errors.Is(err, ErrNotLeader) and
// its siblings work for every error the client returns.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t != nil && t.Code == e.Code
}

// Unwrap returns the transport or context error behind e, if any (so that, for example,
// errors.Is(err, context.DeadlineExceeded) holds for a TIMEOUT caused by the caller's deadline).
func (e *Error) Unwrap() error { return e.cause }

// codeText turns NOT_LEADER into "not leader".
func codeText(c pb.ErrorCode) string {
	return strings.ToLower(strings.ReplaceAll(c.String(), "_", " "))
}

// Sentinels for errors.Is. Each matches any *Error with its Code.
var (
	// ErrNotLeader: the replica contacted was not the range's leader. The client follows the leader hint
	// or re-looks the range up by itself; a caller sees this only when MaxAttempts ran out. Definite: a
	// write was not applied.
	ErrNotLeader = &Error{Code: pb.ErrorCode_NOT_LEADER, Message: "replica is not the range's leader"}
	// ErrRangeMoved: the key is no longer in the range the request was routed to (a split or merge
	// happened). The client refreshes its range cache and retries; a caller sees this only when
	// MaxAttempts ran out. Definite: a write was not applied.
	ErrRangeMoved = &Error{Code: pb.ErrorCode_RANGE_MOVED, Message: "key is not in the routed range"}
	// ErrUnavailable: the range has no quorum, the node is not ready, or no node could be reached before
	// the request was sent. Retried with backoff; returned when MaxAttempts ran out. Definite: a write was
	// not applied.
	ErrUnavailable = &Error{Code: pb.ErrorCode_UNAVAILABLE, Message: "range or node unavailable"}
	// ErrOverloaded: the node's admission control rejected the request. Retried with backoff; returned
	// when MaxAttempts ran out. Definite: a write was not applied.
	ErrOverloaded = &Error{Code: pb.ErrorCode_OVERLOADED, Message: "node overloaded"}
	// ErrInvalidArgument: the request is malformed (an empty key, start after end, mutations spanning
	// ranges, ...). Never retried; fix the request.
	ErrInvalidArgument = &Error{Code: pb.ErrorCode_INVALID_ARGUMENT, Message: "invalid argument"}
	// ErrTimeout: the request did not complete in time. For a write the outcome is unknown and the client
	// does not retry; reads are retried until MaxAttempts or the caller's context runs out.
	ErrTimeout = &Error{Code: pb.ErrorCode_TIMEOUT, Message: "request timed out"}
	// ErrAmbiguous: a write was proposed (or sent) but its outcome is unknown, for example because
	// leadership was lost or the connection broke after the request went out. Never retried for writes.
	ErrAmbiguous = &Error{Code: pb.ErrorCode_AMBIGUOUS, Message: "outcome of the write is unknown"}
	// ErrUnauthenticated: the cluster requires an auth token and the one configured (if any) was not
	// accepted. Never retried; set Config.AuthToken.
	ErrUnauthenticated = &Error{Code: pb.ErrorCode_UNAUTHENTICATED, Message: "missing or wrong auth token"}
	// ErrInternal: the server failed in a way it did not classify. Not retried; for a write the outcome
	// is unknown.
	ErrInternal = &Error{Code: pb.ErrorCode_INTERNAL, Message: "internal server error"}
	// ErrCrossRange: a transaction's keys are not all in one range. Never retried; keep a
	// transaction's keys together (for RESP keys, in one hash slot: {tag} keys).
	ErrCrossRange = &Error{Code: pb.ErrorCode_CROSS_RANGE, Message: "transaction spans ranges"}
	// ErrSpanRetired: the key's span moved for good (a re-keyed table's old keys). Never retried;
	// reload what maps to the key (a table's descriptor) and write where it says. Definite: not applied.
	ErrSpanRetired = &Error{Code: pb.ErrorCode_SPAN_RETIRED, Message: "the key's span moved for good"}
)

// ErrClosed is returned by calls made after Close.
var ErrClosed = errors.New("client: closed")

// newError builds a client-side *Error.
func newError(code pb.ErrorCode, msg string, cause error) *Error {
	return &Error{Code: code, Message: msg, cause: cause}
}

// fromPB converts a server error; it returns nil for a nil or OK error.
func fromPB(e *pb.Error) *Error {
	if e == nil || e.GetCode() == pb.ErrorCode_OK {
		return nil
	}
	return &Error{Code: e.GetCode(), Message: e.GetMessage(), LeaderAddr: e.GetLeaderAddr()}
}
