package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/node"
	"github.com/shoaldb/shoal/server"
	"github.com/shoaldb/shoal/storage"
)

// syncBuffer is an io.Writer safe for Run's goroutine and the test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var readyLine = regexp.MustCompile(`(?m)^shoal node (\d+) ready grpc=(\S+) http=(\S+)$`)

// runningNode is a Run in a goroutine.
type runningNode struct {
	cancel     context.CancelFunc
	done       chan error
	grpc, http string
}

// startNode runs cfg and waits for its ready line.
func startNode(t *testing.T, cfg server.Config) *runningNode {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	n := &runningNode{cancel: cancel, done: make(chan error, 1)}
	go func() { n.done <- server.Run(ctx, cfg, out) }()
	deadline := time.After(60 * time.Second)
	for {
		if m := readyLine.FindStringSubmatch(out.String()); m != nil {
			if m[1] == "0" {
				t.Errorf("ready line reports node id 0: %q", m[0])
			}
			n.grpc, n.http = m[2], m[3]
			return n
		}
		select {
		case err := <-n.done:
			t.Fatalf("Run returned before the node was ready: %v (output %q)", err, out.String())
		case <-deadline:
			cancel()
			t.Fatalf("node not ready after 60s; output %q", out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stop cancels the node's context and expects a clean, prompt return.
func (n *runningNode) stop(t *testing.T) {
	t.Helper()
	n.cancel()
	select {
	case err := <-n.done:
		if err != nil {
			t.Fatalf("Run after cancel = %v, want nil", err)
		}
	case <-time.After(20 * time.Second):
		// Every goroutine's stack: what the stop waits on.
		buf := make([]byte, 4<<20)
		t.Logf("goroutines:\n%s", buf[:runtime.Stack(buf, true)])
		t.Fatal("Run did not return within 20s of cancel")
	}
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestRunOneNode(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "n1")
	cfg := server.Config{Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", Node: node.Config{DataDir: dir, Bootstrap: true}}
	n := startNode(t, cfg)
	if strings.HasSuffix(n.grpc, ":0") || strings.HasSuffix(n.http, ":0") {
		t.Fatalf("advertised addresses must be the real ports: grpc=%s http=%s", n.grpc, n.http)
	}
	if code, body := httpGet(t, "http://"+n.http+"/healthz"); code != 200 || strings.TrimSpace(body) != "ok" {
		t.Fatalf("/healthz = %d %q", code, body)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.New(ctx, client.Config{Addrs: []string{n.grpc}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Put(ctx, []byte("user/0001"), []byte("ada")); err != nil {
		t.Fatalf("Put: %v", err)
	}
	v, found, err := c.Get(ctx, []byte("user/0001"))
	if err != nil || !found || string(v) != "ada" {
		t.Fatalf("Get = %q, %v, %v; want ada", v, found, err)
	}
	c.Close()

	code, body := httpGet(t, "http://"+n.http+"/api/nodes")
	var nodes []struct {
		ID   uint64 `json:"id"`
		Addr string `json:"addr"`
		Live bool   `json:"live"`
	}
	if err := json.Unmarshal([]byte(body), &nodes); code != 200 || err != nil || len(nodes) != 1 || nodes[0].Addr != n.grpc || !nodes[0].Live {
		t.Fatalf("/api/nodes = %d %s (%v)", code, body, err)
	}
	if code, body := httpGet(t, "http://"+n.http+"/metrics"); code != 200 || !strings.Contains(body, "shoal_grpc_requests_total") {
		t.Fatalf("/metrics = %d, no gRPC request counter", code)
	}
	n.stop(t)

	// The store was closed cleanly: it reopens (the directory lock is free) and the node restarts from its
	// identity without --bootstrap, with the write still there.
	cfg.Node.Bootstrap = false
	n = startNode(t, cfg)
	ctx2, cancel2 := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel2()
	c, err = client.New(ctx2, client.Config{Addrs: []string{n.grpc}})
	if err != nil {
		t.Fatal(err)
	}
	v, found, err = c.Get(ctx2, []byte("user/0001"))
	c.Close()
	if err != nil || !found || string(v) != "ada" {
		t.Fatalf("Get after restart = %q, %v, %v; want ada", v, found, err)
	}
	n.stop(t)
}

func TestRunRefusesMissingStore(t *testing.T) {
	err := server.Run(context.Background(), server.Config{Listen: "127.0.0.1:0", HTTP: server.HTTPOff, Node: node.Config{DataDir: t.TempDir()}}, io.Discard)
	if !errors.Is(err, storage.ErrNoStore) || !strings.Contains(err.Error(), "--bootstrap") {
		t.Fatalf("Run on an empty directory without --bootstrap/--join = %v, want ErrNoStore telling what to do", err)
	}
}

func TestRunInvalidConfig(t *testing.T) {
	err := server.Run(context.Background(), server.Config{Listen: "nope"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "missing data directory") || !strings.Contains(err.Error(), "invalid listen address") {
		t.Fatalf("Run with a bad config = %v", err)
	}
}

func TestRunPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	dir := t.TempDir()
	err = server.Run(context.Background(), server.Config{Listen: l.Addr().String(), HTTP: server.HTTPOff, Node: node.Config{DataDir: dir, Bootstrap: true}}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "listen for gRPC") {
		t.Fatalf("Run on a busy port = %v", err)
	}
	// The store was closed on the way out: it can be opened again at once.
	e, err := storage.Open(dir, storage.Options{})
	if err != nil {
		t.Fatalf("store not released after a failed Run: %v", err)
	}
	e.Close()
}
