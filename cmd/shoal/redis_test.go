package main

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/shoaldb/shoal/node"
	"github.com/shoaldb/shoal/server/resp"
	"github.com/shoaldb/shoal/storage"
)

// TestRedisKeys: put/get/del --redis reach the keys redis-cli reads and writes through --resp, and
// plain keys stay apart from them.
func TestRedisKeys(t *testing.T) {
	glis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rlis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nd, err := node.StartServing(context.Background(), node.Config{DataDir: t.TempDir(), Addr: glis.Addr().String(), Bootstrap: true,
		Storage: storage.Options{CacheBytes: 8 << 20}}, glis)
	if err != nil {
		t.Fatal(err)
	}
	defer nd.Kill()
	srv, err := resp.New(resp.Config{Node: nd, GRPCAddr: glis.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(rlis)
	defer srv.Close()
	rc := redis.NewClient(&redis.Options{Addr: rlis.Addr().String()})
	defer rc.Close()
	ctx := context.Background()
	host := "--host=" + glis.Addr().String()

	if code, _, errOut := shoal(t, host, "put", "--redis", "user:1", "alice"); code != 0 {
		t.Fatalf("put --redis: %d %s", code, errOut)
	}
	if v, err := rc.Get(ctx, "user:1").Result(); err != nil || v != "alice" {
		t.Fatalf("redis GET of the key put --redis wrote: %q, %v", v, err)
	}
	if err := rc.Set(ctx, "user:2", "bob", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := shoal(t, host, "get", "--redis", "user:2"); code != 0 || out != "bob\n" {
		t.Fatalf("get --redis of a key SET through RESP: %d %q %q", code, out, errOut)
	}
	// The plain key of the same name is another key.
	if code, _, errOut := shoal(t, host, "get", "user:2"); code != 1 || errOut != "not found\n" {
		t.Fatalf("get without --redis: %d %q", code, errOut)
	}
	if code, out, _ := shoal(t, host, "del", "--redis", "user:2"); code != 0 || strings.TrimSpace(out) != "deleted" {
		t.Fatalf("del --redis: %d %q", code, out)
	}
	if n, err := rc.Exists(ctx, "user:2").Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS after del --redis: %d, %v", n, err)
	}
	// A scan shows the keys RESP stored by their Redis names, beside plain keys.
	if code, _, errOut := shoal(t, host, "put", "plain", "p"); code != 0 {
		t.Fatalf("put: %d %s", code, errOut)
	}
	if code, out, errOut := shoal(t, host, "scan", "", ""); code != 0 || !strings.Contains(out, "redis:user:1\talice\n") ||
		!strings.Contains(out, "plain\tp\n") {
		t.Fatalf("scan: %d %q %q", code, out, errOut)
	}
	code, out, _ := shoal(t, host, "--format", "json", "scan", "", "")
	if code != 0 || !strings.Contains(out, `"redis":"redis:user:1"`) && !strings.Contains(out, `"redis": "redis:user:1"`) {
		t.Fatalf("scan --format json: %d %q", code, out)
	}
}
