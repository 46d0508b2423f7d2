package kv

import (
	"google.golang.org/protobuf/proto"

	"github.com/shoaldb/shoal/admission"
	"github.com/shoaldb/shoal/pb"
)

// requestOverhead is charged per request on top of its encoded size: its goroutine's stack and the
// gRPC buffers that hold it.
const requestOverhead = 4 << 10

// admittedRequest is a client request holding its share of the request gate.
type admittedRequest struct {
	g    *admission.Gate
	size int64
}

// admit takes req's share of the request gate, or says OVERLOADED. The caller must call done.
// It returns a value, not a pointer: one allocation less on every request's path.
func (s *Service) admit(req proto.Message) (admittedRequest, *pb.Error) {
	size := int64(proto.Size(req)) + requestOverhead
	if ref := s.gate.TryAcquire(size); ref != nil {
		return admittedRequest{}, &pb.Error{Code: pb.ErrorCode_OVERLOADED, Message: ref.Error()}
	}
	return admittedRequest{g: s.gate, size: size}, nil
}

// grow counts memory the request came to hold after admission (a scan's result).
func (a *admittedRequest) grow(bytes int64) {
	a.g.Grow(bytes)
	a.size += bytes
}

func (a *admittedRequest) done() { a.g.Release(a.size) }
