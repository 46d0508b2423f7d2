// Package clienttest runs a fake Shoal cluster in process for tests of code built on the client: a few
// gRPC "nodes" on 127.0.0.1 that share one in-memory map, ranges with leaders that tests move around,
// and fault injection. Every node holds a replica of every range.
//
// It is not a database and must never be used outside tests: it has no raft, no persistence and no
// concurrency beyond one lock. What it does honour is the server's side of the client contract: every
// request routed with a range id is checked against that range (RANGE_MOVED), writes are served only by
// the leader (NOT_LEADER, with the leader's address unless OmitLeaderAddr), scans stop at range
// boundaries and report the range that served them.
package clienttest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/shoaldb/shoal/pb"
)

// Call describes one request a fake node received, for fault injection.
type Call struct {
	Node   uint64        // the node that received it
	Method string        // "Get", "Put", "Delete", "CompareAndSwap", "BatchWrite", "Scan", "RangeLookup", ...
	Req    proto.Message // the request; do not modify
}

// Fault is what a node does instead of (or after) serving a call.
type Fault struct {
	// Apply serves the call first (so a write takes effect) and only then reports Err or Status: the
	// shape of an ambiguous failure.
	Apply bool
	// Err is returned in the response's error field.
	Err *pb.Error
	// Status, if set, is returned as the gRPC error instead of a response.
	Status error
}

// FirstRangeID is the id of the user range a new Cluster starts with. Range 1 is the meta range, as in
// a real cluster: it is listed by Ranges but never returned by RangeLookup.
const FirstRangeID = 2

// Cluster is a fake cluster of nodes with ids 1..n. Its methods are safe for concurrent use.
type Cluster struct {
	// OmitLeaderAddr makes NOT_LEADER errors carry no leader address, so that clients must look the
	// range up again. Set it before use.
	OmitLeaderAddr bool
	// ScanBudget caps the keys one Scan response returns (0: no cap); a capped response is truncated.
	ScanBudget int
	// Token, if set, is required as "authorization: Bearer <Token>" metadata on every call.
	Token string

	mu        sync.Mutex
	adminOf   map[uint64]pb.NodeAdminState // SetNodeState's marks
	decisions []byte                       // the decision log's JSON (SetDecisions)
	nodes     []*node
	meta      *rangeState   // the meta range: listed, never routed to
	ranges    []*rangeState // user ranges, sorted by start key, covering the whole key space
	data      map[string][]byte
	expireAt  map[string]int64 // Unix ms, for keys written with a ttl
	nextID    uint64
	fault     func(Call) *Fault
	calls     map[string]int // "method" and "node/method" → count
	stopped   map[uint64]bool
}

type rangeState struct {
	desc   *pb.RangeDescriptor
	leader uint64
}

type node struct {
	pb.UnimplementedShoalServer
	c    *Cluster
	id   uint64
	addr string
	srv  *grpc.Server
}

// New starts a cluster of n nodes with one user range [-inf, +inf) (id FirstRangeID) and the meta
// range, both led by node 1. It is stopped when tb ends.
func New(tb testing.TB, n int) *Cluster {
	tb.Helper()
	c := &Cluster{data: make(map[string][]byte), expireAt: make(map[string]int64), calls: make(map[string]int), stopped: make(map[uint64]bool), nextID: FirstRangeID + 1}
	var replicas []*pb.ReplicaDescriptor
	for i := 1; i <= n; i++ {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatalf("clienttest: listen: %v", err)
		}
		nd := &node{c: c, id: uint64(i), addr: lis.Addr().String(), srv: grpc.NewServer()}
		pb.RegisterShoalServer(nd.srv, nd)
		go func() { _ = nd.srv.Serve(lis) }()
		c.nodes = append(c.nodes, nd)
		replicas = append(replicas, &pb.ReplicaDescriptor{NodeId: uint64(i), ReplicaId: uint64(i)})
	}
	c.meta = &rangeState{
		desc:   &pb.RangeDescriptor{RangeId: 1, Replicas: replicas, NextReplicaId: uint64(n + 1), Generation: 1},
		leader: 1,
	}
	c.ranges = []*rangeState{{
		desc:   &pb.RangeDescriptor{RangeId: FirstRangeID, Replicas: replicas, NextReplicaId: uint64(n + 1), Generation: 1},
		leader: 1,
	}}
	tb.Cleanup(c.Stop)
	return c
}

