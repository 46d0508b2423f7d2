package kv

import (
	"context"
	"fmt"
	"time"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
)

// maxTxnOps bounds a transaction's compares and ops: it is one raft entry.
const maxTxnOps = 10000

// Txn implements pb.ShoalServer: compares and ops over keys of one range, atomically at one raft
// index. Keys in more than one range get CROSS_RANGE (the client must not retry it as is).
func (s *Service) Txn(ctx context.Context, req *pb.TxnRequest) (*pb.TxnResponse, error) {
	if len(req.Compares) == 0 && len(req.Success) == 1 && req.Success[0].GetType() == pb.TxnOp_GET {
		return s.txnGet(ctx, req)
	}
	start := time.Now()
	adm, refused := s.admit(req)
	if refused != nil {
		return &pb.TxnResponse{Error: refused}, nil
	}
	defer adm.done()
	keys, pe := s.validateTxn(req)
	if pe != nil {
		return &pb.TxnResponse{Error: pe}, nil
	}
	r, pe := s.replicaFor(req.Header, keys[0], true)
	if pe != nil {
		return &pb.TxnResponse{Error: pe}, nil
	}
	if err := r.CheckKey(keys[0]); err != nil {
		return &pb.TxnResponse{Error: s.PBError(err)}, nil
	}
	if pe := crossRange(r, keys); pe != nil {
		return &pb.TxnResponse{Error: pe}, nil
	}
	cmd := &pb.Command{Txn: &pb.TxnRequest{Compares: req.Compares, Success: req.Success, Failure: req.Failure}}
	res, pe := s.propose(ctx, start, req.Header, keys[0], cmd)
	if pe != nil {
		return &pb.TxnResponse{Error: pe}, nil
	}
	if res.Txn == nil {
		return &pb.TxnResponse{Error: &pb.Error{Code: pb.ErrorCode_INTERNAL, Message: "transaction applied without an outcome"}}, nil
	}
	return res.Txn, nil
}

// validateTxn checks a transaction's shape and returns its keys, the first being the one it routes by.
func (s *Service) validateTxn(req *pb.TxnRequest) ([][]byte, *pb.Error) {
	n := len(req.Compares) + len(req.Success) + len(req.Failure)
	if n == 0 {
		return nil, InvalidArgument("transaction has no compares and no ops")
	}
	if n > maxTxnOps {
		return nil, InvalidArgument("transaction has %d compares and ops; the limit is %d", n, maxTxnOps)
	}
	keys := make([][]byte, 0, n)
	for _, c := range req.Compares {
		keys = append(keys, c.Key)
	}
	for _, ops := range [][]*pb.TxnOp{req.Success, req.Failure} {
		for _, op := range ops {
			if pe := s.validateValue(op.Value); pe != nil {
				return nil, pe
			}
			if op.TtlMs < 0 || op.ExpireAtUnixMs < 0 {
				return nil, InvalidArgument("key %q: negative expiry", op.Key)
			}
			keys = append(keys, op.Key)
		}
	}
	for _, k := range keys {
		if pe := s.validateKey(k); pe != nil {
			return nil, pe
		}
	}
	return keys, nil
}

// crossRange refuses keys that r (the range of the first) does not all hold. Only a leader's span is
// current; elsewhere the request is forwarded and checked there.
func crossRange(r *replica.Replica, keys [][]byte) *pb.Error {
	if !r.IsLeader() {
		return nil
	}
	for _, k := range keys[1:] {
		if r.CheckKey(k) != nil {
			return &pb.Error{Code: pb.ErrorCode_CROSS_RANGE, Message: fmt.Sprintf("transaction spans ranges: key %.64q is not in range %d, which holds key %.64q; "+
				"a transaction's keys must share one range (RESP: one hash slot, e.g. {tag} keys)", k, r.RangeID(), keys[0])}
		}
	}
	return nil
}

// txnGet serves a transaction that only reads one key (RESP's TTL, PTTL, STRLEN) as a linearizable Get:
// its result is the same, and it needs no raft entry.
func (s *Service) txnGet(ctx context.Context, req *pb.TxnRequest) (*pb.TxnResponse, error) {
	g, err := s.Get(ctx, &pb.GetRequest{Header: req.Header, Key: req.Success[0].GetKey()})
	if err != nil || g.GetError() != nil {
		return &pb.TxnResponse{Error: g.GetError()}, err
	}
	r := &pb.TxnOpResult{Found: g.GetFound()}
	if g.GetFound() {
		r.Value, r.ExpireAtUnixMs, r.Version, r.ModIndex = g.GetValue(), g.GetExpireAtUnixMs(), g.GetVersion(), g.GetModIndex()
	}
	return &pb.TxnResponse{Succeeded: true, Results: []*pb.TxnOpResult{r}}, nil
}
