package resp_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/kv"
	"github.com/shoaldb/shoal/node"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
	"github.com/shoaldb/shoal/server/resp"
	"github.com/shoaldb/shoal/storage"
)

var _ resp.Node = (*node.Node)(nil)

// tnode is one in-process node with its RESP listener (the approach of test/testcluster, plus RESP).
type tnode struct {
	grpcAddr, respAddr string
	node               *node.Node
	resp               *resp.Server
}

type tcluster struct {
	nodes []*tnode
	cl    *client.Client
}

func startCluster(t *testing.T, n int) *tcluster {
	t.Helper()
	c := &tcluster{}
	base := t.TempDir()
	for i := 0; i < n; i++ {
		glis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		rlis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		tn := &tnode{grpcAddr: glis.Addr().String(), respAddr: rlis.Addr().String()}
		cfg := node.Config{DataDir: filepath.Join(base, fmt.Sprintf("n%d", i+1)), Addr: tn.grpcAddr, RESPAddr: tn.respAddr,
			Bootstrap: i == 0, Storage: storage.Options{CacheBytes: 16 << 20}, HeartbeatInterval: 200 * time.Millisecond,
			KV: kv.Config{QueueInterval: 300 * time.Millisecond}, Raft: replica.Config{TickInterval: 50 * time.Millisecond}}
		if i > 0 {
			cfg.Join = []string{c.nodes[0].grpcAddr}
		}
		tn.node, err = node.StartServing(context.Background(), cfg, glis)
		if err != nil {
			t.Fatalf("start node %d: %v", i+1, err)
		}
		tn.resp, err = resp.New(resp.Config{Node: tn.node, GRPCAddr: tn.grpcAddr, Advertise: tn.respAddr})
		if err != nil {
			t.Fatal(err)
		}
		go tn.resp.Serve(rlis)
		c.nodes = append(c.nodes, tn)
	}
	t.Cleanup(func() {
		for _, tn := range c.nodes {
			tn.resp.Close()
		}
		for _, tn := range c.nodes {
			tn.node.Kill()
		}
	})
	var addrs []string
	for _, tn := range c.nodes {
		addrs = append(addrs, tn.grpcAddr)
	}
	var err error
	c.cl, err = client.New(context.Background(), client.Config{Addrs: addrs, RequestTimeout: 3 * time.Second, MaxAttempts: 40})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.cl.Close() })
	waitFor(t, 60*time.Second, "every range fully replicated", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		rs, err := c.cl.Ranges(ctx)
		if err != nil || len(rs) < 2 {
			return false
		}
		for _, r := range rs {
			if len(r.Desc.Replicas) != n || r.LeaderNodeId == 0 {
				return false
			}
			for _, rd := range r.Desc.Replicas {
				if rd.Learner {
					return false
				}
			}
		}
		return true
	})
	return c
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s", timeout, what)
}

func (c *tcluster) respAddrs() []string {
	var out []string
	for _, tn := range c.nodes {
		out = append(out, tn.respAddr)
	}
	return out
}

func (c *tcluster) plain(t *testing.T, i int) *redis.Client {
	rc := redis.NewClient(&redis.Options{Addr: c.nodes[i].respAddr, ReadTimeout: 20 * time.Second, WriteTimeout: 20 * time.Second})
	t.Cleanup(func() { rc.Close() })
	return rc
}

func (c *tcluster) clusterClient(t *testing.T, opts *redis.ClusterOptions) *redis.ClusterClient {
	if opts == nil {
		opts = &redis.ClusterOptions{}
	}
	opts.Addrs = c.respAddrs()
	opts.ReadTimeout, opts.WriteTimeout = 20*time.Second, 20*time.Second
	if opts.MaxRedirects == 0 {
		opts.MaxRedirects = 8
	}
	cc := redis.NewClusterClient(opts)
	t.Cleanup(func() { cc.Close() })
	return cc
}

func tctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Expected replies in step tables.
type (
	errPrefix string // an error reply starting with this
	isNil     struct{}
	between   [2]int64 // an integer in [lo, hi] (a PTTL a few milliseconds after the write)
)

type step struct {
	args []any
	want any
}

func check(t *testing.T, label string, got any, err error, want any) {
	t.Helper()
	switch w := want.(type) {
	case errPrefix:
		if err == nil || !strings.HasPrefix(err.Error(), string(w)) {
			t.Errorf("%s: got %#v, %v; want an error starting with %q", label, got, err, w)
		}
	case between:
		if n, ok := got.(int64); err != nil || !ok || n < w[0] || n > w[1] {
			t.Errorf("%s: got %#v, %v; want an integer in %v", label, got, err, w)
		}
	case isNil:
		if !errors.Is(err, redis.Nil) {
			t.Errorf("%s: got %#v, %v; want nil", label, got, err)
		}
	default:
		if err != nil {
			t.Errorf("%s: error %v; want %#v", label, err, want)
		} else if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %#v; want %#v", label, got, want)
		}
	}
}

func run(t *testing.T, rc redis.UniversalClient, steps []step) {
	t.Helper()
	ctx := tctx(t)
	for i, s := range steps {
		got, err := rc.Do(ctx, s.args...).Result()
		check(t, fmt.Sprintf("step %d %v", i, s.args), got, err, s.want)
	}
}

