package table

import (
	"bytes"
	"cmp"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

var allTypes = []Type{Int64, Float64, String, Bytes, Timestamp}

// randValue draws a value of type t, often an edge case: the extremes, zero and its neighbours,
// and strings built from 0x00, 0x01 and 0xFF (the escape bytes) so that prefixes are common.
func randValue(r *rand.Rand, t Type) any {
	switch t {
	case Int64:
		edges := []int64{math.MinInt64, math.MinInt64 + 1, -1, 0, 1, math.MaxInt64 - 1, math.MaxInt64}
		switch r.IntN(3) {
		case 0:
			return edges[r.IntN(len(edges))]
		case 1:
			return r.Int64N(2000) - 1000
		}
		return int64(r.Uint64())
	case Float64:
		edges := []float64{0, math.Copysign(0, -1), math.SmallestNonzeroFloat64, -math.SmallestNonzeroFloat64,
			math.MaxFloat64, -math.MaxFloat64, 1, -1, 0.5, -0.5}
		switch r.IntN(3) {
		case 0:
			return edges[r.IntN(len(edges))]
		case 1:
			return r.NormFloat64() * 100
		}
		for {
			f := math.Float64frombits(r.Uint64())
			if !math.IsNaN(f) && !math.IsInf(f, 0) {
				return f
			}
		}
	case String, Bytes:
		alphabet := []byte{0x00, 0x01, 0xFF, 'a', 'b'}
		b := make([]byte, r.IntN(6))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		if t == String {
			return string(b)
		}
		return b
	case Timestamp:
		lo, hi := time.Date(1678, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano(), time.Date(2261, 12, 31, 0, 0, 0, 0, time.UTC).UnixNano()
		if r.IntN(2) == 0 {
			return time.Unix(0, r.Int64N(2e9)-1e9).UTC()
		}
		return time.Unix(0, int64(uint64(lo)+r.Uint64N(uint64(hi)-uint64(lo)))).UTC()
	}
	panic("unknown type")
}

// compareValues is the order of the values themselves.
func compareValues(t Type, a, b any) int {
	switch t {
	case Int64:
		return cmp.Compare(a.(int64), b.(int64))
	case Float64:
		return cmp.Compare(a.(float64), b.(float64)) // -0 == +0
	case String:
		return cmp.Compare(a.(string), b.(string))
	case Bytes:
		return bytes.Compare(a.([]byte), b.([]byte))
	case Timestamp:
		return a.(time.Time).Compare(b.(time.Time))
	}
	panic("unknown type")
}

func testRand(t *testing.T) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, 0))
}

func sign(n int) int { return cmp.Compare(n, 0) }

// TestKeyOrderIsValueOrder: for every type, the encodings of two values compare as the values do,
// and each decodes back to its value (-0 to +0).
func TestKeyOrderIsValueOrder(t *testing.T) {
	r := testRand(t)
	for _, typ := range allTypes {
		t.Run(typ.String(), func(t *testing.T) {
			for i := 0; i < 20000; i++ {
				a, b := randValue(r, typ), randValue(r, typ)
				ea, eb := appendKeyValue(nil, typ, a), appendKeyValue(nil, typ, b)
				if got, want := sign(bytes.Compare(ea, eb)), compareValues(typ, a, b); got != want {
					t.Fatalf("%v %#v vs %#v: encodings compare %d, values %d (%x vs %x)", typ, a, b, got, want, ea, eb)
				}
				back, rest, err := decodeKeyValue(append(ea, 0xAB), typ)
				if err != nil || !bytes.Equal(rest, []byte{0xAB}) || compareValues(typ, back, a) != 0 {
					t.Fatalf("%v %#v: decoded %#v, rest %x, err %v", typ, a, back, rest, err)
				}
			}
		})
	}
}

