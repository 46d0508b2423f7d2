package kv

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
)

const (
	defaultScanLimit    = 10000
	maxScanResponseSize = 4 << 20
	defaultOpTimeout    = 10 * time.Second
)

func invalid(format string, args ...any) *pb.Error {
	return &pb.Error{Code: pb.ErrorCode_INVALID_ARGUMENT, Message: fmt.Sprintf(format, args...)}
}

func (n *Node) validateKey(k []byte) *pb.Error {
	if len(k) == 0 {
		return invalid("key is empty")
	}
	if len(k) > n.cfg.MaxKeyBytes {
		return invalid("key is %d bytes; the limit is %d (server flag --max-key-bytes)", len(k), n.cfg.MaxKeyBytes)
	}
	return nil
}

func (n *Node) validateValue(v []byte) *pb.Error {
	if len(v) > n.cfg.MaxValueBytes {
		return invalid("value is %d bytes; the limit is %d (server flag --max-value-bytes)", len(v), n.cfg.MaxValueBytes)
	}
	return nil
}

// pbErr converts err and fills the leader's address so the client can go there directly.
func (n *Node) pbErr(err error) *pb.Error {
	pe := toPBError(err)
	if pe != nil && pe.LeaderNodeId != 0 && pe.LeaderAddr == "" {
		if addr, ok := n.dir.resolve(pe.LeaderNodeId); ok {
			pe.LeaderAddr = addr
		}
	}
	return pe
}

// notReady answers requests that reach a node before its store runs.
func (n *Node) notReady() *pb.Error {
	select {
	case <-n.ready:
		return nil
	default:
		return &pb.Error{Code: pb.ErrorCode_UNAVAILABLE, Message: "node is starting"}
	}
}

func withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, defaultOpTimeout)
}

// replicaFor finds the local replica that must serve a request for key. Writes and linearizable reads
// need the leader; the check happens again inside the replica, this one just answers early.
func (n *Node) replicaFor(h *pb.RequestHeader, key []byte, write bool) (*replica.Replica, *pb.Error) {
	select {
	case <-n.ready:
	default:
		return nil, &pb.Error{Code: pb.ErrorCode_UNAVAILABLE, Message: "node is starting"}
	}
	var r *replica.Replica
	if h != nil && h.RangeId != 0 {
		if h.RangeId == replica.MetaRangeID && write {
			return nil, invalid("the meta range cannot be written directly")
		}
		r = n.store.Replica(h.RangeId)
	} else if key != nil {
		r = n.store.ReplicaForKey(key)
	}
	if r == nil {
		pe := &pb.Error{Code: pb.ErrorCode_RANGE_MOVED, Message: fmt.Sprintf("node %d has no replica for this request; look the range up again", n.ident.NodeID)}
		if h != nil && h.RangeId != 0 {
			if l := n.dir.leaderOf(h.RangeId); l != 0 && l != n.ident.NodeID {
				pe.Code = pb.ErrorCode_NOT_LEADER
				pe.LeaderNodeId = l
				pe.LeaderAddr, _ = n.dir.resolve(l)
			}
		}
		return nil, pe
	}
	return r, nil
}

// Get implements pb.ShoalServer.
func (n *Node) Get(ctx context.Context, req *pb.GetRequest) (*pb.GetResponse, error) {
	adm, refused := n.admit(req)
	if refused != nil {
		return &pb.GetResponse{Error: refused}, nil
	}
	defer adm.done()
	if pe := n.validateKey(req.Key); pe != nil {
		return &pb.GetResponse{Error: pe}, nil
	}
	r, pe := n.replicaFor(req.Header, req.Key, false)
	if pe != nil {
		return &pb.GetResponse{Error: pe}, nil
	}
	n.ap.record(r.RangeID(), req.Key)
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	if !req.GetHeader().GetFollowerRead() {
		if err := r.ReadBarrier(ctx); err != nil {
			return &pb.GetResponse{Error: n.pbErr(err)}, nil
		}
	}
	v, found, err := r.Get(req.Key)
	if err != nil {
		return &pb.GetResponse{Error: n.pbErr(err)}, nil
	}
	if !req.GetHeader().GetFollowerRead() {
		n.recordRead(r.RangeID(), req.Key) // a leader's read: the other replicas replay it (read hints)
	}
	return &pb.GetResponse{Found: found, Value: v}, nil
}

