package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/storage"
	"github.com/shoaldb/shoal/storage/stored"
	"github.com/shoaldb/shoal/transport"
)

// TestInteraction runs the replica sequences in testdata/interaction as scripts, the way etcd raft's
// interaction tests do: several stores, one per simulated node, each on its own engine, exchange
// raft messages and snapshots over a network the test delivers by hand. No store runs its loop or
// its log writer: the test calls the loop's two steps itself (tickActive and processReady, which
// without a writer commits each cycle's log batch before it returns), so every script runs the same
// way each time and its expected output is exact. Rewrite it after an intended change with
//
//	go test ./replica -run TestInteraction -rewrite
//
// Commands (node=N names the node that acts; range=R the range; results print after the network
// is stable again, unless said otherwise):
//
//	bootstrap nodes=N voters=(1,2,3) [learners=(...)] [range=R] [start=K] [end=K] [log-threshold=T]
//	                            N stores; range R (default 2) on the listed nodes, replica id = node id
//	campaign node range         the replica starts an election
//	propose node range k=v ...  one write of the given keys
//	propose node range count=C [prefix=P]
//	                            C writes, one after the other: P000=v000, P001=v001, ...
//	split node range key=K new-range=R2
//	merge node left=R           freeze the right neighbour, then the merge trigger on R
//	freeze node range into=L    the merge's first step alone: freeze range for a merge into L
//	merge-trigger node left=R   the merge's last step, as planned by the last freeze
//	abort-merge node left=R     undo the freeze of R's right neighbour: abort through R, then unfreeze
//	add-learner|promote|remove node range target=N [remove=M]
//	                            a configuration change proposed by node; promote with remove is one
//	                            joint change
//	transfer-leader node range to=N
//	caught-up node range to=N   whether the voter on N could take the leadership at once
//	                            (TransfereeCaughtUp); prints without stabilizing
//	truncate node range [index=I]
//	                            truncate the log up to I (default: the replica's truncation point)
//	partition nodes=(3,4)       cut the nodes off from every other (messages and snapshots are lost)
//	heal                        reconnect every node
//	tick [nodes=(...)] [count=C]  C rounds of: one raft tick on each listed node (default all), then
//	                            stabilize
//	stabilize                   run every node's Ready loop and deliver messages until nothing moves
//	print [node=N] [range=R] [keys]
//	                            each replica's raft state, descriptor and configuration (and keys)
//
// Leases are off and the vote blackout after a load is cleared: both are measured on the wall
// clock. Raft's randomized election timeout never fires in these scripts as long as they tick a node
// that hears from no leader fewer than ElectionTicks (10) times.
func TestInteraction(t *testing.T) {
	datadriven.Walk(t, "testdata/interaction", func(t *testing.T, path string) {
		c := &interaction{t: t, nodes: map[uint64]*testNode{}, cut: map[uint64]bool{}}
		t.Cleanup(c.close)
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			var out strings.Builder
			c.out = &out
			if err := c.run(td); err != nil {
				fmt.Fprintf(&out, "error: %v\n", err)
			}
			if out.Len() == 0 {
				return "ok\n"
			}
			return out.String()
		})
	})
}

// testNode is one simulated node: a store on its own engine.
type testNode struct {
	id    uint64
	eng   *storage.Engine
	store *Store
}

// interaction is a set of nodes and the network between them.
type interaction struct {
	t      *testing.T
	out    *strings.Builder
	nodes  map[uint64]*testNode
	ids    []uint64
	ranges []uint64 // every range id a script created, for print

	mu    sync.Mutex
	msgs  []*pb.RaftMessage // sent, not yet delivered
	snaps []*pendingSnap    // snapshots whose sender waits for the delivery
	cut   map[uint64]bool   // partitioned nodes

	ops  []*pendingOp // proposals waiting for their outcome
	plan *mergePlan   // the last merge a freeze prepared
}

