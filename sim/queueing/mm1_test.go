package queueing

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/shoaldb/shoal/sim/des"
)

// simulateMM1 runs n customers through a FIFO single server on the discrete-event core: Poisson
// arrivals at lambda, exponential service at mu. It returns their sojourn times in seconds.
func simulateMM1(lambda, mu float64, n int, seed uint64) []float64 {
	r := rand.New(rand.NewPCG(seed, seed+1))
	t0 := time.Unix(0, 0)
	loop := des.New(t0)
	var queue []time.Time // arrival times of the customers waiting or in service
	var out []float64
	busy := false
	var startService func()
	startService = func() {
		if busy || len(queue) == 0 {
			return
		}
		busy = true
		loop.After(dur(r.ExpFloat64()/mu), func() {
			out = append(out, loop.Now().Sub(queue[0]).Seconds())
			queue = queue[1:]
			busy = false
			startService()
		})
	}
	arrived := 0
	var arrive func()
	arrive = func() {
		queue = append(queue, loop.Now())
		startService()
		if arrived++; arrived < n {
			loop.After(dur(r.ExpFloat64()/lambda), arrive)
		}
	}
	loop.After(0, arrive)
	loop.RunUntil(t0.Add(100 * 365 * 24 * time.Hour))
	return out
}

func dur(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// TestMM1AgainstSimulation: the closed-form mean and p99 against an event-by-event simulation of the
// same queue, at low, medium and high utilization.
func TestMM1AgainstSimulation(t *testing.T) {
	for _, tt := range []struct {
		lambda, mu float64
		tol        float64
	}{
		{100, 1000, 0.02},
		{500, 1000, 0.03},
		{800, 1000, 0.06},
	} {
		s := Server{Mu: tt.mu}
		n := 300_000
		if raceEnabled {
			n, tt.tol = 30_000, 3*tt.tol
		}
		soj := simulateMM1(tt.lambda, tt.mu, n, 7)
		var sum float64
		for _, x := range soj {
			sum += x
		}
		mean := sum / float64(len(soj))
		want := 1 / (tt.mu - tt.lambda)
		if got := s.Mean(tt.lambda).Seconds(); math.Abs(got-want) > 1e-9 {
			t.Fatalf("ρ=%.1f: Mean %v, closed form %v", tt.lambda/tt.mu, got, want)
		}
		if rel := math.Abs(mean-want) / want; rel > tt.tol {
			t.Errorf("ρ=%.1f: simulated mean %.3f ms, M/M/1 %.3f ms (%.1f%% off, tolerance %.0f%%)",
				tt.lambda/tt.mu, 1e3*mean, 1e3*want, 100*rel, 100*tt.tol)
		}
		sort.Float64s(soj)
		p99 := soj[len(soj)*99/100]
		if want := s.Quantile(tt.lambda, 0.99).Seconds(); math.Abs(p99-want)/want > 2*tt.tol {
			t.Errorf("ρ=%.1f: simulated p99 %.3f ms, M/M/1 %.3f ms", tt.lambda/tt.mu, 1e3*p99, 1e3*want)
		}
		t.Logf("ρ=%.1f: mean %.3f ms (closed form %.3f), p99 %.3f ms (closed form %.3f)", tt.lambda/tt.mu,
			1e3*mean, 1e3*want, 1e3*p99, 1e3*s.Quantile(tt.lambda, 0.99).Seconds())
	}
}

func TestSaturation(t *testing.T) {
	s := Server{Mu: 1000}
	if got := s.Served(5000); got != MaxUtilization*1000 {
		t.Fatalf("served %v of an overload, want %v", got, MaxUtilization*1000)
	}
	if s.Mean(5000) <= s.Mean(500) {
		t.Fatal("an overloaded server is not slower than a half-loaded one")
	}
	if (Server{}).Served(10) != 0 {
		t.Fatal("a server with no capacity serves")
	}
}

func TestMixtureQuantile(t *testing.T) {
	one := Server{Mu: 1000}
	tests := []struct {
		name  string
		parts []Part
		q     float64
		want  time.Duration
	}{
		{"one part is its own quantile", []Part{{1, one.Rate(600)}}, 0.99, one.Quantile(600, 0.99)},
		{"equal parts are one part", []Part{{2, 400}, {2, 400}}, 0.5, seconds(math.Ln2 / 400)},
		{"an idle part does not count", []Part{{0, 1}, {5, 400}}, 0.5, seconds(math.Ln2 / 400)},
		{"no load", nil, 0.99, 0},
	}
	for _, tt := range tests {
		got := MixtureQuantile(tt.parts, tt.q)
		if d := got - tt.want; d > time.Microsecond || d < -time.Microsecond {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
	// A slow part among fast ones sets the tail: with 5 % of the requests on a node 10x slower, the
	// p99 is the slow node's p80 (0.01/0.05 = 0.2 of its requests are beyond it), within the
	// fast ones' negligible share.
	got := MixtureQuantile([]Part{{95, 10000}, {5, 1000}}, 0.99)
	want := seconds(-math.Log(0.2) / 1000)
	if rel := math.Abs(got.Seconds()-want.Seconds()) / want.Seconds(); rel > 0.01 {
		t.Fatalf("mixture p99 %v, want about %v", got, want)
	}
}
