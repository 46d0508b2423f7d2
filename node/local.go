package node

import (
	"context"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc"

	"github.com/shoaldb/shoal/transport"
)

// DefaultStartTimeout bounds StartServing's bootstrap or join.
const DefaultStartTimeout = 60 * time.Second

// StartServing creates a node, serves its services on plain gRPC on lis (nil: listen on cfg.Addr,
// retrying for a few seconds, since a restart may race the old socket's release) and starts it,
// within DefaultStartTimeout. It is the in-process node of tests and benchmarks; `shoal start` adds
// HTTP, RESP, TLS and authentication around New instead (package server). Kill stops it.
func StartServing(ctx context.Context, cfg Config, lis net.Listener) (*Node, error) {
	n, err := New(cfg)
	if err != nil {
		return nil, err
	}
	if lis == nil {
		for i := 0; i < 50; i++ {
			if lis, err = net.Listen("tcp", cfg.Addr); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			n.Close()
			return nil, fmt.Errorf("listen on %s: %w", cfg.Addr, err)
		}
	}
	n.srv = grpc.NewServer(transport.ServerOptions()...)
	n.RegisterServices(n.srv)
	go n.srv.Serve(lis)
	sctx, cancel := context.WithTimeout(ctx, DefaultStartTimeout)
	defer cancel()
	if err := n.Start(sctx); err != nil {
		n.srv.Stop()
		n.Stop()
		n.Close()
		return nil, err
	}
	return n, nil
}

// Kill stops a node StartServing started, as abruptly as one process allows: the gRPC server is cut
// (running handlers finish first, so the engine is never closed under one), the node's goroutines
// stop and the engine closes, with no leadership handoff.
func (n *Node) Kill() {
	if n.srv != nil {
		n.srv.Stop()
	}
	n.Stop()
	n.Close()
}

// Server is the gRPC server StartServing runs (nil otherwise), for callers that stop it their own way.
func (n *Node) Server() *grpc.Server { return n.srv }
