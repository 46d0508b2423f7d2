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

func (s *Service) validateKey(k []byte) *pb.Error {
	if len(k) == 0 {
		return InvalidArgument("key is empty")
	}
	if len(k) > s.cfg.MaxKeyBytes {
		return InvalidArgument("key is %d bytes; the limit is %d (server flag --max-key-bytes)", len(k), s.cfg.MaxKeyBytes)
	}
	return nil
}

func (s *Service) validateValue(v []byte) *pb.Error {
	if len(v) > s.cfg.MaxValueBytes {
		return InvalidArgument("value is %d bytes; the limit is %d (server flag --max-value-bytes)", len(v), s.cfg.MaxValueBytes)
	}
	return nil
}

// PBError converts err and fills the leader's address so the client can go there directly.
func (s *Service) PBError(err error) *pb.Error {
	pe := ToPBError(err)
	if pe != nil && pe.LeaderNodeId != 0 && pe.LeaderAddr == "" {
		if addr, ok := s.cluster.Resolve(pe.LeaderNodeId); ok {
			pe.LeaderAddr = addr
		}
	}
	return pe
}

// notReady answers requests that reach a node before its store runs.
func (s *Service) notReady() *pb.Error {
	select {
	case <-s.ready:
		return nil
	default:
		return &pb.Error{Code: pb.ErrorCode_UNAVAILABLE, Message: "node is starting"}
	}
}

// replicaFor finds the local replica that must serve a request for key. Writes and linearizable reads
// need the leader; the check happens again inside the replica, this one just answers early.
func (s *Service) replicaFor(h *pb.RequestHeader, key []byte, write bool) (*replica.Replica, *pb.Error) {
	select {
	case <-s.ready:
	default:
		return nil, &pb.Error{Code: pb.ErrorCode_UNAVAILABLE, Message: "node is starting"}
	}
	var r *replica.Replica
	if h != nil && h.RangeId != 0 {
		if h.RangeId == replica.MetaRangeID && write {
			return nil, InvalidArgument("the meta range cannot be written directly")
		}
		r = s.store.Replica(h.RangeId)
	} else if key != nil {
		r = s.store.ReplicaForKey(key)
	}
	if r == nil {
		pe := &pb.Error{Code: pb.ErrorCode_RANGE_MOVED, Message: fmt.Sprintf("node %d has no replica for this request; look the range up again", s.nodeID)}
		if h != nil && h.RangeId != 0 {
			if l := s.cluster.LeaderOf(h.RangeId); l != 0 && l != s.nodeID {
				pe.Code = pb.ErrorCode_NOT_LEADER
				pe.LeaderNodeId = l
				pe.LeaderAddr, _ = s.cluster.Resolve(l)
			}
		}
		return nil, pe
	}
	return r, nil
}

// served tells the Observer how long the request that arrived at start took on r, unless its answer
// pe sends the client elsewhere.
func (s *Service) served(r *replica.Replica, start time.Time, pe *pb.Error) {
	if c := pe.GetCode(); c == pb.ErrorCode_NOT_LEADER || c == pb.ErrorCode_RANGE_MOVED {
		return
	}
	s.obs.Served(r.RangeID(), time.Since(start))
}

// readBarrier waits until r may serve a read with h's consistency (pb.RequestHeader) and reports
// whether it is a leader's linearizable read (read hints replay those on the other replicas).
func readBarrier(ctx context.Context, r *replica.Replica, h *pb.RequestHeader) (leaderRead bool, err error) {
	switch {
	case h.GetFollowerRead():
		return false, nil
	case h.GetConsistency() == pb.ReadConsistency_READ_REPLICA:
		return r.IsLeader(), r.ReplicaReadBarrier(ctx)
	case h.GetConsistency() == pb.ReadConsistency_READ_BOUNDED:
		if h.GetMaxStalenessMs() <= 0 {
			return false, errCode(pb.ErrorCode_INVALID_ARGUMENT, "a bounded-staleness read needs a positive max_staleness_ms")
		}
		return r.IsLeader(), r.BoundedReadBarrier(ctx, time.Duration(h.GetMaxStalenessMs())*time.Millisecond)
	}
	return true, r.ReadBarrier(ctx)
}

