package kv

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"google.golang.org/protobuf/proto"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
	"github.com/shoaldb/shoal/storage"
	"github.com/shoaldb/shoal/transport"
)

// TestRanges runs the range layer's scripts in testdata/: routing, request validation and its typed
// errors, splits (on request and by size) and merges with their meta-range bookkeeping, on one real
// node (a replica store on a Pebble engine) whose view of other nodes is the script's. Rewrite the
// expected output after an intended change with
//
//	go test ./kv -run TestRanges -rewrite
//
// Commands:
//
//	start [range-max-bytes=N] [max-key-bytes=N] [max-value-bytes=N]
//	                                   bootstrap node 1: the meta range (1) and one user range (2)
//	                                   covering every key, both led here
//	put k=v ...                        one Put each
//	get key=K [range=R] [follower]     a Get, with a header naming range R when given
//	delete key=K
//	cas key=K [expected=V | absent] [value=V | delete]
//	batch k=v ... [range=R]            one BatchWrite of every pair
//	scan [start=K] [end=K] [limit=N] [reverse]
//	split key=K
//	merge key=K                        merge the range holding K with its right neighbour
//	lookup key=K | lookup meta
//	ranges                             the meta range's view (the Ranges RPC)
//	peer node=N [leads=R,...]          another node exists (at a fake address) and leads ranges R
//	compact                            flush and compact the engine (range sizes are read from tables)
//	queues                             one pass of the range queues (meta repair, size splits, merges)
//	fill prefix=P count=N bytes=B      N writes of B-byte values under P000, P001, ...
//
// Empty values are written as "-".
func TestRanges(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		if strings.Contains(path, "fuzz") {
			return
		}
		e := &rangeEnv{t: t}
		t.Cleanup(e.stop)
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			out, err := e.run(td)
			if err != nil {
				t.Fatalf("%s: %v", td.Pos, err)
			}
			if out == "" {
				return "ok\n"
			}
			return out
		})
	})
}

// rangeEnv is one kv.Service on a single-node store.
type rangeEnv struct {
	t     *testing.T
	eng   *storage.Engine
	store *replica.Store
	s     *Service
	peers *scriptCluster
}

// scriptCluster is the script's view of other nodes: fake addresses, and which node leads what.
type scriptCluster struct {
	nodes   map[uint64]*pb.NodeDescriptor
	leaders map[uint64]uint64
}

func (c *scriptCluster) Resolve(node uint64) (string, bool) {
	if d := c.nodes[node]; d != nil {
		return d.Addr, true
	}
	return "", false
}
func (c *scriptCluster) Get(node uint64) *pb.NodeDescriptor { return c.nodes[node] }
func (c *scriptCluster) Client(addr string) (pb.ShoalClient, error) {
	return nil, fmt.Errorf("no connection to %s in this test", addr)
}
func (c *scriptCluster) ProbeNodes() []uint64           { return nil }
func (c *scriptCluster) LeaderOf(rangeID uint64) uint64 { return c.leaders[rangeID] }
func (c *scriptCluster) MetaLeader() uint64             { return 1 }
func (c *scriptCluster) MetaDesc() *pb.RangeDescriptor  { return nil }
func (c *scriptCluster) SetLeader(rangeID, node uint64) {
	c.leaders[rangeID] = node
}
func (c *scriptCluster) MovedLeader(rangeID, node uint64) { c.leaders[rangeID] = node }

type noTransport struct{}

func (noTransport) Send(*pb.RaftMessage) bool { return true }
func (noTransport) SendSnapshot(context.Context, *pb.RaftMessage, transport.SnapshotSource) error {
	return nil
}

func (e *rangeEnv) stop() {
	if e.s != nil {
		e.s.Stop()
	}
	if e.store != nil {
		e.store.Stop()
	}
	if e.eng != nil {
		e.eng.Close()
	}
}

