package sim

import (
	"testing"
	"time"
)

// TestPacing: closed-loop clients serve what they can through the warm-up, then offer the share of
// its second half's throughput (or the rate set), never more than the closed loop serves, and from
// the probe serve what they can again.
func TestPacing(t *testing.T) {
	type step struct {
		at   time.Duration
		x    float64 // what the closed loop would serve
		want float64
	}
	for _, tc := range []struct {
		name  string
		p     pacing
		steps []step
	}{
		{"closed loop", pacing{warmup: 10 * time.Second}, []step{{time.Second, 100, 100}, {20 * time.Second, 300, 300}}},
		{"share of the second half", pacing{share: 0.5, warmup: 10 * time.Second, probe: 30 * time.Second}, []step{
			{2 * time.Second, 50, 50}, // first half: not counted
			{6 * time.Second, 180, 180},
			{8 * time.Second, 220, 220},
			{12 * time.Second, 300, 100}, // 0.5 × mean(180, 220)
			{14 * time.Second, 80, 80},   // the closed loop serves less than the pace
			{30 * time.Second, 300, 300}, // the probe
		}},
		{"a rate set", pacing{rate: 120, warmup: 10 * time.Second}, []step{{6 * time.Second, 400, 400}, {12 * time.Second, 400, 120}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.p
			for _, s := range tc.steps {
				if got := p.offer(s.at, s.x); got != s.want {
					t.Errorf("at %v with %v: %v, want %v", s.at, s.x, got, s.want)
				}
			}
		})
	}
}
