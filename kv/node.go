// Package kv owns ranges as a distributed whole: the meta range of range descriptors, node identity,
// bootstrap and join, node liveness, routing of requests to the local leader replica, splits and
// up-replication. It serves the public KV API (pb.ShoalServer) for the server layer.
//
// It must never write the engine directly for replicated data: every change goes through a range's
// raft group (package replica).
package kv

import (
	"context"
	"time"

	"google.golang.org/grpc"

	"github.com/shoaldb/shoal/storage"
)

// Config configures a Node. Zero values take the documented defaults.
type Config struct {
	Engine *storage.Engine
	// Addr is the advertised gRPC address (clients and peers dial it).
	Addr string
	// HTTPAddr and RESPAddr are advertised to clients through node descriptors.
	HTTPAddr, RESPAddr string
	// Bootstrap creates a new cluster if the store has no identity yet.
	Bootstrap bool
	// Join lists gRPC addresses of existing nodes to join through if the store has no identity yet.
	Join []string
	// TickInterval is the raft tick (default 100ms; election after 10–20 ticks).
	TickInterval time.Duration
	// MaxKeyBytes (default 4 KiB) and MaxValueBytes (default 8 MiB) bound request sizes.
	MaxKeyBytes, MaxValueBytes int
	// RangeMaxBytes triggers an automatic split (default 64 MiB).
	RangeMaxBytes int64
	// ReplicationFactor is the number of voters per range (default 3).
	ReplicationFactor int
	// DeadNodeTimeout: a node silent for this long is considered dead (default 60s).
	DeadNodeTimeout time.Duration
	// DialOptions are used for node-to-node gRPC (default insecure).
	DialOptions []grpc.DialOption
	// AuthToken is attached to node-to-node calls when the cluster requires one.
	AuthToken string
}

// Node is one Shoal node: its store of replicas, its transport and its view of the cluster.
type Node struct {
	cfg Config
}

// NewNode prepares a node; nothing runs until Start.
func NewNode(cfg Config) (*Node, error) { panic("kv: under construction") }

// RegisterServices registers the public Shoal API and the raft transport on s.
func (n *Node) RegisterServices(s *grpc.Server) { panic("kv: under construction") }

// Start bootstraps or joins the cluster if the store is new, then starts raft, heartbeats and the
// background queues. It returns once the node has an identity and serves requests.
func (n *Node) Start(ctx context.Context) error { panic("kv: under construction") }

// Stop stops every goroutine of the node; the engine stays open (the caller owns it).
func (n *Node) Stop() { panic("kv: under construction") }

// NodeID is the node's id (0 before Start).
func (n *Node) NodeID() uint64 { return 0 }