// Get implements pb.ShoalServer.
func (s *Service) Get(ctx context.Context, req *pb.GetRequest) (*pb.GetResponse, error) {
	start := time.Now()
	adm, refused := s.admit(req)
	if refused != nil {
		return &pb.GetResponse{Error: refused}, nil
	}
	defer adm.done()
	if pe := s.validateKey(req.Key); pe != nil {
		return &pb.GetResponse{Error: pe}, nil
	}
	r, pe := s.replicaFor(req.Header, req.Key, false)
	if pe != nil {
		return &pb.GetResponse{Error: pe}, nil
	}
	resp := s.get(ctx, r, req)
	s.served(r, start, resp.Error)
	return resp, nil
}

// get serves req on r.
func (s *Service) get(ctx context.Context, r *replica.Replica, req *pb.GetRequest) *pb.GetResponse {
	s.obs.Request(r.RangeID(), req.Key)
	ctx, cancel := WithTimeout(ctx)
	defer cancel()
	leaderRead, err := readBarrier(ctx, r, req.GetHeader())
	if err != nil {
		return &pb.GetResponse{Error: s.PBError(err)}
	}
	// After the barrier: the state read includes every fence applied before the read began.
	if pe := retiredKey(r, req.Key); pe != nil {
		return &pb.GetResponse{Error: pe}
	}
	v, found, err := r.GetStored(req.Key)
	if err != nil {
		return &pb.GetResponse{Error: s.PBError(err)}
	}
	if leaderRead {
		s.obs.Read(r.RangeID(), req.Key) // a leader's read: the other replicas replay it (read hints)
	}
	if !found {
		return &pb.GetResponse{}
	}
	return &pb.GetResponse{Found: true, Value: v.Data, ExpireAtUnixMs: v.ExpireAtMs, Version: v.Version, ModIndex: v.ModIndex}
}

// propose proposes cmd to the range of key (or of h's range) for a write request that arrived at start.
func (s *Service) propose(ctx context.Context, start time.Time, h *pb.RequestHeader, key []byte, cmd *pb.Command) (replica.Result, *pb.Error) {
	r, pe := s.replicaFor(h, key, true)
	if pe != nil {
		return replica.Result{}, pe
	}
	if key != nil {
		s.obs.Request(r.RangeID(), key)
	}
	ctx, cancel := WithTimeout(ctx)
	defer cancel()
	var res replica.Result
	for {
		// A fenced write waits for its fence to lift rather than fail (fence.go); one that a fence
		// applied before it refused was not applied, and is proposed again.
		if pe = holdWhileFenced(ctx, r, cmd); pe != nil {
			return replica.Result{}, pe
		}
		var err error
		res, err = r.Propose(ctx, cmd)
		if isFenced(err) {
			// Not applied: propose it again after the hold, stamped with the leader's clock then
			// (a relative TTL, NX/XX and expiry are judged when it applies, not when first tried).
			cmd.ClockUnixMs = 0
			continue
		}
		if err != nil {
			pe = s.PBError(err)
		}
		break
	}
	s.served(r, start, pe)
	return res, pe
}

// Put implements pb.ShoalServer.
func (s *Service) Put(ctx context.Context, req *pb.PutRequest) (*pb.PutResponse, error) {
	start := time.Now()
	adm, refused := s.admit(req)
	if refused != nil {
		return &pb.PutResponse{Error: refused}, nil
	}
	defer adm.done()
	if pe := s.validateKey(req.Key); pe != nil {
		return &pb.PutResponse{Error: pe}, nil
	}
	if pe := s.validateValue(req.Value); pe != nil {
		return &pb.PutResponse{Error: pe}, nil
	}
	cmd := &pb.Command{Mutations: []*pb.Mutation{{Key: req.Key, Value: req.Value}}}
	switch {
	case req.TtlMs < 0:
		return &pb.PutResponse{Error: InvalidArgument("ttl %dms is negative", req.TtlMs)}, nil
	case req.TtlMs > 0:
		// Relative to the leader's clock when it proposes: resolved on apply from the command's stamp.
		cmd = &pb.Command{Txn: &pb.TxnRequest{Success: []*pb.TxnOp{{Type: pb.TxnOp_PUT, Key: req.Key, Value: req.Value, TtlMs: req.TtlMs}}}}
	}
	_, pe := s.propose(ctx, start, req.Header, req.Key, cmd)
	return &pb.PutResponse{Error: pe}, nil
}

