package test

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/autopilot/decisions"
	"github.com/shoaldb/shoal/autopilot/policy"
	"github.com/shoaldb/shoal/stream"
	"github.com/shoaldb/shoal/test/testcluster"
)

// TestStreamAlignSplitsWhereTheEventsAre: with stream_align on (its floor lowered to 50 events/s for
// 1 s, any latency taken for a backlog and no node deemed saturated: the test runs on loaded machines
// under -race, and judges where the split goes, not when; testdata/stream_align judges when), the count job's range, whose events are on
// keys k00–k59 at the start of its span, is split by the autopilot at the median of the events' keys —
// not in the span's middle — while the producer runs; every acknowledged event's effect is applied exactly once across the split, and the new
// range's events are applied by the task at its leader (no remote state access).
// splitKeyOf finds a split operator's key in its description (`split r3: split at "/s/count/k3"`).
var splitKeyOf = regexp.MustCompile(`split at "([^"]*)"`)

func TestStreamAlignSplitsWhereTheEventsAre(t *testing.T) {
	opts := testcluster.Options{Nodes: 3}
	opts.Node.Autopilot.Policies.StreamAlign = policy.StreamAlignConfig{MinEvents: 50, BacklogLatency: time.Nanosecond,
		Saturated: 2, HotFor: time.Second, MinSamples: 64}
	c, cl, ctx := streamClusterWith(t, opts)
	if err := cl.SetPolicy(ctx, policy.NameStreamAlign, true); err != nil {
		t.Fatal(err)
	}
	run := startCounting(ctx, countIngester(t, cl), 60)
	var key []byte
	testcluster.WaitFor(t, 20*time.Second, "a stream_align split of the count span", func() bool {
		ds, _, err := cl.Decisions(ctx)
		if err != nil {
			return false
		}
		for _, d := range ds {
			if d.Policy == policy.NameStreamAlign && d.Status == decisions.StatusSucceeded {
				t.Logf("%s: %s (%s)", d.Operator, d.Reason, d.Predicted)
				if m := splitKeyOf.FindStringSubmatch(d.Operator); m != nil {
					key = []byte(m[1])
				}
				return true
			}
		}
		return false
	})
	// One split is what is judged: at this threshold the halves would soon be split again.
	if err := cl.SetPolicy(ctx, policy.NameStreamAlign, false); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // events on both halves after the split
	run.stop(t, ctx, c, cl)
	ranges, err := cl.UserRanges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range ranges {
		found = found || bytes.Equal(r.GetDesc().GetStartKey(), key)
	}
	if !found || !bytes.HasPrefix(key, []byte(stream.CountPrefix)) {
		t.Fatalf("the split's key %q starts no range of the count span", key)
	}
	// The events' keys are k00…k59, uniform: the median is near k30.
	if mid := strings.TrimPrefix(string(key), stream.CountPrefix); mid < "k20" || mid > "k40" {
		t.Errorf("split at %q, want near the events' median (k30)", key)
	}
	if _, remote := streamStats(c); remote != 0 {
		t.Errorf("%d state accesses went to another node; aligned tasks should have none", remote)
	}
}
