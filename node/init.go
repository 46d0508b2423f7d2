package node

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/shoaldb/shoal/pb"
)

// Initialization of a cluster whose nodes all started with --join (as CockroachDB's `init`): every node
// waits in its join loop until some node of its --join list belongs to a cluster; `shoal init --host A`
// (the Init RPC) makes A bootstrap one, and the others then join through A. The nodes of a Kubernetes
// StatefulSet can so share one pod template.
//
// Invariant: a node bootstraps at most once, and only while it waits to join with no identity — either
// Start's --bootstrap path or one accepted Init, never both: the join loop is the only place that runs
// an accepted Init, and it stops taking them once it has an identity.

// initPhase is where a node is on its way to a cluster identity, as Init sees it.
type initPhase int

const (
	phaseStarting     initPhase = iota // Start has not decided yet how the node gets its identity
	phaseWaiting                       // in the join loop: an Init is welcome
	phaseInitializing                  // an Init was accepted and is checking peers or bootstrapping
	phaseMember                        // the node has an identity (bootstrapped, joined or restarted)
)

// initGate hands an accepted Init to the join loop and tells Init where the node is.
type initGate struct {
	mu        sync.Mutex
	phase     initPhase
	clusterID string // set with phaseMember
	nodeID    uint64
	// requests carries an accepted Init to the join loop, which answers on the channel it receives
	// with bootstrap's result. At most one Init is accepted (phaseInitializing), so a send never blocks.
	requests chan chan error
	// member is closed once the node has an identity.
	member chan struct{}
	// cancelAttempt cancels the join loop's Join call in flight, so that an accepted Init does not
	// wait for a peer that does not answer.
	cancelAttempt context.CancelFunc
}

func newInitGate() *initGate {
	return &initGate{requests: make(chan chan error, 1), member: make(chan struct{})}
}

// setPhase moves the gate to phaseWaiting or phaseStarting (back from a refused Init).
func (g *initGate) setPhase(p initPhase) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.phase != phaseMember {
		g.phase = p
	}
}

// joined records the node's identity: every later Init is answered "already initialized".
func (g *initGate) joined(clusterID string, nodeID uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.phase == phaseMember {
		return
	}
	g.phase, g.clusterID, g.nodeID = phaseMember, clusterID, nodeID
	close(g.member)
}

// initCheckTimeout bounds the check of one peer before an Init bootstraps.
const initCheckTimeout = 3 * time.Second

