package server_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/shoaldb/shoal/node"
	"github.com/shoaldb/shoal/server"
)

// TestRunAloneStopsAtOnce: a single node has nowhere to move its leaderships, so Ctrl-C stops it
// without waiting out the drain timeout.
func TestRunAloneStopsAtOnce(t *testing.T) {
	cfg := server.Config{Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", Node: node.Config{DataDir: filepath.Join(t.TempDir(), "n1"), Bootstrap: true}}
	n := startNode(t, cfg)
	time.Sleep(500 * time.Millisecond) // the node leads its ranges by now
	start := time.Now()
	n.stop(t)
	// Waiting out the drain timeout (5 s) is what a node with somewhere to move its leaderships
	// may do; a host that stalls for seconds must not pass for that.
	if took := time.Since(start); took >= 5*time.Second {
		t.Errorf("a single node took %v to stop, the drain timeout or more", took)
	}
}
