package resp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/pb"
)

// op is one command being executed: its connection, context and routing state.
type op struct {
	s     *Server
	c     *conn
	ctx   context.Context
	write bool // the command may write (decides how timeouts are reported)
	slot  int  // slot of the command's keys; -1 without keys
	// mayMove: the next backend call may answer MOVED instead of forwarding. It is set for keyed
	// commands of cluster-mode connections and cleared by the first backend call, so that MOVED is only
	// ever answered before the command has done anything (and then the client redoes all of it).
	mayMove atomic.Bool
}

// replyError is an error whose text is the RESP error reply (with its code, e.g. "WRONGTYPE ...").
type replyError string

func (e replyError) Error() string { return string(e) }

const (
	errWrongType = replyError("WRONGTYPE Operation against a key holding the wrong kind of value")
	errNotInt    = replyError("ERR value is not an integer or out of range")
	errSyntax    = replyError("ERR syntax error")
	errCrossSlot = replyError("CROSSSLOT Keys in request don't hash to the same slot")
)

// movedError redirects a cluster client to the node leading the key's slot.
type movedError struct {
	slot int
	addr string
}

func (e *movedError) Error() string { return fmt.Sprintf("MOVED %d %s", e.slot, e.addr) }

// errSpansRanges: a batch's keys fall in more than one range (it is split and retried).
var errSpansRanges = errors.New("batch spans ranges")

// reroutable reports whether a local call failed only because this node does not serve the key: no
// local replica, not the leader, or the replica not ready. Nothing was written in those cases.
func reroutable(pe *pb.Error) bool {
	switch pe.GetCode() {
	case pb.ErrorCode_NOT_LEADER, pb.ErrorCode_RANGE_MOVED, pb.ErrorCode_UNAVAILABLE:
		return true
	}
	return false
}

func localErr(err error) *pb.Error {
	return &pb.Error{Code: pb.ErrorCode_INTERNAL, Message: err.Error()}
}

// callErr is how a local call failed: its own error err, else the error pe of its reply (nil: it
// succeeded).
func callErr(pe *pb.Error, err error) *pb.Error {
	if err != nil {
		return localErr(err)
	}
	return pe
}

// refuse decides what follows a local call that failed with pe: the error to reply with (the node's
// own refusal, or a MOVED redirect), or nil to forward the call.
func (o *op) refuse(canMove bool, pe *pb.Error, write bool) error {
	if !reroutable(pe) {
		return pbReply(pe, write)
	}
	return o.route(canMove, pe)
}

// route decides what to do after a local call failed with pe (reroutable): a *movedError when this is
// the first call of a cluster-mode command and the slot's owner is another node with a RESP address;
// nil to forward.
func (o *op) route(canMove bool, pe *pb.Error) error {
	if !canMove || o.slot < 0 {
		return nil
	}
	if addr, ok := o.s.movedTarget(o.ctx, o.slot, pe); ok {
		return &movedError{slot: o.slot, addr: addr}
	}
	return nil
}

// header is the request header of a read: for read-only commands of a READONLY connection, a
// bounded-staleness read any replica may serve (client.DefaultMaxStaleness, as Redis Cluster's
// replicas serve READONLY clients what they have); never for the reads of a write, which must see
// the latest value.
func (o *op) header() *pb.RequestHeader {
	if o.replicaRead() {
		return &pb.RequestHeader{Consistency: pb.ReadConsistency_READ_BOUNDED, MaxStalenessMs: client.DefaultMaxStaleness.Milliseconds()}
	}
	return nil
}

func (o *op) replicaRead() bool { return !o.write && o.c != nil && o.c.readonly }

func (o *op) readOpts() []client.ReadOption {
	if o.replicaRead() {
		return []client.ReadOption{client.BoundedStaleness(client.DefaultMaxStaleness)}
	}
	return nil
}

// get reads Shoal key k.
func (o *op) get(k []byte) ([]byte, bool, error) {
	canMove := o.mayMove.Swap(false)
	resp, err := o.s.node.Get(o.ctx, &pb.GetRequest{Header: o.header(), Key: k})
	pe := callErr(resp.GetError(), err)
	if pe == nil {
		return resp.GetValue(), resp.GetFound(), nil
	}
	if err := o.refuse(canMove, pe, false); err != nil {
		return nil, false, err
	}
	v, found, err := o.s.fwd.Get(o.ctx, k, o.readOpts()...)
	return v, found, err
}