// pendingSnap is a snapshot in flight: its sender's goroutine waits in SendSnapshot until the test
// delivers it and answers done.
type pendingSnap struct {
	header *pb.RaftMessage
	kvs    []*pb.KeyValue
	done   chan error
}

// endpoint is one node's Transport.
type endpoint struct {
	c    *interaction
	node uint64
}

func (e endpoint) Send(msg *pb.RaftMessage) bool {
	e.c.mu.Lock()
	defer e.c.mu.Unlock()
	e.c.msgs = append(e.c.msgs, proto.Clone(msg).(*pb.RaftMessage))
	return true
}

func (e endpoint) SendSnapshot(ctx context.Context, header *pb.RaftMessage, src transport.SnapshotSource) error {
	var kvs []*pb.KeyValue
	for {
		kv, err := src.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			src.Close()
			return err
		}
		kvs = append(kvs, kv)
	}
	src.Close()
	ps := &pendingSnap{header: proto.Clone(header).(*pb.RaftMessage), kvs: kvs, done: make(chan error, 1)}
	e.c.mu.Lock()
	e.c.snaps = append(e.c.snaps, ps)
	e.c.mu.Unlock()
	select {
	case err := <-ps.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *interaction) close() {
	for _, id := range c.ids {
		c.nodes[id].store.Stop()
	}
	for _, op := range c.ops {
		<-op.done
	}
	for _, id := range c.ids {
		c.nodes[id].eng.Close()
	}
}

func (c *interaction) run(td *datadriven.TestData) error {
	switch td.Cmd {
	case "bootstrap":
		return c.bootstrap(td)
	case "partition":
		c.mu.Lock()
		for _, n := range c.nodeList(td, "nodes") {
			c.cut[n] = true
		}
		c.mu.Unlock()
		return nil
	case "heal":
		c.mu.Lock()
		c.cut = map[uint64]bool{}
		c.mu.Unlock()
		return nil
	case "tick":
		return c.tick(td)
	case "stabilize":
		return c.stabilize()
	case "print":
		c.print(td)
		return nil
	}
	switch td.Cmd {
	case "merge":
		return c.merge(td)
	case "merge-trigger":
		return c.mergeTrigger(td)
	case "abort-merge":
		return c.abortMerge(td)
	}
	r, err := c.replica(td, "range")
	if err != nil {
		return err
	}
	switch td.Cmd {
	case "campaign":
		r.Campaign()
		return c.stabilize()
	case "propose":
		return c.propose(td, r)
	case "split":
		return c.split(td, r)
	case "add-learner", "promote", "remove":
		return c.changeReplicas(td, r)
	case "transfer-leader":
		if err := r.TransferLeadership(c.uintArg(td, "to")); err != nil {
			return err
		}
		return c.stabilize()
	case "caught-up":
		ok, err := r.TransfereeCaughtUp(c.uintArg(td, "to"))
		if err != nil {
			return err
		}
		fmt.Fprintf(c.out, "range %d: n%d caught up: %v\n", r.RangeID(), c.uintArg(td, "to"), ok)
		return nil
	case "truncate":
		return c.truncate(td, r)
	case "freeze":
		return c.freeze(r, c.uintArg(td, "into"))
	}
	return fmt.Errorf("unknown command %q", td.Cmd)
}

func (c *interaction) uintArg(td *datadriven.TestData, key string) uint64 {
	var v uint64
	td.ScanArgs(c.t, key, &v)
	return v
}

func (c *interaction) nodeList(td *datadriven.TestData, key string) []uint64 {
	arg, ok := td.Arg(key)
	if !ok {
		return nil
	}
	var out []uint64
	for _, v := range arg.Vals {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			c.t.Fatalf("%s: %s=%v: %v", td.Pos, key, arg.Vals, err)
		}
		out = append(out, n)
	}
	return out
}

// replica is the replica of range (argument key) on the node argument.
func (c *interaction) replica(td *datadriven.TestData, key string) (*Replica, error) {
	n, ok := c.nodes[c.uintArg(td, "node")]
	if !ok {
		return nil, fmt.Errorf("no node %d", c.uintArg(td, "node"))
	}
	id := c.uintArg(td, key)
	r := n.store.Replica(id)
	if r == nil {
		return nil, fmt.Errorf("node %d has no replica of range %d", n.id, id)
	}
	return r, nil
}