func (n *Node) propose(ctx context.Context, h *pb.RequestHeader, key []byte, cmd *pb.Command) (replica.Result, *pb.Error) {
	r, pe := n.replicaFor(h, key, true)
	if pe != nil {
		return replica.Result{}, pe
	}
	if key != nil {
		n.ap.record(r.RangeID(), key)
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	res, err := r.Propose(ctx, cmd)
	if err != nil {
		return res, n.pbErr(err)
	}
	return res, nil
}

// Put implements pb.ShoalServer.
func (n *Node) Put(ctx context.Context, req *pb.PutRequest) (*pb.PutResponse, error) {
	adm, refused := n.admit(req)
	if refused != nil {
		return &pb.PutResponse{Error: refused}, nil
	}
	defer adm.done()
	if pe := n.validateKey(req.Key); pe != nil {
		return &pb.PutResponse{Error: pe}, nil
	}
	if pe := n.validateValue(req.Value); pe != nil {
		return &pb.PutResponse{Error: pe}, nil
	}
	_, pe := n.propose(ctx, req.Header, req.Key, &pb.Command{Mutations: []*pb.Mutation{{Key: req.Key, Value: req.Value}}})
	return &pb.PutResponse{Error: pe}, nil
}

// Delete implements pb.ShoalServer.
func (n *Node) Delete(ctx context.Context, req *pb.DeleteRequest) (*pb.DeleteResponse, error) {
	adm, refused := n.admit(req)
	if refused != nil {
		return &pb.DeleteResponse{Error: refused}, nil
	}
	defer adm.done()
	if pe := n.validateKey(req.Key); pe != nil {
		return &pb.DeleteResponse{Error: pe}, nil
	}
	res, pe := n.propose(ctx, req.Header, req.Key, &pb.Command{Mutations: []*pb.Mutation{{Key: req.Key, Delete: true}}})
	return &pb.DeleteResponse{Error: pe, Found: res.Found}, nil
}

// CompareAndSwap implements pb.ShoalServer.
func (n *Node) CompareAndSwap(ctx context.Context, req *pb.CompareAndSwapRequest) (*pb.CompareAndSwapResponse, error) {
	adm, refused := n.admit(req)
	if refused != nil {
		return &pb.CompareAndSwapResponse{Error: refused}, nil
	}
	defer adm.done()
	if pe := n.validateKey(req.Key); pe != nil {
		return &pb.CompareAndSwapResponse{Error: pe}, nil
	}
	if pe := n.validateValue(req.Value); pe != nil {
		return &pb.CompareAndSwapResponse{Error: pe}, nil
	}
	cmd := &pb.Command{
		Condition: &pb.Condition{Key: req.Key, Expected: req.Expected, ExpectAbsent: req.ExpectAbsent},
		Mutations: []*pb.Mutation{{Key: req.Key, Value: req.Value, Delete: req.Delete}},
	}
	res, pe := n.propose(ctx, req.Header, req.Key, cmd)
	return &pb.CompareAndSwapResponse{Error: pe, Swapped: res.Swapped, Found: res.Found, Current: res.Current}, nil
}

// BatchWrite implements pb.ShoalServer: all mutations apply atomically in one range.
func (n *Node) BatchWrite(ctx context.Context, req *pb.BatchWriteRequest) (*pb.BatchWriteResponse, error) {
	adm, refused := n.admit(req)
	if refused != nil {
		return &pb.BatchWriteResponse{Error: refused}, nil
	}
	defer adm.done()
	if len(req.Mutations) == 0 {
		return &pb.BatchWriteResponse{Error: invalid("batch has no mutations")}, nil
	}
	for _, m := range req.Mutations {
		if pe := n.validateKey(m.Key); pe != nil {
			return &pb.BatchWriteResponse{Error: pe}, nil
		}
		if pe := n.validateValue(m.Value); pe != nil {
			return &pb.BatchWriteResponse{Error: pe}, nil
		}
	}
	first := req.Mutations[0].Key
	r, pe := n.replicaFor(req.Header, first, true)
	if pe != nil {
		return &pb.BatchWriteResponse{Error: pe}, nil
	}
	if err := r.CheckKey(first); err != nil {
		return &pb.BatchWriteResponse{Error: n.pbErr(err)}, nil
	}
	if r.IsLeader() {
		for _, m := range req.Mutations[1:] {
			if err := r.CheckKey(m.Key); err != nil {
				return &pb.BatchWriteResponse{Error: invalid("batch spans more than one range: key %q is outside range %d (batches are atomic within one range)", m.Key, r.RangeID())}, nil
			}
		}
	}
	_, pe = n.propose(ctx, req.Header, first, &pb.Command{Mutations: req.Mutations})
	return &pb.BatchWriteResponse{Error: pe}, nil
}

// Scan implements pb.ShoalServer: it serves the part of [start, end) inside one range.
func (n *Node) Scan(ctx context.Context, req *pb.ScanRequest) (*pb.ScanResponse, error) {
	adm, refused := n.admit(req)
	if refused != nil {
		return &pb.ScanResponse{Error: refused}, nil
	}
	defer adm.done()
	if pe := n.notReady(); pe != nil {
		return &pb.ScanResponse{Error: pe}, nil
	}
	if len(req.End) > 0 && bytes.Compare(req.Start, req.End) > 0 {
		return &pb.ScanResponse{Error: invalid("scan start %q is after end %q", req.Start, req.End)}, nil
	}
	if req.Limit < 0 {
		return &pb.ScanResponse{Error: invalid("scan limit %d is negative", req.Limit)}, nil
	}
	if len(req.Start) > n.cfg.MaxKeyBytes || len(req.End) > n.cfg.MaxKeyBytes {
		return &pb.ScanResponse{Error: invalid("scan bound longer than %d bytes", n.cfg.MaxKeyBytes)}, nil
	}
	var r *replica.Replica
	var pe *pb.Error
	if req.GetHeader().GetRangeId() == 0 && req.Reverse {
		r = n.replicaForReverse(req.End)
		if r == nil {
			pe = &pb.Error{Code: pb.ErrorCode_RANGE_MOVED, Message: "no local replica for this scan"}
		}
	} else {
		r, pe = n.replicaFor(req.Header, req.Start, false)
	}
	if pe != nil {
		return &pb.ScanResponse{Error: pe}, nil
	}
	n.ap.record(r.RangeID(), req.Start)
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	if !req.GetHeader().GetFollowerRead() {
		if err := r.ReadBarrier(ctx); err != nil {
			return &pb.ScanResponse{Error: n.pbErr(err)}, nil
		}
	}
	limit := int(req.Limit)
	if limit == 0 {
		limit = defaultScanLimit
	}
	kvs, desc, truncated, err := r.Scan(req.Start, req.End, limit, maxScanResponseSize, req.Reverse)
	if err != nil {
		return &pb.ScanResponse{Error: n.pbErr(err)}, nil
	}
	var resultBytes int64
	for _, kv := range kvs {
		resultBytes += int64(len(kv.Key) + len(kv.Value))
	}
	adm.grow(resultBytes)
	if !req.GetHeader().GetFollowerRead() {
		n.recordScan(r.RangeID(), req.Start, req.End, limit, req.Reverse)
	}
	return &pb.ScanResponse{Kvs: kvs, Range: desc, Truncated: truncated}, nil
}

func (n *Node) replicaForReverse(end []byte) *replica.Replica {
	for _, r := range n.store.Replicas() {
		d := r.Desc()
		if d == nil || r.IsMeta() {
			continue
		}
		if len(end) == 0 {
			if len(d.EndKey) == 0 {
				return r
			}
			continue
		}
		if bytes.Compare(d.StartKey, end) < 0 && (len(d.EndKey) == 0 || bytes.Compare(end, d.EndKey) <= 0) {
			return r
		}
	}
	return nil
}

// RangeLookup implements pb.ShoalServer.
func (n *Node) RangeLookup(ctx context.Context, req *pb.RangeLookupRequest) (*pb.RangeLookupResponse, error) {
	select {
	case <-n.ready:
	default:
		return &pb.RangeLookupResponse{Error: &pb.Error{Code: pb.ErrorCode_UNAVAILABLE, Message: "node is starting"}}, nil
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	var d *pb.RangeDescriptor
	if req.Meta {
		d = n.metaDesc()
		if d == nil {
			return &pb.RangeLookupResponse{Error: &pb.Error{Code: pb.ErrorCode_UNAVAILABLE, Message: "meta range location not known yet"}}, nil
		}
	} else {
		var err error
		if d, err = n.lookupRange(ctx, req.Key); err != nil {
			return &pb.RangeLookupResponse{Error: n.pbErr(err)}, nil
		}
	}
	resp := &pb.RangeLookupResponse{Range: d, LeaderNodeId: n.leaderNodeOf(d.RangeId)}
	for _, rd := range d.Replicas {
		if nd := n.dir.get(rd.NodeId); nd != nil {
			resp.Nodes = append(resp.Nodes, nd)
		}
	}
	return resp, nil
}

// leaderNodeOf is the best known leader of a range: the local replica's view, else heartbeats.
func (n *Node) leaderNodeOf(rangeID uint64) uint64 {
	if r := n.store.Replica(rangeID); r != nil {
		if l := r.LeaderNode(); l != 0 {
			return l
		}
	}
	if rangeID == replica.MetaRangeID {
		n.dir.mu.RLock()
		defer n.dir.mu.RUnlock()
		return n.dir.metaLeader
	}
	return n.dir.leaderOf(rangeID)
}

// MetaCommand implements pb.ShoalServer (node-internal).
func (n *Node) MetaCommand(ctx context.Context, req *pb.MetaCommandRequest) (*pb.MetaCommandResponse, error) {
	if pe := n.notReady(); pe != nil {
		return &pb.MetaCommandResponse{Error: pe}, nil
	}
	if req.Command == nil {
		return &pb.MetaCommandResponse{Error: invalid("missing command")}, nil
	}
	if req.Command.Split != nil {
		return &pb.MetaCommandResponse{Error: invalid("the meta range does not split")}, nil
	}
	r := n.store.Replica(replica.MetaRangeID)
	if r == nil {
		return &pb.MetaCommandResponse{Error: &pb.Error{Code: pb.ErrorCode_NOT_LEADER, Message: "no meta replica here", LeaderNodeId: n.leaderNodeOf(replica.MetaRangeID)}}, nil
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	res, err := r.Propose(ctx, proto.Clone(req.Command).(*pb.Command))
	if err != nil {
		return &pb.MetaCommandResponse{Error: n.pbErr(err)}, nil
	}
	return &pb.MetaCommandResponse{Counter: res.Counter}, nil
}

// Split implements pb.ShoalServer: split the range containing key at key.
func (n *Node) Split(ctx context.Context, req *pb.SplitRequest) (*pb.SplitResponse, error) {
	if pe := n.notReady(); pe != nil {
		return &pb.SplitResponse{Error: pe}, nil
	}
	if pe := n.validateKey(req.Key); pe != nil {
		return &pb.SplitResponse{Error: pe}, nil
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	d, err := n.lookupRange(ctx, req.Key)
	if err != nil {
		return &pb.SplitResponse{Error: n.pbErr(err)}, nil
	}
	if bytes.Equal(d.StartKey, req.Key) {
		return &pb.SplitResponse{Error: invalid("key %q is already the start of range %d", req.Key, d.RangeId)}, nil
	}
	resp := &pb.SplitResponse{}
	err = n.onLeader(ctx, d.RangeId, func(r *replica.Replica) error {
		l, rr, err := n.splitLocal(ctx, r, req.Key)
		resp.Left, resp.Right = l, rr
		return err
	}, func(ctx context.Context, c pb.ShoalClient) (*pb.Error, error) {
		if isForwarded(ctx) {
			return nil, errNoForward
		}
		out, err := c.Split(ctx, req)
		if err != nil {
			return nil, err
		}
		resp.Left, resp.Right = out.Left, out.Right
		return out.Error, nil
	})
	if err != nil {
		resp.Error = n.pbErr(err)
	}
	return resp, nil
}

// splitLocal splits r (this node leads it) at key and records both halves in the meta range.
func (n *Node) splitLocal(ctx context.Context, r *replica.Replica, key []byte) (*pb.RangeDescriptor, *pb.RangeDescriptor, error) {
	d := r.Desc()
	if d == nil {
		return nil, nil, errCode(pb.ErrorCode_UNAVAILABLE, "replica not initialized")
	}
	if r.IsMeta() {
		return nil, nil, errCode(pb.ErrorCode_INVALID_ARGUMENT, "the meta range does not split")
	}
	if bytes.Equal(d.StartKey, key) {
		return nil, nil, errCode(pb.ErrorCode_INVALID_ARGUMENT, fmt.Sprintf("key %q is already the start of range %d", key, d.RangeId))
	}
	if err := r.CheckKey(key); err != nil {
		return nil, nil, err
	}
	res, err := n.metaCommand(ctx, &pb.Command{IncrementKey: replica.MetaCounterKey("range-id")})
	if err != nil {
		return nil, nil, fmt.Errorf("allocate range id: %w", err)
	}
	left := proto.Clone(d).(*pb.RangeDescriptor)
	left.EndKey = append([]byte(nil), key...)
	left.Generation++
	right := proto.Clone(d).(*pb.RangeDescriptor)
	right.RangeId = res.Counter
	right.StartKey = append([]byte(nil), key...)
	right.Generation = left.Generation
	if _, err := r.Propose(ctx, &pb.Command{Split: &pb.SplitTrigger{SplitKey: key, NewRangeId: right.RangeId, Left: left, Right: right}}); err != nil {
		return nil, nil, err
	}
	n.dir.setLeader(right.RangeId, n.ident.NodeID)
	// If this fails the meta-repair queue writes it later; clients retry meanwhile.
	if _, err := n.metaCommand(ctx, &pb.Command{MetaUpdate: &pb.MetaUpdate{Ranges: []*pb.RangeDescriptor{left, right}}}); err != nil {
		n.log.Warn("split applied but meta update failed; repair queue will retry", "range", d.RangeId, "err", err)
	}
	n.log.Info("range split", "range", d.RangeId, "new_range", right.RangeId, "key", fmt.Sprintf("%q", key))
	return left, right, nil
}

// TransferLeader implements pb.ShoalServer.
func (n *Node) TransferLeader(ctx context.Context, req *pb.TransferLeaderRequest) (*pb.TransferLeaderResponse, error) {
	if pe := n.notReady(); pe != nil {
		return &pb.TransferLeaderResponse{Error: pe}, nil
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	err := n.onLeader(ctx, req.RangeId, func(r *replica.Replica) error {
		if err := r.TransferLeadership(req.NodeId); err != nil {
			return err
		}
		// Raft abandons a transfer after an election timeout when the transferee does not catch up
		// in time (a follower behind on its log, a dropped message, a node restarting): ask again
		// once the transferee answers, rather than wait out the caller's deadline (seen once in CI:
		// 10 s lost).
		for ctx.Err() == nil {
			if l := r.LeaderNode(); l == req.NodeId {
				return nil
			}
			if err := r.RetryTransfer(req.NodeId); err != nil {
				return err
			}
			time.Sleep(20 * time.Millisecond)
		}
		return errCode(pb.ErrorCode_TIMEOUT, fmt.Sprintf("range %d: leadership did not move to node %d in time", req.RangeId, req.NodeId))
	}, func(ctx context.Context, c pb.ShoalClient) (*pb.Error, error) {
		if isForwarded(ctx) {
			return nil, errNoForward
		}
		out, err := c.TransferLeader(ctx, req)
		if err != nil {
			return nil, err
		}
		return out.Error, nil
	})
	if err != nil {
		return &pb.TransferLeaderResponse{Error: n.pbErr(err)}, nil
	}
	n.dir.movedLeader(req.RangeId, req.NodeId)
	return &pb.TransferLeaderResponse{}, nil
}

// RelocateReplica implements pb.ShoalServer.
func (n *Node) RelocateReplica(ctx context.Context, req *pb.RelocateReplicaRequest) (*pb.RelocateReplicaResponse, error) {
	if pe := n.notReady(); pe != nil {
		return &pb.RelocateReplicaResponse{Error: pe}, nil
	}
	if req.AddNodeId == 0 && req.RemoveNodeId == 0 {
		return &pb.RelocateReplicaResponse{Error: invalid("nothing to do: give add_node_id and/or remove_node_id")}, nil
	}
	if req.AddNodeId != 0 && n.dir.get(req.AddNodeId) == nil {
		return &pb.RelocateReplicaResponse{Error: invalid("unknown node %d", req.AddNodeId)}, nil
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
	}
	resp := &pb.RelocateReplicaResponse{}
	err := n.onLeader(ctx, req.RangeId, func(r *replica.Replica) error {
		d, err := n.relocateLocal(ctx, r, req.AddNodeId, req.RemoveNodeId, req.Step)
		resp.Range = d
		return err
	}, func(ctx context.Context, c pb.ShoalClient) (*pb.Error, error) {
		if isForwarded(ctx) {
			return nil, errNoForward
		}
		out, err := c.RelocateReplica(ctx, req)
		if err != nil {
			return nil, err
		}
		resp.Range = out.Range
		return out.Error, nil
	})
	if err != nil {
		resp.Error = n.pbErr(err)
	}
	return resp, nil
}
