package testcluster

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/shoaldb/shoal/autopilot/policy"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
)

// StopTimeout bounds how long KillWait waits for a node's in-flight gRPC handlers.
const StopTimeout = 20 * time.Second

// KillWait is Kill, except that it waits for the node's in-flight gRPC handlers to return before it
// stops the node and closes its engine.
//
// Why: Kill calls grpc.Server.Stop, which closes connections and cancels RPCs but does not wait for
// running handlers (unless the server was built with grpc.WaitForHandlers). A raft-stream handler in
// the middle of a batch then steps raft on an engine Kill has already closed, and pebble panics with
// "pebble: closed", taking the whole test binary down. GracefulStop does wait for handlers, and a
// concurrent Stop cuts it short without skipping that wait; that is what this does.
//
// It returns an error (and leaves the node stopped but its engine open) if the handlers do not
// return within StopTimeout. Safe to call from any goroutine that owns the node's lifecycle.
func (c *Cluster) KillWait(i int) error {
	n := c.Nodes[i]
	if !n.alive {
		return nil
	}
	done := make(chan struct{})
	go func() {
		n.srv.GracefulStop()
		close(done)
	}()
	n.srv.Stop()
	c.countDropped(n)
	return c.closeAfter(i, done)
}

// StopGracefully stops node i as `shoal start` does on SIGTERM: its leaderships handed to peers (up
// to 5 s), its client requests in flight answered while new ones are refused (up to 2 s), the node
// stopped, its gRPC server stopped gracefully (up to 1 s, then cut), and its engine closed.
func (c *Cluster) StopGracefully(i int) error {
	n := c.Nodes[i]
	if !n.alive {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	n.Node.DrainLeaderships(ctx)
	cancel()
	ctx, cancel = context.WithTimeout(context.Background(), 2*time.Second)
	n.Node.DrainRequests(ctx)
	cancel()
	n.Node.Stop()
	done := make(chan struct{})
	go func() {
		n.srv.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Second): // peers' raft streams hold a graceful stop
		n.srv.Stop()
	}
	c.countDropped(n)
	return c.closeAfter(i, done)
}

// closeAfter closes node i's engine once done (its gRPC handlers returned) is closed, and marks the
// node stopped; if the handlers do not return within StopTimeout it leaves the engine open and says so.
func (c *Cluster) closeAfter(i int, done <-chan struct{}) error {
	n := c.Nodes[i]
	select {
	case <-done:
	case <-time.After(StopTimeout):
		n.Node.Stop()
		n.lis, n.alive = nil, false
		return fmt.Errorf("node %d: gRPC handlers still running %v after Stop; engine left open", i+1, StopTimeout)
	}
	n.Node.Stop()
	n.Eng.Close()
	n.lis = nil
	n.alive = false
	return nil
}

// StartSafe is Start, except that at test end the nodes are stopped with KillWait rather than Kill
// (see KillWait for why Kill can panic in pebble when a node is stopped with requests in flight).
func StartSafe(t testing.TB, opts Options) *Cluster {
	t.Helper()
	c := Start(t, opts)
	// Cleanups run last-registered first: this runs after the clients made later are closed, and
	// before the Stop registered by Start, which then finds every node already stopped.
	t.Cleanup(func() {
		for i := range c.Nodes {
			if err := c.KillWait(i); err != nil {
				t.Errorf("stopping the cluster: %v", err)
			}
		}
	})
	return c
}

// TryRestart is Restart for goroutines other than the test's own (a nemesis, say): it returns the
// error instead of failing the test, since t.Fatal may only be called from the test goroutine.
// Calls on the same cluster must not race with each other or with Kill.
func (c *Cluster) TryRestart(i int) error {
	n := c.Nodes[i]
	if n.alive {
		return nil
	}
	if err := c.startNode(n, false, false); err != nil {
		return fmt.Errorf("restart node %d: %w", i+1, err)
	}
	return nil
}

