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
	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/stream"
)

// TestStreamExactlyOnceUnderChaos: the count job's producer runs beside the chaos suite's workload
// on three `shoal start` processes while the nemesis kills nodes with -9 (restarting them 1–4 s
// later), moves leaderships and splits ranges for 12 s; events in flight at a killed or moved leader
// are sent again with their positions. After the faults are healed, every counter must equal its
// key's acknowledged events and hold the last one's position — no event lost, none applied twice —
// and the chaos run's own checks (porcupine, final read) must pass. CHAOS_SEED replays a seed,
// SHOAL_BIN names a prebuilt binary.
func TestStreamExactlyOnceUnderChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos: not in -short mode")
	}
	seed := chaosSeed(t)
	bin := shoalBinary(t)
	// A seed's schedule can miss what the test is about — its transfers all aimed at a node just
	// killed, none moved a leadership — so such a run is run again with the next seed (at most 3);
	// every run's checks count.
	for attempt := range 3 {
		actions := streamChaosRun(t, bin, seed+uint64(attempt))
		if t.Failed() || (actions[chaos.ActKill] > 0 && actions[chaos.ActTransfer] > 0) {
			return
		}
		t.Logf("seed %d: the nemesis killed no node or moved no leadership (actions: %v); next seed", seed+uint64(attempt), actions)
	}
	t.Errorf("three seeds from %d: the nemesis killed no node or moved no leadership in any", seed)
}

// streamChaosRun is one chaos run with the count job's producer alongside; it checks the run and
// returns the nemesis's actions.
func streamChaosRun(t *testing.T, bin string, seed uint64) map[string]int {
	dir := t.TempDir()
	var (
		mu    sync.Mutex // the workload alongside may outlive chaos.Run's wait for it
		total uint64
		run   *counting
	)
	logw := &testLogWriter{t: t}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := chaos.Run(ctx, chaos.Config{
		Seed: seed, Bin: bin, Dir: dir, Mode: os.Getenv("CHAOS_MODE"), Workers: 2,
		Duration: 12 * time.Second, MinInterval: 500 * time.Millisecond, MaxInterval: 1500 * time.Millisecond,
		Actions: map[string]int{chaos.ActKill: 2, chaos.ActTransfer: 3, chaos.ActSplit: 1},
		Log:     logw,
		Alongside: func(ctx context.Context, addrs []string, healed <-chan struct{}) error {
			cl, err := client.New(ctx, client.Config{Addrs: addrs, RequestTimeout: 2 * time.Second, MaxAttempts: 40})
			if err != nil {
				return err
			}
			defer cl.Close()
			in, err := stream.NewIngester(stream.IngesterConfig{Client: cl, MaxBatch: 64}, "count")
			if err != nil {
				return err
			}
			defer in.Close()
			r := startCounting(ctx, in, 40)
			mu.Lock()
			run = r
			mu.Unlock()
			<-healed
			n, err := r.verify(ctx, cl)
			mu.Lock()
			total = n
			mu.Unlock()
			return err
		},
	})
	logw.flush()
	if err != nil {
		t.Fatalf("seed %d: the run could not be carried out: %v", seed, err)
	}
	t.Log(rep.Summary())
	for _, p := range rep.Problems {
		t.Errorf("%s", p)
	}
	if !rep.OK() && len(rep.Problems) == 0 {
		t.Errorf("the chaos run's checks failed: %d lost, %d phantom, linearizable %q", len(rep.Lost), len(rep.Phantom), rep.Linearizable)
	}
	mu.Lock()
	defer mu.Unlock()
	if run != nil {
		run.mu.Lock()
		t.Logf("stream: %d events applied exactly once over %d keys, %d replays skipped, %d found applied after a lost answer",
			total, run.keys, run.dups, run.lost)
		run.mu.Unlock()
	}
	if total == 0 {
		t.Errorf("no stream event acknowledged")
	}
	if t.Failed() {
		logTails(t, dir)
	}
	return rep.Actions
}

// logTails logs the last lines of each node's log in dir.
func logTails(t *testing.T, dir string) {
	logs, _ := filepath.Glob(filepath.Join(dir, "n*.log"))
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		t.Logf("last lines of %s:\n%s", filepath.Base(l), strings.Join(lines[max(0, len(lines)-30):], "\n"))
	}
}