func (c *interaction) bootstrap(td *datadriven.TestData) error {
	var nodes int
	td.ScanArgs(c.t, "nodes", &nodes)
	rangeID := uint64(FirstUserRangeID)
	td.MaybeScanArgs(c.t, "range", &rangeID)
	var start, end string
	td.MaybeScanArgs(c.t, "start", &start)
	td.MaybeScanArgs(c.t, "end", &end)
	var threshold uint64
	td.MaybeScanArgs(c.t, "log-threshold", &threshold)
	desc := &pb.RangeDescriptor{RangeId: rangeID, Generation: 1}
	if start != "" {
		desc.StartKey = []byte(start)
	}
	if end != "" {
		desc.EndKey = []byte(end)
	}
	for _, learner := range []bool{false, true} {
		key := map[bool]string{false: "voters", true: "learners"}[learner]
		for _, n := range c.nodeList(td, key) {
			desc.Replicas = append(desc.Replicas, &pb.ReplicaDescriptor{NodeId: n, ReplicaId: n, Learner: learner})
			desc.NextReplicaId = max(desc.NextReplicaId, n+1)
		}
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	for id := uint64(1); id <= uint64(nodes); id++ {
		eng, err := storage.Open(c.t.TempDir(), storage.Options{CreateIfMissing: true})
		if err != nil {
			return err
		}
		s := NewStore(Config{NodeID: id, Engine: eng, Transport: endpoint{c, id}, TickInterval: time.Millisecond,
			LogTruncateThreshold: threshold, DisableLeaseReads: true, Logger: logger})
		c.nodes[id] = &testNode{id: id, eng: eng, store: s}
		c.ids = append(c.ids, id)
		if slices.ContainsFunc(desc.Replicas, func(rd *pb.ReplicaDescriptor) bool { return rd.NodeId == id }) {
			if err := s.Bootstrap(desc, nil); err != nil {
				return err
			}
		}
		if err := s.Load(); err != nil {
			return err
		}
		for _, r := range s.Replicas() {
			r.mu.Lock()
			r.noVotesUntil = time.Time{}
			r.mu.Unlock()
		}
	}
	c.ranges = append(c.ranges, rangeID)
	return nil
}

// tick runs count rounds of one tick on each listed node followed by stabilize.
func (c *interaction) tick(td *datadriven.TestData) error {
	count := 1
	td.MaybeScanArgs(c.t, "count", &count)
	nodes := c.nodeList(td, "nodes")
	if nodes == nil {
		nodes = c.ids
	}
	for i := 0; i < count; i++ {
		for _, id := range nodes {
			c.nodes[id].store.tickActive()
		}
		if err := c.stabilize(); err != nil {
			return err
		}
	}
	return nil
}

// stabilize runs every node's Ready loop and delivers what they send until no node has work and
// nothing is in flight; then it reports the proposals that finished.
func (c *interaction) stabilize() error {
	for round := 0; ; round++ {
		if round > 10000 {
			return errors.New("no stable state after 10000 rounds")
		}
		moved := false
		for _, id := range c.ids {
			s := c.nodes[id].store
			s.dirtyMu.Lock()
			dirty := len(s.dirty) > 0
			s.dirtyMu.Unlock()
			if dirty {
				s.processReady()
				moved = true
			}
		}
		if c.deliverSnapshots() {
			moved = true
		}
		if c.deliverMessages() {
			moved = true
		}
		if !moved {
			break
		}
	}
	c.reportOps()
	return nil
}

// waitFor polls cond until it holds; it reads state other goroutines of the store change.
func (c *interaction) waitFor(what string, cond func() bool) {
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// deliverSnapshots hands every snapshot in flight to its receiver (or fails it across a partition)
// and waits until each sender has recorded the outcome.
func (c *interaction) deliverSnapshots() bool {
	// Every snapshot the loops started is in flight once its sender has queued it.
	c.waitFor("snapshots to be queued", func() bool {
		inFlight := 0
		for _, id := range c.ids {
			inFlight += len(c.nodes[id].store.snapSem)
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.snaps) == inFlight
	})
	c.mu.Lock()
	snaps := c.snaps
	c.snaps = nil
	c.mu.Unlock()
	sort.SliceStable(snaps, func(i, j int) bool {
		a, b := snaps[i].header, snaps[j].header
		return a.FromNode < b.FromNode || a.FromNode == b.FromNode && a.RangeId < b.RangeId
	})
	for _, ps := range snaps {
		h := ps.header
		msg := &raftpb.Message{}
		_ = proto.Unmarshal(h.Message, msg)
		fmt.Fprintf(c.out, "snapshot n%d->n%d range %d at index %d (%d keys): ", h.FromNode, h.ToNode, h.RangeId,
			msg.GetSnapshot().GetMetadata().GetIndex(), len(ps.kvs))
		var err error
		if c.cut[h.FromNode] || c.cut[h.ToNode] {
			err = errors.New("partitioned")
		} else {
			err = c.nodes[h.ToNode].store.HandleSnapshot(h, ps.kvs)
		}
		if err != nil {
			fmt.Fprintf(c.out, "failed: %v\n", err)
		} else {
			fmt.Fprintln(c.out, "applied")
		}
		ps.done <- err
		s := c.nodes[h.FromNode].store
		c.waitFor("the snapshot's sender to record the outcome", func() bool { return len(s.snapSem) == 0 })
	}
	return len(snaps) > 0
}

// deliverMessages hands every message sent so far to its receiver, in an order that does not
// depend on the order in which a loop visited its replicas: by receiver, range and sender, and in
// sending order within each.
func (c *interaction) deliverMessages() bool {
	c.mu.Lock()
	msgs := c.msgs
	c.msgs = nil
	c.mu.Unlock()
	sent := len(msgs) > 0
	sort.SliceStable(msgs, func(i, j int) bool {
		a, b := msgs[i], msgs[j]
		if a.ToNode != b.ToNode {
			return a.ToNode < b.ToNode
		}
		if a.RangeId != b.RangeId {
			return a.RangeId < b.RangeId
		}
		return a.FromNode < b.FromNode
	})
	for len(msgs) > 0 {
		to := msgs[0].ToNode
		n := 1
		for n < len(msgs) && msgs[n].ToNode == to {
			n++
		}
		var batch []*pb.RaftMessage
		for _, m := range msgs[:n] {
			if !c.cut[m.FromNode] && !c.cut[m.ToNode] {
				batch = append(batch, m)
			}
		}
		if node, ok := c.nodes[to]; ok && len(batch) > 0 {
			node.store.HandleRaftMessages(batch)
		}
		msgs = msgs[n:]
	}
	return sent
}

// pendingOp is a proposal (a write, a split, a merge step or a configuration change) whose proposer
// waits for its outcome in a goroutine of its own, as a client's request does.
type pendingOp struct {
	what   string
	r      *Replica
	id     uint64 // the proposal id, once raft has the proposal
	done   chan struct{}
	res    Result
	err    error
	report bool // printed by the stabilize that sees it finish
}

// submit starts fn (which proposes on r) and returns once raft holds the proposal or fn has
// returned.
func (c *interaction) submit(what string, r *Replica, fn func(ctx context.Context) (Result, error)) *pendingOp {
	op := &pendingOp{what: what, r: r, done: make(chan struct{}), report: true}
	r.mu.Lock()
	before := map[uint64]bool{}
	for id := range r.proposals {
		before[id] = true
	}
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	go func() {
		defer cancel()
		op.res, op.err = fn(ctx)
		close(op.done)
	}()
	c.ops = append(c.ops, op)
	c.waitFor(what+" to be proposed", func() bool {
		select {
		case <-op.done:
			return true
		default:
		}
		r.mu.Lock()
		for id := range r.proposals {
			if !before[id] {
				op.id = id
			}
		}
		r.mu.Unlock()
		if op.id == 0 {
			return false
		}
		// The proposer marks the replica for the loop just after it registered the proposal.
		r.store.dirtyMu.Lock()
		defer r.store.dirtyMu.Unlock()
		return r.store.dirty[r.rangeID] == r
	})
	return op
}

// finished reports whether op has its outcome, waiting for its goroutine if raft is done with it.
func (op *pendingOp) finished() bool {
	select {
	case <-op.done:
		return true
	default:
	}
	op.r.mu.Lock()
	_, waiting := op.r.proposals[op.id]
	op.r.mu.Unlock()
	if waiting {
		return false
	}
	<-op.done
	return true
}

func (c *interaction) reportOps() {
	keep := c.ops[:0]
	for _, op := range c.ops {
		if !op.finished() {
			keep = append(keep, op)
			continue
		}
		if op.report {
			fmt.Fprintf(c.out, "%s: %s\n", op.what, outcome(op.err))
		}
	}
	c.ops = keep
}

func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	var e *Error
	if errors.As(err, &e) {
		return fmt.Sprintf("%s: %s", e.Code, e.Msg)
	}
	return err.Error()
}

func (c *interaction) propose(td *datadriven.TestData, r *Replica) error {
	if td.HasArg("count") {
		var count int
		td.ScanArgs(c.t, "count", &count)
		prefix := "k"
		td.MaybeScanArgs(c.t, "prefix", &prefix)
		failed := 0
		for i := 0; i < count; i++ {
			op := c.submit("", r, func(ctx context.Context) (Result, error) {
				return r.Propose(ctx, putCmd(fmt.Sprintf("%s%03d", prefix, i), fmt.Sprintf("v%03d", i)))
			})
			op.report = false
			if err := c.stabilize(); err != nil {
				return err
			}
			if !op.finished() || op.err != nil {
				failed++
			}
		}
		fmt.Fprintf(c.out, "%d writes: %d ok\n", count, count-failed)
		return nil
	}
	cmd := &pb.Command{}
	var keys []string
	for _, a := range td.CmdArgs {
		if a.Key == "node" || a.Key == "range" {
			continue
		}
		cmd.Mutations = append(cmd.Mutations, &pb.Mutation{Key: []byte(a.Key), Value: []byte(a.SingleVal(c.t))})
		keys = append(keys, a.Key)
	}
	c.submit(fmt.Sprintf("write %s", strings.Join(keys, ",")), r, func(ctx context.Context) (Result, error) { return r.Propose(ctx, cmd) })
	return c.stabilize()
}

// split splits r's range at key, building the two descriptors as kv does.
func (c *interaction) split(td *datadriven.TestData, r *Replica) error {
	var key string
	td.ScanArgs(c.t, "key", &key)
	newID := c.uintArg(td, "new-range")
	d := r.Desc()
	if d == nil {
		return errors.New("replica not initialized")
	}
	left := proto.Clone(d).(*pb.RangeDescriptor)
	left.EndKey = []byte(key)
	left.Generation++
	right := proto.Clone(d).(*pb.RangeDescriptor)
	right.RangeId, right.StartKey, right.Generation = newID, []byte(key), left.Generation
	c.ranges = append(c.ranges, newID)
	c.submit(fmt.Sprintf("split range %d at %q", d.RangeId, key), r, func(ctx context.Context) (Result, error) {
		return r.Propose(ctx, &pb.Command{Split: &pb.SplitTrigger{SplitKey: []byte(key), NewRangeId: newID, Left: left, Right: right}})
	})
	return c.stabilize()
}

// rightNeighbour is the leader replica of the range that starts where left ends.
func (c *interaction) rightNeighbour(left *pb.RangeDescriptor) (*Replica, *pb.RangeDescriptor, error) {
	for _, id := range c.ids {
		for _, r := range c.nodes[id].store.Replicas() {
			if d := r.Desc(); d != nil && r.IsLeader() && len(left.EndKey) > 0 && bytes.Equal(d.StartKey, left.EndKey) {
				return r, d, nil
			}
		}
	}
	return nil, nil, fmt.Errorf("range %d: no leader of a right neighbour", left.RangeId)
}

// mergePlan is what a merge's coordinator knows once the right range froze: the trigger it will
// propose is built from these two descriptors.
type mergePlan struct{ left, frozen *pb.RangeDescriptor }

// freeze proposes the merge's first step on r's range: freeze it for a merge into the range into.
// Once the freeze applied, the plan records it with the left range's descriptor as r's node has it.
func (c *interaction) freeze(r *Replica, into uint64) error {
	d := r.Desc()
	op := c.submit(fmt.Sprintf("freeze range %d", d.RangeId), r, func(ctx context.Context) (Result, error) {
		return r.Propose(ctx, &pb.Command{Freeze: &pb.FreezeForMerge{LeftRangeId: into, Generation: d.Generation}})
	})
	if err := c.stabilize(); err != nil {
		return err
	}
	if op.finished() && op.err == nil {
		if lr := r.store.Replica(into); lr != nil {
			c.plan = &mergePlan{left: lr.Desc(), frozen: r.Desc()}
		}
	}
	return nil
}

// merge runs the merge protocol as kv's coordinator does: freeze the right neighbour through its
// leader, then the trigger (mergeTrigger) on the left range through node.
func (c *interaction) merge(td *datadriven.TestData) error {
	lr, err := c.replica(td, "left")
	if err != nil {
		return err
	}
	rr, _, err := c.rightNeighbour(lr.Desc())
	if err != nil {
		return err
	}
	c.plan = nil
	if err := c.freeze(rr, lr.RangeID()); err != nil || c.plan == nil {
		return err
	}
	return c.mergeTrigger(td)
}

// mergeTrigger proposes the trigger of the last planned merge on the left range through node, once
// every replica of the frozen range applied the freeze (the coordinator waits for that).
func (c *interaction) mergeTrigger(td *datadriven.TestData) error {
	lr, err := c.replica(td, "left")
	if err != nil {
		return err
	}
	if c.plan == nil {
		return errors.New("no merge planned: freeze first")
	}
	left, frozen := c.plan.left, c.plan.frozen
	for _, rd := range frozen.Replicas {
		if r := c.nodes[rd.NodeId].store.Replica(frozen.RangeId); r != nil && r.Applied() < frozen.FreezeIndex {
			fmt.Fprintf(c.out, "replica of range %d on n%d has not applied the freeze\n", frozen.RangeId, rd.NodeId)
			return nil
		}
	}
	merged := proto.Clone(left).(*pb.RangeDescriptor)
	merged.EndKey = frozen.EndKey
	merged.Generation = max(left.Generation, frozen.Generation) + 1
	c.submit(fmt.Sprintf("merge range %d into range %d", frozen.RangeId, left.RangeId), lr, func(ctx context.Context) (Result, error) {
		return lr.Propose(ctx, &pb.Command{Merge: &pb.MergeTrigger{Left: left, Right: frozen, Merged: merged}})
	})
	return c.stabilize()
}

// abortMerge undoes a freeze as kv does: a MergeAbort through the left range's log (no trigger
// planned before it can apply), then the unfreeze through the right range's leader.
func (c *interaction) abortMerge(td *datadriven.TestData) error {
	lr, err := c.replica(td, "left")
	if err != nil {
		return err
	}
	left := lr.Desc()
	rr, frozen, err := c.rightNeighbour(left)
	if err != nil {
		return err
	}
	abort := c.submit(fmt.Sprintf("abort the merge into range %d", left.RangeId), lr, func(ctx context.Context) (Result, error) {
		return lr.Propose(ctx, &pb.Command{MergeAbort: &pb.MergeAbort{RightRangeId: frozen.RangeId, FreezeIndex: frozen.FreezeIndex, RightStartKey: frozen.StartKey}})
	})
	if err := c.stabilize(); err != nil {
		return err
	}
	if !abort.finished() || abort.err != nil {
		return nil
	}
	c.submit(fmt.Sprintf("unfreeze range %d", frozen.RangeId), rr, func(ctx context.Context) (Result, error) {
		return rr.Propose(ctx, &pb.Command{Unfreeze: &pb.UnfreezeRange{LeftRangeId: left.RangeId, FreezeIndex: frozen.FreezeIndex}})
	})
	return c.stabilize()
}

// changeReplicas builds the next descriptor and the raft changes as kv's replication changes do.
func (c *interaction) changeReplicas(td *datadriven.TestData, r *Replica) error {
	d := r.Desc()
	if d == nil {
		return errors.New("replica not initialized")
	}
	next := proto.Clone(d).(*pb.RangeDescriptor)
	next.Generation++
	target := c.uintArg(td, "target")
	var changes []*raftpb.ConfChangeSingle
	var what []string
	change := func(t raftpb.ConfChangeType, id uint64) {
		changes = append(changes, &raftpb.ConfChangeSingle{Type: t.Enum(), NodeId: proto.Uint64(id)})
	}
	remove := func(node uint64) {
		keep := next.Replicas[:0]
		for _, rd := range next.Replicas {
			if rd.NodeId == node {
				change(raftpb.ConfChangeRemoveNode, rd.ReplicaId)
			} else {
				keep = append(keep, rd)
			}
		}
		next.Replicas = keep
		what = append(what, fmt.Sprintf("remove n%d", node))
	}
	switch td.Cmd {
	case "add-learner":
		next.Replicas = append(next.Replicas, &pb.ReplicaDescriptor{NodeId: target, ReplicaId: next.NextReplicaId, Learner: true})
		change(raftpb.ConfChangeAddLearnerNode, next.NextReplicaId)
		next.NextReplicaId++
		what = append(what, fmt.Sprintf("add learner n%d", target))
	case "promote":
		for _, rd := range next.Replicas {
			if rd.NodeId == target {
				rd.Learner = false
				change(raftpb.ConfChangeAddNode, rd.ReplicaId)
			}
		}
		what = append(what, fmt.Sprintf("promote n%d", target))
		if td.HasArg("remove") {
			remove(c.uintArg(td, "remove"))
		}
	case "remove":
		remove(target)
	}
	c.submit(fmt.Sprintf("range %d: %s", d.RangeId, strings.Join(what, ", ")), r, func(ctx context.Context) (Result, error) {
		return Result{}, r.ChangeReplicas(ctx, next, changes)
	})
	return c.stabilize()
}

// truncate drops the replica's log up to index (default: its truncation point) as the apply loop
// does once the log outgrows LogTruncateThreshold.
func (c *interaction) truncate(td *datadriven.TestData, r *Replica) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	to := r.truncationPointLocked()
	td.MaybeScanArgs(c.t, "index", &to)
	if to > r.applied {
		return fmt.Errorf("index %d is not applied (applied %d)", to, r.applied)
	}
	if to <= r.log.TruncatedIndex() {
		fmt.Fprintf(c.out, "nothing to truncate: the log starts after %d\n", r.log.TruncatedIndex())
		return nil
	}
	b := r.store.eng.NewBatch()
	defer b.Close()
	if err := r.log.Truncate(b, to); err != nil {
		return err
	}
	if err := b.Commit(true); err != nil {
		return err
	}
	fmt.Fprintf(c.out, "log truncated up to %d\n", to)
	return nil
}

