package kv

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"google.golang.org/protobuf/proto"

	"github.com/shoaldb/shoal/admission"
	"github.com/shoaldb/shoal/pb"
)

// requestOverhead is charged per request on top of its encoded size: its goroutine's stack and the
// gRPC buffers that hold it.
const requestOverhead = 4 << 10

// admittedRequest is a client request holding its share of the request gate.
type admittedRequest struct {
	g        *admission.Gate
	size     int64
	inflight *requestCount
}

// admit takes req's share of the request gate, or says OVERLOADED (UNAVAILABLE once Drain began).
// The caller must call done. It returns a value, not a pointer: one allocation less on every
// request's path.
func (s *Service) admit(req proto.Message) (admittedRequest, *pb.Error) {
	if !s.inflight.enter() {
		return admittedRequest{}, &pb.Error{Code: pb.ErrorCode_UNAVAILABLE,
			Message: fmt.Sprintf("node %d is stopping: request not served, retry another node", s.nodeID)}
	}
	size := int64(proto.Size(req)) + requestOverhead
	if ref := s.gate.TryAcquire(size); ref != nil {
		s.inflight.leave()
		return admittedRequest{}, &pb.Error{Code: pb.ErrorCode_OVERLOADED, Message: ref.Error()}
	}
	return admittedRequest{g: s.gate, size: size, inflight: &s.inflight}, nil
}

// Drain refuses every client request from now on with UNAVAILABLE (nothing of it ran, so its client
// retries another node) and waits until the requests in flight have answered or ctx ends; it returns
// how many still run. A node about to stop calls it once its leaderships are gone: a write forwarded
// through it then finishes, where cutting it would leave its client an ambiguous outcome.
func (s *Service) Drain(ctx context.Context) int { return s.inflight.drain(ctx) }

// requestCount counts the admitted requests still running, and refuses new ones once draining. It
// is lock-free, as the request gate is: every request passes through it twice.
type requestCount struct {
	n       atomic.Int64
	closing atomic.Bool
	once    sync.Once
	idle    chan struct{} // made by drain; closed once closing and n reaches 0
	made    sync.Once
}

func (c *requestCount) idleCh() chan struct{} {
	c.made.Do(func() { c.idle = make(chan struct{}) })
	return c.idle
}

func (c *requestCount) enter() bool {
	c.n.Add(1)
	if c.closing.Load() {
		c.leave()
		return false
	}
	return true
}

func (c *requestCount) leave() {
	// A request that raced drain's flag (counted, then saw it) leaves here too: whichever decrement
	// or check finds 0 after the flag is set closes idle, once.
	if c.n.Add(-1) == 0 && c.closing.Load() {
		c.once.Do(func() { close(c.idleCh()) })
	}
}

func (c *requestCount) drain(ctx context.Context) int {
	idle := c.idleCh()
	c.closing.Store(true)
	if c.n.Load() == 0 {
		c.once.Do(func() { close(idle) })
	}
	select {
	case <-idle:
		// Every admitted request has left: a count above 0 now is a refused request between its
		// increment and its leave.
		return 0
	case <-ctx.Done():
		return int(c.n.Load())
	}
}

// grow counts memory the request came to hold after admission (a scan's result).
func (a *admittedRequest) grow(bytes int64) {
	a.g.Grow(bytes)
	a.size += bytes
}

func (a *admittedRequest) done() {
	a.g.Release(a.size)
	a.inflight.leave()
}
