package move

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMoveTiny moves the replica of an 8 MiB range under a short workload and checks what the report
// says happened: the move completed onto the fourth node, snapshot bytes flowed, no foreground
// operation failed, every phase was measured and the new replica holds the same data as the others.
// It asserts nothing about speed.
func TestMoveTiny(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 4-node cluster")
	}
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	rep, err := Run(ctx, Options{Dir: t.TempDir(), Out: out, SizeBytes: 8 << 20, RateBytesPerSec: 4 << 20, Threads: 4,
		Warmup: 500 * time.Millisecond, Before: 2 * time.Second, After: time.Second, Progress: &progress})
	if err != nil {
		t.Fatalf("%v\nprogress:\n%s", err, progress.String())
	}
	var sum strings.Builder
	WriteSummary(&sum, rep)
	t.Logf("summary:\n%s", sum.String())

	b, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got Report
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	mv := got.Move
	if !mv.Done || mv.Error != "" {
		t.Fatalf("move not done: %+v", mv)
	}
	if mv.FromNode == 0 || mv.ToNode == 0 || mv.FromNode == mv.LeaderNode || mv.FromNode == mv.ToNode {
		t.Errorf("move n%d→n%d with leader n%d", mv.FromNode, mv.ToNode, mv.LeaderNode)
	}
	if len(mv.VotersTo) != ReplicationFactor || !contains(mv.VotersTo, mv.ToNode) || contains(mv.VotersTo, mv.FromNode) {
		t.Errorf("voters before %v, after %v", mv.VotersFrom, mv.VotersTo)
	}
	// The learner got the data as a snapshot of at least the loaded keys and values.
	if mv.Snapshots < 1 || mv.SnapshotsApplied < 1 || mv.SnapshotBytes < uint64(got.Load.Bytes) || mv.RangeBytes != got.Load.Bytes {
		t.Errorf("snapshots %d accepted, %d applied, %d bytes; loaded %d bytes", mv.Snapshots, mv.SnapshotsApplied, mv.SnapshotBytes, got.Load.Bytes)
	}
	if len(mv.Events) == 0 || mv.SendingS <= 0 || mv.SendRateBytesSec <= 0 {
		t.Errorf("snapshot events %v, sending %vs at %v B/s", mv.Events, mv.SendingS, mv.SendRateBytesSec)
	}
	if mv.DurationS <= 0 || mv.EndS <= mv.StartS || mv.EffectiveRateBytesSec <= 0 || mv.ExpectedS <= 0 {
		t.Errorf("move timing: %+v", mv)
	}
	if got.Load.Records != got.Settings.Records || got.Load.Records < 100 || got.Load.Bytes > got.Settings.SizeBytes {
		t.Errorf("load: %+v, settings %+v", got.Load, got.Settings)
	}
	if got.Errors != 0 {
		t.Errorf("%d foreground errors, e.g. %s", got.Errors, got.ErrorSample)
	}
	for name, p := range map[string]Phase{"before": got.Before, "during": got.During, "after": got.After} {
		if p.Ops == 0 || p.DurationS <= 0 || p.P99Ms <= 0 || p.P99Ms < p.P50Ms {
			t.Errorf("phase %s: %+v", name, p)
		}
	}
	if got.P99Ratio <= 0 || got.P50Ratio <= 0 {
		t.Errorf("ratios: p50 %v p99 %v", got.P50Ratio, got.P99Ratio)
	}
	v := got.Verify
	if !v.OK || !v.DigestsMatch || !v.LeaderMoved || v.SampleFound != v.SampleReads || len(v.Replicas) != ReplicationFactor {
		t.Errorf("verify: %+v", v)
	}
	for _, d := range v.Replicas {
		if d.Keys != got.Settings.Records {
			t.Errorf("replica on n%d holds %d keys, want %d", d.Node, d.Keys, got.Settings.Records)
		}
	}
	phases := map[string]bool{}
	for _, p := range got.Series {
		phases[p.Phase] = true
	}
	if !phases["before"] || !phases["after"] {
		t.Errorf("series phases %v", phases)
	}
	if len(got.Plots) != 1 {
		t.Fatalf("plots %v", got.Plots)
	}
	png, err := os.ReadFile(filepath.Join(out, got.Plots[0]))
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Errorf("plot %s: %v", got.Plots[0], err)
	}
}

func contains(s []uint64, v uint64) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
