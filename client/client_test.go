package client_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/client/clienttest"
	"github.com/shoaldb/shoal/pb"
)

func newClient(t *testing.T, cl *clienttest.Cluster, cfg client.Config) *client.Client {
	t.Helper()
	if cfg.Addrs == nil {
		cfg.Addrs = cl.Addrs()[:1]
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = 2 * time.Second
	}
	c, err := client.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

// onceFault injects f into the first call of method (counting only calls of that method).
func onceFault(method string, f *clienttest.Fault) func(clienttest.Call) *clienttest.Fault {
	var n atomic.Int32
	return func(c clienttest.Call) *clienttest.Fault {
		if c.Method == method && n.Add(1) == 1 {
			return f
		}
		return nil
	}
}

func TestNotLeaderRedirect(t *testing.T) {
	for _, omit := range []bool{false, true} {
		t.Run(fmt.Sprintf("omitLeaderAddr=%v", omit), func(t *testing.T) {
			cl := clienttest.New(t, 2)
			cl.OmitLeaderAddr = omit
			c := newClient(t, cl, client.Config{})
			if err := c.Put(ctx(t), []byte("a"), []byte("1")); err != nil {
				t.Fatal(err)
			}
			cl.SetLeader(clienttest.FirstRangeID, 2)
			cl.ResetCalls()
			if err := c.Put(ctx(t), []byte("b"), []byte("2")); err != nil {
				t.Fatal(err)
			}
			if v, _ := cl.Value("b"); v != "2" {
				t.Fatalf("b = %q", v)
			}
			if got := cl.CallsTo(1, "Put"); got != 1 {
				t.Errorf("puts to old leader = %d, want 1", got)
			}
			if got := cl.CallsTo(2, "Put"); got != 1 {
				t.Errorf("puts to new leader = %d, want 1", got)
			}
			wantLookups := 0
			if omit {
				wantLookups = 1 // no hint: the range is looked up again
			}
			if got := cl.Calls("RangeLookup"); got != wantLookups {
				t.Errorf("lookups = %d, want %d", got, wantLookups)
			}
			// The new leader is cached: the next request goes straight there.
			cl.ResetCalls()
			if _, _, err := c.Get(ctx(t), []byte("b")); err != nil {
				t.Fatal(err)
			}
			if got := cl.CallsTo(2, "Get"); got != 1 || cl.Calls("Get") != 1 {
				t.Errorf("gets: node 2 %d, total %d; want 1, 1", got, cl.Calls("Get"))
			}
		})
	}
}

func TestRangeMovedRelookup(t *testing.T) {
	cl := clienttest.New(t, 2)
	c := newClient(t, cl, client.Config{})
	cl.Set("x", "old")
	if _, _, err := c.Get(ctx(t), []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := cl.Split("m"); err != nil {
		t.Fatal(err)
	}
	cl.ResetCalls()
	if err := c.Put(ctx(t), []byte("x"), []byte("new")); err != nil {
		t.Fatal(err)
	}
	if v, _ := cl.Value("x"); v != "new" {
		t.Fatalf("x = %q", v)
	}
	if got := cl.Calls("Put"); got != 2 {
		t.Errorf("puts = %d, want 2 (RANGE_MOVED, then the new range)", got)
	}
	if got := cl.Calls("RangeLookup"); got != 1 {
		t.Errorf("lookups = %d, want 1", got)
	}
}

// TestRetryRules checks, per server error code, whether each kind of operation is retried.
func TestRetryRules(t *testing.T) {
	type op struct {
		name   string
		method string
		write  bool
		do     func(context.Context, *client.Client) error
	}
	ops := []op{
		{"get", "Get", false, func(ctx context.Context, c *client.Client) error {
			_, _, err := c.Get(ctx, []byte("k"))
			return err
		}},
		{"scan", "Scan", false, func(ctx context.Context, c *client.Client) error {
			_, err := c.Scan(ctx, []byte("a"), []byte("z"), 0, false)
			return err
		}},
		{"put", "Put", true, func(ctx context.Context, c *client.Client) error {
			return c.Put(ctx, []byte("k"), []byte("v2"))
		}},
		{"delete", "Delete", true, func(ctx context.Context, c *client.Client) error {
			_, err := c.Delete(ctx, []byte("k"))
			return err
		}},
		{"cas", "CompareAndSwap", true, func(ctx context.Context, c *client.Client) error {
			_, _, _, err := c.CompareAndSwap(ctx, []byte("k"), []byte("v"), false, []byte("v2"))
			return err
		}},
		{"batch", "BatchWrite", true, func(ctx context.Context, c *client.Client) error {
			return c.BatchWrite(ctx, []*pb.Mutation{{Key: []byte("k"), Value: []byte("v2")}, {Key: []byte("k2"), Delete: true}})
		}},
	}
	cases := []struct {
		name         string
		fault        *clienttest.Fault
		sentinel     error
		writeRetried bool
		readRetried  bool
	}{
		{"ambiguous", &clienttest.Fault{Apply: true, Err: &pb.Error{Code: pb.ErrorCode_AMBIGUOUS, Message: "leadership lost"}}, client.ErrAmbiguous, false, true},
		{"timeout", &clienttest.Fault{Err: &pb.Error{Code: pb.ErrorCode_TIMEOUT}}, client.ErrTimeout, false, true},
		{"grpc unavailable after send", &clienttest.Fault{Status: status.Error(codes.Unavailable, "connection reset")}, client.ErrAmbiguous, false, true},
		{"grpc unknown after send", &clienttest.Fault{Status: status.Error(codes.Unknown, "boom")}, client.ErrAmbiguous, false, true},
		{"unavailable", &clienttest.Fault{Err: &pb.Error{Code: pb.ErrorCode_UNAVAILABLE}}, client.ErrUnavailable, true, true},
		{"overloaded", &clienttest.Fault{Err: &pb.Error{Code: pb.ErrorCode_OVERLOADED}}, client.ErrOverloaded, true, true},
		{"invalid argument", &clienttest.Fault{Err: &pb.Error{Code: pb.ErrorCode_INVALID_ARGUMENT, Message: "bad"}}, client.ErrInvalidArgument, false, false},
		{"unauthenticated", &clienttest.Fault{Err: &pb.Error{Code: pb.ErrorCode_UNAUTHENTICATED}}, client.ErrUnauthenticated, false, false},
		{"grpc unauthenticated", &clienttest.Fault{Status: status.Error(codes.Unauthenticated, "no token")}, client.ErrUnauthenticated, false, false},
		{"internal", &clienttest.Fault{Err: &pb.Error{Code: pb.ErrorCode_INTERNAL}}, client.ErrInternal, false, false},
	}
	for _, tc := range cases {
		for _, o := range ops {
			t.Run(tc.name+"/"+o.name, func(t *testing.T) {
				cl := clienttest.New(t, 2)
				cl.Set("k", "v")
				c := newClient(t, cl, client.Config{})
				if _, err := c.Lookup(ctx(t), []byte("k")); err != nil { // warm the cache
					t.Fatal(err)
				}
				cl.SetFault(onceFault(o.method, tc.fault))
				err := o.do(ctx(t), c)
				retried := tc.readRetried
				if o.write {
					retried = tc.writeRetried
				}
				calls := cl.Calls(o.method)
				if retried {
					if err != nil {
						t.Fatalf("err = %v, want success after a retry", err)
					}
					if calls < 2 {
						t.Errorf("%s calls = %d, want a retry", o.method, calls)
					}
					return
				}
				if !errors.Is(err, tc.sentinel) {
					t.Fatalf("err = %v, want %v", err, tc.sentinel)
				}
				if calls != 1 {
					t.Errorf("%s calls = %d, want 1 (not retried)", o.method, calls)
				}
			})
		}
	}
}

func TestAmbiguousPutIsAppliedButReported(t *testing.T) {
	cl := clienttest.New(t, 1)
	c := newClient(t, cl, client.Config{})
	cl.SetFault(onceFault("Put", &clienttest.Fault{Apply: true, Err: &pb.Error{Code: pb.ErrorCode_AMBIGUOUS}}))
	err := c.Put(ctx(t), []byte("k"), []byte("v"))
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Code != pb.ErrorCode_AMBIGUOUS {
		t.Fatalf("err = %v, want an AMBIGUOUS *client.Error", err)
	}
	if v, ok := cl.Value("k"); !ok || v != "v" {
		t.Fatalf("fake did not apply the write: %q %v", v, ok)
	}
}

func TestTransportFailureBeforeSendIsRetried(t *testing.T) {
	cl := clienttest.New(t, 3)
	// The client knows node 2 only; it learns from the lookup that node 1 leads, but never connects
	// to it before node 1 dies (a connection that breaks under a sent write is ambiguous instead).
	c := newClient(t, cl, client.Config{Addrs: []string{cl.Addr(2)}})
	if _, err := c.Lookup(ctx(t), []byte("k")); err != nil {
		t.Fatal(err)
	}
	cl.StopNode(1)
	cl.SetLeader(clienttest.FirstRangeID, 2)
	if err := c.Put(ctx(t), []byte("k"), []byte("v2")); err != nil {
		t.Fatalf("put after the leader died: %v", err)
	}
	if v, _ := cl.Value("k"); v != "v2" {
		t.Fatalf("k = %q", v)
	}
	// A dead seed address is skipped by lookups too.
	c = newClient(t, cl, client.Config{Addrs: []string{cl.Addr(1), cl.Addr(3)}})
	if _, _, err := c.Get(ctx(t), []byte("k")); err != nil {
		t.Fatalf("get with a dead seed: %v", err)
	}
}

func TestMaxAttemptsAndDeadline(t *testing.T) {
	cl := clienttest.New(t, 1)
	cl.SetFault(func(c clienttest.Call) *clienttest.Fault {
		if c.Method == "Get" {
			return &clienttest.Fault{Err: &pb.Error{Code: pb.ErrorCode_UNAVAILABLE, Message: "no quorum"}}
		}
		return nil
	})
	c := newClient(t, cl, client.Config{MaxAttempts: 3})
	_, _, err := c.Get(ctx(t), []byte("k"))
	if !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("err = %v, want unavailable", err)
	}
	if got := cl.Calls("Get"); got != 3 {
		t.Errorf("gets = %d, want 3", got)
	}

	c = newClient(t, cl, client.Config{MaxAttempts: 1000})
	dctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, _, err = c.Get(dctx, []byte("k"))
	if !errors.Is(err, client.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want timeout wrapping context.DeadlineExceeded", err)
	}
}

func scanKeys(kvs []*pb.KeyValue) string {
	var b strings.Builder
	for _, kv := range kvs {
		b.Write(kv.GetKey())
	}
	return b.String()
}

func TestScanAcrossRanges(t *testing.T) {
	const all = "abcdefghijklmnopqrstuvwxyz"
	rev := func(s string) string {
		r := []byte(s)
		for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
			r[i], r[j] = r[j], r[i]
		}
		return string(r)
	}
	cases := []struct {
		start, end string
		limit      int
		reverse    bool
		want       string
	}{
		{"", "", 0, false, all},
		{"", "", 15, false, all[:15]},
		{"c", "p", 0, false, "cdefghijklmno"},
		{"m", "", 3, false, "mno"},
		{"l", "n", 0, false, "lm"},
		{"", "", 0, true, rev(all)},
		{"", "", 15, true, rev(all)[:15]},
		{"", "m", 0, true, rev(all[:12])}, // end exactly at a range boundary
		{"c", "p", 0, true, rev("cdefghijklmno")},
		{"c", "p", 5, true, "onmlk"},
		{"x", "x", 0, false, ""},
		{"zz", "", 0, false, ""},
		{"", "a", 0, true, ""},
	}
	for _, splits := range [][]string{{"m"}, {"h", "m", "t"}} {
		for _, budget := range []int{0, 4} {
			cl := clienttest.New(t, 2)
			cl.ScanBudget = budget
			for _, k := range all {
				cl.Set(string(k), "v"+string(k))
			}
			c := newClient(t, cl, client.Config{})
			for _, tc := range cases {
				name := fmt.Sprintf("splits=%v/budget=%d/[%q,%q)/limit=%d/reverse=%v", splits, budget, tc.start, tc.end, tc.limit, tc.reverse)
				t.Run(name, func(t *testing.T) {
					// Split after the first case so that a stale cache (one range) meets split ranges.
					for _, s := range splits {
						if rd, _ := cl.Range(s); string(rd.GetStartKey()) != s {
							if _, _, err := cl.Split(s); err != nil {
								t.Fatal(err)
							}
						}
					}
					kvs, err := c.Scan(ctx(t), []byte(tc.start), []byte(tc.end), tc.limit, tc.reverse)
					if err != nil {
						t.Fatal(err)
					}
					if got := scanKeys(kvs); got != tc.want {
						t.Fatalf("got %q, want %q (cluster %v)", got, tc.want, cl)
					}
					for _, kv := range kvs {
						if string(kv.GetValue()) != "v"+string(kv.GetKey()) {
							t.Fatalf("value of %q = %q", kv.GetKey(), kv.GetValue())
						}
					}
				})
			}
		}
	}
}