// print shows, for every node and range, the replica's raft view, descriptor and configuration,
// or why the node has no replica.
func (c *interaction) print(td *datadriven.TestData) {
	var node, rangeID uint64
	td.MaybeScanArgs(c.t, "node", &node)
	td.MaybeScanArgs(c.t, "range", &rangeID)
	ranges := slices.Clone(c.ranges)
	slices.Sort(ranges)
	for _, id := range slices.Compact(ranges) {
		if rangeID != 0 && id != rangeID {
			continue
		}
		fmt.Fprintf(c.out, "range %d\n", id)
		for _, nid := range c.ids {
			if node != 0 && nid != node {
				continue
			}
			c.printReplica(c.nodes[nid], id, td.HasArg("keys"))
		}
	}
}

func (c *interaction) printReplica(n *testNode, rangeID uint64, keys bool) {
	r := n.store.Replica(rangeID)
	if r == nil {
		switch ts := n.store.tombstoneReplicaID(rangeID); {
		case ts == 0:
		case n.store.MergedAway(rangeID):
			fmt.Fprintf(c.out, "  n%d: merged away\n", n.id)
		default:
			fmt.Fprintf(c.out, "  n%d: removed (tombstone at replica %d)\n", n.id, ts)
		}
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.desc == nil {
		fmt.Fprintf(c.out, "  n%d: replica %d uninitialized\n", n.id, r.replicaID)
		return
	}
	state := strings.ToLower(strings.TrimPrefix(r.state.String(), "State"))
	if l := r.nodeOfLocked(r.leader); l != 0 && r.state != raft.StateLeader {
		state += fmt.Sprintf(" of n%d", l)
	}
	log := fmt.Sprintf("log %d..%d", r.log.TruncatedIndex()+1, r.log.Last())
	if r.log.Last() == r.log.TruncatedIndex() {
		log = fmt.Sprintf("log empty after %d", r.log.TruncatedIndex())
	}
	fmt.Fprintf(c.out, "  n%d: replica %d, %s, term %d, applied %d, %s", n.id, r.replicaID, state,
		r.log.HardState().GetTerm(), r.applied, log)
	if r.quiesced {
		fmt.Fprint(c.out, ", quiesced")
	}
	d := r.desc
	fmt.Fprintf(c.out, "\n      [%s, %s) gen %d:", d.StartKey, endKey(d.EndKey), d.Generation)
	for _, rd := range d.Replicas {
		fmt.Fprintf(c.out, " n%d/%d", rd.NodeId, rd.ReplicaId)
		if rd.Learner {
			fmt.Fprint(c.out, " (learner)")
		}
	}
	if d.MergingInto != 0 {
		fmt.Fprintf(c.out, "; frozen at %d for a merge into range %d", d.FreezeIndex, d.MergingInto)
	}
	cs := r.log.ConfState()
	fmt.Fprintf(c.out, "\n      raft voters %v", cs.GetVoters())
	if len(cs.GetVotersOutgoing()) > 0 {
		fmt.Fprintf(c.out, " outgoing %v", cs.GetVotersOutgoing())
	}
	if len(cs.GetLearners()) > 0 {
		fmt.Fprintf(c.out, " learners %v", cs.GetLearners())
	}
	fmt.Fprintln(c.out)
	if keys {
		lo, hi := storage.DataSpan(r.IsMeta(), d.StartKey, d.EndKey)
		it, err := n.eng.NewIter(lo, hi)
		if err != nil {
			c.t.Fatal(err)
		}
		var kvs []string
		for ok := it.First(); ok; ok = it.Next() {
			v, err := stored.Decode(it.Value())
			if err != nil {
				c.t.Fatal(err)
			}
			kvs = append(kvs, fmt.Sprintf("%s=%s", storage.StripDataPrefix(it.Key()), v.Data))
		}
		if err := it.Close(); err != nil {
			c.t.Fatal(err)
		}
		fmt.Fprintf(c.out, "      keys (%d): %s\n", len(kvs), compactKeys(kvs))
	}
}

func endKey(k []byte) string {
	if len(k) == 0 {
		return "∞"
	}
	return string(k)
}

// compactKeys lists at most six pairs: the first three and the last three.
func compactKeys(kvs []string) string {
	if len(kvs) > 6 {
		kvs = append(append(slices.Clone(kvs[:3]), "..."), kvs[len(kvs)-3:]...)
	}
	return strings.Join(kvs, " ")
}
