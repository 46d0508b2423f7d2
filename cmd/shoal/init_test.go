package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoaldb/shoal/node"
	"github.com/shoaldb/shoal/storage"
)

// joinOnlyCluster starts n in-process nodes that all start with --join naming every node and none
// with --bootstrap. started yields each node once it serves.
func joinOnlyCluster(t *testing.T, n int) (addrs []string, started <-chan *node.Node) {
	t.Helper()
	var lis []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lis = append(lis, l)
		addrs = append(addrs, l.Addr().String())
	}
	ch := make(chan *node.Node, n)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var mu sync.Mutex
	var nodes []*node.Node
	base := t.TempDir()
	for i := range n {
		cfg := node.Config{DataDir: filepath.Join(base, fmt.Sprint(i)), Addr: addrs[i], Join: addrs,
			Storage: storage.Options{CacheBytes: 8 << 20}, HeartbeatInterval: 200 * time.Millisecond}
		wg.Add(1)
		go func() {
			defer wg.Done()
			nd, err := node.StartServing(ctx, cfg, lis[i])
			if err != nil {
				if ctx.Err() == nil {
					t.Errorf("node %s: %v", addrs[i], err)
				}
				return
			}
			mu.Lock()
			nodes = append(nodes, nd)
			mu.Unlock()
			ch <- nd
		}()
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		for _, nd := range nodes {
			nd.Kill()
		}
	})
	return addrs, ch
}

func TestInitCommand(t *testing.T) {
	addrs, started := joinOnlyCluster(t, 3)
	select {
	case nd := <-started:
		t.Fatalf("node %d started before init", nd.NodeID())
	case <-time.After(500 * time.Millisecond):
	}

	code, out, errOut := shoal(t, "--host", addrs[0], "init")
	if code != 0 || !strings.Contains(out, "initialized: "+addrs[0]+" is node 1;") || errOut != "" {
		t.Fatalf("init: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	var cluster string
	for range addrs {
		select {
		case nd := <-started:
			if cluster != "" && nd.ClusterID() != cluster {
				t.Fatalf("two clusters: %s and %s", cluster, nd.ClusterID())
			}
			cluster = nd.ClusterID()
		case <-time.After(60 * time.Second):
			t.Fatal("the nodes did not all join after init")
		}
	}
	if !strings.Contains(out, "Cluster "+cluster+" initialized") {
		t.Fatalf("init printed %q, cluster is %s", out, cluster)
	}

	// Any node says the cluster exists, with exit code 1.
	for _, a := range addrs {
		code, out, errOut = shoal(t, "--host", a, "init")
		if code != 1 || out != "" || !strings.HasPrefix(errOut, "Error: cluster is already initialized: node ") || !strings.Contains(errOut, cluster) {
			t.Errorf("second init via %s: code %d, stdout %q, stderr %q", a, code, out, errOut)
		}
	}

	// The cluster serves: a write through any node.
	if code, _, errOut := shoal(t, "--host", addrs[2], "put", "k", "v"); code != 0 {
		t.Fatalf("put after init: %d %s", code, errOut)
	}
}

func TestInitCommandJSON(t *testing.T) {
	addrs, started := joinOnlyCluster(t, 1) // a single node naming only itself waits for init too
	code, out, errOut := shoal(t, "--host", addrs[0], "--format", "json", "init")
	var got struct {
		ClusterID string `json:"cluster_id"`
		NodeID    uint64 `json:"node_id"`
		Addr      string `json:"addr"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil || got.NodeID != 1 || got.ClusterID == "" || got.Addr != addrs[0] {
		t.Fatalf("init --format json: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	select {
	case nd := <-started:
		if nd.ClusterID() != got.ClusterID {
			t.Fatalf("node in cluster %s, init said %s", nd.ClusterID(), got.ClusterID)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the node did not start after init")
	}
}

func TestInitCommandErrors(t *testing.T) {
	code, _, errOut := shoal(t, "--host", "127.0.0.1:1,127.0.0.1:2", "init")
	if code != 2 || !strings.Contains(errOut, "init talks to one node") {
		t.Errorf("two hosts: code %d, stderr %q", code, errOut)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	// At once: within half the default 10-s --timeout, which an init that retries would run into.
	start := time.Now()
	code, _, errOut = shoal(t, "--host", dead, "init")
	if code != 1 || !strings.HasPrefix(errOut, "Error: unavailable: node "+dead) || time.Since(start) > 5*time.Second {
		t.Errorf("refused connection: code %d after %v, stderr %q", code, time.Since(start), errOut)
	}
}