func TestScanWithStaleCacheBeforeSplit(t *testing.T) {
	cl := clienttest.New(t, 2)
	for _, k := range "abcdefghijklmnopqrstuvwxyz" {
		cl.Set(string(k), "v")
	}
	c := newClient(t, cl, client.Config{})
	if _, err := c.Scan(ctx(t), nil, nil, 0, false); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"e", "q"} {
		if _, _, err := cl.Split(s); err != nil {
			t.Fatal(err)
		}
	}
	for _, reverse := range []bool{false, true} {
		kvs, err := c.Scan(ctx(t), nil, nil, 0, reverse)
		if err != nil {
			t.Fatal(err)
		}
		if len(kvs) != 26 {
			t.Fatalf("reverse=%v: %d keys, want 26: %q", reverse, len(kvs), scanKeys(kvs))
		}
	}
}

func TestClientSideValidation(t *testing.T) {
	cl := clienttest.New(t, 1)
	c := newClient(t, cl, client.Config{})
	cases := []struct {
		name string
		err  error
	}{
		{"get empty key", func() error { _, _, err := c.Get(ctx(t), nil); return err }()},
		{"put empty key", c.Put(ctx(t), []byte{}, []byte("v"))},
		{"delete empty key", func() error { _, err := c.Delete(ctx(t), nil); return err }()},
		{"cas empty key", func() error { _, _, _, err := c.CompareAndSwap(ctx(t), nil, nil, true, []byte("v")); return err }()},
		{"scan start after end", func() error { _, err := c.Scan(ctx(t), []byte("b"), []byte("a"), 0, false); return err }()},
		{"scan negative limit", func() error { _, err := c.Scan(ctx(t), nil, nil, -1, false); return err }()},
		{"batch empty", c.BatchWrite(ctx(t), nil)},
		{"transfer range 0", c.TransferLeader(ctx(t), 0, 1)},
	}
	for _, tc := range cases {
		if !errors.Is(tc.err, client.ErrInvalidArgument) {
			t.Errorf("%s: err = %v, want invalid argument", tc.name, tc.err)
		}
	}
	if got := cl.Calls("RangeLookup"); got != 0 {
		t.Errorf("validation failures made %d lookups", got)
	}
	_, _, err := c.Get(ctx(t), nil)
	if got := err.Error(); got != "invalid argument: key is empty" {
		t.Errorf("message = %q", got)
	}
}

