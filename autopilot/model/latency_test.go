package model

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestLatencyBucketsCoverEveryValue: every value falls in a bucket whose bounds hold it, buckets grow
// with the value, and none is wider than 1/8 of its lower bound (the precision the package promises).
func TestLatencyBucketsCoverEveryValue(t *testing.T) {
	prev := -1
	for us := uint64(0); us < 1<<31; us += 1 + us/37 {
		b := LatencyBucket(time.Duration(us) * time.Microsecond)
		if b < prev {
			t.Fatalf("%d µs in bucket %d, below the bucket of a smaller value (%d)", us, b, prev)
		}
		prev = b
		lo, hi := latencyBounds(b)
		if b == LatencyBuckets-1 {
			if float64(us) < lo {
				t.Fatalf("%d µs in the overflow bucket, which starts at %g", us, lo)
			}
			continue
		}
		if float64(us) < lo || float64(us) >= hi {
			t.Fatalf("%d µs in bucket %d = [%g, %g)", us, b, lo, hi)
		}
		if lo >= latencySub && hi-lo > lo/latencySub {
			t.Fatalf("bucket %d = [%g, %g) is wider than 1/%d of its lower bound", b, lo, hi, latencySub)
		}
	}
	if got := LatencyBucket(-time.Second); got != 0 {
		t.Errorf("negative duration in bucket %d", got)
	}
	if got := LatencyBucket(time.Hour); got != LatencyBuckets-1 {
		t.Errorf("an hour in bucket %d, want the overflow bucket %d", got, LatencyBuckets-1)
	}
}

// TestLatencyQuantilesOfKnownDistributions draws latencies from known distributions and compares the
// histogram's quantiles with the exact ones of the same draws.
func TestLatencyQuantilesOfKnownDistributions(t *testing.T) {
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	tests := []struct {
		name string
		draw func(*rand.Rand) time.Duration
	}{
		{"constant 3ms", func(*rand.Rand) time.Duration { return 3 * time.Millisecond }},
		{"uniform 100µs-10ms", func(r *rand.Rand) time.Duration { return ms(0.1 + 9.9*r.Float64()) }},
		{"exponential mean 2ms", func(r *rand.Rand) time.Duration { return ms(2 * r.ExpFloat64()) }},
		{"log-normal median 1ms", func(r *rand.Rand) time.Duration { return ms(math.Exp(r.NormFloat64())) }},
		{"bimodal 98% 1ms 2% 50ms", func(r *rand.Rand) time.Duration {
			if r.Float64() < 0.02 {
				return ms(50 + r.Float64())
			}
			return ms(1 + 0.1*r.Float64())
		}},
		{"sub-8µs", func(r *rand.Rand) time.Duration { return time.Duration(r.IntN(8000)) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			const n = 200_000
			all := make([]time.Duration, n)
			rec := NewLatencyRecorder()
			var counts LatencyCounts
			for i := range all {
				all[i] = tc.draw(rng)
				rec.Record(all[i])
				counts.Record(all[i])
			}
			slices.Sort(all)
			h := rec.Take(TextEpoch)
			if h.Count() != n || counts.Count() != n {
				t.Fatalf("counted %d and %d requests, want %d", h.Count(), counts.Count(), n)
			}
			for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
				exact := all[int(math.Ceil(q*n))-1]
				got := h.Quantile(q)
				if c := counts.Quantile(q); c != got {
					t.Errorf("p%g: %v from the recorder, %v from the counts", 100*q, got, c)
				}
				// Within the bucket's precision (1/8), plus the microsecond the buckets round to.
				if tol := exact/8 + time.Microsecond; got < exact-tol || got > exact+tol {
					t.Errorf("p%g = %v, exact %v (allowed ±%v)", 100*q, got, exact, tol)
				}
			}
		})
	}
}

func TestLatencyEmptyAndMalformed(t *testing.T) {
	var nilHist *LatencyHistogram
	if nilHist.Count() != 0 || nilHist.Quantile(0.99) != 0 {
		t.Error("a nil histogram is not empty")
	}
	if h := NewLatencyRecorder().Take(TextEpoch); h != nil {
		t.Errorf("a recorder without requests took %+v", h)
	}
	var c LatencyCounts
	c.Add(&LatencyHistogram{Buckets: []uint32{1, 2}, Counts: []uint64{5}})           // lengths differ
	c.Add(&LatencyHistogram{Buckets: []uint32{LatencyBuckets}, Counts: []uint64{5}}) // no such bucket
	if c.Count() != 0 || c.Histogram(TextEpoch) != nil {
		t.Errorf("malformed histograms were counted: %d", c.Count())
	}
}

// TestLatencyRecorderLosesNothing: requests recorded from several goroutines while windows are taken
// all show up in some window (a request that races with Take lands in a later one).
func TestLatencyRecorderLosesNothing(t *testing.T) {
	rec := NewLatencyRecorder()
	const workers, each = 4, 20_000
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				rec.Record(time.Duration(i%5000) * time.Microsecond)
			}
		}()
	}
	var total uint64
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		total += rec.Take(TextEpoch).Count()
	}
	total += rec.Take(TextEpoch).Count() + rec.Take(TextEpoch).Count()
	if total != workers*each {
		t.Fatalf("windows hold %d requests, %d were recorded", total, workers*each)
	}
}

func TestParseLatency(t *testing.T) {
	c, err := ParseCluster("now 5s\nnode 1\nrange 2 [a,b) voters=1 latency=990@2ms,10@40ms")
	if err != nil {
		t.Fatal(err)
	}
	h := c.Range(2).Latency
	if h.Count() != 1000 || !h.At.Equal(TextEpoch.Add(5*time.Second)) {
		t.Fatalf("histogram %+v", h)
	}
	if p50, p99, p999 := h.Quantile(0.5), h.Quantile(0.99), h.Quantile(0.999); p50 < 1900*time.Microsecond || p50 > 2100*time.Microsecond ||
		p99 > 2100*time.Microsecond || p999 < 38*time.Millisecond || p999 > 42*time.Millisecond {
		t.Fatalf("p50 %v p99 %v p99.9 %v", p50, p99, p999)
	}
	for _, bad := range []string{"latency=10", "latency=x@1ms", "latency=10@fast"} {
		if _, err := ParseCluster("node 1\nrange 2 [a,b) voters=1 " + bad); err == nil {
			t.Errorf("%s parsed", bad)
		}
	}
}
