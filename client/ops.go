package client

import (
	"context"
	"fmt"
	"time"

	"github.com/shoaldb/shoal/pb"
)

// ReadOption modifies a read.
type ReadOption func(*readOptions)

type readOptions struct {
	follower     bool
	consistency  pb.ReadConsistency
	maxStaleness time.Duration
}

// op is a read's opKind with its options.
func (o readOptions) op(name string) opKind {
	return opKind{name: name, follower: o.follower, consistency: o.consistency, maxStalenessMs: o.maxStaleness.Milliseconds()}
}

// FollowerRead lets any replica of the range (voter or learner) serve the read from its local state,
// without a linearizability check: the value may be stale, but the leader does no work.
func FollowerRead() ReadOption {
	return func(o *readOptions) { o.follower = true }
}

// ReplicaRead lets any replica of the range, a learner too, serve the read linearizably: one that
// does not lead asks the leader for its commit index (raft's ReadIndex) and serves once it has
// applied that far, so the leader sends an index instead of the data.
func ReplicaRead() ReadOption {
	return func(o *readOptions) { o.consistency = pb.ReadConsistency_READ_REPLICA }
}

// DefaultMaxStaleness is BoundedStaleness's bound when it is given none (and RESP's READONLY's).
const DefaultMaxStaleness = 2 * time.Second

// BoundedStaleness lets any replica of the range serve the read if its state holds every write
// acknowledged more than maxStaleness ago (≤ 0: DefaultMaxStaleness); one that cannot tell first
// asks the leader for its commit index, as ReplicaRead does. Resolution: milliseconds.
func BoundedStaleness(maxStaleness time.Duration) ReadOption {
	if maxStaleness <= 0 {
		maxStaleness = DefaultMaxStaleness
	}
	maxStaleness = max(maxStaleness, time.Millisecond)
	return func(o *readOptions) { o.consistency, o.maxStaleness = pb.ReadConsistency_READ_BOUNDED, maxStaleness }
}

// invalid returns an INVALID_ARGUMENT error with msg.
func invalid(msg string) error {
	return newError(pb.ErrorCode_INVALID_ARGUMENT, msg, nil)
}

// errEmptyKey is returned for an empty key; the server would reject it too.
func errEmptyKey() error { return invalid("key is empty") }

// locator routes by key.
func (c *Client) locator(key []byte) locateFunc {
	return func(ctx context.Context) (rangeEntry, error) { return c.locate(ctx, key) }
}

// replicaRefresh is how old a cached descriptor may be for a read any replica may serve: the
// autopilot adds and removes read replicas (learners) that no error would tell the client about.
const replicaRefresh = 5 * time.Second

// readLocator routes a read by key: for one any replica may serve, on a descriptor at most
// replicaRefresh old, so that new read replicas get their share.
func (c *Client) readLocator(key []byte, op opKind) locateFunc {
	if !op.anyReplica() {
		return c.locator(key)
	}
	return func(ctx context.Context) (rangeEntry, error) {
		if e, ok := c.cache.get(key); ok && time.Since(e.at) < replicaRefresh {
			return e, nil
		}
		_, e, err := c.lookupOnce(ctx, key)
		return e, err
	}
}

// Get returns the value of key and whether it exists. It is linearizable unless FollowerRead is given.
func (c *Client) Get(ctx context.Context, key []byte, opts ...ReadOption) (value []byte, found bool, err error) {
	e, found, err := c.GetEntry(ctx, key, opts...)
	return e.Value, found, err
}

// Put sets key to value. An ErrAmbiguous or ErrTimeout error means the write may or may not have been
// applied.
func (c *Client) Put(ctx context.Context, key, value []byte) error {
	if len(key) == 0 {
		return errEmptyKey()
	}
	return c.run(ctx, opKind{name: "put", write: true}, c.locator(key), "",
		func(ctx context.Context, sc pb.ShoalClient, hdr *pb.RequestHeader, _ target) (*pb.Error, error) {
			r, err := sc.Put(ctx, &pb.PutRequest{Header: hdr, Key: key, Value: value})
			return r.GetError(), err
		})
}