// commandTable is the command table test for keys named by k (all in one slot for cluster clients).
func commandTable(k func(string) string) []step {
	a := func(xs ...any) []any { return xs }
	return []step{
		{a("SET", k("s"), "v1"), "OK"},
		{a("GET", k("s")), "v1"},
		{a("GET", k("missing")), isNil{}},
		{a("SET", k("s"), "v2", "GET"), "v1"},
		{a("SET", k("s"), "v3", "NX"), isNil{}},
		{a("GET", k("s")), "v2"},
		{a("SET", k("nx"), "v", "NX"), "OK"},
		{a("SET", k("xx"), "v", "XX"), isNil{}},
		{a("SET", k("nx"), "w", "XX"), "OK"},
		{a("GET", k("nx")), "w"},
		{a("SET", k("ttl"), "v", "EX", "100"), "OK"},
		{a("TTL", k("ttl")), int64(100)},
		{a("SET", k("ttl"), "w", "KEEPTTL"), "OK"},
		{a("TTL", k("ttl")), int64(100)},
		{a("SET", k("ttl"), "w", "EX", "0"), errPrefix("ERR invalid expire time in 'set' command")},
		{a("SET", k("ttl"), "w", "EX", "1", "KEEPTTL"), errPrefix("ERR syntax error")},
		{a("SET", k("ttl"), "x", "PX", "100000", "GET"), "w"},
		{a("PTTL", k("ttl")), between{99000, 100000}},
		{a("SET", k("ttl"), "x"), "OK"},
		{a("TTL", k("ttl")), int64(-1)},
		{a("TTL", k("missing")), int64(-2)},
		{a("PTTL", k("missing")), int64(-2)},
		{a("EXPIRE", k("ttl"), "50"), int64(1)},
		{a("TTL", k("ttl")), int64(50)},
		{a("EXPIRE", k("missing"), "50"), int64(0)},
		{a("EXPIRE", k("ttl"), "50", "NX"), errPrefix("ERR Shoal does not support EXPIRE's")},
		{a("PERSIST", k("ttl")), int64(1)},
		{a("PERSIST", k("ttl")), int64(0)},
		{a("TTL", k("ttl")), int64(-1)},
		{a("PEXPIRE", k("ttl"), "70000"), int64(1)},
		{a("PTTL", k("ttl")), between{69000, 70000}},
		{a("EXPIREAT", k("ttl"), "4102444800"), int64(1)}, // 2100-01-01
		{a("PEXPIREAT", k("ttl"), "4102444800000"), int64(1)},
		{a("GETEX", k("ttl"), "PERSIST"), "x"},
		{a("TTL", k("ttl")), int64(-1)},
		{a("GETEX", k("ttl"), "EX", "30"), "x"},
		{a("TTL", k("ttl")), int64(30)},
		{a("GETEX", k("ttl")), "x"},
		{a("GETEX", k("missing"), "EX", "30"), isNil{}},
		{a("GETEX", k("ttl"), "EX", "0"), errPrefix("ERR invalid expire time in 'getex' command")},
		{a("SETEX", k("ex"), "20", "v"), "OK"},
		{a("TTL", k("ex")), int64(20)},
		{a("SETEX", k("ex"), "-1", "v"), errPrefix("ERR invalid expire time in 'setex' command")},
		{a("PSETEX", k("ex"), "20000", "w"), "OK"},
		{a("PTTL", k("ex")), between{19000, 20000}},
		{a("EXPIRE", k("ex"), "0"), int64(1)}, // a ttl of zero deletes, as in Redis
		{a("GET", k("ex")), isNil{}},
		{a("SET", k("gone"), "v", "PXAT", "1"), "OK"}, // an expiry in the past: gone at once
		{a("GET", k("gone")), isNil{}},
		{a("INCRBY", k("cnt"), "5"), int64(5)},
		{a("EXPIRE", k("cnt"), "40"), int64(1)},
		{a("INCR", k("cnt")), int64(6)},
		{a("TTL", k("cnt")), int64(40)}, // INCR keeps the expiry
		{a("INCRBYFLOAT", k("f"), "10.5"), "10.5"},
		{a("INCRBYFLOAT", k("f"), "0.1"), "10.6"},
		{a("INCRBYFLOAT", k("f"), "x"), errPrefix("ERR value is not a valid float")},
		{a("GETSET", k("f"), "1"), "10.6"},
		{a("GETSET", k("newgs"), "1"), isNil{}},
		{a("APPEND", k("ap"), "ab"), int64(2)},
		{a("APPEND", k("ap"), "cd"), int64(4)},
		{a("STRLEN", k("ap")), int64(4)},
		{a("STRLEN", k("missing")), int64(0)},
		{a("GETDEL", k("ap")), "abcd"},
		{a("GETDEL", k("ap")), isNil{}},
		{a("SET", k("s"), "v", "NX", "XX"), errPrefix("ERR syntax error")},
		{a("SETNX", k("nx"), "x"), int64(0)},
		{a("EXISTS", k("s"), k("missing"), k("s")), int64(2)},
		{a("MSET", k("a"), "1", k("b"), "2"), "OK"},
		{a("MGET", k("a"), k("b"), k("missing")), []any{"1", "2", nil}},
		{a("MSET", k("a")), errPrefix("ERR wrong number of arguments")},
		{a("INCR", k("n")), int64(1)},
		{a("INCRBY", k("n"), "41"), int64(42)},
		{a("DECR", k("n")), int64(41)},
		{a("DECRBY", k("n"), "1"), int64(40)},
		{a("INCR", k("s")), errPrefix("ERR value is not an integer or out of range")},
		{a("INCRBY", k("n"), "x"), errPrefix("ERR value is not an integer or out of range")},
		{a("SET", k("big"), "9223372036854775807"), "OK"},
		{a("INCR", k("big")), errPrefix("ERR increment or decrement would overflow")},
		{a("HSET", k("h"), "f1", "a", "f2", "b"), int64(2)},
		{a("HSET", k("h"), "f1", "A", "f3", "c"), int64(1)},
		{a("HSET", k("h"), "f1"), errPrefix("ERR wrong number of arguments")},
		{a("HGET", k("h"), "f1"), "A"},
		{a("HGET", k("h"), "nope"), isNil{}},
		{a("HGET", k("missing"), "f"), isNil{}},
		{a("HMGET", k("h"), "f1", "nope", "f3"), []any{"A", nil, "c"}},
		{a("HGETALL", k("h")), []any{"f1", "A", "f2", "b", "f3", "c"}},
		{a("HGETALL", k("missing")), []any{}},
		{a("HLEN", k("h")), int64(3)},
		{a("HEXISTS", k("h"), "f2"), int64(1)},
		{a("HDEL", k("h"), "f2", "nope", "f2"), int64(1)},
		{a("HMGET", k("h"), "f2"), []any{nil}},
		{a("TYPE", k("h")), "hash"},
		{a("TYPE", k("s")), "string"},
		{a("TYPE", k("missing")), "none"},
		{a("GET", k("h")), errPrefix("WRONGTYPE")},
		{a("INCR", k("h")), errPrefix("WRONGTYPE")},
		{a("APPEND", k("h"), "x"), errPrefix("WRONGTYPE")},
		{a("STRLEN", k("h")), errPrefix("WRONGTYPE")},
		{a("GETDEL", k("h")), errPrefix("WRONGTYPE")},
		{a("TTL", k("h")), int64(-1)},
		{a("PERSIST", k("h")), int64(0)},
		{a("EXPIRE", k("h"), "10"), errPrefix("ERR Shoal expires string keys only")},
		{a("SET", k("h"), "x", "GET"), errPrefix("WRONGTYPE")},
		{a("HGET", k("s"), "f"), errPrefix("WRONGTYPE")},
		{a("HSET", k("s"), "f", "v"), errPrefix("WRONGTYPE")},
		{a("HGETALL", k("s")), errPrefix("WRONGTYPE")},
		{a("HDEL", k("s"), "f"), errPrefix("WRONGTYPE")},
		{a("MGET", k("h"), k("s")), []any{nil, "v2"}}, // MGET answers nil for other types, like Redis
		// SET replaces a hash; its fields stay hidden and DEL removes them.
		{a("SET", k("h"), "now a string"), "OK"},
		{a("GET", k("h")), "now a string"},
		{a("TYPE", k("h")), "string"},
		{a("HGETALL", k("h")), errPrefix("WRONGTYPE")},
		{a("EXISTS", k("h")), int64(1)},
		{a("DEL", k("h")), int64(1)},
		{a("EXISTS", k("h")), int64(0)},
		{a("HSET", k("h"), "new", "v"), int64(1)},
		{a("HGETALL", k("h")), []any{"new", "v"}},
		{a("HDEL", k("h"), "new"), int64(1)},
		{a("EXISTS", k("h")), int64(0)},
		{a("DEL", k("s"), k("a"), k("missing"), k("s")), int64(2)},
		{a("EXISTS", k("s"), k("a")), int64(0)},
		{a("GET", k("s")), isNil{}},
		{a("SET", k("empty"), ""), "OK"},
		{a("GET", k("empty")), ""},
		{a("SET", k("bin"), "\x00\r\n\xff"), "OK"},
		{a("GET", k("bin")), "\x00\r\n\xff"},
	}
}

