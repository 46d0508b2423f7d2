package sim

import (
	"testing"
	"time"
)

// TestUnitsCountedAgainAsAFullCount: in scenarios that kill, join, split, merge and move replicas
// and leaderships, every partial count of the load per unit of offered rate (computeUnits) equals
// a pass over every range, to the last bit (computeUnits panics otherwise).
func TestUnitsCountedAgainAsAFullCount(t *testing.T) {
	if testing.Short() {
		t.Skip("seconds of simulation")
	}
	verifyUnits = true
	defer func() { verifyUnits = false }()
	for _, name := range []string{"node-loss", "join", "hotspot", "merge", "drain", "scale"} {
		t.Run(name, func(t *testing.T) {
			sc, ok := Lookup(name)
			if !ok {
				t.Fatalf("no scenario %s", name)
			}
			opts := Options{Seed: 1, OnlyPolicyOn: true}
			if name == "scale" {
				sc.OpsPerSec = 20_000
				opts.Nodes, opts.Ranges, opts.Duration = 30, 600, 21*time.Minute
			}
			if _, err := Run(sc, opts); err != nil {
				t.Fatal(err)
			}
		})
	}
}
