package stream

import (
	"context"
	"fmt"

	"github.com/shoaldb/shoal/pb"
)

// slot is a key's state as read: the position stored with it, its data, and kv's version (the
// commit's condition).
type slot struct {
	pos     uint64
	data    []byte
	present bool
	version uint64
}

type write struct {
	data   []byte
	delete bool
}

// State is a handler's view of the job's state during one event: reads go to the node's store (the
// event's own key is already read), writes are buffered and committed with the event's position.
type State struct {
	store   Store
	ev      Event
	reads   map[string]*slot
	writes  map[string]*write
	written []string // write order, for a deterministic transaction
}

func newState(st Store, ev Event, prim slot) *State {
	return &State{store: st, ev: ev, reads: map[string]*slot{string(ev.Key): &prim}, writes: map[string]*write{}}
}

// Get returns key's data as this event sees it (its own writes included).
func (s *State) Get(ctx context.Context, key []byte) (data []byte, found bool, err error) {
	if w, ok := s.writes[string(key)]; ok {
		return w.data, !w.delete, nil
	}
	sl, err := s.read(ctx, key)
	if err != nil {
		return nil, false, err
	}
	return sl.data, sl.present, nil
}

func (s *State) read(ctx context.Context, key []byte) (*slot, error) {
	if sl, ok := s.reads[string(key)]; ok {
		return sl, nil
	}
	e, err := s.store.Get(ctx, key, false)
	if err != nil {
		return nil, fmt.Errorf("read state key %q: %w", key, err)
	}
	pos, data, present, err := decodeEntry(e)
	if err != nil {
		return nil, fmt.Errorf("state key %q: %w", key, err)
	}
	sl := &slot{pos: pos, data: data, present: present, version: e.Version}
	s.reads[string(key)] = sl
	return sl, nil
}

// stateMark is the state's writes at one moment (State.mark), to undo a refused event's.
type stateMark struct {
	writes  map[string]*write
	written int
}

func (s *State) mark() stateMark {
	m := stateMark{writes: make(map[string]*write, len(s.writes)), written: len(s.written)}
	for k, w := range s.writes {
		m.writes[k] = w
	}
	return m
}

func (s *State) reset(m stateMark) { s.writes, s.written = m.writes, s.written[:m.written] }

// Put sets key to value when the event commits.
func (s *State) Put(key, value []byte) {
	s.note(key, &write{data: append([]byte(nil), value...)})
}

// Delete removes key when the event commits.
func (s *State) Delete(key []byte) { s.note(key, &write{delete: true}) }

func (s *State) note(key []byte, w *write) {
	k := string(key)
	if _, ok := s.writes[k]; !ok {
		s.written = append(s.written, k)
	}
	s.writes[k] = w
}

// txn builds the event's commit: every written key and the event's own key compared at the version
// read, the event's key stored with the event's position, the other keys with the position they held.
func (s *State) txn(ctx context.Context) (*pb.TxnRequest, error) {
	prim := string(s.ev.Key)
	keys := append([]string{prim}, s.written...)
	req := &pb.TxnRequest{}
	for i, k := range keys {
		if i > 0 && k == prim {
			continue
		}
		sl, err := s.read(ctx, []byte(k))
		if err != nil {
			return nil, err
		}
		req.Compares = append(req.Compares, &pb.Compare{Key: []byte(k), Target: pb.Compare_VERSION, Op: pb.Compare_EQUAL, Number: sl.version})
		pos := sl.pos
		if k == prim {
			pos = s.ev.Position
		}
		req.Success = append(req.Success, s.op(k, pos, sl))
	}
	return req, nil
}

// op is key k's write at position pos: what the handler wrote, or (the event's key, untouched) its
// data again under the new position.
func (s *State) op(k string, pos uint64, sl *slot) *pb.TxnOp {
	w, ok := s.writes[k]
	switch {
	case !ok && sl.present:
		return &pb.TxnOp{Type: pb.TxnOp_PUT, Key: []byte(k), Value: EncodeValue(pos, sl.data)}
	case !ok || w.delete:
		if pos == 0 {
			return &pb.TxnOp{Type: pb.TxnOp_DELETE, Key: []byte(k)}
		}
		return &pb.TxnOp{Type: pb.TxnOp_PUT, Key: []byte(k), Value: encodeAbsent(pos)}
	default:
		return &pb.TxnOp{Type: pb.TxnOp_PUT, Key: []byte(k), Value: EncodeValue(pos, w.data)}
	}
}