// Stop stops every node.
func (c *Cluster) Stop() {
	for _, nd := range c.nodes {
		nd.srv.Stop()
	}
}

// StopNode stops node id: its address refuses connections from then on.
func (c *Cluster) StopNode(id uint64) {
	c.mu.Lock()
	c.stopped[id] = true
	nd := c.nodes[id-1]
	c.mu.Unlock()
	nd.srv.Stop()
}

// Addrs returns the gRPC addresses of all nodes, in node id order.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, nd := range c.nodes {
		out = append(out, nd.addr)
	}
	return out
}

// Addr returns the gRPC address of node id.
func (c *Cluster) Addr(id uint64) string { return c.nodes[id-1].addr }

// SetFault installs f, which is asked about every call before it is served; nil (or a nil result)
// serves normally.
func (c *Cluster) SetFault(f func(Call) *Fault) {
	c.mu.Lock()
	c.fault = f
	c.mu.Unlock()
}

// Calls returns how many calls of method all nodes received.
func (c *Cluster) Calls(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[method]
}

// CallsTo returns how many calls of method node id received.
func (c *Cluster) CallsTo(id uint64, method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[fmt.Sprintf("%d/%s", id, method)]
}

// ResetCalls zeroes the call counters.
func (c *Cluster) ResetCalls() {
	c.mu.Lock()
	c.calls = make(map[string]int)
	c.mu.Unlock()
}

// Set writes key directly, bypassing the nodes.
func (c *Cluster) Set(key, value string) {
	c.mu.Lock()
	c.data[key] = []byte(value)
	c.mu.Unlock()
}

// Value reads key directly, bypassing the nodes.
func (c *Cluster) Value(key string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.data[key]
	return string(v), ok
}

// Split splits the range containing key at key, directly, and returns the descriptors after it. The
// right-hand range gets a new id and the left-hand range's leader.
func (c *Cluster) Split(key string) (left, right *pb.RangeDescriptor, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.splitLocked([]byte(key))
}

// SetLeader makes node nodeID the leader of range rangeID, directly.
func (c *Cluster) SetLeader(rangeID, nodeID uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if rs := c.byID(rangeID); rs != nil {
		rs.leader = nodeID
	}
}

// Range returns (a copy of) the descriptor of the range containing key, and its leader.
func (c *Cluster) Range(key string) (*pb.RangeDescriptor, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rs := c.rangeFor([]byte(key))
	return proto.Clone(rs.desc).(*pb.RangeDescriptor), rs.leader
}

func contains(d *pb.RangeDescriptor, key []byte) bool {
	return bytes.Compare(d.GetStartKey(), key) <= 0 && (len(d.GetEndKey()) == 0 || bytes.Compare(key, d.GetEndKey()) < 0)
}

func (c *Cluster) rangeFor(key []byte) *rangeState {
	for _, rs := range c.ranges {
		if contains(rs.desc, key) {
			return rs
		}
	}
	panic("clienttest: ranges do not cover the key space")
}

func (c *Cluster) byID(id uint64) *rangeState {
	for _, rs := range c.ranges {
		if rs.desc.GetRangeId() == id {
			return rs
		}
	}
	return nil
}

func (c *Cluster) splitLocked(key []byte) (left, right *pb.RangeDescriptor, err error) {
	if len(key) == 0 {
		return nil, nil, fmt.Errorf("split key is empty")
	}
	for i, rs := range c.ranges {
		if !contains(rs.desc, key) {
			continue
		}
		if bytes.Equal(rs.desc.GetStartKey(), key) {
			return nil, nil, fmt.Errorf("key %q already starts range r%d", key, rs.desc.GetRangeId())
		}
		l := proto.Clone(rs.desc).(*pb.RangeDescriptor)
		r := proto.Clone(rs.desc).(*pb.RangeDescriptor)
		l.EndKey = append([]byte(nil), key...)
		l.Generation++
		r.RangeId = c.nextID
		c.nextID++
		r.StartKey = append([]byte(nil), key...)
		r.Generation = l.Generation
		c.ranges[i] = &rangeState{desc: l, leader: rs.leader}
		c.ranges = append(c.ranges[:i+1], append([]*rangeState{{desc: r, leader: rs.leader}}, c.ranges[i+1:]...)...)
		return proto.Clone(l).(*pb.RangeDescriptor), proto.Clone(r).(*pb.RangeDescriptor), nil
	}
	return nil, nil, fmt.Errorf("no range holds %q", key)
}