func TestRESP(t *testing.T) {
	c := startCluster(t, 3)

	t.Run("plain", func(t *testing.T) {
		for i := range c.nodes {
			t.Run(fmt.Sprintf("node%d", i+1), func(t *testing.T) {
				rc := c.plain(t, i)
				run(t, rc, commandTable(func(s string) string { return fmt.Sprintf("plain%d:%s", i, s) }))
			})
		}
	})

	t.Run("cluster", func(t *testing.T) {
		cc := c.clusterClient(t, nil)
		run(t, cc, commandTable(func(s string) string { return "{c}" + s }))
		// Keys spread over slots, one command each.
		ctx := tctx(t)
		for i := 0; i < 50; i++ {
			if err := cc.Set(ctx, fmt.Sprintf("spread:%d", i), i, 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
		for i := 0; i < 50; i++ {
			if v, err := cc.Get(ctx, fmt.Sprintf("spread:%d", i)).Int(); err != nil || v != i {
				t.Fatalf("spread:%d = %d, %v", i, v, err)
			}
		}
	})

	t.Run("typed API", func(t *testing.T) {
		ctx := tctx(t)
		for _, rc := range []redis.UniversalClient{c.plain(t, 1), c.clusterClient(t, nil)} {
			key := "{typed}user:1"
			if err := rc.HSet(ctx, key, map[string]any{"name": "ann", "age": 42}).Err(); err != nil {
				t.Fatal(err)
			}
			m, err := rc.HGetAll(ctx, key).Result()
			if err != nil || !reflect.DeepEqual(m, map[string]string{"name": "ann", "age": "42"}) {
				t.Fatalf("HGetAll = %v, %v", m, err)
			}
			vals, err := rc.HMGet(ctx, key, "age", "nope").Result()
			if err != nil || !reflect.DeepEqual(vals, []any{"42", nil}) {
				t.Fatalf("HMGet = %#v, %v", vals, err)
			}
			if n, err := rc.Incr(ctx, "{typed}ctr").Result(); err != nil || n < 1 {
				t.Fatalf("Incr = %d, %v", n, err)
			}
			if err := rc.MSet(ctx, "{typed}a", "1", "{typed}b", "2").Err(); err != nil {
				t.Fatal(err)
			}
			if v, err := rc.MGet(ctx, "{typed}a", "{typed}b").Result(); err != nil || !reflect.DeepEqual(v, []any{"1", "2"}) {
				t.Fatalf("MGet = %v, %v", v, err)
			}
			if _, err := rc.Get(ctx, key).Result(); err == nil || !strings.HasPrefix(err.Error(), "WRONGTYPE") {
				t.Fatalf("Get of a hash: %v", err)
			}
			if n, err := rc.Del(ctx, key, "{typed}ctr", "{typed}a", "{typed}b").Result(); err != nil || n != 4 {
				t.Fatalf("Del = %d, %v", n, err)
			}
		}
	})

	t.Run("crossslot", func(t *testing.T) {
		// go-redis's ClusterClient sends CLUSTER SLOTS on one pooled connection only; its others are plain
		// connections to the listener. READWRITE on connect makes every connection cluster-aware.
		cc := c.clusterClient(t, &redis.ClusterOptions{
			OnConnect: func(ctx context.Context, cn *redis.Conn) error { return cn.ReadWrite(ctx).Err() },
		})
		ctx := tctx(t)
		for _, args := range [][]any{{"MSET", "a", "1", "b", "2"}, {"MGET", "a", "b"}, {"DEL", "a", "b"}, {"EXISTS", "a", "b"}} {
			_, err := cc.Do(ctx, args...).Result()
			check(t, fmt.Sprint(args), nil, err, errPrefix("CROSSSLOT Keys in request don't hash to the same slot"))
		}
		// A plain client may name keys of any slots: the listener splits by range.
		rc := c.plain(t, 2)
		run(t, rc, []step{
			{[]any{"MSET", "x1", "1", "x2", "2", "x3", "3", "x1", "4"}, "OK"},
			{[]any{"MGET", "x1", "x2", "x3", "x4"}, []any{"4", "2", "3", nil}},
			{[]any{"DEL", "x1", "x2", "x3", "x4"}, int64(3)},
		})
	})

	t.Run("pipeline", func(t *testing.T) {
		ctx := tctx(t)
		rc := c.plain(t, 1)
		pipe := rc.Pipeline()
		var incrs []*redis.IntCmd
		for i := 0; i < 100; i++ {
			incrs = append(incrs, pipe.Incr(ctx, "pipe:ctr"))
			pipe.Set(ctx, fmt.Sprintf("pipe:%d", i), i, 0)
		}
		get := pipe.Get(ctx, "pipe:42")
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
		for i, cmd := range incrs {
			if cmd.Val() != int64(i+1) {
				t.Fatalf("INCR %d answered %d: replies out of order", i, cmd.Val())
			}
		}
		if get.Val() != "42" {
			t.Fatalf("GET = %q", get.Val())
		}
	})

	t.Run("scan", func(t *testing.T) {
		ctx := tctx(t)
		rc := c.plain(t, 2)
		want := map[string]bool{}
		for i := 0; i < 60; i++ {
			k := fmt.Sprintf("scan:s%d", i)
			rc.Set(ctx, k, "v", 0)
			want[k] = true
		}
		for i := 0; i < 10; i++ {
			k := fmt.Sprintf("scan:h%d", i)
			rc.HSet(ctx, k, "a", 1, "b", 2, "c", 3)
			want[k] = true
		}
		got := map[string]bool{}
		var cursor uint64
		for calls := 0; ; calls++ {
			keys, next, err := rc.Scan(ctx, cursor, "scan:*", 7).Result()
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range keys {
				if got[k] {
					t.Fatalf("SCAN returned %q twice", k)
				}
				got[k] = true
			}
			if cursor = next; cursor == 0 {
				break
			}
			if calls > 20000 {
				t.Fatal("SCAN does not end")
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("SCAN found %d keys, want %d", len(got), len(want))
		}
		hashes, _, err := rc.ScanType(ctx, 0, "scan:*", 100000, "hash").Result()
		if err != nil || len(hashes) != 10 {
			t.Fatalf("SCAN TYPE hash = %d keys, %v", len(hashes), err)
		}
		keys, err := rc.Keys(ctx, "scan:h*").Result()
		if err != nil || len(keys) != 10 {
			t.Fatalf("KEYS = %v, %v", keys, err)
		}
		// Cluster clients scan each master: every key once in all.
		cc := c.clusterClient(t, nil)
		all := map[string]int{}
		err = cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			it := m.Scan(ctx, 0, "scan:*", 50).Iterator()
			for it.Next(ctx) {
				all[it.Val()]++
			}
			return it.Err()
		})
		if err != nil {
			t.Fatal(err)
		}
		for k := range want {
			if all[k] != 1 {
				t.Fatalf("cluster SCAN saw %q %d times", k, all[k])
			}
		}
	})

	t.Run("readonly", func(t *testing.T) {
		// ReadOnly sends READONLY on every connection: reads go to replicas (follower reads), writes to
		// leaders, and the reads inside a write (INCR's) stay linearizable.
		ctx := tctx(t)
		ro := c.clusterClient(t, &redis.ClusterOptions{ReadOnly: true})
		for i := 1; i <= 20; i++ {
			if n, err := ro.Incr(ctx, "ro:n").Result(); err != nil || n != int64(i) {
				t.Fatalf("INCR %d = %d, %v", i, n, err)
			}
		}
		waitFor(t, 10*time.Second, "a follower read to see the last INCR", func() bool {
			v, err := ro.Get(ctx, "ro:n").Result()
			return err == nil && v == "20"
		})
	})

	t.Run("protocol", func(t *testing.T) { testProtocol(t, c.nodes[1].respAddr) })
	t.Run("auth", func(t *testing.T) { testAuth(t, c) })
	t.Run("tools", func(t *testing.T) { testTools(t, c) })

	t.Run("nodes and slots agree", func(t *testing.T) { testNodesMatchSlots(t, c) })

	t.Run("info keyspace", func(t *testing.T) {
		ctx := tctx(t)
		rc := c.plain(t, 0)
		rc.Set(ctx, "info:a", "1", 0)
		rc.HSet(ctx, "info:h", "f", "v", "g", "w")
		n, err := rc.DBSize(ctx).Result()
		if err != nil || n < 2 {
			t.Fatalf("DBSIZE = %d, %v", n, err)
		}
		info, err := rc.Info(ctx, "keyspace").Result()
		if want := fmt.Sprintf("# Keyspace\r\ndb0:keys=%d,expires=0,avg_ttl=0\r\n", n); err != nil || info != want {
			t.Fatalf("INFO keyspace = %q, %v; want %q", info, err, want)
		}
		if info, err := rc.Info(ctx).Result(); err != nil || !strings.Contains(info, fmt.Sprintf("db0:keys=%d,", n)) || !strings.Contains(info, "# Replication\r\nrole:") {
			t.Fatalf("INFO = %q, %v", info, err)
		}
		if info, err := rc.Info(ctx, "server").Result(); err != nil || strings.Contains(info, "Keyspace") {
			t.Fatalf("INFO server = %q, %v", info, err)
		}
	})

	t.Run("flushdb", func(t *testing.T) {
		ctx := tctx(t)
		rc := c.plain(t, 2)
		rc.Set(ctx, "flush:a", "1", 0)
		rc.HSet(ctx, "flush:h", "f", "v")
		if err := rc.FlushDB(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if n, err := rc.DBSize(ctx).Result(); err != nil || n != 0 {
			t.Fatalf("DBSIZE after FLUSHDB = %d, %v", n, err)
		}
		cc := c.clusterClient(t, nil)
		for i := 0; i < 20; i++ {
			cc.Set(ctx, fmt.Sprintf("flush:%d", i), i, 0)
		}
		if err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return m.FlushDB(ctx).Err() }); err != nil {
			t.Fatal(err)
		}
		if n, err := rc.DBSize(ctx).Result(); err != nil || n != 0 {
			t.Fatalf("DBSIZE after FLUSHDB on every master = %d, %v", n, err)
		}
		// The rest of the key space is untouched.
		if err := c.cl.Put(ctx, []byte("not-resp"), []byte("x")); err != nil {
			t.Fatal(err)
		}
		rc.FlushDB(ctx)
		if _, found, err := c.cl.Get(ctx, []byte("not-resp")); err != nil || !found {
			t.Fatalf("FLUSHDB touched a key outside the RESP key space: %v %v", found, err)
		}
	})

	// Last: it changes the topology.
	t.Run("split and transfer", func(t *testing.T) { testSplitTransfer(t, c) })
}

