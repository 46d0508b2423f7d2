package server_test

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/node"
	"github.com/shoaldb/shoal/server"
)

// TestAuthTokenClusterReplicates starts three nodes that require an auth token and checks that the
// cluster still replicates: raft messages and snapshots between nodes carry the token too.
func TestAuthTokenClusterReplicates(t *testing.T) {
	const token = "s3cret-token"
	base := t.TempDir()
	first := startNode(t, server.Config{Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", Node: node.Config{DataDir: filepath.Join(base, "n1"), Bootstrap: true, AuthToken: token}})
	nodes := []*runningNode{first}
	for i := 2; i <= 3; i++ {
		nodes = append(nodes, startNode(t, server.Config{Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", Node: node.Config{DataDir: filepath.Join(base, "n"+string(rune('0'+i))), Join: []string{first.grpc}, AuthToken: token}}))
	}
	defer func() {
		for i := len(nodes) - 1; i >= 0; i-- {
			nodes[i].stop(t)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := client.New(ctx, client.Config{Addrs: []string{first.grpc}, AuthToken: token})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Put(ctx, []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	waitThreeVoters(ctx, t, c, "a token-protected cluster")
	// The replicate policy added the joiners' replicas: the node running the autopilot counts them.
	found := false
	for wait := 0; !found && wait < 50; wait++ {
		if wait > 0 {
			time.Sleep(200 * time.Millisecond)
		}
		found = anyNodeCounts(ctx, t, nodes, token)
	}
	if !found {
		t.Fatalf("no node reports shoal_autopilot_operators_total for the replicate policy's succeeded add-replica operators")
	}
}

// anyNodeCounts reports whether some node's /metrics counts a succeeded add-replica of replicate.
func anyNodeCounts(ctx context.Context, t *testing.T, nodes []*runningNode, token string) bool {
	for _, n := range nodes {
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+n.http+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(body), `shoal_autopilot_operators_total{kind="add-replica",outcome="succeeded",policy="replicate"}`) {
			return true
		}
	}
	return false
}

// waitThreeVoters waits until every range has three voters and a leader, as c reports it.
func waitThreeVoters(ctx context.Context, t *testing.T, c *client.Client, what string) {
	t.Helper()
	for {
		rs, err := c.Ranges(ctx)
		full := err == nil && len(rs) > 0
		for _, r := range rs {
			voters := 0
			for _, rd := range r.GetDesc().GetReplicas() {
				if !rd.GetLearner() {
					voters++
				}
			}
			if voters != 3 || r.GetLeaderNodeId() == 0 {
				full = false
			}
		}
		if full {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("ranges not on 3 voters in %s: %v (err %v)", what, rs, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
