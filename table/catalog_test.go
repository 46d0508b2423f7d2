package table

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/table/tabletest"
)

func usersDesc(t *testing.T) Descriptor {
	t.Helper()
	cols, err := ParseColumns("id:int64,name:string,city:string,score:float64,pic:bytes,seen:timestamp")
	if err != nil {
		t.Fatal(err)
	}
	return NewDescriptor("users", cols, []string{"id"})
}

func TestCreateDescribeList(t *testing.T) {
	ctx := context.Background()
	cat := NewCatalog(tabletest.New())
	d, err := cat.Create(ctx, usersDesc(t))
	if err != nil {
		t.Fatal(err)
	}
	if d.ID == 0 {
		t.Fatal("create assigned no id")
	}
	got, err := cat.Describe(ctx, "users")
	if err != nil || !reflect.DeepEqual(got, d) {
		t.Fatalf("describe: %+v, %v; want %+v", got, err, d)
	}
	if _, err := cat.Create(ctx, usersDesc(t)); !errors.Is(err, ErrTableExists) {
		t.Fatalf("second create: %v, want ErrTableExists", err)
	}
	o := NewDescriptor("orders", []Column{{Name: "id", Type: Int64}}, []string{"id"})
	o2, err := cat.Create(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if o2.ID == d.ID {
		t.Fatalf("two tables share id %d", d.ID)
	}
	list, err := cat.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, x := range list {
		names = append(names, x.Name)
	}
	if !reflect.DeepEqual(names, []string{"orders", "users"}) {
		t.Fatalf("list: %v", names)
	}
	if _, err := cat.Describe(ctx, "nope"); !errors.Is(err, ErrNoTable) {
		t.Fatalf("describe of a missing table: %v", err)
	}
}

// TestConcurrentCreateOneWins: of many concurrent creates of one name exactly one succeeds, and the
// descriptor stored is the winner's.
func TestConcurrentCreateOneWins(t *testing.T) {
	ctx := context.Background()
	cat := NewCatalog(tabletest.New())
	var wins atomic.Int32
	var winner atomic.Value
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := cat.Create(ctx, usersDesc(t))
			switch {
			case err == nil:
				wins.Add(1)
				winner.Store(d)
			case !errors.Is(err, ErrTableExists):
				t.Errorf("create: %v", err)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d creates won, want 1", wins.Load())
	}
	got, err := cat.Describe(ctx, "users")
	if err != nil || got.ID != winner.Load().(Descriptor).ID {
		t.Fatalf("stored descriptor %+v (%v), winner %+v", got, err, winner.Load())
	}
}

func TestBadDescriptors(t *testing.T) {
	for _, tc := range []struct {
		name, cols, pk string
	}{
		{"", "id:int64", "id"},
		{"1abc", "id:int64", "id"},
		{"a-b", "id:int64", "id"},
		{"t", "id:int64,id:string", "id"},
		{"t", "id:int64", ""},
		{"t", "id:int64", "nope"},
		{"t", "id:int64", "id,id"},
		{strings.Repeat("x", MaxNameLen+1), "id:int64", "id"},
	} {
		cols, err := ParseColumns(tc.cols)
		if err != nil {
			t.Fatal(err)
		}
		kv := tabletest.New()
		_, err = NewCatalog(kv).Create(context.Background(), NewDescriptor(tc.name, cols, ParseKeyList(tc.pk)))
		if !errors.Is(err, client.ErrInvalidArgument) {
			t.Errorf("create %q %q %q: %v, want InvalidArgument", tc.name, tc.cols, tc.pk, err)
		}
		if kv.Writes != 0 {
			t.Errorf("create %q %q %q: %d writes", tc.name, tc.cols, tc.pk, kv.Writes)
		}
	}
	if _, err := ParseColumns("id:int32"); err == nil {
		t.Error("ParseColumns took an unknown type")
	}
}

// TestBadRowsWriteNothing: every kind of bad row is refused with INVALID_ARGUMENT before the store
// sees a write.
func TestBadRowsWriteNothing(t *testing.T) {
	ctx := context.Background()
	kv := tabletest.New()
	cat := NewCatalog(kv)
	if _, err := cat.Create(ctx, usersDesc(t)); err != nil {
		t.Fatal(err)
	}
	tb, err := cat.Open(ctx, "users")
	if err != nil {
		t.Fatal(err)
	}
	before, writes := kv.Snapshot(), kv.Writes
	big := strings.Repeat("x", MaxRowBytes)
	for _, js := range []string{
		`{"id":1,"nope":2}`,                      // unknown column
		`{"id":"1"}`,                             // wrong type
		`{"id":1.5}`,                             // not an integer
		`{"id":99999999999999999999}`,            // out of range
		`{"name":"ann"}`,                         // missing key column
		`{"id":null,"name":"ann"}`,               // null key column
		`{"id":1,"score":"high"}`,                // wrong type
		`{"id":1,"pic":"not base64!"}`,           // bad bytes
		`{"id":1,"seen":"yesterday"}`,            // bad timestamp
		`{"id":1,"seen":"3000-01-01T00:00:00Z"}`, // timestamp out of int64 ns
		`{"id":1,"id":2}`,                        // a column twice
		`{"id":1} {}`,                            // trailing data
		`[1]`,                                    // not an object
		`{"id":1,"name":"` + big + `"}`,          // oversized
		`{"id":1,"city":{"a":1}}`,                // an object for a string
	} {
		row, err := ParseRowJSON(&tb.Desc, []byte(js))
		if err == nil {
			err = tb.Put(ctx, row)
		}
		if !errors.Is(err, client.ErrInvalidArgument) {
			t.Errorf("row %.60s: %v, want InvalidArgument", js, err)
		}
	}
	for _, row := range []Row{{"id": int32(1)}, {"id": int64(1), "score": 1}, {"id": "x"}} {
		if err := tb.Put(ctx, row); !errors.Is(err, client.ErrInvalidArgument) {
			t.Errorf("row %#v: %v, want InvalidArgument", row, err)
		}
	}
	for _, key := range [][]string{{}, {"1", "2"}, {"one"}} {
		if _, err := ParseKey(&tb.Desc, key); !errors.Is(err, client.ErrInvalidArgument) {
			t.Errorf("key %q: %v, want InvalidArgument", key, err)
		}
	}
	if kv.Writes != writes || !reflect.DeepEqual(kv.Snapshot(), before) {
		t.Fatalf("refused rows wrote to the store")
	}
}

func TestRowsJSONRoundTrip(t *testing.T) {
	ctx := context.Background()
	cat := NewCatalog(tabletest.New())
	if _, err := cat.Create(ctx, usersDesc(t)); err != nil {
		t.Fatal(err)
	}
	tb, _ := cat.Open(ctx, "users")
	in := `{"id":-7,"name":"a<b>&\"c\"","city":null,"score":2.5,"pic":"AAEC","seen":"2024-05-06T07:08:09.123456789Z"}`
	row, err := ParseRowJSON(&tb.Desc, []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if err := tb.Put(ctx, row); err != nil {
		t.Fatal(err)
	}
	key, err := ParseKey(&tb.Desc, []string{"-7"})
	if err != nil {
		t.Fatal(err)
	}
	got, found, err := tb.Get(ctx, key...)
	if err != nil || !found {
		t.Fatalf("get: %v %v", found, err)
	}
	if out := string(RowJSON(&tb.Desc, got)); out != in {
		t.Fatalf("row came back as\n%s\nwant\n%s", out, in)
	}
	if found, err := tb.Delete(ctx, key...); err != nil || !found {
		t.Fatalf("delete: %v %v", found, err)
	}
	if _, found, _ := tb.Get(ctx, key...); found {
		t.Fatal("row still there after delete")
	}
}

// TestScanAndDropAcrossRanges: a scan pages through the rows in key order; a drop whose pages
// straddle range boundaries deletes every row, reports progress and leaves no drop record, and
// a re-created table of the same name gets a new id and no old rows.
func TestScanAndDropAcrossRanges(t *testing.T) {
	ctx := context.Background()
	d := NewDescriptor("ev", []Column{{Name: "k", Type: Int64}, {Name: "v", Type: String}}, []string{"k"})
	// Boundaries inside the table's span (id 1): rows around k=-5 and k=40 lie in other ranges.
	probe := d
	probe.ID = 1
	kv := tabletest.New(string(EncodeKey(&probe, []any{int64(-5)})), string(EncodeKey(&probe, []any{int64(40)})))
	cat := NewCatalog(kv)
	cat.Page = 7
	d, err := cat.Create(ctx, d)
	if err != nil || d.ID != 1 {
		t.Fatalf("create: id %d, %v", d.ID, err)
	}
	tb, _ := cat.Open(ctx, "ev")
	var want []int64
	for k := int64(-30); k < 70; k += 3 {
		if err := tb.Put(ctx, Row{"k": k, "v": fmt.Sprint(k)}); err != nil {
			t.Fatal(err)
		}
		want = append(want, k)
	}
	for _, limit := range []int{0, 5, 7, 8, 1000} {
		var got []int64
		if err := tb.Scan(ctx, limit, func(r Row) bool { got = append(got, r["k"].(int64)); return true }); err != nil {
			t.Fatal(err)
		}
		w := want
		if limit > 0 && limit < len(w) {
			w = w[:limit]
		}
		if !reflect.DeepEqual(got, w) {
			t.Fatalf("scan limit %d: %v, want %v", limit, got, w)
		}
	}
	var last int
	n, err := cat.Drop(ctx, "ev", func(d int) { last = d })
	if err != nil || n != len(want) || last != n {
		t.Fatalf("drop: %d rows (progress %d), %v; want %d", n, last, err, len(want))
	}
	if left := kv.Snapshot(); len(left) != 1 { // the id counter
		t.Fatalf("after drop the store holds %v", left)
	}
	d2, err := cat.Create(ctx, NewDescriptor("ev", d.Columns, d.PrimaryKey))
	if err != nil || d2.ID == d.ID {
		t.Fatalf("re-create: id %d (old %d), %v", d2.ID, d.ID, err)
	}
	if _, err := cat.Drop(ctx, "nope", nil); !errors.Is(err, ErrNoTable) {
		t.Fatalf("drop of a missing table: %v", err)
	}
}

// TestFinishDrops: rows of a drop that stopped after removing the descriptor are deleted by
// FinishDrops, and its record with them.
func TestFinishDrops(t *testing.T) {
	ctx := context.Background()
	kv := tabletest.New()
	cat := NewCatalog(kv)
	d, _ := cat.Create(ctx, NewDescriptor("x", []Column{{Name: "k", Type: String}}, []string{"k"}))
	tb, _ := cat.Open(ctx, "x")
	for _, k := range []string{"a", "b", "c"} {
		if err := tb.Put(ctx, Row{"k": k}); err != nil {
			t.Fatal(err)
		}
	}
	// What Drop does before its rows: the record, then the descriptor gone.
	_ = kv.Put(ctx, dropKey(d.ID), nil)
	_, _ = kv.Delete(ctx, descKey("x"))
	n, err := cat.FinishDrops(ctx, nil)
	if err != nil || n != 3 {
		t.Fatalf("finish drops: %d, %v", n, err)
	}
	if left := kv.Snapshot(); len(left) != 1 {
		t.Fatalf("after FinishDrops the store holds %v", left)
	}
}

// TestUnknownOutcomes: a create or a drop whose descriptor write took effect but answered
// AMBIGUOUS succeeds, as a read-back shows; one that did not take effect still fails.
func TestUnknownOutcomes(t *testing.T) {
	ctx := context.Background()
	kv := tabletest.New()
	cat := NewCatalog(kv)
	kv.AfterTxn = func(req *pb.TxnRequest) error {
		if len(req.Compares) > 0 { // the descriptor's write, not the id counter's
			return client.ErrAmbiguous
		}
		return nil
	}
	d, err := cat.Create(ctx, usersDesc(t))
	if err != nil || d.ID == 0 {
		t.Fatalf("create answered ambiguous but applied: %v", err)
	}
	// A create that loses to a concurrent one (which wins between its check and its write) and
	// answers ambiguous still fails.
	other := NewDescriptor("orders", []Column{{Name: "id", Type: Int64}}, []string{"id"})
	kv.AfterTxn = func(req *pb.TxnRequest) error {
		if len(req.Compares) == 0 { // the id counter: the rival writes its descriptor now
			winner := other
			winner.ID = 999
			b, _ := json.Marshal(winner)
			_ = kv.Put(ctx, descKey("orders"), b)
			return nil
		}
		return client.ErrAmbiguous
	}
	if _, err := cat.Create(ctx, other); !errors.Is(err, client.ErrAmbiguous) {
		t.Fatalf("create answered ambiguous and not applied: %v, want the ambiguous error", err)
	}
	kv.AfterTxn = func(req *pb.TxnRequest) error { return client.ErrAmbiguous }
	if _, err := cat.Drop(ctx, "users", nil); err != nil {
		t.Fatalf("drop answered ambiguous but applied: %v", err)
	}
	if _, err := cat.Describe(ctx, "users"); !errors.Is(err, ErrNoTable) {
		t.Fatalf("after the drop: %v", err)
	}
}
