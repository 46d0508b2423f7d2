// Package localnode starts a real Shoal node inside the current process — its own Pebble engine,
// kv node and gRPC server on a loopback listener — and stops it abruptly. The test harness, the
// scenario runner and the core benchmarks share it. It must never be used by `shoal start` (package
// server owns real processes: flags, HTTP, signals).
package localnode

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/grpc"

	"github.com/shoaldb/shoal/kv"
	"github.com/shoaldb/shoal/storage"
	"github.com/shoaldb/shoal/storage/emudisk"
	"github.com/shoaldb/shoal/transport"
)

// Options say where and how to start a node.
type Options struct {
	// Dir is the data directory; Create makes a new store there (bootstrap or join).
	Dir    string
	Create bool
	// Addr is the node's gRPC address. Listener, if set, is already bound to it; otherwise Start
	// binds Addr itself, retrying for a few seconds (a restart may race the old socket's release).
	Addr     string
	Listener net.Listener
	// CacheBytes is the block cache size (0: the storage default).
	CacheBytes int64
	// MemTableBytes is the memtable size (0: the storage default). Pebble reserves the memtables'
	// size out of the block cache, so a small cache needs small memtables to cache anything.
	MemTableBytes uint64
	// LBaseMaxBytes is storage.Options.LBaseMaxBytes (0: Pebble's default).
	LBaseMaxBytes int64
	// TargetFileBytes is storage.Options.TargetFileBytes (0: Pebble's default).
	TargetFileBytes int64
	// Device gives the node's engine an emulated disk of its own (see storage/emudisk); nil: off.
	Device *emudisk.Options
	// FS is the engine's filesystem (nil: the OS); tests wrap it to inject faults (storage/faultfs).
	FS vfs.FS
	// KV is the node's configuration; Engine and Addr are filled in.
	KV kv.Config
	// StartTimeout bounds kv.Node.Start (bootstrap or join). Default 60s.
	StartTimeout time.Duration
}

// Node is a running in-process node.
type Node struct {
	Addr string
	Eng  *storage.Engine
	KV   *kv.Node
	srv  *grpc.Server
}

// Start opens the store, starts the node and serves gRPC on its address.
func Start(ctx context.Context, o Options) (*Node, error) {
	if o.Create {
		if err := os.MkdirAll(o.Dir, 0o755); err != nil {
			return nil, err
		}
	}
	eng, err := storage.Open(o.Dir, storage.Options{CreateIfMissing: o.Create, CacheBytes: o.CacheBytes, MemTableBytes: o.MemTableBytes,
		LBaseMaxBytes: o.LBaseMaxBytes,
		TargetFileBytes: o.TargetFileBytes, Device: o.Device, FS: o.FS})
	if err != nil {
		return nil, err
	}
	cfg := o.KV
	cfg.Engine, cfg.Addr = eng, o.Addr
	kn, err := kv.NewNode(cfg)
	if err != nil {
		eng.Close()
		return nil, err
	}
	lis := o.Listener
	if lis == nil {
		for i := 0; i < 50; i++ {
			if lis, err = net.Listen("tcp", o.Addr); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			eng.Close()
			return nil, fmt.Errorf("listen on %s: %w", o.Addr, err)
		}
	}
	srv := grpc.NewServer(transport.ServerOptions()...)
	kn.RegisterServices(srv)
	go srv.Serve(lis)
	timeout := o.StartTimeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := kn.Start(sctx); err != nil {
		srv.Stop()
		eng.Close()
		return nil, err
	}
	return &Node{Addr: o.Addr, Eng: eng, KV: kn, srv: srv}, nil
}

// Kill stops the node abruptly, as far as one process allows: the gRPC server is cut (running
// handlers finish first, so the engine is never closed under one), the node's goroutines stop and the
// engine closes, with no leadership handoff.
func (n *Node) Kill() {
	n.srv.Stop()
	n.KV.Stop()
	n.Eng.Close()
}

// Server is the node's gRPC server (for callers that stop it their own way first).
func (n *Node) Server() *grpc.Server { return n.srv }
