package scenario

import (
	"encoding/binary"
	"math/rand/v2"
)

// values makes the values a run writes. By default every value is one fixed pattern of letters,
// which Pebble's block compression shrinks about sevenfold: 160 000 records of 256 B make ~6 MB of
// tables, all in the bottom level. Random values (--random-values) are fresh random bytes per write:
// incompressible, so the tables hold what was written and the store spreads over several levels, as
// a store whose data does not compress.
type values struct {
	fixed  []byte
	random bool
}

func newValues(size int, random bool) values {
	fixed := make([]byte, size)
	for i := range fixed {
		fixed[i] = byte('a' + i%26)
	}
	return values{fixed: fixed, random: random}
}

// next returns a value to write. A random value is a new slice (the client may still hold the
// previous one); the fixed one is shared and must not be modified.
func (v values) next(rng *rand.Rand) []byte {
	if !v.random {
		return v.fixed
	}
	b := make([]byte, len(v.fixed)+7)
	for i := 0; i < len(v.fixed); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], rng.Uint64())
	}
	return b[:len(v.fixed)]
}
