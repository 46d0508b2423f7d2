// Package tabletest is an in-memory store for tests of code built on package table: one sorted map
// behind a lock that offers what table.KV asks of the client, with range boundaries a test sets so
// that batches and transactions across them are refused as the store refuses them. It is not a
// database and must never be used outside tests.
package tabletest

import (
	"bytes"
	"context"
	"sort"
	"strconv"
	"sync"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/pb"
)

// KV is the in-memory store. Writes counts the write requests it served.
type KV struct {
	mu     sync.Mutex
	m      map[string][]byte
	splits [][]byte
	Writes int
	// AfterTxn, if set, is called after a transaction is applied; an error it returns is the
	// transaction's answer (ErrAmbiguous, say: applied, but the caller cannot know).
	AfterTxn func(req *pb.TxnRequest) error
}

// New returns an empty store whose ranges are split at splits.
func New(splits ...string) *KV {
	f := &KV{m: map[string][]byte{}}
	for _, s := range splits {
		f.splits = append(f.splits, []byte(s))
	}
	return f
}

// rangeOf is the index of the range holding k.
func (f *KV) rangeOf(k []byte) int {
	i := 0
	for _, s := range f.splits {
		if bytes.Compare(k, s) >= 0 {
			i++
		}
	}
	return i
}

// Get returns key's value, as (*client.Client).Get does.
func (f *KV) Get(_ context.Context, key []byte, _ ...client.ReadOption) ([]byte, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.m[string(key)]
	return bytes.Clone(v), ok, nil
}

// Put sets key to value.
func (f *KV) Put(_ context.Context, key, value []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.m[string(key)] = bytes.Clone(value)
	f.Writes++
	return nil
}

// Delete removes key and reports whether it existed.
func (f *KV) Delete(_ context.Context, key []byte) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.m[string(key)]
	delete(f.m, string(key))
	f.Writes++
	return ok, nil
}

// Scan returns the pairs with start <= key < end in key order (descending with reverse), at most
// limit of them (0: all).
func (f *KV) Scan(_ context.Context, start, end []byte, limit int, reverse bool) ([]*pb.KeyValue, error) {
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

// Txn runs a transaction of EXISTS and VALUE compares and GET, PUT, DELETE and INCR ops (others
// panic), refusing one whose keys span ranges with client.ErrCrossRange.
func (f *KV) Txn(_ context.Context, req *pb.TxnRequest) (*pb.TxnResponse, error) {
	resp, err := f.txn(req)
	if err == nil && f.AfterTxn != nil { // outside the lock: the hook may write to the store
		if err := f.AfterTxn(req); err != nil {
			return nil, err
		}
	}
	return resp, err
}

func (f *KV) txn(req *pb.TxnRequest) (*pb.TxnResponse, error) {
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
			panic("tabletest: compare target not faked")
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
			panic("tabletest: txn op not faked")
		}
		resp.Results = append(resp.Results, r)
	}
	f.Writes++
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

// BatchWrite applies muts atomically, refusing a batch whose keys span ranges with
// INVALID_ARGUMENT, as the client does.
func (f *KV) BatchWrite(_ context.Context, muts []*pb.Mutation) error {
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
	f.Writes++
	return nil
}

// Snapshot copies the store's contents, to check that a refused request wrote nothing.
func (f *KV) Snapshot() map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]string{}
	for k, v := range f.m {
		out[k] = string(v)
	}
	return out
}
