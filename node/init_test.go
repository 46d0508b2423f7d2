package node

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/shoaldb/shoal/kv"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
	"github.com/shoaldb/shoal/storage"
)

// waitingNodes starts n nodes that all name every node in --join (themselves included, as the pods of
// one StatefulSet do) and none bootstraps. It returns their addresses and a channel that yields each
// node once its Start returned.
func waitingNodes(t *testing.T, n int) ([]string, <-chan *Node) {
	t.Helper()
	base := t.TempDir()
	var addrs []string
	var lis []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lis = append(lis, l)
		addrs = append(addrs, l.Addr().String())
	}
	started := make(chan *Node, n)
	var mu sync.Mutex
	var nodes []*Node
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	for i := range n {
		cfg := Config{DataDir: filepath.Join(base, fmt.Sprintf("n%d", i+1)), Addr: addrs[i], Join: addrs,
			Storage: storage.Options{CacheBytes: 8 << 20, MemTableBytes: 1 << 20}, HeartbeatInterval: 200 * time.Millisecond,
			KV: kv.Config{QueueInterval: 300 * time.Millisecond}, Raft: replica.Config{TickInterval: 50 * time.Millisecond}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			nd, err := StartServing(ctx, cfg, lis[i])
			if err != nil {
				if ctx.Err() == nil {
					t.Errorf("node %d: %v", i+1, err)
				}
				return
			}
			mu.Lock()
			nodes = append(nodes, nd)
			mu.Unlock()
			started <- nd
		}()
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		for _, nd := range nodes {
			nd.Kill()
		}
	})
	return addrs, started
}

func initClient(t *testing.T, addr string) pb.ShoalClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return pb.NewShoalClient(cc)
}

// callInit sends Init, retrying while the node is still on its way to the join loop.
func callInit(t *testing.T, addr string) *pb.InitResponse {
	t.Helper()
	c := initClient(t, addr)
	for deadline := time.Now().Add(20 * time.Second); ; {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		resp, err := c.Init(ctx, &pb.InitRequest{})
		cancel()
		if err == nil && resp.GetError().GetCode() != pb.ErrorCode_UNAVAILABLE {
			return resp
		}
		if time.Now().After(deadline) {
			t.Fatalf("Init of %s: %v %v", addr, resp, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestInit: nodes that all start with --join wait; Init makes one bootstrap, the others join it, and
// a second Init, on any node, is refused as already initialized.
func TestInit(t *testing.T) {
	addrs, started := waitingNodes(t, 3)
	select {
	case nd := <-started:
		t.Fatalf("node %s started before any init", nd.cfg.Addr)
	case <-time.After(time.Second):
	}
	resp := callInit(t, addrs[1])
	if resp.Error != nil || resp.NodeId != 1 || resp.ClusterId == "" || resp.AlreadyInitialized {
		t.Fatalf("Init = %v", resp)
	}
	ids := map[uint64]bool{}
	for range addrs {
		select {
		case nd := <-started:
			if nd.ClusterID() != resp.ClusterId || ids[nd.NodeID()] {
				t.Fatalf("node %s: cluster %s node %d; init made cluster %s, ids so far %v", nd.cfg.Addr, nd.ClusterID(), nd.NodeID(), resp.ClusterId, ids)
			}
			ids[nd.NodeID()] = true
		case <-time.After(60 * time.Second):
			t.Fatalf("only %d nodes started after init", len(ids))
		}
	}
	for _, a := range addrs {
		again := callInit(t, a)
		if !again.AlreadyInitialized || again.ClusterId != resp.ClusterId || !strings.HasPrefix(again.GetError().GetMessage(), "cluster is already initialized") {
			t.Errorf("second Init of %s = %v", a, again)
		}
	}
}

// TestInitRace: two inits at once on two waiting nodes never make two clusters.
func TestInitRace(t *testing.T) {
	addrs, started := waitingNodes(t, 3)
	var wg sync.WaitGroup
	resps := make([]*pb.InitResponse, 2)
	for i := range resps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resps[i] = callInit(t, addrs[i])
		}()
	}
	wg.Wait()
	ok := 0
	for _, r := range resps {
		if r.Error == nil {
			ok++
		} else if !r.AlreadyInitialized {
			t.Fatalf("Init = %v", r)
		}
	}
	if ok > 1 {
		t.Fatalf("two inits succeeded: %v", resps)
	}
	if ok == 0 { // each saw the other under way: both refused, the nodes still wait
		if r := callInit(t, addrs[2]); r.Error != nil {
			t.Fatalf("Init after two refused ones = %v", r)
		}
	}
	clusters := map[string]bool{}
	for range addrs {
		select {
		case nd := <-started:
			clusters[nd.ClusterID()] = true
		case <-time.After(60 * time.Second):
			t.Fatal("not every node started")
		}
	}
	if len(clusters) != 1 {
		t.Fatalf("clusters %v", clusters)
	}
}

// TestInitBootstrapped: a node started with --bootstrap is initialized; Init tells so.
func TestInitBootstrapped(t *testing.T) {
	nd := startBootstrapped(t)
	resp := callInit(t, nd.cfg.Addr)
	want := fmt.Sprintf("cluster is already initialized: node 1 (%s) belongs to cluster %s", nd.cfg.Addr, nd.ClusterID())
	if !resp.AlreadyInitialized || resp.GetError().GetMessage() != want {
		t.Fatalf("Init = %v; want %q", resp, want)
	}
}