// NewClient returns a client connected to every node with the given per-attempt timeout and attempt
// budget (zero: the harness defaults of Client). It is closed at test end. Call it from the test
// goroutine.
func (c *Cluster) NewClient(requestTimeout time.Duration, maxAttempts int) *client.Client {
	c.t.Helper()
	if requestTimeout == 0 {
		requestTimeout = 3 * time.Second
	}
	if maxAttempts == 0 {
		maxAttempts = 40
	}
	var all []string
	for _, n := range c.Nodes {
		all = append(all, n.Addr)
	}
	cl, err := client.New(context.Background(), client.Config{Addrs: all, RequestTimeout: requestTimeout, MaxAttempts: maxAttempts})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { cl.Close() })
	return cl
}

// RangeOf returns the status of the user range holding key, as the cluster reports it.
func RangeOf(ctx context.Context, cl *client.Client, key []byte) (*pb.RangeStatus, error) {
	rs, err := cl.UserRanges(ctx)
	if err != nil {
		return nil, err
	}
	for _, r := range rs {
		d := r.GetDesc()
		if bytes.Compare(key, d.GetStartKey()) >= 0 && (len(d.GetEndKey()) == 0 || bytes.Compare(key, d.GetEndKey()) < 0) {
			return r, nil
		}
	}
	return nil, fmt.Errorf("no user range holds key %q (%d user ranges)", key, len(rs))
}

// NodeIndex maps a node id to its index in c.Nodes (node ids are assigned in start order: node i+1
// is c.Nodes[i]). It returns -1 if no node has that id.
func (c *Cluster) NodeIndex(nodeID uint64) int {
	for i, n := range c.Nodes {
		if n.Node != nil && n.Node.NodeID() == nodeID {
			return i
		}
	}
	if nodeID >= 1 && int(nodeID) <= len(c.Nodes) {
		return int(nodeID) - 1
	}
	return -1
}

// LocalReplica returns node i's replica of the user range holding key, or nil.
func (c *Cluster) LocalReplica(i int, key []byte) *replica.Replica {
	n := c.Nodes[i]
	if !n.alive {
		return nil
	}
	for _, r := range n.Node.Store().Replicas() {
		if r.IsMeta() {
			continue
		}
		d := r.Desc()
		if d == nil {
			continue
		}
		if bytes.Compare(key, d.GetStartKey()) >= 0 && (len(d.GetEndKey()) == 0 || bytes.Compare(key, d.GetEndKey()) < 0) {
			return r
		}
	}
	return nil
}

// AddNode starts one more node, which joins the cluster through node 1, and returns its index. Like
// TryRestart it returns errors instead of failing the test; it must not race with Kill or restarts.
func (c *Cluster) AddNode() (int, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	i := len(c.Nodes)
	n := &Node{Index: i, Dir: filepath.Join(c.t.TempDir(), fmt.Sprintf("n%d", i+1)), Addr: lis.Addr().String(), lis: lis}
	c.Nodes = append(c.Nodes, n)
	if err := c.startNode(n, false, true); err != nil {
		return i, fmt.Errorf("start node %d: %w", i+1, err)
	}
	return i, nil
}

// SwitchOff switches the named autopilot policies off (so that a test controls what moves), failing t
// on an error. Call it from the test goroutine.
func SwitchOff(t testing.TB, ctx context.Context, cl *client.Client, policies ...string) {
	t.Helper()
	for _, p := range policies {
		if err := cl.SetPolicy(ctx, p, false); err != nil {
			t.Fatal(err)
		}
	}
}

// Hold switches off the autopilot policies that move replicas or leaderships on their own
// (rebalance, merge, load split, shed) and waits until no operator runs, so that a test's clients
// see a placement that stays put. Call it from the test goroutine.
func Hold(t testing.TB, ctx context.Context, cl *client.Client) {
	t.Helper()
	SwitchOff(t, ctx, cl, policy.NameRebalance, policy.NameMerge, policy.NameLoadSplit, policy.NameShed)
	WaitFor(t, 60*time.Second, "no autopilot operator running", func() bool {
		ds, _, err := cl.Decisions(ctx)
		if err != nil {
			return false
		}
		for _, d := range ds {
			if d.Status == "running" {
				return false
			}
		}
		return true
	})
}