// Delete removes key and reports whether it existed. An ErrAmbiguous or ErrTimeout error means the
// delete may or may not have been applied.
func (c *Client) Delete(ctx context.Context, key []byte) (found bool, err error) {
	if len(key) == 0 {
		return false, errEmptyKey()
	}
	var resp *pb.DeleteResponse
	err = c.run(ctx, opKind{name: "delete", write: true}, c.locator(key), "",
		func(ctx context.Context, sc pb.ShoalClient, hdr *pb.RequestHeader, _ target) (*pb.Error, error) {
			r, err := sc.Delete(ctx, &pb.DeleteRequest{Header: hdr, Key: key})
			resp = r
			return r.GetError(), err
		})
	if err != nil {
		return false, err
	}
	return resp.GetFound(), nil
}

// CompareAndSwap sets key to value if its current value equals expected or, with expectAbsent, if
// key does not exist. It returns whether it swapped and, if not, the current value and whether the key
// exists. An ErrAmbiguous or ErrTimeout error means the swap may or may not have been applied.
func (c *Client) CompareAndSwap(ctx context.Context, key, expected []byte, expectAbsent bool, value []byte) (swapped bool, current []byte, found bool, err error) {
	if len(key) == 0 {
		return false, nil, false, errEmptyKey()
	}
	if expectAbsent && len(expected) != 0 {
		return false, nil, false, invalid("compare-and-swap: expected value given together with expect-absent")
	}
	return c.cas(ctx, "compare-and-swap", &pb.CompareAndSwapRequest{Key: key, Expected: expected, ExpectAbsent: expectAbsent, Value: value})
}

// CompareAndDelete deletes key if its current value equals expected, and reports whether it did. An
// ErrAmbiguous or ErrTimeout error means the delete may or may not have been applied.
func (c *Client) CompareAndDelete(ctx context.Context, key, expected []byte) (swapped bool, err error) {
	if len(key) == 0 {
		return false, errEmptyKey()
	}
	swapped, _, _, err = c.cas(ctx, "compare-and-delete", &pb.CompareAndSwapRequest{Key: key, Expected: expected, Delete: true})
	return swapped, err
}

func (c *Client) cas(ctx context.Context, name string, req *pb.CompareAndSwapRequest) (swapped bool, current []byte, found bool, err error) {
	var resp *pb.CompareAndSwapResponse
	err = c.run(ctx, opKind{name: name, write: true}, c.locator(req.Key), "",
		func(ctx context.Context, sc pb.ShoalClient, hdr *pb.RequestHeader, _ target) (*pb.Error, error) {
			r := &pb.CompareAndSwapRequest{Header: hdr, Key: req.Key, Expected: req.Expected,
				ExpectAbsent: req.ExpectAbsent, Value: req.Value, Delete: req.Delete}
			out, err := sc.CompareAndSwap(ctx, r)
			resp = out
			return out.GetError(), err
		})
	if err != nil {
		return false, nil, false, err
	}
	return resp.GetSwapped(), resp.GetCurrent(), resp.GetFound(), nil
}

// BatchWrite applies muts atomically. All keys must fall in one range; otherwise it returns
// ErrInvalidArgument without writing anything. An ErrAmbiguous or ErrTimeout error means the batch may
// or may not have been applied (as a whole: never in part).
func (c *Client) BatchWrite(ctx context.Context, muts []*pb.Mutation) error {
	return c.batchWrite(ctx, muts, 0)
}

// BatchWriteAsFenceOwner is BatchWrite for the owner of span fence id (FenceSpan): its writes
// pass that fence, retired or not.
func (c *Client) BatchWriteAsFenceOwner(ctx context.Context, muts []*pb.Mutation, id uint64) error {
	return c.batchWrite(ctx, muts, id)
}

