package replica

import (
	"bytes"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica/internal/eval"
	"github.com/shoaldb/shoal/storage"
)

// Span fences (pb.SpanFence) live in the range descriptor, so that every replica applies them at
// the same index, and snapshots, restarts and splits carry them. Checking them is part of applying
// a write: a write proposed before a fence but applied after it fails too, so once a fence has
// applied at index i, no write to its span applies after i — what a re-key's last catch-up needs.

// fencedErrLocked returns FENCED (or SPAN_RETIRED) when cmd writes a key a fence of the range holds
// and cmd does not own that fence.
func (r *Replica) fencedErrLocked(cmd *pb.Command) *Error {
	f, k := CommandFence(r.desc, cmd)
	switch {
	case f == nil:
		return nil
	case f.Retired:
		return &Error{Code: pb.ErrorCode_SPAN_RETIRED, Msg: fmt.Sprintf("key %.64q: its span moved for good (fence %d): reload what maps to it", k, f.Id)}
	}
	return &Error{Code: pb.ErrorCode_FENCED, Msg: fmt.Sprintf("key %.64q: its span is fenced (fence %d)", k, f.Id)}
}

// CommandFence returns a fence of d that holds a key cmd writes (and the key), unless cmd owns it.
func CommandFence(d *pb.RangeDescriptor, cmd *pb.Command) (*pb.SpanFence, []byte) {
	if len(d.GetFences()) == 0 {
		return nil, nil
	}
	check := func(k []byte) *pb.SpanFence {
		if f := FenceFor(d, k); f != nil && f.Id != cmd.FenceOwner {
			return f
		}
		return nil
	}
	for _, m := range cmd.Mutations {
		if f := check(m.Key); f != nil {
			return f, m.Key
		}
	}
	if cmd.Txn != nil {
		for _, k := range eval.Keys(cmd.Txn) {
			if f := check(k); f != nil {
				return f, k
			}
		}
	}
	return nil, nil
}

// FenceFor returns the fence of d that holds key, nil if none does.
func FenceFor(d *pb.RangeDescriptor, key []byte) *pb.SpanFence {
	for _, f := range d.GetFences() {
		if bytes.Compare(key, f.StartKey) >= 0 && (len(f.EndKey) == 0 || bytes.Compare(key, f.EndKey) < 0) {
			return f
		}
	}
	return nil
}

// applyFenceLocked sets (replacing one with the same id) or lifts a fence, a descriptor change.
func (r *Replica) applyFenceLocked(b *storage.Batch, cmd *pb.Command, index uint64) (Result, error) {
	if r.IsMeta() {
		return Result{Err: &Error{Code: pb.ErrorCode_INVALID_ARGUMENT, Msg: "the meta range has no fences"}}, nil
	}
	d := proto.Clone(r.desc).(*pb.RangeDescriptor)
	id := cmd.LiftFence
	if cmd.SetFence != nil {
		id = cmd.SetFence.Id
	}
	if id == 0 {
		return Result{Err: &Error{Code: pb.ErrorCode_INVALID_ARGUMENT, Msg: "a fence needs a non-zero id"}}, nil
	}
	kept := d.Fences[:0]
	for _, f := range d.Fences {
		if f.Id != id {
			kept = append(kept, f)
		}
	}
	d.Fences = kept
	if f := cmd.SetFence; f != nil {
		nf := proto.Clone(f).(*pb.SpanFence)
		if bytes.Compare(nf.StartKey, d.StartKey) < 0 {
			nf.StartKey = d.StartKey
		}
		if len(d.EndKey) > 0 && (len(nf.EndKey) == 0 || bytes.Compare(nf.EndKey, d.EndKey) > 0) {
			nf.EndKey = d.EndKey
		}
		if len(nf.EndKey) > 0 && bytes.Compare(nf.StartKey, nf.EndKey) >= 0 {
			return Result{Err: &Error{Code: pb.ErrorCode_INVALID_ARGUMENT, Msg: fmt.Sprintf("fence %d does not overlap range %d", id, r.rangeID)}}, nil
		}
		d.Fences = append(d.Fences, nf)
	}
	d.Generation++
	r.desc = d
	if err := r.writeDescLocked(b); err != nil {
		return Result{}, err
	}
	return Result{Index: index}, nil
}

// Fences are the range's span fences now, without a copy of the descriptor (fences and descriptors
// are replaced, never changed in place): every write and read looks at them, and most ranges have
// none.
func (r *Replica) Fences() []*pb.SpanFence {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.desc.GetFences()
}

// WriteFence is CommandFence on the range's current fences.
func (r *Replica) WriteFence(cmd *pb.Command) (*pb.SpanFence, []byte) {
	fs := r.Fences()
	if len(fs) == 0 {
		return nil, nil
	}
	return CommandFence(&pb.RangeDescriptor{Fences: fs}, cmd)
}