// TestCompositeKeyOrder: rows of random composite keys (every type, in random key layouts) sort by
// their kv keys exactly as their key tuples sort, and the keys decode back to the tuples.
func TestCompositeKeyOrder(t *testing.T) {
	r := testRand(t)
	for layout := 0; layout < 40; layout++ {
		n := 1 + r.IntN(4)
		var cols []Column
		var pk []string
		for i := 0; i < n; i++ {
			name := string(rune('a' + i))
			cols = append(cols, Column{Name: name, Type: allTypes[r.IntN(len(allTypes))]})
			pk = append(pk, name)
		}
		d := NewDescriptor("t", cols, pk)
		d.ID = 1 + r.Uint64N(1000)
		if err := d.Validate(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2000; i++ {
			ta, tb := make([]any, n), make([]any, n)
			for j, c := range cols {
				ta[j], tb[j] = randValue(r, c.Type), randValue(r, c.Type)
				if r.IntN(2) == 0 {
					tb[j] = ta[j] // shared leading columns are what make composite keys hard
				}
			}
			want := 0
			for j, c := range cols {
				if want = compareValues(c.Type, ta[j], tb[j]); want != 0 {
					break
				}
			}
			ka, kb := EncodeKey(&d, ta), EncodeKey(&d, tb)
			if got := sign(bytes.Compare(ka, kb)); got != want {
				t.Fatalf("layout %v: %#v vs %#v: keys compare %d, tuples %d", cols, ta, tb, got, want)
			}
			back, err := DecodeKey(&d, ka)
			if err != nil {
				t.Fatal(err)
			}
			for j, c := range cols {
				if compareValues(c.Type, back[j], ta[j]) != 0 {
					t.Fatalf("layout %v: %#v decoded as %#v", cols, ta, back)
				}
			}
		}
	}
}

// TestTablesAreContiguous: every row key of a table lies in its span and outside every other
// table's span, system keys included, whatever the ids' digits.
func TestTablesAreContiguous(t *testing.T) {
	r := testRand(t)
	d := NewDescriptor("t", []Column{{Name: "k", Type: Bytes}}, []string{"k"})
	ids := []uint64{1, 2, 9, 10, 11, 19, 100, 101, math.MaxUint64}
	sys := [][]byte{sysSeqKey, descKey("t"), dropKey(1), dropKey(10)}
	for i := 0; i < 5000; i++ {
		d.ID = ids[r.IntN(len(ids))]
		k := EncodeKey(&d, []any{randValue(r, Bytes)})
		for _, id := range ids {
			s, e := TableSpan(id)
			in := bytes.Compare(k, s) >= 0 && bytes.Compare(k, e) < 0
			if in != (id == d.ID) {
				t.Fatalf("key %x of table %d: in span of table %d = %v", k, d.ID, id, in)
			}
		}
		for _, sk := range sys {
			s, e := TableSpan(d.ID)
			if bytes.Compare(sk, s) >= 0 && bytes.Compare(sk, e) < 0 {
				t.Fatalf("system key %q lies in table %d's span", sk, d.ID)
			}
		}
	}
}

// TestRowRoundTrip: random rows of a table with every type encode and decode to themselves; NULL
// columns stay absent.
func TestRowRoundTrip(t *testing.T) {
	r := testRand(t)
	var cols []Column
	for i, typ := range allTypes {
		cols = append(cols, Column{Name: "k" + typ.String(), Type: typ}, Column{Name: "v" + typ.String(), Type: allTypes[(i+2)%len(allTypes)]})
	}
	d := NewDescriptor("every", cols, []string{"kstring", "kint64"})
	d.ID = 7
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5000; i++ {
		row := Row{}
		for _, c := range d.Columns {
			if d.isKey(c.Name) || r.IntN(4) > 0 {
				row[c.Name] = randValue(r, c.Type)
			}
		}
		k, v, err := d.EncodeRow(row)
		if err != nil {
			t.Fatal(err)
		}
		back, err := d.DecodeRow(k, v)
		if err != nil {
			t.Fatal(err)
		}
		if len(back) != len(row) {
			t.Fatalf("row %#v came back as %#v", row, back)
		}
		for n, want := range row {
			c, _ := d.Column(n)
			got := back[n]
			if c.Type == Float64 && !d.isKey(n) {
				// A value column keeps the sign of zero (bits are stored); a key column does not.
				if math.Float64bits(got.(float64)) != math.Float64bits(want.(float64)) {
					t.Fatalf("column %s: %v came back as %v", n, want, got)
				}
				continue
			}
			if compareValues(c.Type, got, want) != 0 || reflect.TypeOf(got) != reflect.TypeOf(want) {
				t.Fatalf("column %s: %#v came back as %#v", n, want, got)
			}
		}
	}
}