func (c *Client) batchWrite(ctx context.Context, muts []*pb.Mutation, fenceOwner uint64) error {
	if len(muts) == 0 {
		return invalid("batch write: no mutations")
	}
	for i, m := range muts {
		if m == nil || len(m.GetKey()) == 0 {
			return invalid(fmt.Sprintf("batch write: mutation %d: key is empty", i))
		}
	}
	first := muts[0].GetKey()
	locate := func(ctx context.Context) (rangeEntry, error) {
		e, err := c.locate(ctx, first)
		if err != nil {
			return e, err
		}
		if outside := outsideKey(e.desc, muts); outside != nil {
			// The cache may be stale (a merge): look again before refusing.
			c.cache.evict(e.desc)
			if _, e, err = c.lookupOnce(ctx, first); err != nil {
				return e, err
			}
			if outside := outsideKey(e.desc, muts); outside != nil {
				return e, invalid(fmt.Sprintf("batch write: keys %q and %q are in different ranges (%s holds the first); split the batch per range", first, outside, spanString(e.desc)))
			}
		}
		return e, nil
	}
	return c.run(ctx, opKind{name: "batch write", write: true}, locate, "",
		func(ctx context.Context, sc pb.ShoalClient, hdr *pb.RequestHeader, _ target) (*pb.Error, error) {
			r, err := sc.BatchWrite(ctx, &pb.BatchWriteRequest{Header: hdr, Mutations: muts, FenceOwner: fenceOwner})
			return r.GetError(), err
		})
}

// outsideKey returns the first mutation key outside d, or nil.
func outsideKey(d *pb.RangeDescriptor, muts []*pb.Mutation) []byte {
	for _, m := range muts {
		if !contains(d, m.GetKey()) {
			return m.GetKey()
		}
	}
	return nil
}

// Nodes returns the status of every node in the cluster.
func (c *Client) Nodes(ctx context.Context) ([]*pb.NodeStatus, error) {
	var resp *pb.NodesResponse
	err := c.run(ctx, opKind{name: "nodes"}, nil, "",
		func(ctx context.Context, sc pb.ShoalClient, _ *pb.RequestHeader, _ target) (*pb.Error, error) {
			r, err := sc.Nodes(ctx, &pb.NodesRequest{})
			resp = r
			return r.GetError(), err
		})
	if err != nil {
		return nil, err
	}
	return resp.GetNodes(), nil
}

// Ranges returns the status of every range in the cluster.
func (c *Client) Ranges(ctx context.Context) ([]*pb.RangeStatus, error) {
	return c.ranges(ctx, &pb.RangesRequest{})
}

// AppliedIndexes returns the status of the ranges named, as the answering node knows them, without
// their size estimates: a poll of how far their replicas there have applied (0 where it holds
// none).
func (c *Client) AppliedIndexes(ctx context.Context, ids []uint64) ([]*pb.RangeStatus, error) {
	return c.ranges(ctx, &pb.RangesRequest{RangeIds: ids, WithoutSizes: true})
}

func (c *Client) ranges(ctx context.Context, req *pb.RangesRequest) ([]*pb.RangeStatus, error) {
	var resp *pb.RangesResponse
	err := c.run(ctx, opKind{name: "ranges"}, nil, "",
		func(ctx context.Context, sc pb.ShoalClient, _ *pb.RequestHeader, _ target) (*pb.Error, error) {
			r, err := sc.Ranges(ctx, req)
			resp = r
			return r.GetError(), err
		})
	if err != nil {
		return nil, err
	}
	return resp.GetRanges(), nil
}

// UserRanges returns the status of every range but the meta range: the ranges that hold user data.
func (c *Client) UserRanges(ctx context.Context) ([]*pb.RangeStatus, error) {
	rs, err := c.Ranges(ctx)
	if err != nil {
		return nil, err
	}
	out := rs[:0:0]
	for _, r := range rs {
		if r.GetDesc().GetRangeId() != MetaRangeID {
			out = append(out, r)
		}
	}
	return out, nil
}