func TestBatchWriteAcrossRanges(t *testing.T) {
	cl := clienttest.New(t, 1)
	if _, _, err := cl.Split("m"); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, cl, client.Config{})
	err := c.BatchWrite(ctx(t), []*pb.Mutation{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("z"), Value: []byte("2")}})
	if !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("err = %v, want invalid argument", err)
	}
	if got := cl.Calls("BatchWrite"); got != 0 {
		t.Errorf("batch writes sent = %d, want 0", got)
	}
	if err := c.BatchWrite(ctx(t), []*pb.Mutation{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("b"), Value: []byte("2")}}); err != nil {
		t.Fatal(err)
	}
}

// WriteMany sends one batch per range, keeps each key's writes in their order, and still writes
// everything when the client learns of a split only from the refused batch.
func TestWriteManyGroupsByRange(t *testing.T) {
	cl := clienttest.New(t, 1)
	c := newClient(t, cl, client.Config{})
	bg := ctx(t)
	if err := c.Put(bg, []byte("a"), []byte("0")); err != nil { // the cache knows one range
		t.Fatal(err)
	}
	for _, k := range []string{"g", "m", "t"} {
		if _, _, err := cl.Split(k); err != nil {
			t.Fatal(err)
		}
	}
	var muts []*pb.Mutation
	for i := range 40 {
		k := []byte{byte('a' + i%26)}
		muts = append(muts, &pb.Mutation{Key: k, Value: []byte(fmt.Sprint(i))})
	}
	if err := c.WriteMany(bg, muts); err != nil {
		t.Fatal(err)
	}
	for i := 14; i < 40; i++ { // the last write of each key wins
		k := []byte{byte('a' + i%26)}
		if v, ok, err := c.Get(bg, k); err != nil || !ok || string(v) != fmt.Sprint(i) {
			t.Fatalf("%s = %q %v %v, want %d", k, v, ok, err, i)
		}
	}
	before := cl.Calls("BatchWrite")
	if err := c.WriteMany(bg, muts); err != nil { // the cache knows the four ranges now
		t.Fatal(err)
	}
	if got := cl.Calls("BatchWrite") - before; got != 4 {
		t.Errorf("%d batches for keys in 4 ranges, want 4", got)
	}
}