// conn is a raw RESP connection for protocol-level checks.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(60 * time.Second))
	return &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

func (r *rawConn) send(s string) {
	if _, err := r.nc.Write([]byte(s)); err != nil {
		r.t.Fatal(err)
	}
}

// reply reads one reply and renders it on one line (arrays as [a b c], nulls as <nil>).
func (r *rawConn) reply() (string, error) {
	line, err := r.br.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	switch line[0] {
	case '$':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return "<nil>", nil
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(r.br, b); err != nil {
			return "", err
		}
		return string(b[:n]), nil
	case '*':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return "<nil>", nil
		}
		var parts []string
		for i := 0; i < n; i++ {
			p, err := r.reply()
			if err != nil {
				return "", err
			}
			parts = append(parts, p)
		}
		return "[" + strings.Join(parts, " ") + "]", nil
	}
	return line, nil
}

func (r *rawConn) expect(want string) {
	r.t.Helper()
	got, err := r.reply()
	if err != nil {
		r.t.Fatalf("reading reply: %v (want %q)", err, want)
	}
	if strings.HasSuffix(want, "*") {
		if !strings.HasPrefix(got, strings.TrimSuffix(want, "*")) {
			r.t.Fatalf("got %q, want %q", got, want)
		}
	} else if got != want {
		r.t.Fatalf("got %q, want %q", got, want)
	}
}