// serve runs one call on node nd: counting, auth, fault injection, then fn under the cluster lock.
func (nd *node) serve(ctx context.Context, method string, req proto.Message, fn func() *pb.Error) (*pb.Error, error) {
	c := nd.c
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[method]++
	c.calls[fmt.Sprintf("%d/%s", nd.id, method)]++
	if c.Token != "" {
		md, _ := metadata.FromIncomingContext(ctx)
		if got := md.Get("authorization"); len(got) != 1 || got[0] != "Bearer "+c.Token {
			return nil, status.Error(codes.Unauthenticated, "missing or wrong auth token")
		}
	}
	if c.fault != nil {
		if f := c.fault(Call{Node: nd.id, Method: method, Req: req}); f != nil {
			if f.Apply {
				fn()
			}
			if f.Status != nil {
				return nil, f.Status
			}
			return f.Err, nil
		}
	}
	return fn(), nil
}

// route checks that this node may serve a request for key routed with hdr. Writes need the leader.
func (nd *node) route(hdr *pb.RequestHeader, key []byte, write bool) (*rangeState, *pb.Error) {
	c := nd.c
	if len(key) == 0 {
		return nil, &pb.Error{Code: pb.ErrorCode_INVALID_ARGUMENT, Message: "key is empty"}
	}
	rs := c.rangeFor(key)
	if id := hdr.GetRangeId(); id != 0 && id != rs.desc.GetRangeId() {
		e := &pb.Error{Code: pb.ErrorCode_RANGE_MOVED, Message: fmt.Sprintf("key %q is not in range r%d", key, id)}
		if old := c.byID(id); old != nil {
			e.Range = proto.Clone(old.desc).(*pb.RangeDescriptor)
		}
		return nil, e
	}
	if perr := nd.leaderCheck(rs, write || !hdr.GetFollowerRead()); perr != nil {
		return nil, perr
	}
	return rs, nil
}

func (nd *node) leaderCheck(rs *rangeState, needLeader bool) *pb.Error {
	if !needLeader || rs.leader == nd.id {
		return nil
	}
	e := &pb.Error{Code: pb.ErrorCode_NOT_LEADER, Message: fmt.Sprintf("node %d does not lead range r%d", nd.id, rs.desc.GetRangeId()), LeaderNodeId: rs.leader}
	if !nd.c.OmitLeaderAddr {
		e.LeaderAddr = nd.c.nodes[rs.leader-1].addr
	}
	return e
}

// Get implements pb.ShoalServer.
func (nd *node) Get(ctx context.Context, req *pb.GetRequest) (*pb.GetResponse, error) {
	resp := &pb.GetResponse{}
	perr, err := nd.serve(ctx, "Get", req, func() *pb.Error {
		if _, perr := nd.route(req.GetHeader(), req.GetKey(), false); perr != nil {
			return perr
		}
		k := string(req.GetKey())
		if at, ok := nd.c.expireAt[k]; ok && at <= time.Now().UnixMilli() {
			delete(nd.c.data, k) // expired: gone, as the sweeper would make it
			delete(nd.c.expireAt, k)
		}
		resp.Value, resp.Found = nd.c.data[k]
		resp.ExpireAtUnixMs = nd.c.expireAt[k]
		return nil
	})
	resp.Error = perr
	return resp, err
}

// Put implements pb.ShoalServer.
func (nd *node) Put(ctx context.Context, req *pb.PutRequest) (*pb.PutResponse, error) {
	perr, err := nd.serve(ctx, "Put", req, func() *pb.Error {
		if _, perr := nd.route(req.GetHeader(), req.GetKey(), true); perr != nil {
			return perr
		}
		nd.c.data[string(req.GetKey())] = append([]byte{}, req.GetValue()...)
		delete(nd.c.expireAt, string(req.GetKey()))
		if req.GetTtlMs() > 0 {
			nd.c.expireAt[string(req.GetKey())] = time.Now().UnixMilli() + req.GetTtlMs()
		}
		return nil
	})
	return &pb.PutResponse{Error: perr}, err
}

// Delete implements pb.ShoalServer.
func (nd *node) Delete(ctx context.Context, req *pb.DeleteRequest) (*pb.DeleteResponse, error) {
	resp := &pb.DeleteResponse{}
	perr, err := nd.serve(ctx, "Delete", req, func() *pb.Error {
		if _, perr := nd.route(req.GetHeader(), req.GetKey(), true); perr != nil {
			return perr
		}
		_, resp.Found = nd.c.data[string(req.GetKey())]
		delete(nd.c.data, string(req.GetKey()))
		delete(nd.c.expireAt, string(req.GetKey()))
		return nil
	})
	resp.Error = perr
	return resp, err
}

