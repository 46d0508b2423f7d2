package benchutil

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"sync"

	"github.com/shoaldb/shoal/node"
	"github.com/shoaldb/shoal/storage"
	"github.com/shoaldb/shoal/storage/emudisk"
)

// NodeConfig is an in-process node's configuration as the benchmarks tune it (policies, hints,
// snapshot rates, intervals). Every bench package names it through this alias and starts nodes only
// through StartNode, so that a change of the node's package is an edit of this file.
type NodeConfig = node.Config

// NodeSpec says where and how to start a node.
type NodeSpec struct {
	Dir    string
	Create bool // a new store (bootstrap, or join through Config.Join)
	// Listener is bound to the node's gRPC address (Listen); without one the node binds Addr itself
	// (a restart, retrying while the old socket is released).
	Listener net.Listener
	Addr     string
	// CacheBytes and MemTableBytes size the engine's block cache and memtables (0: the storage
	// defaults).
	CacheBytes    int64
	MemTableBytes uint64
	// Device is the engine's emulated disk (nil: the machine's).
	Device *emudisk.Options
	Config NodeConfig
	// PerNode, when set, adjusts the spec of the cluster's node i (from 0) before it starts.
	PerNode func(i int, s *NodeSpec)
}

// Node is a running in-process node.
type Node struct {
	Addr string
	Eng  *storage.Engine
	KV   *node.Node
}

// Listen binds a loopback port for a node's gRPC server: its address is the node's identity across
// a kill and a restart.
func Listen() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }

// StartNode opens the store, starts the node and serves gRPC on s.Listener (or s.Addr).
func StartNode(ctx context.Context, s NodeSpec) (*Node, error) {
	addr := s.Addr
	if s.Listener != nil {
		addr = s.Listener.Addr().String()
	}
	cfg := s.Config
	cfg.DataDir, cfg.Addr = s.Dir, addr
	cfg.Storage.CreateIfMissing = s.Create
	cfg.Storage.CacheBytes, cfg.Storage.MemTableBytes = s.CacheBytes, s.MemTableBytes
	cfg.Storage.Device = s.Device
	if st := cfg.Storage.WithDefaults(); st.BlockRoomBytes() < st.CacheBytes/4 {
		slog.Warn("the block cache leaves little room for blocks beside the memtables Pebble charges to it",
			"node", addr, "cache_bytes", st.CacheBytes, "memtable_bytes", st.MemTableBytes, "room_bytes", st.BlockRoomBytes())
	}
	n, err := node.StartServing(ctx, cfg, s.Listener)
	if err != nil {
		return nil, err
	}
	return &Node{Addr: addr, Eng: n.Engine(), KV: n}, nil
}

// Kill stops the node abruptly: its gRPC server cut, its goroutines stopped, its engine closed, no
// leadership handed off.
func (n *Node) Kill() { n.KV.Kill() }

// Cluster is a local cluster of in-process nodes, n1 … nN in directories n1 … nN under one
// directory: the first bootstraps, the others join it. A node keeps its directory and address
// across a kill and a restart.
type Cluster struct {
	dir   string
	spec  NodeSpec // every node's: Dir, Listener, Addr, Create, Bootstrap and Join are set per node
	mu    sync.Mutex
	addrs []string
	nodes []*Node // nil: killed
	// DeviceBefore sums, per node, the emulated-disk counters of its engines closed by kills.
	deviceBefore []emudisk.Stats
}

// StartCluster starts n nodes from spec.
func StartCluster(ctx context.Context, dir string, n int, spec NodeSpec) (*Cluster, error) {
	c := &Cluster{dir: dir, spec: spec}
	for i := 0; i < n; i++ {
		if _, err := c.Add(ctx); err != nil {
			c.Stop()
			return nil, fmt.Errorf("start node %d: %w", i+1, err)
		}
	}
	return c, nil
}

// Add starts one more node, which joins the cluster (or bootstraps it, the first); it returns its
// index.
func (c *Cluster) Add(ctx context.Context) (int, error) {
	lis, err := Listen()
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	i := len(c.nodes)
	c.addrs = append(c.addrs, lis.Addr().String())
	c.nodes = append(c.nodes, nil)
	c.deviceBefore = append(c.deviceBefore, emudisk.Stats{})
	c.mu.Unlock()
	if err := c.start(ctx, i, lis); err != nil {
		lis.Close()
		return i, err
	}
	return i, nil
}

func (c *Cluster) start(ctx context.Context, i int, lis net.Listener) error {
	s := c.spec
	s.Dir, s.Listener, s.Addr, s.Create = filepath.Join(c.dir, fmt.Sprintf("n%d", i+1)), lis, c.addrs[i], lis != nil
	s.Config.Bootstrap = i == 0 && lis != nil
	if s.PerNode != nil {
		s.PerNode(i, &s)
	}
	if !s.Config.Bootstrap {
		s.Config.Join = []string{c.addrs[0]}
		if i == 0 {
			s.Config.Join = []string{c.addrs[1]}
		}
	}
	n, err := StartNode(ctx, s)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.nodes[i] = n
	c.mu.Unlock()
	return nil
}

// Kill stops node i abruptly (Node.Kill); a killed node stays killed.
func (c *Cluster) Kill(i int) {
	c.mu.Lock()
	n := c.nodes[i]
	c.nodes[i] = nil
	c.mu.Unlock()
	if n == nil {
		return
	}
	n.Kill()
	c.mu.Lock()
	c.deviceBefore[i] = c.deviceBefore[i].Add(n.Eng.DeviceStats())
	c.mu.Unlock()
}

// Restart starts killed node i again from its directory (a live node is left alone).
func (c *Cluster) Restart(ctx context.Context, i int) error {
	if c.Node(i) != nil {
		return nil
	}
	return c.start(ctx, i, nil)
}

// Stop kills every node.
func (c *Cluster) Stop() {
	for i := range c.Len() {
		c.Kill(i)
	}
}

// Len is the number of nodes started, live or killed.
func (c *Cluster) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.nodes)
}

// Node is node i, or nil while it is killed.
func (c *Cluster) Node(i int) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i]
}

// Nodes lists every node, nil for a killed one.
func (c *Cluster) Nodes() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Node(nil), c.nodes...)
}

// Addrs lists the nodes' gRPC addresses.
func (c *Cluster) Addrs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.addrs...)
}

// IndexOf is the index of the live node with id, or -1.
func (c *Cluster) IndexOf(id uint64) int {
	for i, n := range c.Nodes() {
		if n != nil && n.KV.NodeID() == id {
			return i
		}
	}
	return -1
}

// TotalDeviceStats sums every node's emulated-disk counters since the cluster started.
func (c *Cluster) TotalDeviceStats() emudisk.Stats {
	var sum emudisk.Stats
	for i := range c.Nodes() {
		sum = sum.Add(c.DeviceStats(i))
	}
	return sum
}

// DeviceStats are node i's emulated-disk counters since the cluster started, across kills.
func (c *Cluster) DeviceStats(i int) emudisk.Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.nodes[i]; n != nil {
		return c.deviceBefore[i].Add(n.Eng.DeviceStats())
	}
	return c.deviceBefore[i]
}
