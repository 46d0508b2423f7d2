// Package txn turns Redis string commands into Shoal transaction ops (pb.TxnOp) and writes their
// replies from the ops' results, so that a command runs as one transaction on its own and a
// MULTI … EXEC block runs as one transaction of all its commands' ops.
//
// It owns the commands' argument rules and reply shapes (Redis's, including TTL's -2 and -1). It
// must never call the cluster: package resp runs the transaction, checks key types (a hash where a
// string is expected) and routes it.
package txn

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/server/resp/wire"
)

// Error is a command's error reply (its text starts with the Redis error code).
type Error string

func (e Error) Error() string { return string(e) }

const (
	errSyntax   = Error("ERR syntax error")
	errNotInt   = Error("ERR value is not an integer or out of range")
	errNotFloat = Error("ERR value is not a valid float")
	errWrong    = "WRONGTYPE Operation against a key holding the wrong kind of value"
)

// Env is what building a plan needs from the listener.
type Env struct {
	// Key maps a Redis key to the Shoal key of its string value.
	Key func(redisKey []byte) []byte
	// Now is the listener's clock (Unix ms) when the reply is written, for TTL's and PTTL's replies.
	Now func() int64
}

// Plan is one command as transaction ops with its reply.
type Plan struct {
	// Key is the Redis key whose type decides OnHash (nil: no type check).
	Key []byte
	Ops []*pb.TxnOp
	// Reply writes the reply from the results of Ops (in order).
	Reply func(w *wire.Writer, rs []*pb.TxnOpResult)
	// CheckFirst: look at Key's type before running (the command may create a string, which must
	// not happen over a hash); else only when the string turns out absent.
	CheckFirst bool
	// OnHash writes the reply for a Key that is a hash and reports whether that ends the command
	// (false: run the ops anyway).
	OnHash func(w *wire.Writer) bool
}

func wrongType(w *wire.Writer) bool { w.Error(errWrong); return true }

// Supported reports whether Build knows the command (name in lower case).
func Supported(name string) bool { _, ok := builders[name]; return ok }

type builder func(env Env, args [][]byte) (*Plan, error)

// entry is a command Build knows, with Redis's arity (negative: at least that many, with the name).
type entry struct {
	arity int
	build builder
}

var builders map[string]entry

func init() {
	builders = map[string]entry{
		"get": {2, buildGet}, "set": {-3, buildSet}, "setex": {4, buildSetex}, "psetex": {4, buildSetex},
		"getset": {3, buildGetset}, "getdel": {2, buildGetdel}, "getex": {-2, buildGetex},
		"append": {3, buildAppend}, "strlen": {2, buildStrlen},
		"incr": {2, buildIncr}, "decr": {2, buildIncr}, "incrby": {3, buildIncr}, "decrby": {3, buildIncr},
		"incrbyfloat": {3, buildIncrFloat},
		"expire":      {-3, buildExpire}, "pexpire": {-3, buildExpire}, "expireat": {-3, buildExpire}, "pexpireat": {-3, buildExpire},
		"persist": {2, buildPersist}, "ttl": {2, buildTTL}, "pttl": {2, buildTTL},
		"mget": {-2, buildMget}, "mset": {-3, buildMset}, "del": {-2, buildDel}, "unlink": {-2, buildDel}, "exists": {-2, buildExists},
	}
}

// Build makes the plan of args (args[0] the command's name, any case).
func Build(env Env, args [][]byte) (*Plan, error) {
	name := strings.ToLower(string(args[0]))
	e, ok := builders[name]
	if !ok {
		return nil, Error(fmt.Sprintf("ERR '%s' is not supported inside MULTI by Shoal (string commands only)", name))
	}
	if e.arity > 0 && len(args) != e.arity || e.arity < 0 && len(args) < -e.arity {
		return nil, Error(fmt.Sprintf("ERR wrong number of arguments for '%s' command", name))
	}
	return e.build(env, args)
}

func one(op *pb.TxnOp, reply func(w *wire.Writer, r *pb.TxnOpResult)) *Plan {
	return &Plan{Ops: []*pb.TxnOp{op}, Reply: func(w *wire.Writer, rs []*pb.TxnOpResult) { reply(w, rs[0]) }}
}

func bulkOrNull(w *wire.Writer, r *pb.TxnOpResult) {
	if r.Found {
		w.Bulk(r.Value)
	} else {
		w.Null()
	}
}

