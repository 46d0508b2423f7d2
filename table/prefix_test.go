package table

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/table/tabletest"
)

// TestScanPrefix checks prefix scans against a filter of the whole table: forward and reverse, with
// limits, across range boundaries and pages, with values whose encoding ends in 0xFF bytes (so the
// span's end needs a carry), and that a set of columns that is not a leading part of the key is
// refused.
func TestScanPrefix(t *testing.T) {
	ctx := context.Background()
	probe := Descriptor{ID: 1, Columns: []Column{{Name: "a", Type: Int64, ID: 1}, {Name: "b", Type: Int64, ID: 2}, {Name: "c", Type: String, ID: 3}}, PrimaryKey: []string{"a", "b"}}
	kv := tabletest.New(string(EncodeKey(&probe, []any{int64(255), int64(3)})))
	cat := NewCatalog(kv)
	cat.Page = 3
	if _, err := cat.Create(ctx, NewDescriptor("t", probe.Columns, probe.PrimaryKey)); err != nil {
		t.Fatal(err)
	}
	tb, err := cat.Open(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	as := []int64{-1, 0, 254, 255, 256, 511, -256}
	for _, a := range as {
		for b := int64(-2); b < 8; b++ {
			if err := tb.Put(ctx, Row{"a": a, "b": b, "c": "x"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	type ab struct{ a, b int64 }
	collect := func(prefix Row, limit int, reverse bool) []ab {
		t.Helper()
		var out []ab
		if err := tb.ScanPrefix(ctx, prefix, limit, reverse, func(r Row) bool {
			out = append(out, ab{r["a"].(int64), r["b"].(int64)})
			return true
		}); err != nil {
			t.Fatalf("scan %v: %v", prefix, err)
		}
		return out
	}
	all := collect(nil, 0, false)
	if len(all) != len(as)*10 || !slices.IsSortedFunc(all, func(x, y ab) int {
		if x.a != y.a {
			return int(x.a - y.a)
		}
		return int(x.b - y.b)
	}) {
		t.Fatalf("whole table: %d rows, in order? %v", len(all), all)
	}
	for _, tc := range []struct {
		prefix  Row
		limit   int
		reverse bool
	}{
		{Row{"a": int64(255)}, 0, false},
		{Row{"a": int64(255)}, 0, true},
		{Row{"a": int64(-1)}, 4, true},
		{Row{"a": int64(-256)}, 7, false},
		{Row{"a": int64(511), "b": int64(7)}, 0, false},
		{Row{"a": int64(3)}, 0, false},
	} {
		var want []ab
		for _, r := range all {
			if r.a == tc.prefix["a"] && (tc.prefix["b"] == nil || r.b == tc.prefix["b"]) {
				want = append(want, r)
			}
		}
		if tc.reverse {
			slices.Reverse(want)
		}
		if tc.limit > 0 && len(want) > tc.limit {
			want = want[:tc.limit]
		}
		if got := collect(tc.prefix, tc.limit, tc.reverse); !slices.Equal(got, want) {
			t.Errorf("prefix %v limit %d reverse %v: got %v, want %v", tc.prefix, tc.limit, tc.reverse, got, want)
		}
	}
	for _, bad := range []Row{{"b": int64(1)}, {"a": "x"}, {"a": int64(1), "c": "x"}, {"a": int64(1), "b": int64(1), "c": "x"}} {
		err := tb.ScanPrefix(ctx, bad, 0, false, func(Row) bool { return true })
		if !errors.Is(err, client.ErrInvalidArgument) {
			t.Errorf("prefix %v: got %v, want INVALID_ARGUMENT", bad, err)
		}
	}
}

// TestCompareAndPut checks that a compare-and-put writes only over the row it was given (or over no
// row when given nil), and that concurrent increments of a counter row that retry lose none.
func TestCompareAndPut(t *testing.T) {
	ctx := context.Background()
	cat := NewCatalog(tabletest.New())
	cols, _ := ParseColumns("id:int64,n:int64,note:string")
	if _, err := cat.Create(ctx, NewDescriptor("c", cols, []string{"id"})); err != nil {
		t.Fatal(err)
	}
	tb, err := cat.Open(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	first := Row{"id": int64(1), "n": int64(0), "note": "x"}
	if ok, err := tb.CompareAndPut(ctx, nil, first); !ok || err != nil {
		t.Fatalf("create: %v %v", ok, err)
	}
	if ok, err := tb.CompareAndPut(ctx, nil, first); ok || err != nil {
		t.Fatalf("create over an existing row: %v %v, want false", ok, err)
	}
	if ok, err := tb.CompareAndPut(ctx, Row{"id": int64(1), "n": int64(5), "note": "x"}, first); ok || err != nil {
		t.Fatalf("put over a row that differs: %v %v, want false", ok, err)
	}
	if _, err := tb.CompareAndPut(ctx, Row{"id": int64(2), "n": int64(0)}, first); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("old row of another key: %v, want INVALID_ARGUMENT", err)
	}
	const workers, each = 8, 50
	done := make(chan error, workers)
	for range workers {
		go func() {
			for range each {
				for {
					cur, _, err := tb.Get(ctx, int64(1))
					if err != nil {
						done <- err
						return
					}
					next := Row{"id": int64(1), "n": cur["n"].(int64) + 1, "note": cur["note"]}
					ok, err := tb.CompareAndPut(ctx, cur, next)
					if err != nil {
						done <- err
						return
					}
					if ok {
						break
					}
				}
			}
			done <- nil
		}()
	}
	for range workers {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if cur, _, _ := tb.Get(ctx, int64(1)); cur["n"] != int64(workers*each) {
		t.Fatalf("counter %v after %d increments", cur["n"], workers*each)
	}
}