// Delete implements pb.ShoalServer.
func (s *Service) Delete(ctx context.Context, req *pb.DeleteRequest) (*pb.DeleteResponse, error) {
	start := time.Now()
	adm, refused := s.admit(req)
	if refused != nil {
		return &pb.DeleteResponse{Error: refused}, nil
	}
	defer adm.done()
	if pe := s.validateKey(req.Key); pe != nil {
		return &pb.DeleteResponse{Error: pe}, nil
	}
	res, pe := s.propose(ctx, start, req.Header, req.Key, &pb.Command{Mutations: []*pb.Mutation{{Key: req.Key, Delete: true}}})
	return &pb.DeleteResponse{Error: pe, Found: res.Found}, nil
}

// CompareAndSwap implements pb.ShoalServer.
func (s *Service) CompareAndSwap(ctx context.Context, req *pb.CompareAndSwapRequest) (*pb.CompareAndSwapResponse, error) {
	start := time.Now()
	adm, refused := s.admit(req)
	if refused != nil {
		return &pb.CompareAndSwapResponse{Error: refused}, nil
	}
	defer adm.done()
	if pe := s.validateKey(req.Key); pe != nil {
		return &pb.CompareAndSwapResponse{Error: pe}, nil
	}
	if pe := s.validateValue(req.Value); pe != nil {
		return &pb.CompareAndSwapResponse{Error: pe}, nil
	}
	cmd := &pb.Command{
		Condition: &pb.Condition{Key: req.Key, Expected: req.Expected, ExpectAbsent: req.ExpectAbsent},
		Mutations: []*pb.Mutation{{Key: req.Key, Value: req.Value, Delete: req.Delete}},
	}
	res, pe := s.propose(ctx, start, req.Header, req.Key, cmd)
	return &pb.CompareAndSwapResponse{Error: pe, Swapped: res.Swapped, Found: res.Found, Current: res.Current}, nil
}

// BatchWrite implements pb.ShoalServer: all mutations apply atomically in one range.
func (s *Service) BatchWrite(ctx context.Context, req *pb.BatchWriteRequest) (*pb.BatchWriteResponse, error) {
	start := time.Now()
	adm, refused := s.admit(req)
	if refused != nil {
		return &pb.BatchWriteResponse{Error: refused}, nil
	}
	defer adm.done()
	if len(req.Mutations) == 0 {
		return &pb.BatchWriteResponse{Error: InvalidArgument("batch has no mutations")}, nil
	}
	for _, m := range req.Mutations {
		if pe := s.validateKey(m.Key); pe != nil {
			return &pb.BatchWriteResponse{Error: pe}, nil
		}
		if pe := s.validateValue(m.Value); pe != nil {
			return &pb.BatchWriteResponse{Error: pe}, nil
		}
	}
	first := req.Mutations[0].Key
	r, pe := s.replicaFor(req.Header, first, true)
	if pe != nil {
		return &pb.BatchWriteResponse{Error: pe}, nil
	}
	if err := r.CheckKey(first); err != nil {
		return &pb.BatchWriteResponse{Error: s.PBError(err)}, nil
	}
	if r.IsLeader() {
		for _, m := range req.Mutations[1:] {
			if err := r.CheckKey(m.Key); err != nil {
				return &pb.BatchWriteResponse{Error: InvalidArgument("batch spans more than one range: key %q is outside range %d (batches are atomic within one range)", m.Key, r.RangeID())}, nil
			}
		}
	}
	_, pe = s.propose(ctx, start, req.Header, first, &pb.Command{Mutations: req.Mutations, FenceOwner: req.FenceOwner})
	return &pb.BatchWriteResponse{Error: pe}, nil
}

