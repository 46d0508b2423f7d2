package eval

import (
	"testing"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/storage"
	"github.com/shoaldb/shoal/storage/stored"
)

// TestTxnSequence runs commands one after another on one store, at increasing raft indexes and
// clocks, and checks each transaction's results.
func TestTxnSequence(t *testing.T) {
	eng, err := storage.Open(t.TempDir(), storage.Options{CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	key := func(k []byte) []byte { return storage.UserDataKey(k) }
	k := []byte("k")
	put := func(v string, ttl int64) *pb.TxnOp {
		return &pb.TxnOp{Type: pb.TxnOp_PUT, Key: k, Value: []byte(v), TtlMs: ttl}
	}
	get := &pb.TxnOp{Type: pb.TxnOp_GET, Key: k}
	ver := func(op pb.Compare_Op, n uint64) *pb.Compare {
		return &pb.Compare{Key: k, Target: pb.Compare_VERSION, Op: op, Number: n}
	}
	type step struct {
		name  string
		clock int64
		txn   *pb.TxnRequest
		ok    bool
		check func(t *testing.T, rs []*pb.TxnOpResult)
	}
	want := func(found bool, val string, version uint64) func(*testing.T, []*pb.TxnOpResult) {
		return func(t *testing.T, rs []*pb.TxnOpResult) {
			r := rs[len(rs)-1]
			if r.Found != found || string(r.Value) != val || r.Version != version {
				t.Errorf("last result %v, want found=%v value=%q version=%d", r, found, val, version)
			}
		}
	}
	steps := []step{
		{"create with ttl", 1000, &pb.TxnRequest{Compares: []*pb.Compare{{Key: k, Target: pb.Compare_EXISTS, Exists: false}}, Success: []*pb.TxnOp{put("1", 500), get}}, true, want(true, "1", 1)},
		{"version compare", 1100, &pb.TxnRequest{Compares: []*pb.Compare{ver(pb.Compare_EQUAL, 1)}, Success: []*pb.TxnOp{{Type: pb.TxnOp_INCR, Key: k, Delta: 41}, get}}, true,
			func(t *testing.T, rs []*pb.TxnOpResult) {
				if rs[0].IntValue != 42 || rs[1].ExpireAtUnixMs != 1500 || rs[1].Version != 2 {
					t.Errorf("incr kept ttl? %v %v", rs[0], rs[1])
				}
			}},
		{"stale version fails", 1200, &pb.TxnRequest{Compares: []*pb.Compare{ver(pb.Compare_EQUAL, 1)}, Success: []*pb.TxnOp{put("x", 0)}, Failure: []*pb.TxnOp{get}}, false, want(true, "42", 2)},
		{"expired key is absent", 1500, &pb.TxnRequest{Compares: []*pb.Compare{{Key: k, Target: pb.Compare_EXISTS, Exists: true}}, Failure: []*pb.TxnOp{get}}, false, want(false, "", 0)},
		{"sweep deletes expired", 1501, &pb.TxnRequest{Success: []*pb.TxnOp{{Type: pb.TxnOp_DELETE, Key: k, OnlyExpired: true}}}, true,
			func(t *testing.T, rs []*pb.TxnOpResult) {
				if !rs[0].Applied {
					t.Errorf("sweep did not delete: %v", rs[0])
				}
			}},
		{"recreate, sweep spares live key", 1600, &pb.TxnRequest{Success: []*pb.TxnOp{put("2", 0), {Type: pb.TxnOp_DELETE, Key: k, OnlyExpired: true}, get}}, true, want(true, "2", 1)},
		{"persist without ttl is a no-op", 1700, &pb.TxnRequest{Success: []*pb.TxnOp{{Type: pb.TxnOp_EXPIRE, Key: k, IfPresent: true}}}, true,
			func(t *testing.T, rs []*pb.TxnOpResult) {
				if rs[0].Applied {
					t.Errorf("persist applied on a key without expiry")
				}
			}},
		{"expire in the past deletes", 1800, &pb.TxnRequest{Success: []*pb.TxnOp{{Type: pb.TxnOp_EXPIRE, Key: k, ExpireAtUnixMs: 1}, get}}, true, want(false, "", 0)},
		{"set nx, append, incr error", 1900, &pb.TxnRequest{Success: []*pb.TxnOp{
			{Type: pb.TxnOp_PUT, Key: k, Value: []byte("a"), IfAbsent: true}, {Type: pb.TxnOp_PUT, Key: k, Value: []byte("b"), IfAbsent: true},
			{Type: pb.TxnOp_APPEND, Key: k, Value: []byte("bc")}, {Type: pb.TxnOp_INCR, Key: k, Delta: 1}, get}}, true,
			func(t *testing.T, rs []*pb.TxnOpResult) {
				if !rs[0].Applied || rs[1].Applied || rs[2].IntValue != 3 || rs[3].Error == "" || string(rs[4].Value) != "abc" {
					t.Errorf("results %v", rs)
				}
			}},
		{"incrbyfloat", 2000, &pb.TxnRequest{Success: []*pb.TxnOp{put("10.1", 0), {Type: pb.TxnOp_INCR_FLOAT, Key: k, DeltaFloat: 0.2}}}, true,
			func(t *testing.T, rs []*pb.TxnOpResult) {
				if string(rs[1].Value) != "10.3" {
					t.Errorf("10.1+0.2 = %q, want 10.3", rs[1].Value)
				}
			}},
	}
	for i, s := range steps {
		b := eng.NewIndexedBatch()
		out, err := Apply(b, &pb.Command{ClockUnixMs: s.clock, Txn: s.txn}, Env{DataKey: key, Index: uint64(10 + i)})
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if err := b.Commit(false); err != nil {
			t.Fatal(err)
		}
		b.Close()
		if out.Txn.Succeeded != s.ok {
			t.Errorf("%s: succeeded %v, want %v", s.name, out.Txn.Succeeded, s.ok)
		}
		t.Run(s.name, func(t *testing.T) { s.check(t, out.Txn.Results) })
	}
	raw, _, _ := eng.Get(key(k))
	if v, _ := stored.Decode(raw); v.ModIndex != uint64(10+len(steps)-1) {
		t.Errorf("mod index %d, want the last command's index %d", v.ModIndex, 10+len(steps)-1)
	}
}