// put writes Shoal key k.
func (o *op) put(k, v []byte) error {
	canMove := o.mayMove.Swap(false)
	resp, err := o.s.node.Put(o.ctx, &pb.PutRequest{Key: k, Value: v})
	pe := callErr(resp.GetError(), err)
	if pe == nil {
		return nil
	}
	if err := o.refuse(canMove, pe, true); err != nil {
		return err
	}
	return o.s.fwd.Put(o.ctx, k, v)
}

// cas sets k to v if its value is expected (or, with absent, if it does not exist).
func (o *op) cas(k, expected []byte, absent bool, v []byte) (swapped bool, err error) {
	canMove := o.mayMove.Swap(false)
	if absent {
		expected = nil
	}
	resp, err := o.s.node.CompareAndSwap(o.ctx, &pb.CompareAndSwapRequest{Key: k, Expected: expected, ExpectAbsent: absent, Value: v})
	pe := callErr(resp.GetError(), err)
	if pe == nil {
		return resp.GetSwapped(), nil
	}
	if err := o.refuse(canMove, pe, true); err != nil {
		return false, err
	}
	swapped, _, _, err = o.s.fwd.CompareAndSwap(o.ctx, k, expected, absent, v)
	return swapped, err
}

// batch applies muts: atomically when they fall in one range and their size is at most the node's value
// limit, else split (by size, then recursively in halves) into batches that are each atomic on their
// own. The size bound keeps every batch within the gRPC message limit and raft entries small.
func (o *op) batch(muts []*pb.Mutation) error {
	if len(muts) == 0 {
		return nil
	}
	size := 0
	for i, m := range muts {
		size += len(m.Key) + len(m.Value) + 16
		if size > o.s.cfg.MaxValueBytes+o.s.cfg.MaxKeyBytes && i > 0 {
			if err := o.batch(muts[:i]); err != nil {
				return err
			}
			return o.batch(muts[i:])
		}
	}
	err := o.batchOnce(muts)
	if err != errSpansRanges {
		return err
	}
	if len(muts) == 1 {
		return replyError("ERR internal error: a single-key batch was refused as spanning ranges")
	}
	h := len(muts) / 2
	var wg sync.WaitGroup
	var errR error
	wg.Add(1)
	go func() {
		defer wg.Done()
		errR = o.batch(muts[h:])
	}()
	errL := o.batch(muts[:h])
	wg.Wait()
	if errL != nil {
		return errL
	}
	return errR
}

func (o *op) batchOnce(muts []*pb.Mutation) error {
	canMove := o.mayMove.Swap(false)
	if len(muts) == 1 {
		// A single mutation needs no batch: Put and Delete are cheaper to route.
		m := muts[0]
		if m.Delete {
			return o.del(canMove, m.Key)
		}
		o.mayMove.Store(canMove)
		return o.put(m.Key, m.Value)
	}
	resp, err := o.s.node.BatchWrite(o.ctx, &pb.BatchWriteRequest{Mutations: muts})
	pe := callErr(resp.GetError(), err)
	if pe == nil {
		return nil
	}
	if pe.Code == pb.ErrorCode_INVALID_ARGUMENT {
		// Keys and values were checked before: the keys span ranges.
		return errSpansRanges
	}
	if err := o.refuse(canMove, pe, true); err != nil {
		return err
	}
	err = o.s.fwd.BatchWrite(o.ctx, muts)
	if errors.Is(err, client.ErrInvalidArgument) {
		return errSpansRanges
	}
	return err
}

func (o *op) del(canMove bool, k []byte) error {
	resp, err := o.s.node.Delete(o.ctx, &pb.DeleteRequest{Key: k})
	pe := callErr(resp.GetError(), err)
	if pe == nil {
		return nil
	}
	if err := o.refuse(canMove, pe, true); err != nil {
		return err
	}
	_, err = o.s.fwd.Delete(o.ctx, k)
	return err
}