func (r *rawConn) expectClosed() {
	r.t.Helper()
	if got, err := r.reply(); err == nil {
		r.t.Fatalf("connection still open: got %q", got)
	}
}

func testProtocol(t *testing.T, addr string) {
	t.Run("survives command errors", func(t *testing.T) {
		r := dialRaw(t, addr)
		r.send("FOO bar\r\n")
		r.expect("-ERR unknown command 'FOO', with args beginning with: 'bar' ")
		r.send("*1\r\n$3\r\nGET\r\n")
		r.expect("-ERR wrong number of arguments for 'get' command")
		r.send("SELECT 1\r\nSELECT 0\r\nSELECT x\r\n")
		r.expect("-ERR DB index is out of range")
		r.expect("+OK")
		r.expect("-ERR value is not an integer or out of range")
		r.send("CLUSTER FOO\r\nCLIENT FOO\r\n")
		r.expect("-ERR unknown subcommand 'FOO'. Try CLUSTER HELP.")
		r.expect("-ERR unknown subcommand 'FOO'. Try CLIENT HELP.")
		r.send("PING\r\n")
		r.expect("+PONG")
		// Once cluster-aware, keys of different slots are refused.
		r.send("CLUSTER KEYSLOT a\r\nMGET a b\r\nMGET {a}1 {a}2\r\n")
		r.expect(":15495")
		r.expect("-CROSSSLOT Keys in request don't hash to the same slot")
		if got, err := r.reply(); err != nil || (got != "[<nil> <nil>]" && !strings.HasPrefix(got, "-MOVED 15495 ")) {
			t.Fatalf("MGET of one slot = %q, %v; want the values or MOVED (this node may not lead the slot)", got, err)
		}
	})
	t.Run("inline and pipelining", func(t *testing.T) {
		r := dialRaw(t, addr)
		r.send("SET inline:k 'hello world'\r\nGET inline:k\r\nECHO \"a\\x41\"\r\n")
		r.expect("+OK")
		r.expect("hello world")
		r.expect("aA")
		var b strings.Builder
		for i := 0; i < 200; i++ {
			fmt.Fprintf(&b, "*2\r\n$4\r\nECHO\r\n$%d\r\n%d\r\n", len(strconv.Itoa(i)), i)
		}
		r.send(b.String())
		for i := 0; i < 200; i++ {
			r.expect(strconv.Itoa(i))
		}
	})
	t.Run("hello", func(t *testing.T) {
		r := dialRaw(t, addr)
		r.send("HELLO 3\r\n")
		r.expect("-ERR unknown command*") // what go-redis (every v9) falls back to RESP2 on
		r.send("HELLO 2 SETNAME me\r\nCLIENT GETNAME\r\nHELLO 4\r\n")
		r.expect("[server shoal version 7.0.0 proto :2 id *")
		r.expect("me")
		r.expect("-NOPROTO*")
		r.send("COMMAND INFO get nosuch\r\nCOMMAND COUNT\r\n")
		r.expect("[[get :2 [+readonly +fast] :1 :1 :1 [+@read +@string +@fast]] <nil>]")
		r.expect(":*")
		r.send("CONFIG GET save\r\nCONFIG GET appendonly\r\n")
		r.expect("[save ]")
		r.expect("[appendonly no]")
	})
	t.Run("oversize value", func(t *testing.T) {
		// A value over the limit is refused with its size and the limit; the connection goes on.
		big := strings.Repeat("v", kv.DefaultMaxValueBytes+1)
		r := dialRaw(t, addr)
		r.send("PING\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$" + strconv.Itoa(len(big)) + "\r\n" + big + "\r\nPING\r\n")
		r.expect("+PONG")
		r.expect("-ERR value is 8388609 bytes; the limit is 8388608 (--max-value-bytes)")
		r.expect("+PONG")
		rc := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: 20 * time.Second, WriteTimeout: 20 * time.Second})
		defer rc.Close()
		ctx := tctx(t)
		err := rc.Set(ctx, "big", big, 0).Err()
		check(t, "SET of a large value", nil, err, errPrefix("ERR value is 8388609 bytes; the limit is 8388608 (--max-value-bytes)"))
		if err := rc.Set(ctx, "big", big[:1<<20], 0).Err(); err != nil {
			t.Fatalf("SET of a value under the limit on the same client: %v", err)
		}
	})
	t.Run("protocol error is read before the close", func(t *testing.T) {
		// Like redis-cli, the client writes the whole command before it reads: the server gives up
		// early, but neither the write nor the reading of the error may meet a reset.
		r := dialRaw(t, addr)
		r.send("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$" + strconv.Itoa(1<<30) + "\r\n" + strings.Repeat("v", 4<<20))
		r.expect("-ERR Protocol error: invalid bulk length")
		r.expectClosed()
	})
	t.Run("malformed closes", func(t *testing.T) {
		for _, in := range []string{"*2\r\n+OK\r\n", "*x\r\n", "SET k \"unbalanced\r\n", "*1\r\n$3\r\nabcXY"} {
			r := dialRaw(t, addr)
			r.send(in)
			r.expect("-ERR Protocol error:*")
			r.expectClosed()
		}
	})
	t.Run("quit", func(t *testing.T) {
		r := dialRaw(t, addr)
		r.send("QUIT\r\nPING\r\n")
		r.expect("+OK")
		r.expectClosed()
	})
	t.Run("value limit", func(t *testing.T) {
		r := dialRaw(t, addr)
		long := strings.Repeat("k", 5000)
		r.send("*2\r\n$3\r\nGET\r\n$5000\r\n" + long + "\r\nPING\r\n")
		r.expect("-ERR key too long*")
		r.expect("+PONG")
	})
}

