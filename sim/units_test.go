package sim

import (
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/sim/workload"
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

// TestKeySampleAsTheSampler: a simulated key sample is what model.NewKeySample makes of the same
// draws, for zipfian and hotspot loads and windows smaller and larger than a sample.
func TestKeySampleAsTheSampler(t *testing.T) {
	const records = 100_000
	for _, dist := range []workload.Dist{workload.NewZipfian(records), workload.Hotspot{N: records, Hot: 100, Ops: 0.9}} {
		for _, requests := range []float64{0, 1, 37.5, 5000} {
			c := testCluster(t, 3, 100, 0)
			c.dist = dist
			r := c.order[0]
			drawer := rand.New(rand.NewPCG(9, 9))
			c.rnd = rand.New(rand.NewPCG(9, 9))
			got := c.keySample(r, epoch, requests)
			var keys [][]byte
			for range min(int(requests), model.DefaultKeySampleSize) {
				keys = append(keys, workload.Key(dist.Sample(drawer, r.lo, r.hi)))
			}
			if want := model.NewKeySample(epoch, uint64(requests), keys); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s, %.1f requests: %+v, want %+v", dist.Name(), requests, got, want)
			}
		}
	}
}
