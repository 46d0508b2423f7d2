package table

import (
	"bytes"
	"context"
	"sort"
	"strconv"
	"sync"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/pb"
)

// fakeKV is an in-memory KV for unit tests: one sorted map behind a lock. splits are range
// boundaries: a batch write or transaction whose keys straddle one is refused as the store would.
type fakeKV struct {
	mu     sync.Mutex
	m      map[string][]byte
	splits [][]byte
	writes int // successful write requests
}

func newFakeKV(splits ...string) *fakeKV {
	f := &fakeKV{m: map[string][]byte{}}
	for _, s := range splits {
		f.splits = append(f.splits, []byte(s))
	}
	return f
}

func (f *fakeKV) rangeOf(k []byte) int {
	i := 0
	for _, s := range f.splits {
		if bytes.Compare(k, s) >= 0 {
			i++
		}
	}
	return i
}

func (f *fakeKV) Get(_ context.Context, key []byte, _ ...client.ReadOption) ([]byte, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.m[string(key)]
	return bytes.Clone(v), ok, nil
}

func (f *fakeKV) Put(_ context.Context, key, value []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.m[string(key)] = bytes.Clone(value)
	f.writes++
	return nil
}

func (f *fakeKV) Delete(_ context.Context, key []byte) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.m[string(key)]
	delete(f.m, string(key))
	f.writes++
	return ok, nil
}

func (f *fakeKV) Scan(_ context.Context, start, end []byte, limit int, reverse bool) ([]*pb.KeyValue, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var keys []string
	for k := range f.m {
		if k >= string(start) && (len(end) == 0 || k < string(end)) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	if reverse {
		sort.Sort(sort.Reverse(sort.StringSlice(keys)))
	}
	out := []*pb.KeyValue{}
	for _, k := range keys {
		if limit > 0 && len(out) == limit {
			break
		}
		out = append(out, &pb.KeyValue{Key: []byte(k), Value: bytes.Clone(f.m[k])})
	}
	return out, nil
}

func (f *fakeKV) Txn(_ context.Context, req *pb.TxnRequest) (*pb.TxnResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	keys := txnKeysOf(req)
	for _, k := range keys[1:] {
		if f.rangeOf(k) != f.rangeOf(keys[0]) {
			return nil, client.ErrCrossRange
		}
	}
	ok := true
	for _, c := range req.Compares {
		v, found := f.m[string(c.Key)]
		switch c.Target {
		case pb.Compare_EXISTS:
			ok = ok && (found == c.Exists) == (c.Op == pb.Compare_EQUAL)
		case pb.Compare_VALUE:
			ok = ok && found && bytes.Equal(v, c.Value) == (c.Op == pb.Compare_EQUAL)
		default:
			panic("fakeKV: compare target not faked")
		}
	}
	ops := req.Success
	if !ok {
		ops = req.Failure
	}
	resp := &pb.TxnResponse{Succeeded: ok}
	for _, op := range ops {
		r := &pb.TxnOpResult{}
		v, found := f.m[string(op.Key)]
		r.Found, r.Value = found, v
		switch op.Type {
		case pb.TxnOp_PUT:
			f.m[string(op.Key)] = bytes.Clone(op.Value)
		case pb.TxnOp_DELETE:
			delete(f.m, string(op.Key))
		case pb.TxnOp_INCR:
			n, _ := strconv.ParseInt(string(v), 10, 64)
			n += op.Delta
			r.IntValue = n
			f.m[string(op.Key)] = strconv.AppendInt(nil, n, 10)
		case pb.TxnOp_GET:
		default:
			panic("fakeKV: txn op not faked")
		}
		resp.Results = append(resp.Results, r)
	}
	f.writes++
	return resp, nil
}

func txnKeysOf(req *pb.TxnRequest) [][]byte {
	var ks [][]byte
	for _, c := range req.Compares {
		ks = append(ks, c.Key)
	}
	for _, op := range append(append([]*pb.TxnOp{}, req.Success...), req.Failure...) {
		ks = append(ks, op.Key)
	}
	return ks
}

func (f *fakeKV) BatchWrite(_ context.Context, muts []*pb.Mutation) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range muts[1:] {
		if f.rangeOf(m.Key) != f.rangeOf(muts[0].Key) {
			return &client.Error{Code: pb.ErrorCode_INVALID_ARGUMENT, Message: "batch write: keys in different ranges"}
		}
	}
	for _, m := range muts {
		if m.Delete {
			delete(f.m, string(m.Key))
		} else {
			f.m[string(m.Key)] = bytes.Clone(m.Value)
		}
	}
	f.writes++
	return nil
}

// snapshot copies the map, to check that a refused request wrote nothing.
func (f *fakeKV) snapshot() map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]string{}
	for k, v := range f.m {
		out[k] = string(v)
	}
	return out
}
