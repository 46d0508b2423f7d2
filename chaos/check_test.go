package chaos

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/shoaldb/shoal/chaos/history"
	"github.com/shoaldb/shoal/test/testcluster"
)

// TestFinalReadFindsLostWrites gives the final check a cluster (in process, one node) whose contents
// disagree with the recorded writes in every way it must notice: an acknowledged write missing, a
// write that definitely failed but is present, a key holding a value other than the one written, a
// key nobody wrote; and one that agrees. The history of the final reads must not be linearizable
// either (an acknowledged write read back as absent).
func TestFinalReadFindsLostWrites(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Nodes: 1})
	cl := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	put := func(k, v string) {
		t.Helper()
		for {
			err := cl.Put(ctx, []byte(k), []byte(v))
			if err == nil {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("put %s: %v", k, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	put("00/u/w0/1", "w0.1")  // acknowledged and present: fine
	put("02/u/w0/3", "w0.3")  // definitely failed, yet present: phantom
	put("03/u/w0/4", "other") // acknowledged as w0.4: corrupt
	put("04/u/w9/9", "w9.9")  // never written by the workload: corrupt
	put("05/c/0/e0", "x")     // a contended key: not a unique write

	h := history.New(1)
	wl := &workload{h: h, epoch: time.Second, uniques: map[string]*uniqueWrite{}}
	record := func(k, v string, o history.Outcome) {
		u := &uniqueWrite{key: k, value: v, outcome: o}
		wl.uniques[k] = u
		if o == history.OutOK {
			call := h.Now()
			h.Add(0, history.Input{Kind: history.Put, Key: k, Value: v}, history.Output{}, call, h.Now(), nil)
		}
	}
	record("00/u/w0/1", "w0.1", history.OutOK)
	record("01/u/w0/2", "w0.2", history.OutOK) // lost
	record("02/u/w0/3", "w0.3", history.OutDefinite)
	record("03/u/w0/4", "w0.4", history.OutOK)
	record("06/u/w0/5", "w0.5", history.OutUnknown) // absent: allowed

	fc, err := wl.finalRead(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if fc.acked != 3 || fc.unknown != 1 || fc.definite != 1 {
		t.Errorf("acked/unknown/definite = %d/%d/%d, want 3/1/1", fc.acked, fc.unknown, fc.definite)
	}
	if len(fc.lost) != 1 || !strings.HasPrefix(fc.lost[0], "01/u/w0/2") {
		t.Errorf("lost = %q, want 01/u/w0/2", fc.lost)
	}
	if len(fc.phantom) != 1 || !strings.HasPrefix(fc.phantom[0], "02/u/w0/3") {
		t.Errorf("phantom = %q, want 02/u/w0/3", fc.phantom)
	}
	if len(fc.corrupt) != 2 {
		t.Errorf("corrupt = %q, want 03/u/w0/4 and 04/u/w9/9", fc.corrupt)
	}
	if len(fc.scanMissed) != 0 {
		t.Errorf("scan missed %q", fc.scanMissed)
	}
	if res, _, _ := history.Check(h.Finish(), 10*time.Second, t.TempDir(), t.Name()); res != porcupine.Illegal {
		t.Errorf("history with a lost acknowledged write: porcupine says %v, want illegal", res)
	}
}

// TestConfigDefaults checks the validation of a run's configuration.
func TestConfigDefaults(t *testing.T) {
	if _, err := (Config{}).withDefaults(); err == nil {
		t.Error("a config without Bin and Dir was accepted")
	}
	cfg, err := (Config{Bin: "x", Dir: "y"}).withDefaults()
	if err != nil || cfg.Nodes != 3 || cfg.Mode != "auto" || len(cfg.Actions) != len(AllActions) {
		t.Errorf("defaults: %+v, %v", cfg, err)
	}
	for _, bad := range []Config{
		{Bin: "x", Dir: "y", Nodes: 2},
		{Bin: "x", Dir: "y", Mode: "docker"},
		{Bin: "x", Dir: "y", Actions: map[string]int{"meteor": 1}},
		{Bin: "x", Dir: "y", MinInterval: time.Second, MaxInterval: time.Millisecond},
	} {
		if _, err := bad.withDefaults(); err == nil {
			t.Errorf("accepted %+v", bad)
		}
	}
	r := &Report{Linearizable: "ok"}
	if !r.OK() {
		t.Error("an empty passing report is not OK")
	}
	r.Lost = []string{"k"}
	if r.OK() || r.Violations() != 1 {
		t.Errorf("a report with a lost write: OK=%v violations=%d", r.OK(), r.Violations())
	}
	if (&Report{Linearizable: "unknown"}).OK() {
		t.Error("an undecided history passed")
	}
}
