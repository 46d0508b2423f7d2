package report

import (
	"testing"
	"time"
)

func TestHistRange(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int64
	}{{0, 1}, {1500 * time.Microsecond, 1500}, {2 * time.Hour, maxUs}} {
		if got := ClampUs(tc.d); got != tc.want {
			t.Errorf("ClampUs(%v) = %d, want %d", tc.d, got, tc.want)
		}
	}
	if h := NewHist(); h.HighestTrackableValue() < maxUs {
		t.Errorf("histogram tracks up to %d µs, want %d", h.HighestTrackableValue(), maxUs)
	}
}
