package kv

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
)

// ToPBError converts any error into the typed error clients see: a replica's or a peer's typed error
// keeps its code, anything else is INTERNAL.
func ToPBError(err error) *pb.Error {
	if err == nil {
		return nil
	}
	var re *replica.Error
	if errors.As(err, &re) {
		return &pb.Error{Code: re.Code, Message: re.Msg, LeaderNodeId: re.LeaderNode, Range: re.Desc}
	}
	var pe *pbError
	if errors.As(err, &pe) {
		return pe.e
	}
	return &pb.Error{Code: pb.ErrorCode_INTERNAL, Message: err.Error()}
}

// FromPB turns a typed error received from a peer into a Go error that ToPBError gives back as it was
// (nil for nil).
func FromPB(e *pb.Error) error {
	if e == nil {
		return nil
	}
	return &pbError{e}
}

// Errorf returns a typed error with code.
func Errorf(code pb.ErrorCode, format string, args ...any) error {
	return &pbError{&pb.Error{Code: code, Message: fmt.Sprintf(format, args...)}}
}

// InvalidArgument is the typed error of a request that cannot be served as given.
func InvalidArgument(format string, args ...any) *pb.Error {
	return &pb.Error{Code: pb.ErrorCode_INVALID_ARGUMENT, Message: fmt.Sprintf(format, args...)}
}

// pbError wraps a pb.Error received from a peer so it can travel as a Go error.
type pbError struct{ e *pb.Error }

func (p *pbError) Error() string { return p.e.Code.String() + ": " + p.e.Message }

func errCode(code pb.ErrorCode, msg string) error {
	return &pbError{&pb.Error{Code: code, Message: msg}}
}

// WithTimeout bounds ctx by defaultOpTimeout unless it has a deadline already.
func WithTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, defaultOpTimeout)
}

// withReplyMargin ends ctx a little before its deadline (a tenth of what is left, at most 1 s), so
// that a handler that waits until then still answers with its own typed error — a TIMEOUT saying
// what it waited for — before the caller's deadline turns the call into a bare DeadlineExceeded.
func withReplyMargin(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, deadline.Add(-replyMargin(time.Until(deadline))))
}

func replyMargin(left time.Duration) time.Duration {
	return max(0, min(time.Second, left/10))
}
