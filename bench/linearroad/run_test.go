package linearroad

import (
	"context"
	"testing"
	"time"

	"github.com/shoaldb/shoal/stream"
)

// TestRunMechanics runs both modes briefly on three in-process nodes: every report acknowledged,
// toll notifications measured, all state accesses local when aligned and most remote when not.
func TestRunMechanics(t *testing.T) {
	if testing.Short() {
		t.Skip("starts nodes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, m := range []stream.Mode{stream.Aligned, stream.Unaligned} {
		r, err := Run(ctx, Config{Mode: m, Vehicles: 600, Segments: 12, Warmup: time.Second, Duration: 3 * time.Second,
			Senders: 4, Dir: t.TempDir(), Log: t.Logf})
		if err != nil {
			t.Fatal(m, err)
		}
		t.Logf("%+v", r)
		if r.Events == 0 || r.Tolls == 0 || r.TollP99Ms <= 0 {
			t.Fatalf("%s: nothing measured: %+v", m, r)
		}
		if m == stream.Aligned && r.LocalShare != 1 {
			t.Errorf("aligned: %.3f of state accesses local, want 1", r.LocalShare)
		}
		if m == stream.Unaligned && r.LocalShare > 0.6 {
			t.Errorf("unaligned: %.3f of state accesses local, want about 1/3", r.LocalShare)
		}
	}
}
