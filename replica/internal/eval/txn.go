package eval

import (
	"bytes"
	"fmt"
	"math"
	"strconv"

	"github.com/shoaldb/shoal/pb"
)

// Errors an operation reports in its result (the transaction's other operations still apply, as
// in Redis's EXEC).
const (
	errNotInteger = "value is not an integer or out of range"
	errNotFloat   = "value is not a valid float"
	errOverflow   = "increment or decrement would overflow"
	errNaN        = "increment would produce NaN or Infinity"
)

// Keys lists every key a transaction touches (for the replica's span check).
func Keys(t *pb.TxnRequest) [][]byte {
	var ks [][]byte
	for _, c := range t.Compares {
		ks = append(ks, c.Key)
	}
	for _, ops := range [][]*pb.TxnOp{t.Success, t.Failure} {
		for _, op := range ops {
			ks = append(ks, op.Key)
		}
	}
	return ks
}

func (a *applier) txn(t *pb.TxnRequest) (*pb.TxnResponse, error) {
	ok := true
	for _, c := range t.Compares {
		held, err := a.compare(c)
		if err != nil {
			return nil, err
		}
		ok = ok && held
	}
	ops := t.Success
	if !ok {
		ops = t.Failure
	}
	resp := &pb.TxnResponse{Succeeded: ok, Results: make([]*pb.TxnOpResult, 0, len(ops))}
	for _, op := range ops {
		r, err := a.op(op)
		if err != nil {
			return nil, err
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

func (a *applier) compare(c *pb.Compare) (bool, error) {
	st, err := a.read(c.Key)
	if err != nil {
		return false, err
	}
	var cmp int
	switch c.Target {
	case pb.Compare_VALUE:
		cmp = bytes.Compare(st.v.Data, c.Value)
		if !st.found {
			cmp = bytes.Compare(nil, c.Value)
		}
	case pb.Compare_EXISTS:
		if st.found == c.Exists {
			cmp = 0
		} else {
			cmp = 1
		}
	case pb.Compare_VERSION, pb.Compare_MOD_INDEX:
		var n uint64
		if st.found {
			n = st.v.Version
			if c.Target == pb.Compare_MOD_INDEX {
				n = st.v.ModIndex
			}
		}
		cmp = compareU64(n, c.Number)
	default:
		return false, fmt.Errorf("compare on key %q: unknown target %v", c.Key, c.Target)
	}
	switch c.Op {
	case pb.Compare_EQUAL:
		return cmp == 0, nil
	case pb.Compare_NOT_EQUAL:
		return cmp != 0, nil
	case pb.Compare_GREATER:
		return cmp > 0, nil
	case pb.Compare_LESS:
		return cmp < 0, nil
	}
	return false, fmt.Errorf("compare on key %q: unknown operator %v", c.Key, c.Op)
}

func compareU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// expiry resolves an op's expiry against the command's clock.
func (a *applier) expiry(op *pb.TxnOp, old state) int64 {
	switch {
	case op.KeepTtl:
		if old.found {
			return old.v.ExpireAtMs
		}
		return 0
	case op.TtlMs != 0:
		if op.TtlMs > math.MaxInt64-a.clock {
			return math.MaxInt64 // saturate: never in practice
		}
		return a.clock + op.TtlMs
	}
	return op.ExpireAtUnixMs
}

func (a *applier) op(op *pb.TxnOp) (*pb.TxnOpResult, error) {
	st, err := a.read(op.Key)
	if err != nil {
		return nil, err
	}
	r := &pb.TxnOpResult{Found: st.found}
	if st.found {
		r.Value, r.ExpireAtUnixMs, r.Version, r.ModIndex = st.v.Data, st.v.ExpireAtMs, st.v.Version, st.v.ModIndex
	}
	switch op.Type {
	case pb.TxnOp_GET:
		return r, nil
	case pb.TxnOp_PUT:
		if op.IfAbsent && st.found || op.IfPresent && !st.found {
			return r, nil
		}
		exp := a.expiry(op, st)
		if exp != 0 && exp <= a.clock {
			// Already expired (SET … PXAT in the past): the key is gone, as Redis deletes it.
			r.Applied = true
			return r, a.delete(op.Key, st)
		}
		r.Applied = true
		return r, a.write(op.Key, st, op.Value, exp)
	case pb.TxnOp_DELETE:
		if op.OnlyExpired {
			raw, found, err := a.b.Get(a.env.DataKey(op.Key))
			if err != nil || !found || st.found || len(raw) == 0 {
				return r, err // live again (rewritten since the sweeper looked) or gone
			}
		} else if !st.found {
			return r, nil
		}
		r.Applied = true
		return r, a.delete(op.Key, st)
	case pb.TxnOp_EXPIRE:
		if !st.found || op.IfPresent && st.v.ExpireAtMs == 0 {
			return r, nil
		}
		exp := a.expiry(op, st)
		r.Applied = true
		if exp != 0 && exp <= a.clock {
			return r, a.delete(op.Key, st)
		}
		st.v.Version-- // an expiry change is not a new version of the value
		return r, a.write(op.Key, st, st.v.Data, exp)
	case pb.TxnOp_INCR, pb.TxnOp_INCR_FLOAT, pb.TxnOp_APPEND:
		return a.update(op, st, r)
	}
	return nil, fmt.Errorf("txn op on key %q: unknown type %v", op.Key, op.Type)
}

// update runs the read-modify-write ops, which keep the key's expiry (as Redis's INCR and APPEND do).
func (a *applier) update(op *pb.TxnOp, st state, r *pb.TxnOpResult) (*pb.TxnOpResult, error) {
	var cur []byte
	var exp int64
	if st.found {
		cur, exp = st.v.Data, st.v.ExpireAtMs
	}
	var next []byte
	switch op.Type {
	case pb.TxnOp_INCR:
		n := int64(0)
		if st.found {
			var err error
			if n, err = strconv.ParseInt(string(cur), 10, 64); err != nil || cur[0] == '+' || len(cur) > 1 && (cur[0] == '0' || cur[0] == '-' && cur[1] == '0') {
				r.Error = errNotInteger
				return r, nil
			}
		}
		d := op.Delta
		if d > 0 && n > math.MaxInt64-d || d < 0 && n < math.MinInt64-d {
			r.Error = errOverflow
			return r, nil
		}
		n += d
		r.IntValue = n
		next = strconv.AppendInt(nil, n, 10)
	case pb.TxnOp_INCR_FLOAT:
		f := 0.0
		if st.found {
			var err error
			if f, err = strconv.ParseFloat(string(cur), 64); err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
				r.Error = errNotFloat
				return r, nil
			}
		}
		f += op.DeltaFloat
		if math.IsNaN(f) || math.IsInf(f, 0) {
			r.Error = errNaN
			return r, nil
		}
		// Seventeen significant digits, as Redis prints its long double, would show float64's rounding
		// (10.1+0.2 = 10.299999999999999); fifteen give what Redis shows.
		f, _ = strconv.ParseFloat(strconv.FormatFloat(f, 'g', 15, 64), 64)
		next = strconv.AppendFloat(nil, f, 'f', -1, 64)
	case pb.TxnOp_APPEND:
		next = append(append([]byte(nil), cur...), op.Value...)
		r.IntValue = int64(len(next))
	}
	r.Applied = true
	r.Value = next
	return r, a.write(op.Key, st, next, exp)
}
