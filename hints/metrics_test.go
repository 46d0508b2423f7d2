package hints

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestMetricNames holds the collector to Prometheus' naming conventions: counters end in _total and
// nothing else does; _sum, _count and _bucket belong to histograms and summaries, so a counter named
// like shoal_hints_apply_lag_seconds_sum beside the gauge shoal_hints_apply_lag_seconds reads as a
// broken histogram.
func TestMetricNames(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newCollector(newCounters()))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != len(metricHelp) {
		t.Fatalf("%d families gathered, %d described", len(mfs), len(metricHelp))
	}
	for _, mf := range mfs {
		name := mf.GetName()
		if (mf.GetType() == dto.MetricType_COUNTER) != strings.HasSuffix(name, "_total") {
			t.Errorf("%s is a %v: counters, and only counters, end in _total", name, mf.GetType())
		}
		for _, suffix := range []string{"_sum", "_count", "_bucket"} {
			if strings.HasSuffix(name, suffix) {
				t.Errorf("%s ends in %s, a histogram's suffix", name, suffix)
			}
		}
	}
}
