package benchutil

import "math/rand/v2"

// RandomBytes is n bytes from rng: a value nothing compresses, so that the bytes a node holds and
// reads are the bytes written.
func RandomBytes(rng *rand.Rand, n int) []byte {
	v := make([]byte, n)
	for i := range v {
		v[i] = byte(rng.Uint32())
	}
	return v
}

// RandomValues is a Load's Values of n random bytes each: writer w's own source, seeded by seed and w.
func RandomValues(n int, seed uint64) func(w int) func() []byte {
	return func(w int) func() []byte {
		rng := rand.New(rand.NewPCG(seed, uint64(w)))
		return func() []byte { return RandomBytes(rng, n) }
	}
}
