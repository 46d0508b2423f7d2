package benchutil

import (
	"testing"
	"time"
)

func TestBarAndClamp(t *testing.T) {
	for _, tc := range []struct {
		frac float64
		want string
	}{
		{-1, "[..............................] x"},
		{0.5, "[###############...............] x"},
		{2, "[##############################] x"},
	} {
		if got := Bar(tc.frac, "x"); got != tc.want {
			t.Errorf("Bar(%v) = %q, want %q", tc.frac, got, tc.want)
		}
	}
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