func buildGet(env Env, args [][]byte) (*Plan, error) {
	p := one(&pb.TxnOp{Type: pb.TxnOp_GET, Key: env.Key(args[1])}, bulkOrNull)
	p.Key, p.OnHash = args[1], wrongType
	return p, nil
}

// maxExpiryMs bounds a ttl or an expiry time so that adding the clock cannot overflow (Redis
// answers "invalid expire time" where its own sum would).
const maxExpiryMs = math.MaxInt64 / 2

// expiry is a parsed EX|PX|EXAT|PXAT option: a relative ttl or an absolute time, in ms.
type expiry struct {
	ttlMs, atMs int64
	set         bool
}

func (e expiry) apply(op *pb.TxnOp) {
	if e.ttlMs != 0 {
		op.TtlMs = e.ttlMs
	} else {
		op.ExpireAtUnixMs = e.atMs
	}
}

// parseExpiry reads the value of option opt (ex, px, exat, pxat); cmd names the command in errors.
// Values must be positive, as in Redis's SET and GETEX.
func parseExpiry(opt string, v []byte, cmd string) (expiry, error) {
	n, ok := wire.ParseInt(v)
	if !ok {
		return expiry{}, errNotInt
	}
	invalid := Error(fmt.Sprintf("ERR invalid expire time in '%s' command", cmd))
	if n <= 0 {
		return expiry{}, invalid
	}
	ms := n
	if opt == "ex" || opt == "exat" {
		if n > math.MaxInt64/1000 {
			return expiry{}, invalid
		}
		ms = n * 1000
	}
	if ms > maxExpiryMs {
		return expiry{}, invalid
	}
	if opt == "ex" || opt == "px" {
		return expiry{ttlMs: ms, set: true}, nil
	}
	return expiry{atMs: ms, set: true}, nil
}

func buildSet(env Env, args [][]byte) (*Plan, error) {
	op := &pb.TxnOp{Type: pb.TxnOp_PUT, Key: env.Key(args[1]), Value: args[2]}
	var get bool
	var exp expiry
	for i := 3; i < len(args); i++ {
		switch a := strings.ToLower(string(args[i])); a {
		case "nx":
			op.IfAbsent = true
		case "xx":
			op.IfPresent = true
		case "get":
			get = true
		case "keepttl":
			if exp.set {
				return nil, errSyntax
			}
			op.KeepTtl = true
		case "ex", "px", "exat", "pxat":
			if exp.set || op.KeepTtl || i+1 >= len(args) {
				return nil, errSyntax
			}
			var err error
			if exp, err = parseExpiry(a, args[i+1], "set"); err != nil {
				return nil, err
			}
			i++
		default:
			return nil, errSyntax
		}
	}
	if op.IfAbsent && op.IfPresent {
		return nil, errSyntax
	}
	exp.apply(op)
	p := one(op, func(w *wire.Writer, r *pb.TxnOpResult) {
		switch {
		case get:
			bulkOrNull(w, r)
		case r.Applied:
			w.Simple("OK")
		default:
			w.Null()
		}
	})
	if get || op.IfAbsent || op.IfPresent {
		p.Key, p.CheckFirst = args[1], true
		p.OnHash = func(w *wire.Writer) bool {
			switch {
			case get:
				return wrongType(w)
			case op.IfAbsent:
				w.Null()
				return true
			}
			op.IfPresent = false // XX: the hash exists, and the string replaces it
			return false
		}
	}
	return p, nil
}

func buildSetex(env Env, args [][]byte) (*Plan, error) {
	name := strings.ToLower(string(args[0]))
	opt := "ex"
	if name == "psetex" {
		opt = "px"
	}
	exp, err := parseExpiry(opt, args[2], name)
	if err != nil {
		return nil, err
	}
	op := &pb.TxnOp{Type: pb.TxnOp_PUT, Key: env.Key(args[1]), Value: args[3]}
	exp.apply(op)
	return one(op, func(w *wire.Writer, _ *pb.TxnOpResult) { w.Simple("OK") }), nil
}

func buildGetset(env Env, args [][]byte) (*Plan, error) {
	p := one(&pb.TxnOp{Type: pb.TxnOp_PUT, Key: env.Key(args[1]), Value: args[2]}, bulkOrNull)
	p.Key, p.CheckFirst, p.OnHash = args[1], true, wrongType
	return p, nil
}

