package scenario

import (
	"bytes"
	"compress/flate"
	"math/rand/v2"
	"testing"
)

func TestValues(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	fixed := newValues(256, false)
	if a, b := fixed.next(rng), fixed.next(rng); !bytes.Equal(a, b) || len(a) != 256 {
		t.Fatalf("fixed values: %d and %d bytes, equal %v; want one 256-byte value", len(a), len(b), bytes.Equal(a, b))
	}
	random := newValues(250, true) // not a multiple of 8
	a, b := random.next(rng), random.next(rng)
	if len(a) != 250 || len(b) != 250 || bytes.Equal(a, b) {
		t.Fatalf("random values: %d and %d bytes, equal %v; want two different 250-byte values", len(a), len(b), bytes.Equal(a, b))
	}
	// What the option is for: random values do not compress, the fixed pattern does.
	ratio := func(v values) float64 {
		var raw, out bytes.Buffer
		w, _ := flate.NewWriter(&out, flate.BestSpeed)
		for i := 0; i < 200; i++ {
			raw.Write(v.next(rng))
		}
		_, _ = w.Write(raw.Bytes())
		_ = w.Close()
		return float64(out.Len()) / float64(raw.Len())
	}
	if r := ratio(random); r < 0.95 {
		t.Errorf("random values compress to %.2f of their size; want incompressible (>= 0.95)", r)
	}
	if r := ratio(fixed); r > 0.2 {
		t.Errorf("fixed values compress to %.2f of their size; want the pattern to compress (<= 0.2)", r)
	}
}
