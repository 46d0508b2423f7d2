package policy

import (
	"bytes"
	"fmt"
	"math/rand"
	"sort"

	"github.com/pingcap/go-ycsb/pkg/generator"
	"github.com/pingcap/go-ycsb/pkg/util"
)

// keyGen draws request keys from a YCSB request distribution over n records.
type keyGen func(r *rand.Rand) []byte

// Distributions the tests use. Keys are "user" plus a zero-padded decimal record number (ordered
// inserts), except "scrambled", YCSB's default: zipfian popularity over records whose keys are hashed,
// so the hot keys are spread over the key space.
var distributions = []string{"zipfian", "hotspot", "latest", "scrambled", "uniform"}

func newKeyGen(dist string, n int64) (keyGen, error) {
	ordered := func(g interface{ Next(*rand.Rand) int64 }) keyGen {
		return func(r *rand.Rand) []byte { return fmt.Appendf(nil, "user%010d", g.Next(r)) }
	}
	switch dist {
	case "zipfian":
		return ordered(generator.NewZipfianWithRange(0, n-1, generator.ZipfianConstant)), nil
	case "hotspot":
		return ordered(generator.NewHotspot(0, n-1, 0.2, 0.8)), nil
	case "latest":
		return ordered(generator.NewSkewedLatest(generator.NewCounter(n))), nil
	case "uniform":
		return ordered(generator.NewUniform(0, n-1)), nil
	case "onekey":
		return func(*rand.Rand) []byte { return []byte("user0000000042") }, nil
	case "scrambled":
		g := generator.NewScrambledZipfian(0, n-1, generator.ZipfianConstant)
		return func(r *rand.Rand) []byte { return fmt.Appendf(nil, "user%d", util.Hash64(g.Next(r))) }, nil
	}
	return nil, fmt.Errorf("unknown distribution %q (want one of %v)", dist, distributions)
}

// loadOracle is a large sorted request sample used to evaluate split keys.
type loadOracle [][]byte

func newLoadOracle(gen keyGen, r *rand.Rand, n int) loadOracle {
	o := make(loadOracle, n)
	for i := range o {
		o[i] = gen(r)
	}
	sort.Slice(o, func(i, j int) bool { return bytes.Compare(o[i], o[j]) < 0 })
	return o
}

// leftShare is the share of requests for keys below key.
func (o loadOracle) leftShare(key []byte) float64 {
	i := sort.Search(len(o), func(i int) bool { return bytes.Compare(o[i], key) >= 0 })
	return float64(i) / float64(len(o))
}

// bestImbalance is the smallest imbalance any split key achieves (keys are indivisible).
func (o loadOracle) bestImbalance() float64 {
	best := 1.0
	for i := 1; i < len(o); i++ {
		if !bytes.Equal(o[i], o[i-1]) {
			l := float64(i) / float64(len(o))
			best = min(best, imbalance(l, 1-l))
		}
	}
	return best
}