func buildGetdel(env Env, args [][]byte) (*Plan, error) {
	p := one(&pb.TxnOp{Type: pb.TxnOp_DELETE, Key: env.Key(args[1])}, bulkOrNull)
	p.Key, p.OnHash = args[1], wrongType
	return p, nil
}

func buildGetex(env Env, args [][]byte) (*Plan, error) {
	op := &pb.TxnOp{Type: pb.TxnOp_GET, Key: env.Key(args[1])}
	for i := 2; i < len(args); i++ {
		switch a := strings.ToLower(string(args[i])); a {
		case "persist":
			if op.Type != pb.TxnOp_GET {
				return nil, errSyntax
			}
			op.Type = pb.TxnOp_EXPIRE // no time: remove the expiry
		case "ex", "px", "exat", "pxat":
			if op.Type != pb.TxnOp_GET || i+1 >= len(args) {
				return nil, errSyntax
			}
			exp, err := parseExpiry(a, args[i+1], "getex")
			if err != nil {
				return nil, err
			}
			op.Type = pb.TxnOp_EXPIRE
			exp.apply(op)
			i++
		default:
			return nil, errSyntax
		}
	}
	p := one(op, bulkOrNull)
	p.Key, p.OnHash = args[1], wrongType
	return p, nil
}

func buildAppend(env Env, args [][]byte) (*Plan, error) {
	p := one(&pb.TxnOp{Type: pb.TxnOp_APPEND, Key: env.Key(args[1]), Value: args[2]}, func(w *wire.Writer, r *pb.TxnOpResult) { w.Int(r.IntValue) })
	p.Key, p.CheckFirst, p.OnHash = args[1], true, wrongType
	return p, nil
}

func buildStrlen(env Env, args [][]byte) (*Plan, error) {
	p := one(&pb.TxnOp{Type: pb.TxnOp_GET, Key: env.Key(args[1])}, func(w *wire.Writer, r *pb.TxnOpResult) { w.Int(int64(len(r.Value))) })
	p.Key, p.OnHash = args[1], wrongType
	return p, nil
}

func opError(w *wire.Writer, r *pb.TxnOpResult) bool {
	if r.Error != "" {
		w.Error("ERR " + r.Error)
		return true
	}
	return false
}

func buildIncr(env Env, args [][]byte) (*Plan, error) {
	d := int64(1)
	switch name := strings.ToLower(string(args[0])); name {
	case "decr":
		d = -1
	case "incrby", "decrby":
		n, ok := wire.ParseInt(args[2])
		if !ok || name == "decrby" && n == math.MinInt64 {
			return nil, errNotInt
		}
		d = n
		if name == "decrby" {
			d = -n
		}
	}
	p := one(&pb.TxnOp{Type: pb.TxnOp_INCR, Key: env.Key(args[1]), Delta: d}, func(w *wire.Writer, r *pb.TxnOpResult) {
		if !opError(w, r) {
			w.Int(r.IntValue)
		}
	})
	p.Key, p.CheckFirst, p.OnHash = args[1], true, wrongType
	return p, nil
}

func buildIncrFloat(env Env, args [][]byte) (*Plan, error) {
	s := string(args[2])
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || strings.TrimSpace(s) != s {
		return nil, errNotFloat
	}
	p := one(&pb.TxnOp{Type: pb.TxnOp_INCR_FLOAT, Key: env.Key(args[1]), DeltaFloat: f}, func(w *wire.Writer, r *pb.TxnOpResult) {
		if !opError(w, r) {
			w.Bulk(r.Value)
		}
	})
	p.Key, p.CheckFirst, p.OnHash = args[1], true, wrongType
	return p, nil
}