// CompareAndSwap implements pb.ShoalServer.
func (nd *node) CompareAndSwap(ctx context.Context, req *pb.CompareAndSwapRequest) (*pb.CompareAndSwapResponse, error) {
	resp := &pb.CompareAndSwapResponse{}
	perr, err := nd.serve(ctx, "CompareAndSwap", req, func() *pb.Error {
		if _, perr := nd.route(req.GetHeader(), req.GetKey(), true); perr != nil {
			return perr
		}
		k := string(req.GetKey())
		cur, found := nd.c.data[k]
		ok := (req.GetExpectAbsent() && !found) || (!req.GetExpectAbsent() && found && bytes.Equal(cur, req.GetExpected()))
		if !ok {
			resp.Found, resp.Current = found, cur
			return nil
		}
		resp.Swapped = true
		if req.GetDelete() {
			delete(nd.c.data, k)
			delete(nd.c.expireAt, k)
		} else {
			nd.c.data[k] = append([]byte{}, req.GetValue()...)
			delete(nd.c.expireAt, k)
		}
		return nil
	})
	resp.Error = perr
	return resp, err
}

// BatchWrite implements pb.ShoalServer.
func (nd *node) BatchWrite(ctx context.Context, req *pb.BatchWriteRequest) (*pb.BatchWriteResponse, error) {
	perr, err := nd.serve(ctx, "BatchWrite", req, func() *pb.Error {
		muts := req.GetMutations()
		if len(muts) == 0 {
			return &pb.Error{Code: pb.ErrorCode_INVALID_ARGUMENT, Message: "no mutations"}
		}
		rs, perr := nd.route(req.GetHeader(), muts[0].GetKey(), true)
		if perr != nil {
			return perr
		}
		for _, m := range muts {
			if !contains(rs.desc, m.GetKey()) {
				return &pb.Error{Code: pb.ErrorCode_INVALID_ARGUMENT, Message: fmt.Sprintf("key %q is not in range r%d", m.GetKey(), rs.desc.GetRangeId())}
			}
		}
		for _, m := range muts {
			if m.GetDelete() {
				delete(nd.c.data, string(m.GetKey()))
				delete(nd.c.expireAt, string(m.GetKey()))
			} else {
				nd.c.data[string(m.GetKey())] = append([]byte{}, m.GetValue()...)
				delete(nd.c.expireAt, string(m.GetKey()))
			}
		}
		return nil
	})
	return &pb.BatchWriteResponse{Error: perr}, err
}