// Scan implements pb.ShoalServer: it serves the part of [start, end) inside one range.
func (s *Service) Scan(ctx context.Context, req *pb.ScanRequest) (*pb.ScanResponse, error) {
	start := time.Now()
	adm, refused := s.admit(req)
	if refused != nil {
		return &pb.ScanResponse{Error: refused}, nil
	}
	defer adm.done()
	if pe := s.notReady(); pe != nil {
		return &pb.ScanResponse{Error: pe}, nil
	}
	if len(req.End) > 0 && bytes.Compare(req.Start, req.End) > 0 {
		return &pb.ScanResponse{Error: InvalidArgument("scan start %q is after end %q", req.Start, req.End)}, nil
	}
	if req.Limit < 0 {
		return &pb.ScanResponse{Error: InvalidArgument("scan limit %d is negative", req.Limit)}, nil
	}
	if len(req.Start) > s.cfg.MaxKeyBytes || len(req.End) > s.cfg.MaxKeyBytes {
		return &pb.ScanResponse{Error: InvalidArgument("scan bound longer than %d bytes", s.cfg.MaxKeyBytes)}, nil
	}
	var r *replica.Replica
	var pe *pb.Error
	if req.GetHeader().GetRangeId() == 0 && req.Reverse {
		r = s.replicaForReverse(req.End)
		if r == nil {
			pe = &pb.Error{Code: pb.ErrorCode_RANGE_MOVED, Message: "no local replica for this scan"}
		}
	} else {
		// An empty start is the first key: the range holding it serves the scan.
		r, pe = s.replicaFor(req.Header, append([]byte{}, req.Start...), false)
	}
	if pe != nil {
		return &pb.ScanResponse{Error: pe}, nil
	}
	resp := s.scan(ctx, r, req, &adm)
	s.served(r, start, resp.Error)
	return resp, nil
}

// scan serves the part of req's span in r, growing adm by the bytes it returns.
func (s *Service) scan(ctx context.Context, r *replica.Replica, req *pb.ScanRequest, adm *admittedRequest) *pb.ScanResponse {
	s.obs.Request(r.RangeID(), req.Start)
	ctx, cancel := WithTimeout(ctx)
	defer cancel()
	leaderRead, err := readBarrier(ctx, r, req.GetHeader())
	if err != nil {
		return &pb.ScanResponse{Error: s.PBError(err)}
	}
	// After the barrier: the state read includes every fence applied before the read began.
	if pe := retiredRead(r, req.Start, req.End); pe != nil {
		return &pb.ScanResponse{Error: pe}
	}
	limit := int(req.Limit)
	if limit == 0 {
		limit = defaultScanLimit
	}
	kvs, desc, truncated, err := r.ScanFor(readSource(ctx), req.Start, req.End, limit, maxScanResponseSize, req.Reverse)
	if err != nil {
		return &pb.ScanResponse{Error: s.PBError(err)}
	}
	var resultBytes int64
	for _, kv := range kvs {
		resultBytes += int64(len(kv.Key) + len(kv.Value))
	}
	adm.grow(resultBytes)
	if leaderRead {
		s.obs.Scan(r.RangeID(), req.Start, req.End, limit, req.Reverse)
	}
	return &pb.ScanResponse{Kvs: kvs, Range: desc, Truncated: truncated}
}

