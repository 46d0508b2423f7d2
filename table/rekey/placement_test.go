package rekey

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"testing"
)

func TestBetween(t *testing.T) {
	for _, tc := range []struct {
		a, b []byte
		f    float64
	}{
		{[]byte("/t/1/\x00"), []byte("/t/1/\xff"), 0.5},
		{[]byte("/t/1/"), []byte("/t/2"), 0.25},
		{[]byte("/t/1/abc"), []byte("/t/1/abd"), 0.9},
		{[]byte("/t/1/"), nil, 0.5},
		{[]byte("k"), []byte("k\x00"), 0.5},
	} {
		got := between(tc.a, tc.b, tc.f)
		if bytes.Compare(got, tc.a) < 0 || (len(tc.b) > 0 && bytes.Compare(got, tc.b) >= 0) {
			t.Errorf("between(%q, %q, %v) = %q: outside [a, b)", tc.a, tc.b, tc.f, got)
		}
	}
	// Evenly spread points of a wide span are increasing.
	a, b := []byte("/t/7/\x00"), []byte("/t/8")
	prev := a
	for p := 1; p < 8; p++ {
		k := between(a, b, float64(p)/8)
		if bytes.Compare(k, prev) <= 0 {
			t.Fatalf("point %d: %q not after %q", p, k, prev)
		}
		prev = k
	}
}

// Boundaries cut the sample into parts of equal bytes, strictly increasing, whatever the weights.
func TestBoundaries(t *testing.T) {
	var s []sampled
	for i := range 1000 {
		w := 1.0
		if i >= 900 {
			w = 9 // the last tenth of the keys holds half the bytes
		}
		s = append(s, sampled{newKey: []byte(fmt.Sprintf("k%04d", 999-i)), weight: w})
	}
	got := boundaries(s, 4)
	if len(got) != 3 {
		t.Fatalf("%d boundaries, want 3: %q", len(got), got)
	}
	for i := 1; i < len(got); i++ {
		if bytes.Compare(got[i-1], got[i]) >= 0 {
			t.Fatalf("boundaries not increasing: %q", got)
		}
	}
	// Half the bytes are in keys k0000..k0099 (weights 9): the middle cut starts right after them.
	if !bytes.Equal(got[1], []byte("k0100")) {
		t.Fatalf("middle boundary %q, want k0100, where the heavy keys end", got[1])
	}
	if got := boundaries(s[:1], 4); len(got) != 0 {
		t.Fatalf("one row: boundaries %q, want none", got)
	}
}

// The placement problem counts a row's bytes where its old range's leader is, in the new range its
// new key falls in.
func TestPlacementInput(t *testing.T) {
	olds := []oldRange{{start: []byte("a"), leader: 1}, {start: []byte("m"), leader: 2}}
	news := []oldRange{{start: []byte("x"), leader: 2}, {start: []byte("y"), leader: 3}}
	sample := []sampled{
		{newKey: []byte("x1"), old: 0, weight: 10},
		{newKey: []byte("x2"), old: 1, weight: 5},
		{newKey: []byte("y1"), old: 1, weight: 7},
	}
	in, cur := placementInput(sample, olds, news, []uint64{1, 2, 3})
	want := [][]float64{{10, 5, 0}, {0, 7, 0}}
	for i := range want {
		for j := range want[i] {
			if in.Local[i][j] != want[i][j] {
				t.Fatalf("Local = %v, want %v", in.Local, want)
			}
		}
	}
	if in.Size[0] != 15 || in.Size[1] != 7 || cur[0] != 1 || cur[1] != 2 {
		t.Fatalf("sizes %v, current %v", in.Size, cur)
	}
	if m := in.Moved(cur); m != 10+7 {
		t.Fatalf("unplaced moves %v, want 17", m)
	}
}

// The rows a probe reads over the fraction of the key space they cover estimate the range's rows.
func TestKeySpaceFraction(t *testing.T) {
	key := func(i uint64) []byte { return binary.BigEndian.AppendUint64([]byte("/t/9/"), i) }
	// 10 000 rows with ids 0, 7, 14, …: a range [key(0), key(70 000)).
	ks := newKeySpace(key(0), key(70000))
	for _, f := range []float64{0, 0.25, 0.5, 0.9} {
		from := ks.at(f)
		first := uint64(math.Ceil(f*70000/7)) * 7 // the first id at or after the probe
		last := first + 7*99                      // a probe of 100 rows
		got := 100 / ks.fraction(from, key(last))
		if got < 9000 || got > 11000 {
			t.Errorf("probe at %.2f: %.0f rows estimated, want about 10 000", f, got)
		}
	}
	if f := ks.fraction(key(10), key(5)); f != 0 {
		t.Errorf("a reversed span covers %v, want 0", f)
	}
}
