package client

import (
	"context"
	"fmt"
	"time"

	"github.com/shoaldb/shoal/pb"
)

// Entry is a key's value with what is stored beside it.
type Entry struct {
	Value []byte
	// ExpireAtMs is when the key expires (Unix ms); 0: never.
	ExpireAtMs int64
	// Version counts the key's writes since it was created; ModIndex is the raft index of the last.
	Version, ModIndex uint64
}

// GetEntry is Get with the key's expiry, version and modification index.
func (c *Client) GetEntry(ctx context.Context, key []byte, opts ...ReadOption) (e Entry, found bool, err error) {
	if len(key) == 0 {
		return e, false, errEmptyKey()
	}
	var ro readOptions
	for _, o := range opts {
		o(&ro)
	}
	var resp *pb.GetResponse
	op := ro.op("get")
	err = c.run(ctx, op, c.readLocator(key, op), "",
		func(ctx context.Context, sc pb.ShoalClient, hdr *pb.RequestHeader, _ target) (*pb.Error, error) {
			r, err := sc.Get(ctx, &pb.GetRequest{Header: hdr, Key: key})
			resp = r
			return r.GetError(), err
		})
	if err != nil || !resp.GetFound() {
		return e, false, err
	}
	return Entry{Value: resp.Value, ExpireAtMs: resp.ExpireAtUnixMs, Version: resp.Version, ModIndex: resp.ModIndex}, true, nil
}

// PutTTL sets key to value, expiring ttl after the range leader's clock when it proposes the write
// (rounded down to milliseconds; ttl must be at least 1ms). An ErrAmbiguous or ErrTimeout error
// means the write may or may not have been applied.
func (c *Client) PutTTL(ctx context.Context, key, value []byte, ttl time.Duration) error {
	if len(key) == 0 {
		return errEmptyKey()
	}
	if ttl < time.Millisecond {
		return invalid(fmt.Sprintf("put: ttl %v is under 1ms", ttl))
	}
	return c.run(ctx, opKind{name: "put", write: true}, c.locator(key), "",
		func(ctx context.Context, sc pb.ShoalClient, hdr *pb.RequestHeader, _ target) (*pb.Error, error) {
			r, err := sc.Put(ctx, &pb.PutRequest{Header: hdr, Key: key, Value: value, TtlMs: ttl.Milliseconds()})
			return r.GetError(), err
		})
}

// txnKeys lists a transaction's keys, the one it is routed by first.
func txnKeys(req *pb.TxnRequest) [][]byte {
	var ks [][]byte
	for _, c := range req.GetCompares() {
		ks = append(ks, c.GetKey())
	}
	for _, ops := range [][]*pb.TxnOp{req.GetSuccess(), req.GetFailure()} {
		for _, op := range ops {
			ks = append(ks, op.GetKey())
		}
	}
	return ks
}

// Txn runs a transaction: if every compare holds, the success ops, else the failure ops, atomically
// and linearizably. Its keys must share one range, else ErrCrossRange (nothing is written). An
// ErrAmbiguous or ErrTimeout error means it may or may not have been applied (as a whole).
func (c *Client) Txn(ctx context.Context, req *pb.TxnRequest) (*pb.TxnResponse, error) {
	keys := txnKeys(req)
	if len(keys) == 0 {
		return nil, invalid("txn: no compares and no ops")
	}
	for i, k := range keys {
		if len(k) == 0 {
			return nil, invalid(fmt.Sprintf("txn: key %d is empty", i))
		}
	}
	locate := func(ctx context.Context) (rangeEntry, error) {
		e, err := c.locate(ctx, keys[0])
		if err != nil {
			return e, err
		}
		if outside := outsideKeys(e.desc, keys); outside != nil {
			c.cache.evict(e.desc) // the cache may be stale (a merge): look again before refusing
			if _, e, err = c.lookupOnce(ctx, keys[0]); err != nil {
				return e, err
			}
			if outside := outsideKeys(e.desc, keys); outside != nil {
				return e, newError(pb.ErrorCode_CROSS_RANGE, fmt.Sprintf("txn: keys %q and %q are in different ranges (%s holds the first)", keys[0], outside, spanString(e.desc)), nil)
			}
		}
		return e, nil
	}
	var resp *pb.TxnResponse
	err := c.run(ctx, opKind{name: "txn", write: true}, locate, "",
		func(ctx context.Context, sc pb.ShoalClient, hdr *pb.RequestHeader, _ target) (*pb.Error, error) {
			r, err := sc.Txn(ctx, &pb.TxnRequest{Header: hdr, Compares: req.Compares, Success: req.Success, Failure: req.Failure})
			resp = r
			return r.GetError(), err
		})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

func outsideKeys(d *pb.RangeDescriptor, keys [][]byte) []byte {
	for _, k := range keys {
		if !contains(d, k) {
			return k
		}
	}
	return nil
}
