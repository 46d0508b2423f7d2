package kv

import (
	"google.golang.org/protobuf/proto"

	"github.com/shoaldb/shoal/admission"
	"github.com/shoaldb/shoal/pb"
)

// AdmissionConfig bounds the client work a node holds (docs/design/admission.md). Beyond the limits
// clients get OVERLOADED at once, which they retry with backoff.
type AdmissionConfig struct {
	// Disabled turns both gates off (they still count, for the metrics). For comparisons only.
	Disabled bool
	// Requests bounds client requests being served (default 4096 and 128 MiB).
	Requests admission.Limits
	// Proposals bounds user writes held in raft, proposed and not yet applied (default 4096 and
	// 64 MiB).
	Proposals admission.Limits
}

// requestOverhead is charged per request on top of its encoded size: its goroutine's stack and the
// gRPC buffers that hold it.
const requestOverhead = 4 << 10

// SetDefaults fills zero limits with the defaults.
func (c *AdmissionConfig) SetDefaults() {
	if c.Requests.Count == 0 {
		c.Requests.Count = 4096
	}
	if c.Requests.Bytes == 0 {
		c.Requests.Bytes = 128 << 20
	}
	if c.Proposals.Count == 0 {
		c.Proposals.Count = 4096
	}
	if c.Proposals.Bytes == 0 {
		c.Proposals.Bytes = 64 << 20
	}
}

// requestLimits and proposalLimits are the limits the gates enforce (none when disabled).
func (c AdmissionConfig) requestLimits() admission.Limits {
	if c.Disabled {
		return admission.Limits{}
	}
	return c.Requests
}

func (c AdmissionConfig) proposalLimits() admission.Limits {
	if c.Disabled {
		return admission.Limits{}
	}
	return c.Proposals
}

// admittedRequest is a client request holding its share of the request gate.
type admittedRequest struct {
	g    *admission.Gate
	size int64
}

// admit takes req's share of the request gate, or says OVERLOADED. The caller must call done.
// It returns a value, not a pointer: one allocation less on every request's path.
func (n *Node) admit(req proto.Message) (admittedRequest, *pb.Error) {
	size := int64(proto.Size(req)) + requestOverhead
	if ref := n.reqGate.TryAcquire(size); ref != nil {
		return admittedRequest{}, &pb.Error{Code: pb.ErrorCode_OVERLOADED, Message: ref.Error()}
	}
	return admittedRequest{g: n.reqGate, size: size}, nil
}

// grow counts memory the request came to hold after admission (a scan's result).
func (a *admittedRequest) grow(bytes int64) {
	a.g.Grow(bytes)
	a.size += bytes
}

func (a *admittedRequest) done() { a.g.Release(a.size) }

// Admission reads the node's two gates: client requests and user writes in raft.
func (n *Node) Admission() (requests, proposals admission.Stats) {
	requests = n.reqGate.Stats()
	if st := n.storeRef.Load(); st != nil {
		proposals = st.ProposalAdmission()
	}
	return requests, proposals
}