// Init implements pb.ShoalServer: see pb.InitRequest.
func (n *Node) Init(ctx context.Context, req *pb.InitRequest) (*pb.InitResponse, error) {
	g := n.initGate
	g.mu.Lock()
	phase, clusterID, nodeID := g.phase, g.clusterID, g.nodeID
	if phase == phaseWaiting && !req.CheckOnly {
		g.phase = phaseInitializing
	}
	g.mu.Unlock()
	switch phase {
	case phaseMember:
		return alreadyInitialized(clusterID, nodeID, fmt.Sprintf("node %d (%s) belongs to cluster %s", nodeID, n.cfg.Addr, clusterID)), nil
	case phaseStarting:
		return &pb.InitResponse{Error: &pb.Error{Code: pb.ErrorCode_UNAVAILABLE,
			Message: "node is starting: retry in a moment (a node waits for init only when started with --join and a new store)"}}, nil
	case phaseInitializing:
		// Reported as initialized: a peer checking before its own init must not create a second cluster.
		return &pb.InitResponse{AlreadyInitialized: true, Error: &pb.Error{Code: pb.ErrorCode_INVALID_ARGUMENT,
			Message: fmt.Sprintf("cluster is already initialized: an init of %s is under way", n.cfg.Addr)}}, nil
	}
	if req.CheckOnly {
		return &pb.InitResponse{}, nil
	}
	// A cluster may already exist among the peers (another node was initialized, or bootstrapped):
	// a second one would split the nodes into two clusters.
	if addr, resp := n.memberAmongPeers(ctx); resp != nil {
		g.setPhase(phaseWaiting)
		where := fmt.Sprintf("node %d (%s) of --join belongs to cluster %s", resp.NodeId, addr, resp.ClusterId)
		if resp.ClusterId == "" {
			where = resp.GetError().GetMessage()
		}
		return alreadyInitialized(resp.ClusterId, 0, strings.TrimPrefix(where, "cluster is already initialized: ")), nil
	}
	done := make(chan error, 1)
	g.requests <- done
	g.mu.Lock()
	if g.cancelAttempt != nil {
		g.cancelAttempt()
	}
	g.mu.Unlock()
	var err error
	select {
	case err = <-done:
	case <-g.member:
		if _, ok := g.takeRequest(); ok {
			// The join loop joined a cluster before it took the request (and never will now).
			g.mu.Lock()
			clusterID, nodeID = g.clusterID, g.nodeID
			g.mu.Unlock()
			return alreadyInitialized(clusterID, nodeID, fmt.Sprintf("node %d (%s) has just joined cluster %s", nodeID, n.cfg.Addr, clusterID)), nil
		}
		err = <-done // the join loop took it: its answer is on its way
	case <-ctx.Done():
		return nil, ctx.Err() // the join loop may still take the request and bootstrap
	}
	if err != nil {
		return &pb.InitResponse{Error: &pb.Error{Code: pb.ErrorCode_INTERNAL, Message: err.Error()}}, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return &pb.InitResponse{ClusterId: g.clusterID, NodeId: g.nodeID}, nil
}

func alreadyInitialized(clusterID string, nodeID uint64, where string) *pb.InitResponse {
	return &pb.InitResponse{ClusterId: clusterID, NodeId: nodeID, AlreadyInitialized: true,
		Error: &pb.Error{Code: pb.ErrorCode_INVALID_ARGUMENT, Message: "cluster is already initialized: " + where}}
}

// memberAmongPeers asks every other node of the --join list whether it belongs to a cluster, and
// returns the first that does (nil if none answers yes; peers that do not answer count as no).
func (n *Node) memberAmongPeers(ctx context.Context) (string, *pb.InitResponse) {
	type answer struct {
		addr string
		resp *pb.InitResponse
	}
	peers := n.joinPeers()
	answers := make(chan answer, len(peers))
	for _, addr := range peers {
		go func() {
			var resp *pb.InitResponse
			if c, err := n.peers.Client(addr); err == nil {
				cctx, cancel := context.WithTimeout(ctx, initCheckTimeout)
				resp, _ = c.Init(cctx, &pb.InitRequest{CheckOnly: true})
				cancel()
			}
			answers <- answer{addr, resp}
		}()
	}
	var found answer
	for range peers {
		if a := <-answers; a.resp.GetAlreadyInitialized() && found.resp == nil {
			found = a
		}
	}
	return found.addr, found.resp
}

// joinPeers is the --join list without this node's own address: a StatefulSet's pods share one list
// that names each of them.
func (n *Node) joinPeers() []string {
	var out []string
	for _, a := range n.cfg.Join {
		if !strings.EqualFold(a, n.cfg.Addr) {
			out = append(out, a)
		}
	}
	return out
}

// takeRequest returns an accepted Init waiting for the join loop, if there is one.
func (g *initGate) takeRequest() (chan error, bool) {
	select {
	case done := <-g.requests:
		return done, true
	default:
		return nil, false
	}
}

// setAttempt records how to cancel the join loop's call in flight (nil: none).
func (g *initGate) setAttempt(cancel context.CancelFunc) {
	g.mu.Lock()
	g.cancelAttempt = cancel
	g.mu.Unlock()
}

// initBootstrap runs an accepted Init in the join loop: the node bootstraps a new cluster.
func (n *Node) initBootstrap(done chan<- error) error {
	err := n.bootstrap()
	if err == nil {
		n.initGate.joined(n.ident.ClusterID, n.ident.NodeID)
		n.log.Info("initialized a new cluster (shoal init): the other nodes join through this one", "cluster", n.ident.ClusterID, "node", n.ident.NodeID)
	}
	done <- err
	if err != nil {
		return fmt.Errorf("initialize a new cluster: %w", err)
	}
	return nil
}
