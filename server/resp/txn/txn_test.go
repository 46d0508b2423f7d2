package txn

import (
	"bufio"
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/server/resp/wire"
)

var testEnv = Env{Key: func(k []byte) []byte { return append([]byte("s:"), k...) }, Now: func() int64 { return 1000 }}

func args(s string) [][]byte {
	var a [][]byte
	for _, f := range strings.Fields(s) {
		a = append(a, []byte(f))
	}
	return a
}

func TestTTLReply(t *testing.T) {
	for _, tc := range []struct {
		found    bool
		exp, now int64
		ms       bool
		want     int64
	}{
		{false, 0, 0, false, -2}, {true, 0, 0, false, -1}, {true, 0, 0, true, -1},
		{true, 10_499, 0, false, 10}, {true, 10_500, 0, false, 11}, {true, 10_500, 0, true, 10_500},
		{true, 5, 10, true, 0},
	} {
		if got := TTLReply(tc.found, tc.exp, tc.now, tc.ms); got != tc.want {
			t.Errorf("TTLReply(%v, %d, %d, %v) = %d, want %d", tc.found, tc.exp, tc.now, tc.ms, got, tc.want)
		}
	}
}

func TestBuild(t *testing.T) {
	for _, tc := range []struct {
		cmd  string
		want string // the first op, or the error
	}{
		{"SET k v EX 10", "PUT ttl=10000"},
		{"SET k v PXAT 5 NX", "PUT at=5 nx"},
		{"SET k v KEEPTTL XX GET", "PUT keep xx"},
		{"SET k v EX 1 PX 2", "ERR syntax error"},
		{"SET k v EX 0", "ERR invalid expire time in 'set' command"},
		{"SET k v EX 9223372036854775807", "ERR invalid expire time in 'set' command"},
		{"SET k v EX x", "ERR value is not an integer or out of range"},
		{"SETEX k 5 v", "PUT ttl=5000"},
		{"PSETEX k 5 v", "PUT ttl=5"},
		{"EXPIRE k -1", "EXPIRE at=1"},
		{"PEXPIRE k 9223372036854775807", "ERR invalid expire time in 'pexpire' command"},
		{"SET k v PX 9223372036854775807", "ERR invalid expire time in 'set' command"},
		{"EXPIREAT k 7", "EXPIRE at=7000"},
		{"PEXPIRE k 7", "EXPIRE ttl=7"},
		{"EXPIRE k 1 GT", "ERR Shoal does not support EXPIRE's NX, XX, GT and LT options"},
		{"GETEX k PERSIST", "EXPIRE"},
		{"GETEX k PERSIST EX 1", "ERR syntax error"},
		{"PERSIST k", "EXPIRE xx"},
		{"DECRBY k 5", "INCR delta=-5"},
		{"DECRBY k -9223372036854775808", "ERR value is not an integer or out of range"},
		{"INCRBYFLOAT k inf", "ERR value is not a valid float"},
		{"HSET k f v", "ERR 'hset' is not supported inside MULTI by Shoal (string commands only)"},
	} {
		p, err := Build(testEnv, args(tc.cmd))
		got := ""
		if err != nil {
			got = err.Error()
		} else {
			got = describe(p.Ops[0])
		}
		if got != tc.want {
			t.Errorf("%s: %q, want %q", tc.cmd, got, tc.want)
		}
	}
}

func describe(op *pb.TxnOp) string {
	parts := []string{op.Type.String()}
	for _, f := range []struct {
		on   bool
		text string
	}{
		{op.TtlMs != 0, "ttl=" + strconv.FormatInt(op.TtlMs, 10)},
		{op.ExpireAtUnixMs != 0, "at=" + strconv.FormatInt(op.ExpireAtUnixMs, 10)},
		{op.KeepTtl, "keep"}, {op.IfAbsent, "nx"}, {op.IfPresent, "xx"},
		{op.Delta != 0, "delta=" + strconv.FormatInt(op.Delta, 10)},
	} {
		if f.on {
			parts = append(parts, f.text)
		}
	}
	return strings.Join(parts, " ")
}

func TestMultiRequestAndReply(t *testing.T) {
	m := NewMulti()
	for _, c := range []string{"INCR n", "GET n"} {
		p, err := Build(testEnv, args(c))
		if err != nil {
			t.Fatal(err)
		}
		m.Queue(p)
	}
	req := m.Request([]Watched{{Key: []byte("s:w"), Found: true, ModIndex: 9}, {Key: []byte("s:x")}})
	if len(req.Success) != 2 || req.Compares[0].Target != pb.Compare_MOD_INDEX || req.Compares[0].Number != 9 || req.Compares[1].Target != pb.Compare_EXISTS {
		t.Fatalf("request %v", req)
	}
	for _, tc := range []struct {
		resp *pb.TxnResponse
		want string
	}{
		{&pb.TxnResponse{Succeeded: false}, "*-1\r\n"},
		{&pb.TxnResponse{Succeeded: true, Results: []*pb.TxnOpResult{{IntValue: 3, Applied: true}, {Found: true, Value: []byte("3")}}}, "*2\r\n:3\r\n$1\r\n3\r\n"},
	} {
		var b bytes.Buffer
		w := wire.NewWriter(bufio.NewWriter(&b))
		m.Reply(w, tc.resp)
		w.Flush()
		if b.String() != tc.want {
			t.Errorf("reply %q, want %q", b.String(), tc.want)
		}
	}
}

// FuzzBuild builds arbitrary commands (every command of the package among the seeds) and writes
// their replies from arbitrary results: it must never panic, and a plan must have ops.
func FuzzBuild(f *testing.F) {
	for name := range builders {
		f.Add(name+" k v", true, int64(5), []byte("7"))
	}
	for _, s := range []string{"SET k v EX 10 GET", "SET k v PXAT 1 NX", "SET k v KEEPTTL XX", "GETEX k PX 5",
		"GETEX k PERSIST", "EXPIRE k -5", "PEXPIREAT k 99", "INCRBYFLOAT k 1e3", "MSET a 1 b 2", "DEL a b", "EXISTS a a"} {
		f.Add(s, false, int64(-1), []byte{})
	}
	f.Fuzz(func(t *testing.T, cmd string, found bool, n int64, val []byte) {
		a := args(cmd)
		if len(a) < 2 {
			return
		}
		p, err := Build(testEnv, a)
		if err != nil {
			return
		}
		if len(p.Ops) == 0 || p.Reply == nil {
			t.Fatalf("%q: plan without ops or reply", cmd)
		}
		rs := make([]*pb.TxnOpResult, len(p.Ops))
		for i := range rs {
			rs[i] = &pb.TxnOpResult{Found: found, Value: val, ExpireAtUnixMs: n, IntValue: n, Applied: found}
		}
		var b bytes.Buffer
		w := wire.NewWriter(bufio.NewWriter(&b))
		p.Reply(w, rs)
		if p.OnHash != nil {
			p.OnHash(w)
		}
		w.Flush()
		if b.Len() == 0 {
			t.Fatalf("%q: no reply", cmd)
		}
	})
}