// Scan implements pb.ShoalServer: it serves the part of [start, end) inside one range, the range given
// by the header or else the one holding start (forward) or the keys just below end (reverse).
func (nd *node) Scan(ctx context.Context, req *pb.ScanRequest) (*pb.ScanResponse, error) {
	resp := &pb.ScanResponse{}
	perr, err := nd.serve(ctx, "Scan", req, func() *pb.Error {
		c := nd.c
		start, end := req.GetStart(), req.GetEnd()
		if len(end) > 0 && bytes.Compare(start, end) > 0 {
			return &pb.Error{Code: pb.ErrorCode_INVALID_ARGUMENT, Message: "start is after end"}
		}
		var rs *rangeState
		if !req.GetReverse() {
			rs = c.rangeFor(start)
		} else {
			for _, r := range c.ranges {
				if (len(end) == 0 && len(r.desc.GetEndKey()) == 0) ||
					(len(end) > 0 && bytes.Compare(r.desc.GetStartKey(), end) < 0 && (len(r.desc.GetEndKey()) == 0 || bytes.Compare(end, r.desc.GetEndKey()) <= 0)) {
					rs = r
				}
			}
		}
		if id := req.GetHeader().GetRangeId(); id != 0 && id != rs.desc.GetRangeId() {
			e := &pb.Error{Code: pb.ErrorCode_RANGE_MOVED, Message: fmt.Sprintf("scan span is not in range r%d", id)}
			if old := c.byID(id); old != nil {
				e.Range = proto.Clone(old.desc).(*pb.RangeDescriptor)
			}
			return e
		}
		if perr := nd.leaderCheck(rs, !req.GetHeader().GetFollowerRead()); perr != nil {
			return perr
		}
		lo := start
		if bytes.Compare(rs.desc.GetStartKey(), lo) > 0 {
			lo = rs.desc.GetStartKey()
		}
		hi := end
		if re := rs.desc.GetEndKey(); len(re) > 0 && (len(hi) == 0 || bytes.Compare(re, hi) < 0) {
			hi = re
		}
		var keys []string
		for k := range c.data {
			if bytes.Compare([]byte(k), lo) >= 0 && (len(hi) == 0 || bytes.Compare([]byte(k), hi) < 0) {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		if req.GetReverse() {
			sort.Sort(sort.Reverse(sort.StringSlice(keys)))
		}
		most := int(req.GetLimit())
		if c.ScanBudget > 0 && (most == 0 || c.ScanBudget < most) {
			most = c.ScanBudget
		}
		if most > 0 && len(keys) > most {
			keys = keys[:most]
			resp.Truncated = true
		}
		for _, k := range keys {
			resp.Kvs = append(resp.Kvs, &pb.KeyValue{Key: []byte(k), Value: c.data[k]})
		}
		resp.Range = proto.Clone(rs.desc).(*pb.RangeDescriptor)
		return nil
	})
	resp.Error = perr
	return resp, err
}

// RangeLookup implements pb.ShoalServer. An empty key finds the first range.
func (nd *node) RangeLookup(ctx context.Context, req *pb.RangeLookupRequest) (*pb.RangeLookupResponse, error) {
	resp := &pb.RangeLookupResponse{}
	perr, err := nd.serve(ctx, "RangeLookup", req, func() *pb.Error {
		c := nd.c
		rs := c.rangeFor(req.GetKey())
		resp.Range = proto.Clone(rs.desc).(*pb.RangeDescriptor)
		resp.LeaderNodeId = rs.leader
		for _, r := range rs.desc.GetReplicas() {
			resp.Nodes = append(resp.Nodes, c.nodeDesc(r.GetNodeId()))
		}
		return nil
	})
	resp.Error = perr
	return resp, err
}

func (c *Cluster) nodeDesc(id uint64) *pb.NodeDescriptor {
	return &pb.NodeDescriptor{NodeId: id, Addr: c.nodes[id-1].addr, HttpAddr: fmt.Sprintf("http-%d", id)}
}

// Nodes implements pb.ShoalServer.
func (nd *node) Nodes(ctx context.Context, req *pb.NodesRequest) (*pb.NodesResponse, error) {
	resp := &pb.NodesResponse{}
	perr, err := nd.serve(ctx, "Nodes", req, func() *pb.Error {
		c := nd.c
		c.drainStepLocked()
		for _, n := range c.nodes {
			st := &pb.NodeStatus{Desc: c.nodeDesc(n.id), Live: !c.stopped[n.id], State: "live"}
			if c.stopped[n.id] {
				st.State = "dead"
			}
			switch c.adminOf[n.id] {
			case pb.NodeAdminState_NODE_DRAINING:
				st.Draining = true
				if st.Live {
					st.State = "draining"
				}
			case pb.NodeAdminState_NODE_DECOMMISSIONING:
				st.State = "decommissioning"
			}
			for _, rs := range append([]*rangeState{c.meta}, c.ranges...) {
				st.RangeCount++
				if rs.leader == n.id {
					st.LeaderCount++
				}
			}
			resp.Nodes = append(resp.Nodes, st)
		}
		return nil
	})
	resp.Error = perr
	return resp, err
}

// Ranges implements pb.ShoalServer: the meta range first, then the user ranges.
func (nd *node) Ranges(ctx context.Context, req *pb.RangesRequest) (*pb.RangesResponse, error) {
	resp := &pb.RangesResponse{}
	perr, err := nd.serve(ctx, "Ranges", req, func() *pb.Error {
		for _, rs := range append([]*rangeState{nd.c.meta}, nd.c.ranges...) {
			if ids := req.GetRangeIds(); len(ids) > 0 && !slices.Contains(ids, rs.desc.GetRangeId()) {
				continue
			}
			resp.Ranges = append(resp.Ranges, &pb.RangeStatus{Desc: proto.Clone(rs.desc).(*pb.RangeDescriptor), LeaderNodeId: rs.leader, AppliedIndex: 10})
		}
		return nil
	})
	resp.Error = perr
	return resp, err
}

// Split implements pb.ShoalServer; it must reach the leader of the range holding the key.
func (nd *node) Split(ctx context.Context, req *pb.SplitRequest) (*pb.SplitResponse, error) {
	resp := &pb.SplitResponse{}
	perr, err := nd.serve(ctx, "Split", req, func() *pb.Error {
		if len(req.GetKey()) == 0 {
			return &pb.Error{Code: pb.ErrorCode_INVALID_ARGUMENT, Message: "key is empty"}
		}
		if perr := nd.leaderCheck(nd.c.rangeFor(req.GetKey()), true); perr != nil {
			return perr
		}
		l, r, err := nd.c.splitLocked(req.GetKey())
		if err != nil {
			return &pb.Error{Code: pb.ErrorCode_INVALID_ARGUMENT, Message: err.Error()}
		}
		resp.Left, resp.Right = l, r
		return nil
	})
	resp.Error = perr
	return resp, err
}

// TransferLeader implements pb.ShoalServer; any node accepts it.
func (nd *node) TransferLeader(ctx context.Context, req *pb.TransferLeaderRequest) (*pb.TransferLeaderResponse, error) {
	perr, err := nd.serve(ctx, "TransferLeader", req, func() *pb.Error {
		c := nd.c
		rs := c.byID(req.GetRangeId())
		if rs == nil {
			return &pb.Error{Code: pb.ErrorCode_INVALID_ARGUMENT, Message: fmt.Sprintf("no range r%d", req.GetRangeId())}
		}
		if req.GetNodeId() == 0 || int(req.GetNodeId()) > len(c.nodes) {
			return &pb.Error{Code: pb.ErrorCode_INVALID_ARGUMENT, Message: fmt.Sprintf("no node %d", req.GetNodeId())}
		}
		rs.leader = req.GetNodeId()
		return nil
	})
	return &pb.TransferLeaderResponse{Error: perr}, err
}

// SetDecisions sets the JSON the Decisions call returns.
func (c *Cluster) SetDecisions(entriesJSON string) {
	c.mu.Lock()
	c.decisions = []byte(entriesJSON)
	c.mu.Unlock()
}

// Decisions implements pb.ShoalServer: the JSON given to SetDecisions.
func (nd *node) Decisions(ctx context.Context, req *pb.DecisionsRequest) (*pb.DecisionsResponse, error) {
	resp := &pb.DecisionsResponse{}
	perr, err := nd.serve(ctx, "Decisions", req, func() *pb.Error {
		resp.EntriesJson = append([]byte(nil), nd.c.decisions...)
		return nil
	})
	resp.Error = perr
	return resp, err
}

// SetNodeState implements pb.ShoalServer: it records the mark, which Nodes reports. As a stand-in
// for the autopilot, each Nodes call then moves one leadership off a draining node.
func (nd *node) SetNodeState(ctx context.Context, req *pb.SetNodeStateRequest) (*pb.SetNodeStateResponse, error) {
	perr, err := nd.serve(ctx, "SetNodeState", req, func() *pb.Error {
		c := nd.c
		if req.GetNodeId() == 0 || int(req.GetNodeId()) > len(c.nodes) {
			return &pb.Error{Code: pb.ErrorCode_INVALID_ARGUMENT, Message: fmt.Sprintf("unknown node %d", req.GetNodeId())}
		}
		if c.adminOf == nil {
			c.adminOf = map[uint64]pb.NodeAdminState{}
		}
		c.adminOf[req.GetNodeId()] = req.GetState()
		return nil
	})
	return &pb.SetNodeStateResponse{Error: perr}, err
}

// drainStepLocked moves one leadership off a draining node to the lowest-numbered other live node.
func (c *Cluster) drainStepLocked() {
	for _, rs := range append([]*rangeState{c.meta}, c.ranges...) {
		if c.adminOf[rs.leader] != pb.NodeAdminState_NODE_DRAINING {
			continue
		}
		for _, n := range c.nodes {
			if n.id != rs.leader && !c.stopped[n.id] && c.adminOf[n.id] != pb.NodeAdminState_NODE_DRAINING {
				rs.leader = n.id
				return
			}
		}
	}
}

// String summarizes the ranges, for test failure messages.
func (c *Cluster) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var parts []string
	for _, rs := range c.ranges {
		parts = append(parts, fmt.Sprintf("r%d[%q,%q)@n%d", rs.desc.GetRangeId(), rs.desc.GetStartKey(), rs.desc.GetEndKey(), rs.leader))
	}
	return strings.Join(parts, " ")
}