func buildExpire(env Env, args [][]byte) (*Plan, error) {
	name := strings.ToLower(string(args[0]))
	if len(args) > 3 {
		return nil, Error(fmt.Sprintf("ERR Shoal does not support %s's NX, XX, GT and LT options", strings.ToUpper(name)))
	}
	n, ok := wire.ParseInt(args[2])
	if !ok {
		return nil, errNotInt
	}
	ms := n
	if name == "expire" || name == "expireat" {
		if n > math.MaxInt64/1000 || n < math.MinInt64/1000 {
			return nil, Error(fmt.Sprintf("ERR invalid expire time in '%s' command", name))
		}
		ms = n * 1000
	}
	if ms > maxExpiryMs {
		return nil, Error(fmt.Sprintf("ERR invalid expire time in '%s' command", name))
	}
	op := &pb.TxnOp{Type: pb.TxnOp_EXPIRE, Key: env.Key(args[1])}
	switch {
	case (name == "expire" || name == "pexpire") && ms > 0:
		op.TtlMs = ms
	case name == "expireat" || name == "pexpireat":
		op.ExpireAtUnixMs = max(ms, 1)
	default:
		op.ExpireAtUnixMs = 1 // a ttl of zero or less: the key goes at once, as in Redis
	}
	p := one(op, func(w *wire.Writer, r *pb.TxnOpResult) { w.Int(b2i(r.Applied)) })
	p.Key = args[1]
	p.OnHash = func(w *wire.Writer) bool {
		w.Error("ERR Shoal expires string keys only; '" + string(args[1]) + "' is a hash")
		return true
	}
	return p, nil
}

func buildPersist(env Env, args [][]byte) (*Plan, error) {
	p := one(&pb.TxnOp{Type: pb.TxnOp_EXPIRE, Key: env.Key(args[1]), IfPresent: true}, func(w *wire.Writer, r *pb.TxnOpResult) { w.Int(b2i(r.Applied)) })
	p.Key = args[1]
	p.OnHash = func(w *wire.Writer) bool { w.Int(0); return true } // a hash never expires
	return p, nil
}

func buildTTL(env Env, args [][]byte) (*Plan, error) {
	ms := strings.ToLower(string(args[0])) == "pttl"
	p := one(&pb.TxnOp{Type: pb.TxnOp_GET, Key: env.Key(args[1])}, func(w *wire.Writer, r *pb.TxnOpResult) {
		w.Int(TTLReply(r.Found, r.ExpireAtUnixMs, env.Now(), ms))
	})
	p.Key = args[1]
	p.OnHash = func(w *wire.Writer) bool { w.Int(-1); return true }
	return p, nil
}

// TTLReply is TTL's (or, with ms, PTTL's) answer: -2 for a missing key, -1 for one without expiry,
// else the time left, in seconds rounded to the nearest as Redis does, or in milliseconds.
func TTLReply(found bool, expireAtMs, nowMs int64, ms bool) int64 {
	switch {
	case !found:
		return -2
	case expireAtMs == 0:
		return -1
	}
	left := max(expireAtMs-nowMs, 0)
	if ms {
		return left
	}
	return (left + 500) / 1000
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func buildMget(env Env, args [][]byte) (*Plan, error) {
	p := &Plan{}
	for _, k := range args[1:] {
		p.Ops = append(p.Ops, &pb.TxnOp{Type: pb.TxnOp_GET, Key: env.Key(k)})
	}
	p.Reply = func(w *wire.Writer, rs []*pb.TxnOpResult) {
		w.Array(len(rs))
		for _, r := range rs {
			bulkOrNull(w, r)
		}
	}
	return p, nil
}

func buildMset(env Env, args [][]byte) (*Plan, error) {
	if len(args)%2 != 1 {
		return nil, Error("ERR wrong number of arguments for 'mset' command")
	}
	p := &Plan{Reply: func(w *wire.Writer, _ []*pb.TxnOpResult) { w.Simple("OK") }}
	for i := 1; i < len(args); i += 2 {
		p.Ops = append(p.Ops, &pb.TxnOp{Type: pb.TxnOp_PUT, Key: env.Key(args[i]), Value: args[i+1]})
	}
	return p, nil
}

// buildDel deletes string values only (inside MULTI; the listener's own DEL also removes hashes).
func buildDel(env Env, args [][]byte) (*Plan, error) {
	p := &Plan{}
	for _, k := range args[1:] {
		p.Ops = append(p.Ops, &pb.TxnOp{Type: pb.TxnOp_DELETE, Key: env.Key(k)})
	}
	p.Reply = func(w *wire.Writer, rs []*pb.TxnOpResult) {
		n := int64(0)
		for _, r := range rs {
			n += b2i(r.Applied)
		}
		w.Int(n)
	}
	return p, nil
}

func buildExists(env Env, args [][]byte) (*Plan, error) {
	p, _ := buildMget(env, args)
	p.Reply = func(w *wire.Writer, rs []*pb.TxnOpResult) {
		n := int64(0)
		for _, r := range rs {
			n += b2i(r.Found)
		}
		w.Int(n)
	}
	return p, nil
}