func testAuth(t *testing.T, c *tcluster) {
	n := c.nodes[0]
	srv, err := resp.New(resp.Config{Node: n.node, GRPCAddr: n.grpcAddr, AuthToken: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	defer srv.Close()
	addr := lis.Addr().String()

	r := dialRaw(t, addr)
	r.send("GET x\r\nCLUSTER SLOTS\r\nAUTH wrong\r\nAUTH someone s3cret\r\nHELLO 2\r\nAUTH s3cret\r\nPING\r\n")
	r.expect("-NOAUTH Authentication required.")
	r.expect("-NOAUTH Authentication required.")
	r.expect("-WRONGPASS*")
	r.expect("-WRONGPASS*")
	r.expect("-NOAUTH HELLO must be called*")
	r.expect("+OK")
	r.expect("+PONG")

	r2 := dialRaw(t, addr)
	r2.send("HELLO 2 AUTH default s3cret\r\nPING\r\n")
	r2.expect("[server shoal*")
	r2.expect("+PONG")

	ctx := tctx(t)
	good := redis.NewClient(&redis.Options{Addr: addr, Password: "s3cret"})
	defer good.Close()
	if err := good.Set(ctx, "auth:k", "v", 0).Err(); err != nil {
		t.Fatalf("go-redis with the password: %v", err)
	}
	bad := redis.NewClient(&redis.Options{Addr: addr})
	defer bad.Close()
	if err := bad.Get(ctx, "auth:k").Err(); err == nil || !strings.HasPrefix(err.Error(), "NOAUTH") {
		t.Fatalf("go-redis without the password: %v", err)
	}
	// Without a configured token, AUTH is an error, as in Redis.
	r3 := dialRaw(t, c.nodes[0].respAddr)
	r3.send("AUTH x\r\n")
	r3.expect("-ERR AUTH <password> called without any password configured*")
}

// testTools runs redis-cli and redis-benchmark when they are installed.
func testTools(t *testing.T, c *tcluster) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Skip("redis-cli not installed")
	}
	host, port, _ := net.SplitHostPort(c.nodes[2].respAddr)
	_, port1, _ := net.SplitHostPort(c.nodes[1].respAddr)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-h", host, "-p", port, "-c", "set", "cli:foo", "bar"}, "OK"},
		{[]string{"-h", host, "-p", port1, "-c", "get", "cli:foo"}, "bar"},
		{[]string{"-h", host, "-p", port, "hset", "cli:h", "a", "1"}, "1"},
		{[]string{"-h", host, "-p", port, "cluster", "keyslot", "foo"}, "12182"},
	} {
		out, err := exec.Command(cli, tc.args...).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != tc.want {
			t.Errorf("redis-cli %v = %q, %v; want %q", tc.args, out, err, tc.want)
		}
	}
	bench, err := exec.LookPath("redis-benchmark")
	if err != nil {
		t.Log("redis-benchmark not installed")
		return
	}
	out, err := exec.Command(bench, "-h", host, "-p", port, "-t", "set,get", "-n", "200", "-c", "4", "-q").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SET:") || !strings.Contains(string(out), "GET:") {
		t.Errorf("redis-benchmark: %v\n%s", err, out)
	}
}