func (s *Service) replicaForReverse(end []byte) *replica.Replica {
	for _, r := range s.store.Replicas() {
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
func (s *Service) RangeLookup(ctx context.Context, req *pb.RangeLookupRequest) (*pb.RangeLookupResponse, error) {
	select {
	case <-s.ready:
	default:
		return &pb.RangeLookupResponse{Error: &pb.Error{Code: pb.ErrorCode_UNAVAILABLE, Message: "node is starting"}}, nil
	}
	ctx, cancel := WithTimeout(ctx)
	defer cancel()
	var d *pb.RangeDescriptor
	if req.Meta {
		d = s.MetaDesc()
		if d == nil {
			return &pb.RangeLookupResponse{Error: &pb.Error{Code: pb.ErrorCode_UNAVAILABLE, Message: "meta range location not known yet"}}, nil
		}
	} else {
		var err error
		if d, err = s.LookupRange(ctx, req.Key); err != nil {
			return &pb.RangeLookupResponse{Error: s.PBError(err)}, nil
		}
	}
	resp := &pb.RangeLookupResponse{Range: d, LeaderNodeId: s.LeaderNodeOf(d.RangeId)}
	for _, rd := range d.Replicas {
		if nd := s.cluster.Get(rd.NodeId); nd != nil {
			resp.Nodes = append(resp.Nodes, nd)
		}
	}
	return resp, nil
}

// LeaderNodeOf is the best known leader of a range: the local replica's view, else heartbeats.
func (s *Service) LeaderNodeOf(rangeID uint64) uint64 {
	if r := s.store.Replica(rangeID); r != nil {
		if l := r.LeaderNode(); l != 0 {
			return l
		}
	}
	if rangeID == replica.MetaRangeID {
		return s.cluster.MetaLeader()
	}
	return s.cluster.LeaderOf(rangeID)
}

// MetaCommand implements pb.ShoalServer (node-internal).
func (s *Service) MetaCommand(ctx context.Context, req *pb.MetaCommandRequest) (*pb.MetaCommandResponse, error) {
	if pe := s.notReady(); pe != nil {
		return &pb.MetaCommandResponse{Error: pe}, nil
	}
	if req.Command == nil {
		return &pb.MetaCommandResponse{Error: InvalidArgument("missing command")}, nil
	}
	if req.Command.Split != nil {
		return &pb.MetaCommandResponse{Error: InvalidArgument("the meta range does not split")}, nil
	}
	r := s.store.Replica(replica.MetaRangeID)
	if r == nil {
		return &pb.MetaCommandResponse{Error: &pb.Error{Code: pb.ErrorCode_NOT_LEADER, Message: "no meta replica here", LeaderNodeId: s.LeaderNodeOf(replica.MetaRangeID)}}, nil
	}
	ctx, cancel := WithTimeout(ctx)
	defer cancel()
	res, err := r.Propose(ctx, proto.Clone(req.Command).(*pb.Command))
	if err != nil {
		return &pb.MetaCommandResponse{Error: s.PBError(err)}, nil
	}
	return &pb.MetaCommandResponse{Counter: res.Counter}, nil
}

// Split implements pb.ShoalServer: split the range containing key at key.
func (s *Service) Split(ctx context.Context, req *pb.SplitRequest) (*pb.SplitResponse, error) {
	if pe := s.notReady(); pe != nil {
		return &pb.SplitResponse{Error: pe}, nil
	}
	if pe := s.validateKey(req.Key); pe != nil {
		return &pb.SplitResponse{Error: pe}, nil
	}
	ctx, cancel := WithTimeout(ctx)
	defer cancel()
	d, err := s.LookupRange(ctx, req.Key)
	if err != nil {
		return &pb.SplitResponse{Error: s.PBError(err)}, nil
	}
	if bytes.Equal(d.StartKey, req.Key) {
		return &pb.SplitResponse{Error: InvalidArgument("key %q is already the start of range %d", req.Key, d.RangeId)}, nil
	}
	resp := &pb.SplitResponse{}
	err = s.OnLeader(ctx, d.RangeId, func(r *replica.Replica) error {
		l, rr, err := s.splitLocal(ctx, r, req.Key)
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
		resp.Error = s.PBError(err)
	}
	return resp, nil
}

// splitLocal splits r (this node leads it) at key and records both halves in the meta range.
func (s *Service) splitLocal(ctx context.Context, r *replica.Replica, key []byte) (*pb.RangeDescriptor, *pb.RangeDescriptor, error) {
	d := r.Desc()
	if d == nil {
		return nil, nil, errCode(pb.ErrorCode_UNAVAILABLE, "replica not initialized")
	}
	if r.IsMeta() {
		return nil, nil, errCode(pb.ErrorCode_INVALID_ARGUMENT, "the meta range does not split")
	}
	aligned, ok := slotAlignedSplitKey(key, d.StartKey, d.EndKey)
	if !ok {
		return nil, nil, errCode(pb.ErrorCode_INVALID_ARGUMENT, fmt.Sprintf("range %d holds one Redis hash slot only: it does not split inside a slot", d.RangeId))
	}
	key = aligned
	if bytes.Equal(d.StartKey, key) {
		return nil, nil, errCode(pb.ErrorCode_INVALID_ARGUMENT, fmt.Sprintf("key %q is already the start of range %d", key, d.RangeId))
	}
	if err := r.CheckKey(key); err != nil {
		return nil, nil, err
	}
	res, err := s.ProposeMeta(ctx, &pb.Command{IncrementKey: replica.MetaCounterKey("range-id")})
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
	s.cluster.SetLeader(right.RangeId, s.nodeID)
	// If this fails the meta-repair queue writes it later; clients retry meanwhile.
	if _, err := s.ProposeMeta(ctx, &pb.Command{MetaUpdate: &pb.MetaUpdate{Ranges: []*pb.RangeDescriptor{left, right}}}); err != nil {
		s.log.Warn("split applied but meta update failed; repair queue will retry", "range", d.RangeId, "err", err)
	}
	s.log.Info("range split", "range", d.RangeId, "new_range", right.RangeId, "key", fmt.Sprintf("%q", key))
	return left, right, nil
}

// TransferLeader implements pb.ShoalServer.
func (s *Service) TransferLeader(ctx context.Context, req *pb.TransferLeaderRequest) (*pb.TransferLeaderResponse, error) {
	if pe := s.notReady(); pe != nil {
		return &pb.TransferLeaderResponse{Error: pe}, nil
	}
	ctx, cancel := WithTimeout(ctx)
	defer cancel()
	err := s.OnLeader(ctx, req.RangeId, func(r *replica.Replica) error {
		if err := waitTransferee(ctx, r, req.NodeId); err != nil {
			return err
		}
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
		return &pb.TransferLeaderResponse{Error: s.PBError(err)}, nil
	}
	s.cluster.MovedLeader(req.RangeId, req.NodeId)
	return &pb.TransferLeaderResponse{}, nil
}

// transfereeWait bounds how long a transfer waits for its transferee to catch up before asking raft
// anyway (raft then catches it up itself, with the range's writes stalled meanwhile).
const transfereeWait = 5 * time.Second

// waitTransferee waits, up to transfereeWait (half of what is left of ctx at most), until the voter
// on node holds every committed entry of r's range and answers, so that the transfer's hand-over,
// during which raft drops proposals, is one message exchange long.
func waitTransferee(ctx context.Context, r *replica.Replica, node uint64) error {
	wait := transfereeWait
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl)/2)
	}
	for end := time.Now().Add(wait); ; time.Sleep(10 * time.Millisecond) {
		ok, err := r.TransfereeCaughtUp(node)
		if ok || err != nil || time.Now().After(end) || ctx.Err() != nil {
			return err
		}
	}
}

// RelocateReplica implements pb.ShoalServer.
func (s *Service) RelocateReplica(ctx context.Context, req *pb.RelocateReplicaRequest) (*pb.RelocateReplicaResponse, error) {
	if pe := s.notReady(); pe != nil {
		return &pb.RelocateReplicaResponse{Error: pe}, nil
	}
	if req.AddNodeId == 0 && req.RemoveNodeId == 0 {
		return &pb.RelocateReplicaResponse{Error: InvalidArgument("nothing to do: give add_node_id and/or remove_node_id")}, nil
	}
	if req.AddNodeId != 0 && s.cluster.Get(req.AddNodeId) == nil {
		return &pb.RelocateReplicaResponse{Error: InvalidArgument("unknown node %d", req.AddNodeId)}, nil
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
	}
	ctx, cancel := withReplyMargin(ctx)
	defer cancel()
	resp := &pb.RelocateReplicaResponse{}
	err := s.OnLeader(ctx, req.RangeId, func(r *replica.Replica) error {
		d, err := s.relocateLocal(ctx, r, req.AddNodeId, req.RemoveNodeId, req.Step)
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
		resp.Error = s.PBError(err)
	}
	return resp, nil
}
