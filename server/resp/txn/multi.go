package txn

import (
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/server/resp/wire"
)

// Watched is a key WATCH saw: its string's Shoal key, whether it existed and its modification index.
type Watched struct {
	Key      []byte
	Found    bool
	ModIndex uint64
}

// Multi is a connection's open MULTI block.
type Multi struct {
	plans []*Plan
	// Aborted: a command failed to queue; EXEC discards the block (EXECABORT).
	Aborted bool
	// Slot is the hash slot of the block's keys (-1 until one is queued).
	Slot int
}

// NewMulti opens a block.
func NewMulti() *Multi { return &Multi{Slot: -1} }

// Queue adds a command's plan.
func (m *Multi) Queue(p *Plan) { m.plans = append(m.plans, p) }

// Len is the number of queued commands.
func (m *Multi) Len() int { return len(m.plans) }

// Request is the block as one transaction: its ops in order, guarded by the watched keys being as
// WATCH saw them (a key modified or expired since fails the transaction).
func (m *Multi) Request(watched []Watched) *pb.TxnRequest {
	req := &pb.TxnRequest{}
	for _, wk := range watched {
		c := &pb.Compare{Key: wk.Key, Target: pb.Compare_MOD_INDEX, Op: pb.Compare_EQUAL, Number: wk.ModIndex}
		if !wk.Found {
			c = &pb.Compare{Key: wk.Key, Target: pb.Compare_EXISTS, Op: pb.Compare_EQUAL, Exists: false}
		}
		req.Compares = append(req.Compares, c)
	}
	for _, p := range m.plans {
		req.Success = append(req.Success, p.Ops...)
	}
	return req
}

// Reply writes EXEC's reply: a null array when a watched key changed, else each command's reply.
func (m *Multi) Reply(w *wire.Writer, resp *pb.TxnResponse) {
	if !resp.Succeeded {
		w.NullArray()
		return
	}
	w.Array(len(m.plans))
	rs := resp.Results
	for _, p := range m.plans {
		n := len(p.Ops)
		if len(rs) < n {
			w.Error("ERR internal error: the transaction returned fewer results than it had ops")
			continue
		}
		p.Reply(w, rs[:n])
		rs = rs[n:]
	}
}