func TestOpsEndToEnd(t *testing.T) {
	cl := clienttest.New(t, 3)
	c := newClient(t, cl, client.Config{})
	bg := ctx(t)
	if err := c.Put(bg, []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := c.Get(bg, []byte("k")); err != nil || !ok || string(v) != "v" {
		t.Fatalf("get = %q %v %v", v, ok, err)
	}
	if _, ok, err := c.Get(bg, []byte("missing")); err != nil || ok {
		t.Fatalf("get missing = %v %v", ok, err)
	}
	swapped, cur, found, err := c.CompareAndSwap(bg, []byte("k"), []byte("nope"), false, []byte("w"))
	if err != nil || swapped || !found || string(cur) != "v" {
		t.Fatalf("failed cas = %v %q %v %v", swapped, cur, found, err)
	}
	if swapped, _, _, err := c.CompareAndSwap(bg, []byte("k"), []byte("v"), false, []byte("w")); err != nil || !swapped {
		t.Fatalf("cas = %v %v", swapped, err)
	}
	if swapped, _, _, err := c.CompareAndSwap(bg, []byte("new"), nil, true, []byte("x")); err != nil || !swapped {
		t.Fatalf("cas absent = %v %v", swapped, err)
	}
	if ok, err := c.CompareAndDelete(bg, []byte("new"), []byte("x")); err != nil || !ok {
		t.Fatalf("cad = %v %v", ok, err)
	}
	if found, err := c.Delete(bg, []byte("k")); err != nil || !found {
		t.Fatalf("delete = %v %v", found, err)
	}
	if found, err := c.Delete(bg, []byte("k")); err != nil || found {
		t.Fatalf("delete again = %v %v", found, err)
	}

	left, right, err := c.Split(bg, []byte("m"))
	if err != nil || string(left.GetEndKey()) != "m" || string(right.GetStartKey()) != "m" {
		t.Fatalf("split = %v %v %v", left, right, err)
	}
	if err := c.TransferLeader(bg, right.GetRangeId(), 3); err != nil {
		t.Fatal(err)
	}
	cl.ResetCalls()
	if err := c.Put(bg, []byte("x"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	if cl.CallsTo(3, "Put") != 1 || cl.Calls("Put") != 1 || cl.Calls("RangeLookup") != 0 {
		t.Errorf("put after split+transfer did not go straight to node 3: node3=%d total=%d lookups=%d",
			cl.CallsTo(3, "Put"), cl.Calls("Put"), cl.Calls("RangeLookup"))
	}
	nodes, err := c.Nodes(bg)
	if err != nil || len(nodes) != 3 {
		t.Fatalf("nodes = %v %v", nodes, err)
	}
	ranges, err := c.Ranges(bg)
	if err != nil || len(ranges) != 3 { // meta, left, right
		t.Fatalf("ranges = %v %v", ranges, err)
	}
	lr, err := c.Lookup(bg, []byte("x"))
	if err != nil || lr.GetRange().GetRangeId() != right.GetRangeId() || lr.GetLeaderNodeId() != 3 {
		t.Fatalf("lookup = %v %v", lr, err)
	}
}

func TestFollowerRead(t *testing.T) {
	cl := clienttest.New(t, 3)
	cl.Set("k", "v")
	c := newClient(t, cl, client.Config{})
	for range 6 {
		v, ok, err := c.Get(ctx(t), []byte("k"), client.FollowerRead())
		if err != nil || !ok || string(v) != "v" {
			t.Fatalf("follower read = %q %v %v", v, ok, err)
		}
	}
	for id := uint64(1); id <= 3; id++ {
		if cl.CallsTo(id, "Get") == 0 {
			t.Errorf("node %d served no follower read", id)
		}
	}
}

func TestAuthToken(t *testing.T) {
	cl := clienttest.New(t, 1)
	cl.Token = "s3cret"
	c := newClient(t, cl, client.Config{})
	if err := c.Put(ctx(t), []byte("k"), []byte("v")); !errors.Is(err, client.ErrUnauthenticated) {
		t.Fatalf("no token: err = %v", err)
	}
	c = newClient(t, cl, client.Config{AuthToken: "s3cret"})
	if err := c.Put(ctx(t), []byte("k"), []byte("v")); err != nil {
		t.Fatalf("with token: %v", err)
	}
}

func TestClosed(t *testing.T) {
	cl := clienttest.New(t, 1)
	c := newClient(t, cl, client.Config{})
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Get(ctx(t), []byte("k")); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("err = %v, want ErrClosed", err)
	}
}

// cachedLeader starts a 3-node fake cluster and a client that has written key "a", so it caches the
// range and its leader; next is the node the tests move the leadership to.
func cachedLeader(t *testing.T) (cl *clienttest.Cluster, c *client.Client, leader, next uint64) {
	t.Helper()
	cl = clienttest.New(t, 3)
	c = newClient(t, cl, client.Config{Addrs: cl.Addrs()})
	if err := c.Put(ctx(t), []byte("a"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	_, leader = cl.Range("a")
	return cl, c, leader, leader%3 + 1
}

// TestUnavailableLeaderIsForgotten: the node the cache names as leader answers UNAVAILABLE (a node
// restarting answers "node is starting" until its store is open) after the leadership moved; the
// client asks another voter instead of waiting the node out.
func TestUnavailableLeaderIsForgotten(t *testing.T) {
	cl, c, leader, next := cachedLeader(t)
	cl.SetLeader(clienttest.FirstRangeID, next)
	cl.SetFault(func(call clienttest.Call) *clienttest.Fault {
		if call.Node == leader {
			return &clienttest.Fault{Err: &pb.Error{Code: pb.ErrorCode_UNAVAILABLE, Message: "node is starting"}}
		}
		return nil
	})
	cl.ResetCalls()
	for i := range 5 {
		if err := c.Put(ctx(t), []byte("a"), []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	if got := cl.CallsTo(leader, "Put"); got != 1 {
		t.Errorf("puts to the starting node = %d, want 1 (then the new leader is learned)", got)
	}
	if got := cl.CallsTo(next, "Put"); got != 5 {
		t.Errorf("puts to the new leader = %d, want 5", got)
	}
}

// TestDeadLeaderFailsOverWithoutALookup: the leader's node dies; the client tries the range's other
// voters from its cache instead of looking the range up again (a dead node often leads the meta
// range too, and the lookup would wait out its election).
func TestDeadLeaderFailsOverWithoutALookup(t *testing.T) {
	cl, c, leader, next := cachedLeader(t)
	cl.StopNode(leader)
	cl.SetLeader(clienttest.FirstRangeID, next)
	cl.ResetCalls()
	for i := range 3 {
		if _, _, err := c.Get(ctx(t), []byte("a")); err != nil {
			t.Fatalf("get %d after the leader died: %v", i, err)
		}
	}
	if got := cl.Calls("RangeLookup"); got != 0 {
		t.Errorf("range lookups after the leader died = %d, want 0 (the cached voters are tried)", got)
	}
	if got := cl.CallsTo(next, "Get"); got != 3 {
		t.Errorf("gets served by the new leader = %d, want 3", got)
	}
}