func (e *rangeEnv) start(cfg Config) error {
	eng, err := storage.Open(e.t.TempDir(), storage.Options{CreateIfMissing: true, CacheBytes: 8 << 20, MemTableBytes: 4 << 20})
	if err != nil {
		return err
	}
	e.eng = eng
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	rc := replica.Config{NodeID: 1, Engine: eng, Transport: noTransport{}, TickInterval: 5 * time.Millisecond, Logger: log}
	boot := replica.NewStore(rc)
	self := &pb.NodeDescriptor{NodeId: 1, Addr: "n1:26257"}
	one := []*pb.ReplicaDescriptor{{NodeId: 1, ReplicaId: 1}}
	meta := &pb.RangeDescriptor{RangeId: replica.MetaRangeID, Replicas: one, NextReplicaId: 2, Generation: 1}
	user := &pb.RangeDescriptor{RangeId: replica.FirstUserRangeID, Replicas: one, NextReplicaId: 2, Generation: 1}
	userData, _ := proto.Marshal(user)
	selfData, _ := proto.Marshal(self)
	counter := func(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }
	if err := boot.Bootstrap(meta, []*pb.KeyValue{
		{Key: replica.MetaDescKey(nil), Value: userData},
		{Key: replica.MetaNodeKey(1), Value: selfData},
		{Key: replica.MetaCounterKey("range-id"), Value: counter(replica.FirstUserRangeID)},
	}); err != nil {
		return err
	}
	if err := boot.Bootstrap(user, nil); err != nil {
		return err
	}
	e.store = replica.NewStore(rc)
	if err := e.store.Load(); err != nil {
		return err
	}
	e.store.Start()
	e.peers = &scriptCluster{nodes: map[uint64]*pb.NodeDescriptor{1: self}, leaders: map[uint64]uint64{}}
	// A long queue interval: the script runs the queues itself.
	cfg.QueueInterval = time.Hour
	e.s = New(cfg, Deps{Cluster: e.peers, Logger: log})
	e.s.Start(1, e.store)
	deadline := time.Now().Add(10 * time.Second)
	for _, id := range []uint64{replica.MetaRangeID, replica.FirstUserRangeID} {
		for r := e.store.Replica(id); r == nil || !r.IsLeader(); r = e.store.Replica(id) {
			if time.Now().After(deadline) {
				return fmt.Errorf("range %d elected no leader", id)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return nil
}

// settle waits until every replica leads: a split's new range elects its leader just after the split
// returns, and the script's next request must not race that election.
func (e *rangeEnv) settle() {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		leads := true
		for _, r := range e.store.Replicas() {
			leads = leads && r.IsLeader()
		}
		if leads {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	e.t.Fatalf("a replica elected no leader within 10s")
}

func (e *rangeEnv) run(td *datadriven.TestData) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out strings.Builder
	arg := func(name string) (string, bool) {
		for _, a := range td.CmdArgs {
			if a.Key == name {
				if len(a.Vals) == 0 {
					return "", true
				}
				return a.Vals[0], true
			}
		}
		return "", false
	}
	num := func(name string) int64 {
		v, _ := arg(name)
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	key := func(name string) []byte {
		v, _ := arg(name)
		return value(v)
	}
	header := func() *pb.RequestHeader {
		h := &pb.RequestHeader{}
		if _, ok := arg("range"); ok {
			h.RangeId = uint64(num("range"))
		}
		if _, ok := arg("follower"); ok {
			h.FollowerRead = true
		}
		return h
	}
	pairs := func() []*pb.Mutation {
		var ms []*pb.Mutation
		for _, a := range td.CmdArgs {
			if a.Key == "range" || len(a.Vals) == 0 {
				continue
			}
			ms = append(ms, &pb.Mutation{Key: value(a.Key), Value: value(a.Vals[0])})
		}
		return ms
	}
	switch td.Cmd {
	case "start":
		return "", e.start(Config{RangeMaxBytes: num("range-max-bytes"), MaxKeyBytes: int(num("max-key-bytes")),
			MaxValueBytes: int(num("max-value-bytes"))})
	case "put":
		for _, m := range pairs() {
			resp, _ := e.s.Put(ctx, &pb.PutRequest{Header: header(), Key: m.Key, Value: m.Value})
			fmt.Fprintf(&out, "put %s: %s\n", show(m.Key), result(resp.Error, ""))
		}
	case "fill":
		p, _ := arg("prefix")
		// Incompressible values (a fixed seed: the same bytes every run), so that sizes are real.
		rng := rand.New(rand.NewPCG(1, 2))
		for i := range int(num("count")) {
			val := make([]byte, num("bytes"))
			for j := range val {
				val[j] = byte(rng.Uint32())
			}
			resp, _ := e.s.Put(ctx, &pb.PutRequest{Key: fmt.Appendf(nil, "%s%03d", p, i), Value: val})
			if resp.Error != nil {
				return "", fmt.Errorf("fill %s%03d: %v", p, i, resp.Error)
			}
		}
	case "get":
		resp, _ := e.s.Get(ctx, &pb.GetRequest{Header: header(), Key: key("key")})
		ok := "not found"
		if resp.Found {
			ok = show(resp.Value)
		}
		fmt.Fprintf(&out, "get %s: %s\n", show(key("key")), result(resp.Error, ok))
	case "delete":
		resp, _ := e.s.Delete(ctx, &pb.DeleteRequest{Header: header(), Key: key("key")})
		fmt.Fprintf(&out, "delete %s: %s\n", show(key("key")), result(resp.Error, fmt.Sprintf("found=%v", resp.Found)))
	case "cas":
		req := &pb.CompareAndSwapRequest{Header: header(), Key: key("key"), Expected: key("expected"), Value: key("value")}
		_, req.ExpectAbsent = arg("absent")
		_, req.Delete = arg("delete")
		resp, _ := e.s.CompareAndSwap(ctx, req)
		fmt.Fprintf(&out, "cas %s: %s\n", show(req.Key), result(resp.Error, fmt.Sprintf("swapped=%v found=%v current=%s",
			resp.Swapped, resp.Found, show(resp.Current))))
	case "batch":
		resp, _ := e.s.BatchWrite(ctx, &pb.BatchWriteRequest{Header: header(), Mutations: pairs()})
		fmt.Fprintf(&out, "batch: %s\n", result(resp.Error, ""))
	case "scan":
		_, reverse := arg("reverse")
		resp, _ := e.s.Scan(ctx, &pb.ScanRequest{Header: header(), Start: key("start"), End: key("end"), Limit: num("limit"), Reverse: reverse})
		if resp.Error != nil {
			fmt.Fprintf(&out, "scan: %s\n", result(resp.Error, ""))
			break
		}
		var kvs []string
		for _, kv := range resp.Kvs {
			kvs = append(kvs, show(kv.Key)+"="+show(kv.Value))
		}
		fmt.Fprintf(&out, "scan: %s (range %d, truncated=%v)\n", strings.Join(kvs, " "), resp.Range.GetRangeId(), resp.Truncated)
	case "split":
		defer e.settle()
		resp, _ := e.s.Split(ctx, &pb.SplitRequest{Key: key("key")})
		fmt.Fprintf(&out, "split at %s: %s\n", show(key("key")), result(resp.Error, describe(resp.Left)+" | "+describe(resp.Right)))
	case "merge":
		defer e.settle()
		resp, _ := e.s.Merge(ctx, &pb.MergeRequest{Key: key("key")})
		fmt.Fprintf(&out, "merge at %s: %s\n", show(key("key")), result(resp.Error, describe(resp.Merged)))
	case "lookup":
		req := &pb.RangeLookupRequest{Key: key("key")}
		_, req.Meta = arg("meta")
		resp, _ := e.s.RangeLookup(ctx, req)
		fmt.Fprintf(&out, "lookup: %s\n", result(resp.Error, fmt.Sprintf("%s leader n%d", describe(resp.Range), resp.LeaderNodeId)))
	case "ranges":
		req := &pb.RangesRequest{}
		if v, ok := arg("ids"); ok {
			for _, id := range strings.Split(v, ",") {
				n, _ := strconv.ParseUint(id, 10, 64)
				req.RangeIds = append(req.RangeIds, n)
			}
		}
		_, req.WithoutSizes = arg("without-sizes")
		resp, _ := e.s.Ranges(ctx, req)
		if resp.Error != nil {
			fmt.Fprintf(&out, "ranges: %s\n", result(resp.Error, ""))
		}
		for _, r := range resp.Ranges {
			sized := ""
			if _, show := arg("sizes"); show {
				sized = fmt.Sprintf(" sized=%v", r.ApproxBytes > 0)
			}
			fmt.Fprintf(&out, "%s leader n%d%s\n", describe(r.Desc), r.LeaderNodeId, sized)
		}
	case "peer":
		id := uint64(num("node"))
		e.peers.nodes[id] = &pb.NodeDescriptor{NodeId: id, Addr: fmt.Sprintf("n%d:26257", id)}
		if v, ok := arg("leads"); ok {
			for _, r := range strings.Split(v, ",") {
				rid, _ := strconv.ParseUint(r, 10, 64)
				e.peers.leaders[rid] = id
			}
		}
	case "compact":
		if err := e.eng.CompactAll(ctx); err != nil {
			return "", err
		}
	case "queues":
		defer e.settle()
		e.s.runQueues(ctx)
	default:
		return "", fmt.Errorf("unknown command %q", td.Cmd)
	}
	return out.String(), nil
}

// value turns a script's value into bytes ("-" is empty).
func value(v string) []byte {
	if v == "" || v == "-" {
		return nil
	}
	return []byte(v)
}

func show(b []byte) string {
	if len(b) == 0 {
		return "-"
	}
	if len(b) > 12 {
		return fmt.Sprintf("%s…(%d bytes)", b[:8], len(b))
	}
	return string(b)
}

// result prints a typed error as CODE: message [leader n] or the success text.
func result(pe *pb.Error, ok string) string {
	if pe == nil {
		if ok == "" {
			return "ok"
		}
		return ok
	}
	s := pe.Code.String() + ": " + pe.Message
	if pe.LeaderNodeId != 0 {
		s += fmt.Sprintf(" [leader n%d at %s]", pe.LeaderNodeId, pe.LeaderAddr)
	}
	return s
}

// describe prints a descriptor as r<id> [start, end) gen <g> nodes.
func describe(d *pb.RangeDescriptor) string {
	if d == nil {
		return "none"
	}
	var nodes []string
	for _, rd := range d.Replicas {
		nodes = append(nodes, fmt.Sprintf("n%d", rd.NodeId))
	}
	sort.Strings(nodes)
	end := "∞"
	if len(d.EndKey) > 0 {
		end = show(d.EndKey)
	}
	s := fmt.Sprintf("r%d [%s, %s) gen %d on %s", d.RangeId, show(d.StartKey), end, d.Generation, strings.Join(nodes, ","))
	if d.MergingInto != 0 {
		s += fmt.Sprintf(" frozen into r%d", d.MergingInto)
	}
	return s
}
