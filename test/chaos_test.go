package test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoaldb/shoal/chaos"
)

// minChaosAcked is the writes a short chaos run must see acknowledged to have exercised the cluster.
const minChaosAcked = 100

// TestChaosShort is the short run of the chaos suite inside `make test`: three `shoal start`
// processes on separate hosts (network namespaces, or loopback behind the partitioning proxy without
// CAP_NET_ADMIN), 25 s of workload while the nemesis does every kind of fault at least once, then
// porcupine over the history and a final read of every acknowledged write. `make chaos` runs the
// long version. CHAOS_SEED replays a seed, CHAOS_MODE forces netns or loopback, SHOAL_BIN names a
// prebuilt binary (make test gives a race-instrumented one; otherwise the test builds one with
// CGO_ENABLED=0).
func TestChaosShort(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos suite: not in -short mode")
	}
	seed := chaosSeed(t)

	bin := shoalBinary(t)

	dir := t.TempDir()
	artifacts := os.Getenv("SHOAL_TEST_ARTIFACTS")
	if artifacts == "" {
		artifacts = os.TempDir() // t.TempDir would be deleted at the end of the test
	}
	logw := &testLogWriter{t: t}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := chaos.Run(ctx, chaos.Config{
		Seed: seed, Bin: bin, Dir: dir, Mode: os.Getenv("CHAOS_MODE"),
		Duration: 25 * time.Second, MinAcked: minChaosAcked, MinInterval: 300 * time.Millisecond, MaxInterval: time.Second,
		Artifacts: artifacts, Log: logw,
	})
	logw.flush()
	if err != nil {
		t.Fatalf("seed %d: the run could not be carried out: %v", seed, err)
	}
	t.Log(rep.Summary())
	if !rep.OK() {
		for _, s := range rep.Lost {
			t.Errorf("lost acknowledged write: %s", s)
		}
		for _, s := range append(append(append(rep.Phantom, rep.Corrupt...), rep.ScanMissed...), rep.Problems...) {
			t.Errorf("%s", s)
		}
		if rep.Linearizable != "ok" {
			t.Errorf("history linearizable: %q (visualization: %s)", rep.Linearizable, rep.Visualization)
		}
		logs, _ := filepath.Glob(filepath.Join(dir, "n*.log"))
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
			t.Logf("last lines of %s:\n%s", filepath.Base(l), strings.Join(lines[max(0, len(lines)-30):], "\n"))
		}
		t.Fatalf("seed %d failed (replay: CHAOS_SEED=%d)", seed, seed)
	}
	// The run must have exercised the cluster: every fault at least once, and enough writes.
	for _, a := range []string{chaos.ActKill, chaos.ActPause, chaos.ActRestart, chaos.ActPartitionHalves,
		chaos.ActPartitionLeader, chaos.ActPartitionLeaderClient, chaos.ActPartitionLink} {
		if rep.Actions[a] == 0 {
			t.Errorf("the nemesis never did %s (actions: %v)", a, rep.Actions)
		}
	}
	for _, a := range []string{chaos.ActSplit, chaos.ActMerge, chaos.ActTransfer} {
		if rep.Actions[a]+rep.Actions[a+" refused"] == 0 {
			t.Errorf("the nemesis never tried %s (actions: %v)", a, rep.Actions)
		}
	}
	if rep.AckedWrites < minChaosAcked {
		t.Errorf("only %d acknowledged unique writes, want %d (the run goes on for them up to twice its length)", rep.AckedWrites, minChaosAcked)
	}
}

// testLogWriter passes a run's progress lines to t.Log, one line at a time.
type testLogWriter struct {
	t   *testing.T
	mu  sync.Mutex
	buf []byte
}

func (w *testLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := strings.IndexByte(string(w.buf), '\n')
		if i < 0 {
			break
		}
		w.t.Log(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
	return len(p), nil
}

func (w *testLogWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.t.Log(string(w.buf))
		w.buf = nil
	}
}
