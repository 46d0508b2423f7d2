// Package benchutil holds what the benchmark runners (bench/core, bench/scenario) and the analysis of
// their reports share: the one function that starts an in-process node, cluster-readiness checks
// through the client, a replica's checksum, latency histograms, the process's CPU and its host's steal, a mean and a
// median, JSON reports, PNG figures and a text progress bar. It holds no state: runners
// own their clusters and reports.
package benchutil

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/shoaldb/shoal/client"
)

// FullyReplicated reports whether every range has want voters, no learners, and a leader.
func FullyReplicated(ctx context.Context, cl *client.Client, want int) bool {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	rs, err := cl.Ranges(ctx)
	if err != nil || len(rs) == 0 {
		return false
	}
	for _, r := range rs {
		voters := 0
		for _, rd := range r.GetDesc().GetReplicas() {
			if rd.Learner {
				return false
			}
			voters++
		}
		if voters != want || r.LeaderNodeId == 0 {
			return false
		}
	}
	return true
}

// WaitFor polls cond every 200 ms until it holds, ctx ends or d passes.
func WaitFor(ctx context.Context, d time.Duration, cond func() bool) error {
	deadline := time.Now().Add(d)
	for !cond() {
		if err := ctx.Err(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still not done after %v", d)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil
}

// Bar draws a 30-character progress bar for frac (0..1) followed by text.
func Bar(frac float64, text string) string {
	const width = 30
	frac = min(max(frac, 0), 1)
	n := int(frac * width)
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", width-n) + "] " + text
}

// WriteJSON writes v to path as indented JSON: every report a runner or an analysis writes.
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// TempDir makes a scratch directory for a benchmark's data.
func TempDir() (string, error) { return os.MkdirTemp("", "shoal-bench-") }
