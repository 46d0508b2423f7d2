// Package benchutil holds the small pieces the benchmark runners (bench/scenario, bench/move) share:
// cluster-readiness checks through the client, latency histogram bounds and a text progress bar.
// It must never start servers or hold state: runners own their clusters and reports.
package benchutil

import (
	"context"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
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

// UserRanges returns the ranges other than the meta range.
func UserRanges(ctx context.Context, cl *client.Client) ([]*pb.RangeStatus, error) {
	rs, err := cl.Ranges(ctx)
	if err != nil {
		return nil, err
	}
	var out []*pb.RangeStatus
	for _, r := range rs {
		if r.GetDesc().GetRangeId() != replica.MetaRangeID {
			out = append(out, r)
		}
	}
	return out, nil
}

// maxUs is the largest latency the histograms record: one minute.
const maxUs = 60_000_000

// NewHist returns a latency histogram in microseconds, 1 µs to one minute, 3 significant digits.
func NewHist() *hdrhistogram.Histogram { return hdrhistogram.New(1, maxUs, 3) }

// ClampUs converts d to microseconds within the histograms' range.
func ClampUs(d time.Duration) int64 { return min(max(d.Microseconds(), 1), maxUs) }

// UsToMs converts microseconds to milliseconds.
func UsToMs(us int64) float64 { return float64(us) / 1000 }

// Bar draws a 30-character progress bar for frac (0..1) followed by text.
func Bar(frac float64, text string) string {
	const width = 30
	frac = min(max(frac, 0), 1)
	n := int(frac * width)
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", width-n) + "] " + text
}