// scan reads [start, end) in key order, at most limit pairs (0: all). more reports that the limit
// stopped it (there may be more).
func (o *op) scan(start, end []byte, limit int) (kvs []*pb.KeyValue, more bool, err error) {
	canMove := o.mayMove.Swap(false)
	cur := start
	for {
		var rem int64
		if limit > 0 {
			rem = int64(limit - len(kvs))
		}
		resp, err := o.s.node.Scan(o.ctx, &pb.ScanRequest{Header: o.header(), Start: cur, End: end, Limit: rem})
		pe := callErr(resp.GetError(), err)
		if pe != nil {
			if err := o.refuse(canMove, pe, false); err != nil {
				return nil, false, err
			}
			// Forward the rest; the client crosses ranges itself.
			rest, err := o.s.fwd.Scan(o.ctx, cur, end, int(rem), false)
			if err != nil {
				return nil, false, err
			}
			kvs = append(kvs, rest...)
			return kvs, limit > 0 && len(kvs) >= limit, nil
		}
		canMove = false
		kvs = append(kvs, resp.GetKvs()...)
		if limit > 0 && len(kvs) >= limit {
			return kvs[:limit], true, nil
		}
		if resp.GetTruncated() && len(resp.GetKvs()) > 0 {
			last := resp.Kvs[len(resp.Kvs)-1].Key
			cur = append(append(make([]byte, 0, len(last)+1), last...), 0)
			continue
		}
		rangeEnd := resp.GetRange().GetEndKey()
		if len(rangeEnd) == 0 || (len(end) > 0 && bytes.Compare(rangeEnd, end) >= 0) || bytes.Compare(rangeEnd, cur) <= 0 {
			return kvs, false, nil
		}
		cur = rangeEnd
	}
}

// each runs fn(0) and then fn(1..n-1) concurrently (at most 16 at a time), and returns the error of
// the lowest index that failed. fn(0) runs alone so that a cluster-mode command can still be
// redirected by its first call.
func each(n int, fn func(i int) error) error {
	if n == 0 {
		return nil
	}
	if err := fn(0); err != nil {
		return err
	}
	if n == 1 {
		return nil
	}
	errs := make([]error, n)
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i := 1; i < n; i++ {
		sem <- struct{}{}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = fn(i)
		}(i)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// pbReply turns a server error into the error reply a Redis client understands.
func pbReply(pe *pb.Error, write bool) error {
	return codeReply(pe.GetCode(), pe.GetMessage(), write)
}

func codeReply(code pb.ErrorCode, msg string, write bool) error {
	msg = strings.TrimSpace(msg)
	switch code {
	case pb.ErrorCode_NOT_LEADER, pb.ErrorCode_RANGE_MOVED, pb.ErrorCode_UNAVAILABLE, pb.ErrorCode_OVERLOADED:
		// Definite: nothing was written; the client may retry (go-redis does on TRYAGAIN).
		return replyError("TRYAGAIN " + msg)
	case pb.ErrorCode_TIMEOUT, pb.ErrorCode_AMBIGUOUS:
		if !write {
			return replyError("TRYAGAIN " + msg)
		}
		// Not TRYAGAIN: a client must not blindly retry a write that may have been applied.
		return replyError("AMBIGUOUS the write may or may not have been applied: " + msg)
	case pb.ErrorCode_INVALID_ARGUMENT:
		return replyError("ERR " + msg)
	case pb.ErrorCode_CROSS_RANGE:
		return replyError("CROSSSLOT Keys in request don't hash to the same slot: " + msg)
	default:
		return replyError("ERR internal error: " + msg)
	}
}

// errorReply is the RESP error text for err, the result of a command that may write if write.
func errorReply(err error, write bool) string {
	var re replyError
	var mv *movedError
	var ce *client.Error
	switch {
	case errors.As(err, &re):
		return string(re)
	case errors.As(err, &mv):
		return mv.Error()
	case errors.As(err, &ce):
		return codeReply(ce.Code, ce.Error(), write).Error()
	case errors.Is(err, context.DeadlineExceeded):
		if write {
			return "AMBIGUOUS command timed out; the write may or may not have been applied"
		}
		return "TRYAGAIN command timed out"
	case errors.Is(err, context.Canceled), errors.Is(err, client.ErrClosed):
		return "ERR server is shutting down"
	default:
		return "ERR " + err.Error()
	}
}
