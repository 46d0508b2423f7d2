package server_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/node"
	"github.com/shoaldb/shoal/server"
)

// TestRunRESP runs a node with a RESP listener (port 0, auth token on): its descriptor advertises the
// real RESP address, a Redis client needs the token, and stopping the node closes the listener.
func TestRunRESP(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "n1")
	cfg := server.Config{Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", RESP: "127.0.0.1:0", Node: node.Config{DataDir: dir, Bootstrap: true, AuthToken: "tok"}}
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

	// RESP commands are counted and timed in /metrics.
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+n.http+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`shoal_resp_commands_total{command="set",outcome="ok"} 1`, `shoal_resp_commands_total{command="get",outcome="ok"}`,
		`shoal_resp_command_duration_seconds_count{command="get"}`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	n.stop(t)
	if nc, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		nc.Close()
		t.Fatal("RESP listener still accepts after the node stopped")
	}
}
