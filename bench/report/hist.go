package report

import (
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// maxUs is the largest latency the histograms record: one minute.
const maxUs = 60_000_000

// NewHist returns a latency histogram in microseconds, 1 µs to one minute, 3 significant digits.
func NewHist() *hdrhistogram.Histogram { return hdrhistogram.New(1, maxUs, 3) }

// ClampUs converts d to microseconds within the histograms' range.
func ClampUs(d time.Duration) int64 { return min(max(d.Microseconds(), 1), maxUs) }

// UsToMs converts microseconds to milliseconds.
func UsToMs(us int64) float64 { return float64(us) / 1000 }

// Quantile is h's q-th percentile in milliseconds.
func Quantile(h *hdrhistogram.Histogram, q float64) float64 { return UsToMs(h.ValueAtQuantile(q)) }

// Window is the mean throughput and the p99 of all latencies of the seconds whose midpoint lies in
// [from, to], and how many seconds those are.
func Window(series []Point, perSec []*hdrhistogram.Histogram, from, to float64) (tput, p99Ms float64, n int) {
	h := NewHist()
	var ops int64
	for i, p := range series {
		if mid := p.T - 0.5; mid >= from && mid <= to && i < len(perSec) {
			ops += p.Ops
			n++
			h.Merge(perSec[i])
		}
	}
	if n == 0 {
		return 0, 0, 0
	}
	return float64(ops) / float64(n), Quantile(h, 99), n
}