// testNodesMatchSlots checks that every node's CLUSTER NODES gives the roles its CLUSTER SLOTS implies:
// each slot interval's first node is a master owning those slots, and a node listed as a replica is
// either a master itself (of other slots) or a replica of an owner it holds slots of.
func testNodesMatchSlots(t *testing.T, c *tcluster) {
	ctx := tctx(t)
	for i := range c.nodes {
		rc := c.plain(t, i)
		var problems []string
		for attempt := 0; attempt < 20; attempt++ {
			problems = nil
			slots, err := rc.ClusterSlots(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			text, err := rc.ClusterNodes(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			type line struct{ flags, master, slots string }
			byAddr, byID := map[string]line{}, map[string]string{}
			for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
				f := strings.Fields(l)
				addr, _, _ := strings.Cut(f[1], "@")
				flags := strings.TrimPrefix(f[2], "myself,")
				byAddr[addr] = line{flags, f[3], strings.Join(f[8:], " ")}
				byID[f[0]] = addr
			}
			owned := map[string][]string{}
			replicaOf := map[string]map[string]bool{} // replica address -> owners whose slots it holds
			for _, sl := range slots {
				owner := sl.Nodes[0].Addr
				if l := byAddr[owner]; l.flags != "master" {
					problems = append(problems, fmt.Sprintf("slots %d-%d: owner %s is %q in CLUSTER NODES", sl.Start, sl.End, owner, l.flags))
				}
				owned[owner] = append(owned[owner], fmt.Sprintf("%d-%d", sl.Start, sl.End))
				for _, r := range sl.Nodes[1:] {
					if replicaOf[r.Addr] == nil {
						replicaOf[r.Addr] = map[string]bool{}
					}
					replicaOf[r.Addr][owner] = true
				}
			}
			for addr, l := range byAddr {
				switch {
				case len(owned[addr]) == 0 && len(replicaOf[addr]) > 0 && (l.flags != "slave" || !replicaOf[addr][byID[l.master]]):
					problems = append(problems, fmt.Sprintf("%s holds replicas of %v only but is %q of %q", addr, replicaOf[addr], l.flags, byID[l.master]))
				case l.flags == "slave" && len(owned[addr]) > 0:
					problems = append(problems, fmt.Sprintf("%s owns slots but is a slave", addr))
				case l.flags == "slave" && byAddr[byID[l.master]].flags != "master":
					problems = append(problems, fmt.Sprintf("%s is a slave of %s, not a master", addr, l.master))
				case l.flags == "master" && len(owned[addr]) > 0 && l.slots == "":
					problems = append(problems, fmt.Sprintf("master %s owns %v in CLUSTER SLOTS and none in CLUSTER NODES", addr, owned[addr]))
				}
			}
			if len(problems) == 0 {
				break
			}
			time.Sleep(300 * time.Millisecond) // a leadership moved between the two commands
		}
		if len(problems) > 0 {
			t.Errorf("node %d: %s", i+1, strings.Join(problems, "; "))
		}
	}
}

// movedCounter counts MOVED replies node clients receive.
type movedCounter struct{ n atomic.Int64 }

func (m *movedCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (m *movedCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err != nil && strings.HasPrefix(err.Error(), "MOVED ") {
			m.n.Add(1)
		}
		return err
	}
}
func (m *movedCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// keyInSlots returns a key whose slot is in [lo, hi].
func keyInSlots(prefix string, lo, hi int) string {
	for i := 0; ; i++ {
		k := fmt.Sprintf("%s%d", prefix, i)
		if s := resp.Slot([]byte(k)); s >= lo && s <= hi {
			return k
		}
	}
}

func (c *tcluster) nodeIndex(id uint64) int {
	for i, n := range c.nodes {
		if n.node.NodeID() == id {
			return i
		}
	}
	return -1
}

// waitLeader waits until every node sees node `leader` leading the range holding key.
func (c *tcluster) waitLeader(t *testing.T, rangeID, leader uint64) {
	waitFor(t, 30*time.Second, fmt.Sprintf("every node to see node %d lead range %d", leader, rangeID), func() bool {
		for _, n := range c.nodes {
			rs, err := n.node.Ranges(context.Background(), &pb.RangesRequest{})
			if err != nil || rs.Error != nil {
				return false
			}
			ok := false
			for _, r := range rs.Ranges {
				if r.Desc.RangeId == rangeID && r.LeaderNodeId == leader {
					ok = true
				}
			}
			if !ok {
				return false
			}
		}
		return true
	})
}

func testSplitTransfer(t *testing.T, c *tcluster) {
	ctx := tctx(t)
	// A cluster client with a slot map from before the split, and one whose every connection is
	// cluster-aware (READWRITE on connect), to see MOVED replies on whichever connection it uses.
	stale := c.clusterClient(t, nil)
	moved := &movedCounter{}
	aware := c.clusterClient(t, &redis.ClusterOptions{
		OnConnect: func(ctx context.Context, cn *redis.Conn) error { return cn.ReadWrite(ctx).Err() },
		NewClient: func(opt *redis.Options) *redis.Client {
			rc := redis.NewClient(opt)
			rc.AddHook(moved)
			return rc
		},
	})
	keys := make([]string, 200)
	for i := range keys {
		keys[i] = fmt.Sprintf("st:%d", i)
		if err := stale.Set(ctx, keys[i], i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := aware.Ping(ctx).Err(); err != nil { // loads its slot map
		t.Fatal(err)
	}

	// This subtest moves leaderships itself and counts the MOVED replies that follow: keep the
	// autopilot's rebalance policy from moving them too.
	if err := c.cl.SetPolicy(ctx, "rebalance", false); err != nil {
		t.Fatal(err)
	}
	defer c.cl.SetPolicy(ctx, "rebalance", true)

	// Split at a slot boundary and move the right half's leadership elsewhere.
	_, right, err := c.cl.Split(ctx, resp.SlotStart(8192))
	if err != nil {
		t.Fatal(err)
	}
	// Right after a split the new range may still be electing (or its leader not yet reported in
	// heartbeats): wait until a lookup names a leader that is one of the cluster's nodes.
	// "old" is the left half's leader (the node a cluster-aware client asks about slots 0..8191);
	// the right half's leadership is then moved to another node.
	var old uint64
	for deadline := time.Now().Add(20 * time.Second); ; {
		lk, err := c.cl.Lookup(ctx, resp.SlotStart(8192))
		left, lerr := c.cl.Lookup(ctx, resp.SlotStart(0))
		if err == nil && lerr == nil && c.nodeIndex(lk.LeaderNodeId) >= 0 && c.nodeIndex(left.LeaderNodeId) >= 0 {
			old = left.LeaderNodeId
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no leader known for the right half after the split: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	target := c.nodes[(c.nodeIndex(old)+1)%len(c.nodes)].node.NodeID()
	if err := c.cl.TransferLeader(ctx, right.RangeId, target); err != nil {
		t.Fatal(err)
	}
	c.waitLeader(t, right.RangeId, target)
	oldAddr, newAddr := c.nodes[c.nodeIndex(old)].respAddr, c.nodes[c.nodeIndex(target)].respAddr

	// CLUSTER SLOTS shows the two intervals with their leaders (a node's slot map may be up to a few
	// seconds old, so wait for the split to show).
	var slots []redis.ClusterSlot
	for deadline := time.Now().Add(15 * time.Second); ; {
		slots, err = stale.ClusterSlots(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		crossing := false
		for _, s := range slots {
			if s.Start <= 8191 && s.End >= 8192 {
				crossing = true
			}
		}
		if !crossing || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	owner := map[int]string{}
	for _, s := range slots {
		owner[s.Start] = s.Nodes[0].Addr
		if s.Start <= 8191 && s.End >= 8192 {
			t.Fatalf("slot interval %d-%d crosses the split", s.Start, s.End)
		}
	}
	var lastEnd = -1
	sort.Slice(slots, func(i, j int) bool { return slots[i].Start < slots[j].Start })
	for _, s := range slots {
		if s.Start != lastEnd+1 {
			t.Fatalf("CLUSTER SLOTS leaves a gap before %d: %+v", s.Start, slots)
		}
		lastEnd = s.End
	}
	if lastEnd != resp.NumSlots-1 || owner[8192] != newAddr {
		t.Fatalf("CLUSTER SLOTS = %+v; want slots 8192.. at %s", slots, newAddr)
	}

	// A cluster-aware connection to the old leader gets MOVED for the moved half, and is served
	// for the other half; a plain connection is served (forwarded) for both.
	hi := keyInSlots("mv:", 8192, resp.NumSlots-1)
	lo := keyInSlots("mv:", 0, 8191)
	r := dialRaw(t, oldAddr)
	r.send(fmt.Sprintf("CLUSTER MYID\r\nSET %s 1\r\nSET %s 1\r\n", hi, lo))
	r.expect("*")
	r.expect(fmt.Sprintf("-MOVED %d %s", resp.Slot([]byte(hi)), newAddr))
	r.expect("+OK")
	p := dialRaw(t, oldAddr)
	p.send(fmt.Sprintf("SET %s 2\r\nGET %s\r\n", hi, hi))
	p.expect("+OK")
	p.expect("2")

	// The stale cluster client still works (forwarded or redirected), and refreshes its map.
	for i, k := range keys {
		if v, err := stale.Get(ctx, k).Int(); err != nil || v != i {
			t.Fatalf("after split+transfer: GET %s = %d, %v", k, v, err)
		}
		if err := stale.Set(ctx, k, i+1000, 0).Err(); err != nil {
			t.Fatalf("after split+transfer: SET %s: %v", k, err)
		}
	}
	// go-redis reloads its slot map in the background (ReloadState returns at once, and does
	// nothing while an earlier reload is still under way): ask until the new map is there.
	for deadline := time.Now().Add(10 * time.Second); ; {
		stale.ReloadState(ctx)
		m, err := stale.MasterForKey(ctx, hi)
		if err == nil && m.Options().Addr == newAddr {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after reload the client sends slot %d to %v (%v), want %s", resp.Slot([]byte(hi)), m, err, newAddr)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The cluster-aware client's map still says the old leader: it gets MOVED and follows it.
	for i, k := range keys {
		if v, err := aware.Get(ctx, k).Int(); err != nil || v != i+1000 {
			t.Fatalf("cluster-aware client: GET %s = %d, %v", k, v, err)
		}
	}
	if moved.n.Load() == 0 {
		t.Fatal("the cluster-aware client never received MOVED")
	}
	t.Logf("cluster-aware client followed %d MOVED replies", moved.n.Load())

	// Move the leadership once more: both clients keep working.
	third := c.nodes[(c.nodeIndex(target)+1)%len(c.nodes)].node.NodeID()
	if err := c.cl.TransferLeader(ctx, right.RangeId, third); err != nil {
		t.Fatal(err)
	}
	c.waitLeader(t, right.RangeId, third)
	before := moved.n.Load()
	for i, k := range keys {
		for _, rc := range []*redis.ClusterClient{stale, aware} {
			if err := rc.Incr(ctx, k).Err(); err != nil {
				t.Fatalf("after the second transfer: INCR %s: %v", k, err)
			}
		}
		if v, err := stale.Get(ctx, k).Int(); err != nil || v != i+1002 {
			t.Fatalf("after the second transfer: GET %s = %d, %v", k, v, err)
		}
	}
	if moved.n.Load() == before {
		t.Fatal("no MOVED after the second transfer")
	}
}
