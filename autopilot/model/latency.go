package model

import (
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
)

// Request latencies are counted in log-linear buckets of microseconds, as HDR histograms do with one
// significant octal digit: values below 8 µs have a bucket each, and every power of two above is cut
// into latencySub equal buckets. A bucket is at most 1/8 of its lower bound wide, so a quantile read
// from the buckets is within 12.5 % of the true one. Values of 2^30 µs (18 minutes) and more share
// the last bucket. Microseconds, not nanoseconds: no request is served faster, and the counters of a
// window stay under 1 KiB.
const (
	latencySubBits = 3
	latencySub     = 1 << latencySubBits
	latencyMaxExp  = 30
	// LatencyBuckets is the number of buckets of a latency histogram: latencySub per power of two
	// from 2^latencySubBits to 2^latencyMaxExp µs, the ones below, and the overflow bucket.
	LatencyBuckets = (latencyMaxExp-latencySubBits+1)*latencySub + 1
)

// LatencyBucket is the bucket of a request that took d (negative durations count as 0).
func LatencyBucket(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	us := uint64(d / time.Microsecond)
	if us < latencySub {
		return int(us)
	}
	e := bits.Len64(us) - 1 // us is in [2^e, 2^(e+1))
	if e >= latencyMaxExp {
		return LatencyBuckets - 1
	}
	m := (us >> (e - latencySubBits)) & (latencySub - 1)
	return (e-latencySubBits+1)*latencySub + int(m)
}

// latencyBounds is the span [lo, hi) of bucket i, in microseconds.
func latencyBounds(i int) (lo, hi float64) {
	if i < latencySub {
		return float64(i), float64(i + 1)
	}
	e := i/latencySub + latencySubBits - 1
	m := uint64(i % latencySub)
	width := uint64(1) << (e - latencySubBits)
	lo = float64((latencySub + m) * width)
	return lo, lo + float64(width)
}

// LatencyHistogram is the latency of the requests a range's leader served in one window, as sparse
// bucket counts: Buckets holds bucket indexes in ascending order, Counts the requests in each. It is
// what heartbeats carry and the model holds; a nil histogram means no request, or none reported.
type LatencyHistogram struct {
	// At is the end of the window; a consumer uses it to tell a new report from one already seen.
	At      time.Time
	Buckets []uint32
	Counts  []uint64
}

// Count is the number of requests in h.
func (h *LatencyHistogram) Count() uint64 {
	if h == nil {
		return 0
	}
	var n uint64
	for _, c := range h.Counts {
		n += c
	}
	return n
}

// Quantile is the q-quantile (0 < q ≤ 1) of the latencies in h, 0 for an empty histogram.
func (h *LatencyHistogram) Quantile(q float64) time.Duration {
	var c LatencyCounts
	c.Add(h)
	return c.Quantile(q)
}

// LatencyCounts adds up latency histograms (several ranges, several windows) to read quantiles of the
// whole. The zero value is empty.
type LatencyCounts struct {
	counts [LatencyBuckets]uint64
	total  uint64
}

// Add adds h's requests (nil adds nothing). Malformed entries (bucket out of range, lengths that
// differ) are ignored: a histogram comes from the network.
func (c *LatencyCounts) Add(h *LatencyHistogram) {
	if h == nil || len(h.Buckets) != len(h.Counts) {
		return
	}
	for i, b := range h.Buckets {
		if int(b) < LatencyBuckets {
			c.counts[b] += h.Counts[i]
			c.total += h.Counts[i]
		}
	}
}

// Record adds one request that took d.
func (c *LatencyCounts) Record(d time.Duration) {
	c.counts[LatencyBucket(d)]++
	c.total++
}

// Count is the number of requests added.
func (c *LatencyCounts) Count() uint64 { return c.total }

// Quantile is the q-quantile (0 < q ≤ 1) of the latencies added, interpolated linearly inside the
// bucket that holds it (as Prometheus' histogram_quantile does); 0 when nothing was added.
func (c *LatencyCounts) Quantile(q float64) time.Duration {
	if c.total == 0 {
		return 0
	}
	q = math.Min(math.Max(q, 0), 1)
	rank := q * float64(c.total) // the rank-th request, counting from 1
	var below uint64
	for i, n := range c.counts {
		if n == 0 {
			continue
		}
		if float64(below+n) >= rank {
			lo, hi := latencyBounds(i)
			frac := (rank - float64(below)) / float64(n)
			return time.Duration((lo + frac*(hi-lo)) * float64(time.Microsecond))
		}
		below += n
	}
	lo, _ := latencyBounds(LatencyBuckets - 1)
	return time.Duration(lo * float64(time.Microsecond))
}

// Histogram returns the counts as a sparse histogram ending at at (nil when empty).
func (c *LatencyCounts) Histogram(at time.Time) *LatencyHistogram {
	if c.total == 0 {
		return nil
	}
	h := &LatencyHistogram{At: at}
	for i, n := range c.counts {
		if n > 0 {
			h.Buckets = append(h.Buckets, uint32(i))
			h.Counts = append(h.Counts, n)
		}
	}
	return h
}

// LatencyRecorder counts the latency of the requests one range serves, window by window: the serving
// path calls Record, the heartbeat calls Take once per window. Record takes no lock: it loads the
// current window's counters and adds one to a bucket atomically, so requests on many cores do not
// queue behind each other (they do share cache lines when they hit the same bucket). Memory is two
// windows of LatencyBuckets 32-bit counters (under 2 KiB) per range. Safe for concurrent use.
type LatencyRecorder struct {
	cur   atomic.Pointer[latencyWindow]
	mu    sync.Mutex // serializes Take
	slots [2]latencyWindow
}

type latencyWindow struct{ counts [LatencyBuckets]atomic.Uint32 }

// NewLatencyRecorder returns an empty recorder.
func NewLatencyRecorder() *LatencyRecorder {
	r := &LatencyRecorder{}
	r.cur.Store(&r.slots[0])
	return r
}

// Record notes one request that took d.
func (r *LatencyRecorder) Record(d time.Duration) {
	r.cur.Load().counts[LatencyBucket(d)].Add(1)
}

// Take ends the current window at at and returns its histogram (nil: no request), starting the next
// window. A Record that loaded the window just before Take switched it may land after Take read its
// bucket; that request is then counted in the window after next, never lost.
func (r *LatencyRecorder) Take(at time.Time) *LatencyHistogram {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.cur.Load()
	next := &r.slots[0]
	if old == next {
		next = &r.slots[1]
	}
	r.cur.Store(next)
	var h *LatencyHistogram
	for i := range old.counts {
		if n := old.counts[i].Swap(0); n > 0 {
			if h == nil {
				h = &LatencyHistogram{At: at}
			}
			h.Buckets = append(h.Buckets, uint32(i))
			h.Counts = append(h.Counts, uint64(n))
		}
	}
	return h
}