// Split splits the range containing key at key, so that key starts the right-hand range, and returns
// the two descriptors. It is sent to the range's leader. An ErrAmbiguous or ErrTimeout error means the
// split may or may not have happened; Lookup tells.
func (c *Client) Split(ctx context.Context, key []byte) (left, right *pb.RangeDescriptor, err error) {
	if len(key) == 0 {
		return nil, nil, errEmptyKey()
	}
	var resp *pb.SplitResponse
	err = c.run(ctx, opKind{name: "split", write: true}, c.locator(key), "",
		func(ctx context.Context, sc pb.ShoalClient, _ *pb.RequestHeader, _ target) (*pb.Error, error) {
			r, err := sc.Split(ctx, &pb.SplitRequest{Key: key})
			resp = r
			return r.GetError(), err
		})
	if err != nil {
		return nil, nil, err
	}
	left, right = resp.GetLeft(), resp.GetRight()
	for _, d := range []*pb.RangeDescriptor{left, right} {
		if d != nil && d.GetRangeId() != 0 {
			c.cache.insert(d, 0, nil)
		}
	}
	return left, right, nil
}

// Merge absorbs the right neighbour of the range holding key into it and returns the merged range.
// Both ranges must have their replicas on the same nodes (ErrInvalidArgument says so otherwise). An
// ErrAmbiguous or ErrTimeout error means the merge may or may not have happened; Lookup tells.
func (c *Client) Merge(ctx context.Context, key []byte) (*pb.RangeDescriptor, error) {
	if len(key) == 0 {
		return nil, errEmptyKey()
	}
	var resp *pb.MergeResponse
	err := c.run(ctx, opKind{name: "merge", write: true}, c.locator(key), "",
		func(ctx context.Context, sc pb.ShoalClient, _ *pb.RequestHeader, _ target) (*pb.Error, error) {
			r, err := sc.Merge(ctx, &pb.MergeRequest{Key: key})
			resp = r
			return r.GetError(), err
		})
	if err != nil {
		return nil, err
	}
	if d := resp.GetMerged(); d.GetRangeId() != 0 {
		c.cache.insert(d, 0, nil)
	}
	return resp.GetMerged(), nil
}

// TransferLeader asks range rangeID to move its leadership to node nodeID. An ErrAmbiguous or
// ErrTimeout error means the transfer may or may not have happened; Ranges tells.
func (c *Client) TransferLeader(ctx context.Context, rangeID, nodeID uint64) error {
	if rangeID == 0 {
		return invalid("transfer leader: range id is 0")
	}
	if nodeID == 0 {
		return invalid("transfer leader: node id is 0")
	}
	prefer := ""
	if e, ok := c.cache.byID(rangeID); ok {
		prefer = c.cache.leaderAddrOf(e)
	}
	err := c.run(ctx, opKind{name: "transfer leader", write: true}, nil, prefer,
		func(ctx context.Context, sc pb.ShoalClient, _ *pb.RequestHeader, _ target) (*pb.Error, error) {
			r, err := sc.TransferLeader(ctx, &pb.TransferLeaderRequest{RangeId: rangeID, NodeId: nodeID})
			return r.GetError(), err
		})
	if err != nil {
		return err
	}
	c.cache.setLeader(rangeID, nodeID, "")
	return nil
}

// Lookup asks the cluster (not the cache) which range holds key, who leads it and where its replicas
// are, and refreshes the cache with the answer. An empty key looks up the first range.
func (c *Client) Lookup(ctx context.Context, key []byte) (*pb.RangeLookupResponse, error) {
	var (
		bo   backoff
		last error
	)
	op := opKind{name: "range lookup"}
	for attempt := 0; attempt < c.cfg.MaxAttempts; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, ctxError(op, err, last)
		}
		if err := c.failFast(); err != nil {
			return nil, err
		}
		resp, _, err := c.lookupOnce(ctx, key)
		if err == nil {
			return resp, nil
		}
		if isTerminal(err) {
			return nil, err
		}
		last = err
		if werr := bo.wait(ctx); werr != nil {
			return nil, ctxError(op, werr, last)
		}
	}
	return nil, last
}

// MetaRangeID is the id of the meta range, which holds range descriptors and no user data. It equals
// replica.MetaRangeID; the client does not import the replica layer.
const MetaRangeID = 1
