package ycsb

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/bench/benchutil"
	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/kv"
	"github.com/shoaldb/shoal/replica"
	"github.com/shoaldb/shoal/server/resp"
)

// respCluster is a real in-process cluster (benchutil.StartNode) with a RESP listener per node.
type respCluster struct {
	grpcAddrs, respAddrs []string
	cl                   *client.Client
}

// startRESPCluster starts n nodes, each with its RESP listener, waits until every range is fully
// replicated, and splits the RESP key space at slot 8192 so that the slot map has two intervals.
func startRESPCluster(t *testing.T, n int) *respCluster {
	t.Helper()
	c := &respCluster{}
	base := t.TempDir()
	var nodes []*benchutil.Node
	var servers []*resp.Server
	t.Cleanup(func() {
		for _, s := range servers {
			s.Close()
		}
		for _, ln := range nodes {
			ln.Kill()
		}
	})
	for i := 0; i < n; i++ {
		glis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		rlis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		gaddr, raddr := glis.Addr().String(), rlis.Addr().String()
		cfg := benchutil.NodeConfig{RESPAddr: raddr, Bootstrap: i == 0,
			HeartbeatInterval: 200 * time.Millisecond, KV: kv.Config{QueueInterval: 300 * time.Millisecond},
			Raft: replica.Config{TickInterval: 50 * time.Millisecond}}
		if i > 0 {
			cfg.Join = []string{c.grpcAddrs[0]}
		}
		ln, err := benchutil.StartNode(context.Background(), benchutil.NodeSpec{Dir: filepath.Join(base, fmt.Sprintf("n%d", i+1)),
			Create: true, Listener: glis, CacheBytes: 16 << 20, Config: cfg})
		if err != nil {
			rlis.Close()
			t.Fatalf("start node %d: %v", i+1, err)
		}
		nodes = append(nodes, ln)
		srv, err := resp.New(resp.Config{Node: ln.KV, GRPCAddr: gaddr, Advertise: raddr})
		if err != nil {
			rlis.Close()
			t.Fatal(err)
		}
		servers = append(servers, srv)
		go srv.Serve(rlis)
		c.grpcAddrs = append(c.grpcAddrs, gaddr)
		c.respAddrs = append(c.respAddrs, raddr)
	}
	var err error
	c.cl, err = client.New(context.Background(), client.Config{Addrs: c.grpcAddrs, RequestTimeout: 3 * time.Second, MaxAttempts: 40})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.cl.Close() })
	deadline := time.Now().Add(90 * time.Second)
	for !c.replicated(n) {
		if time.Now().After(deadline) {
			t.Fatal("ranges not fully replicated in 90s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, _, err := c.cl.Split(ctx, resp.SlotStart(resp.NumSlots/2)); err != nil {
		t.Fatalf("split at slot %d: %v", resp.NumSlots/2, err)
	}
	return c
}

// replicated reports whether every range has n voters and a leader.
func (c *respCluster) replicated(n int) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	rs, err := c.cl.Ranges(ctx)
	if err != nil || len(rs) == 0 {
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
}

// respKeys counts the Shoal keys in the RESP key space (one per record: records are strings).
func (c *respCluster) respKeys(t *testing.T) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kvs, err := c.cl.Scan(ctx, resp.Prefix, resp.PrefixEnd, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	return len(kvs)
}

// TestRESPTarget runs a small load and run phase of every workload but E through go-ycsb's redis
// binding against real RESP listeners, in cluster mode and in plain mode, and checks that every
// operation was done without an error and that the records landed in the RESP key space.
func TestRESPTarget(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	c := startRESPCluster(t, 3)
	type tc struct {
		workload, mode string
		hosts          []string
	}
	var cases []tc
	for _, w := range []string{"a", "b", "c", "d", "f"} {
		cases = append(cases, tc{w, RedisModeCluster, c.respAddrs})
	}
	// Plain mode on a node that may not lead the data: it forwards.
	cases = append(cases, tc{"b", RedisModePlain, c.respAddrs[2:]})
	want := map[string][]string{"a": {OpRead, OpUpdate}, "b": {OpRead, OpUpdate}, "c": {OpRead}, "d": {OpRead, OpInsert}, "f": {OpRead, OpReadModifyWrite}}

	stored := 0 // records in the RESP key space so far (the workloads share the table)
	for _, k := range cases {
		t.Run(k.workload+"-"+k.mode, func(t *testing.T) {
			cfg := Config{Workload: k.workload, Target: TargetRESP, RedisMode: k.mode, Hosts: k.hosts,
				Records: 200, Ops: 600, Threads: 4, Load: true, Props: map[string]string{"writeallfields": "true"}}
			p, err := cfg.Properties()
			if err != nil {
				t.Fatal(err)
			}
			db, err := Open(TargetRESP, k.hosts, "", p)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := Probe(context.Background(), db, p); err != nil {
				t.Fatalf("probe: %v", err)
			}
			rep, err := Run(context.Background(), cfg, db)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Load == nil || rep.Load.Ops != cfg.Records || rep.Load.Errors != 0 || rep.Load.Operations[OpInsert].Count != cfg.Records {
				t.Fatalf("load phase: %+v", rep.Load)
			}
			checkConsistent(t, "load", rep.Load.Ops, rep.Load.Errors, rep.Load.Operations, rep.Load.DurationS, rep.Load.Throughput)
			if rep.Ops != cfg.Ops || rep.Errors != 0 || rep.Truncated {
				t.Fatalf("run phase: %d of %d ops, %d errors (e.g. %s), truncated %v", rep.Ops, cfg.Ops, rep.Errors, rep.ErrorSample, rep.Truncated)
			}
			checkConsistent(t, "run", rep.Ops, rep.Errors, rep.Operations, rep.DurationS, rep.Throughput)
			for _, op := range want[k.workload] {
				if rep.Operations[op].Count == 0 {
					t.Errorf("no %s operations: %+v", op, rep.Operations)
				}
			}
			if len(rep.Operations) != len(want[k.workload]) {
				t.Errorf("operations %v, want %v", rep.OpNames(), want[k.workload])
			}
			if rep.System != "shoal" || rep.Target != TargetRESP || rep.Properties["redis.datatype"] != "string" {
				t.Errorf("report header: system %q target %q datatype %q", rep.System, rep.Target, rep.Properties["redis.datatype"])
			}
			// Loads rewrite the same keys; D inserts new ones.
			stored = max(stored, int(cfg.Records)) + int(rep.Operations[OpInsert].Count)
			if n := c.respKeys(t); n != stored {
				t.Errorf("RESP key space holds %d keys, want %d", n, stored)
			}
		})
	}
}

func TestRESPTargetRejects(t *testing.T) {
	cfg := Config{Workload: "e", Target: TargetRESP, Records: 10, Ops: 10, Threads: 1}
	if _, err := cfg.Properties(); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "scan") {
		t.Fatalf("workload e on resp: %v", err)
	}
	p := mustProps(t, Config{Workload: "a", Target: TargetGRPC, Records: 10, Ops: 10, Threads: 1})
	mustSet(p, "scanproportion", "0.5")
	if _, err := Open(TargetRESP, []string{"127.0.0.1:1"}, "", p); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("open resp with scans: %v", err)
	}
	if _, err := (Config{Workload: "a", Target: TargetRESP, RedisMode: "sentinel", Records: 10, Ops: 1, Threads: 1}).Properties(); err == nil {
		t.Fatal("redis mode sentinel accepted")
	}
	if _, err := (Config{Workload: "a", Target: TargetGRPC, RedisMode: RedisModePlain, Records: 10, Ops: 1, Threads: 1}).Properties(); err == nil {
		t.Fatal("redis mode accepted for grpc")
	}
	p = mustProps(t, Config{Workload: "a", Target: TargetRESP, RedisMode: RedisModePlain, Records: 10, Ops: 1, Threads: 1})
	if p.GetString("redis.mode", "") != "single" || p.GetString("redis.datatype", "") != "string" {
		t.Fatalf("resp properties: %v", p.Map())
	}
	if _, err := Open(TargetRESP, []string{"127.0.0.1:1", "127.0.0.1:2"}, "", p); err == nil || !strings.Contains(err.Error(), "one host") {
		t.Fatalf("plain mode with two hosts: %v", err)
	}
	// Nothing listens on port 1: the binding's ping fails.
	if _, err := Open(TargetRESP, []string{"127.0.0.1:1"}, "", p); err == nil {
		t.Fatal("open of a closed port succeeded")
	}
}
