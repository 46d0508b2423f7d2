package kv

import (
	"context"
	"fmt"
	"sync"

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

// requestCount counts the admitted requests still running, and refuses new ones once draining.
type requestCount struct {
	mu      sync.Mutex
	closing bool
	n       int
	idle    chan struct{} // closed when closing and n reaches 0
}

func (c *requestCount) enter() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return false
	}
	c.n++
	return true
}

func (c *requestCount) leave() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n--
	if c.closing && c.n == 0 {
		close(c.idle)
	}
}

func (c *requestCount) drain(ctx context.Context) int {
	c.mu.Lock()
	if !c.closing {
		c.closing, c.idle = true, make(chan struct{})
		if c.n == 0 {
			close(c.idle)
		}
	}
	idle := c.idle
	c.mu.Unlock()
	select {
	case <-idle:
	case <-ctx.Done():
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
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
