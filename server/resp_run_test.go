package server_test

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/server"
)

// TestRunRESP runs a node with a RESP listener (port 0, auth token on): its descriptor advertises the
// real RESP address, a Redis client needs the token, and stopping the node closes the listener.
func TestRunRESP(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "n1")
	cfg := server.Config{DataDir: dir, Listen: "127.0.0.1:0", HTTP: server.HTTPOff, RESP: "127.0.0.1:0", Bootstrap: true, AuthToken: "tok"}
	n := startNode(t, cfg)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.New(ctx, client.Config{Addrs: []string{n.grpc}, AuthToken: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	nodes, err := c.Nodes(ctx)
	if err != nil || len(nodes) != 1 {
		t.Fatalf("Nodes = %v, %v", nodes, err)
	}
	addr := nodes[0].Desc.RespAddr
	if addr == "" || strings.HasSuffix(addr, ":0") {
		t.Fatalf("node descriptor advertises RESP address %q, want the real port", addr)
	}

	rc := redis.NewClient(&redis.Options{Addr: addr, Password: "tok"})
	defer rc.Close()
	if err := rc.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET with the token: %v", err)
	}
	if v, err := rc.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("GET = %q, %v", v, err)
	}
	anon := redis.NewClient(&redis.Options{Addr: addr})
	defer anon.Close()
	if err := anon.Get(ctx, "k").Err(); err == nil || !strings.HasPrefix(err.Error(), "NOAUTH") {
		t.Fatalf("GET without the token: %v, want NOAUTH", err)
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}, Password: "tok"})
	defer cc.Close()
	if v, err := cc.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("cluster client GET = %q, %v", v, err)
	}

	n.stop(t)
	if nc, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		nc.Close()
		t.Fatal("RESP listener still accepts after the node stopped")
	}
}
