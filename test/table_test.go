package test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/table"
	"github.com/shoaldb/shoal/test/testcluster"
)

// TestTable runs the table layer on a real 3-node cluster: rows come back by primary key in key
// order (negative ints, composite keys with string prefixes), bad rows are refused with
// InvalidArgument and write nothing, of concurrent creates of one name exactly one wins, and a
// drop of a table split across two ranges removes every row, its descriptor and its drop record.
func TestTable(t *testing.T) {
	c := testcluster.StartSafe(t, testcluster.Options{Nodes: 3})
	cl := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cat := table.NewCatalog(cl)
	cat.Page = 16 // several pages per scan and drop

	mustCreate := func(name, cols, pk string) *table.Table {
		t.Helper()
		cs, err := table.ParseColumns(cols)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cat.Create(ctx, table.NewDescriptor(name, cs, table.ParseKeyList(pk))); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		tb, err := cat.Open(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return tb
	}
	// rawRows is the table's span as kv holds it: "key=value" pairs in key order.
	rawRows := func(tb *table.Table) []string {
		t.Helper()
		s, e := table.TableSpan(tb.Desc.ID)
		kvs, err := cl.Scan(ctx, s, e, 0, false)
		if err != nil {
			t.Fatal(err)
		}
		out := []string{}
		for _, kv := range kvs {
			out = append(out, fmt.Sprintf("%x=%x", kv.Key, kv.Value))
		}
		return out
	}

	users := mustCreate("users", "id:int64,name:string,city:string", "id")
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	ids := []int64{-1 << 62, -1000, -1, 0, 1, 7, 1000, 1<<62 + 5}
	for len(ids) < 60 {
		ids = append(ids, r.Int64N(2000)-1000)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	for _, i := range r.Perm(len(ids)) { // written in random order
		if err := users.Put(ctx, table.Row{"id": ids[i], "name": fmt.Sprint("u", ids[i]), "city": "oslo"}); err != nil {
			t.Fatalf("put %d: %v", ids[i], err)
		}
	}
	row, found, err := users.Get(ctx, int64(-1000))
	if err != nil || !found || row["name"] != "u-1000" || row["city"] != "oslo" {
		t.Fatalf("get -1000: %v %v %v", row, found, err)
	}
	var got []int64
	if err := users.Scan(ctx, 0, func(r table.Row) bool { got = append(got, r["id"].(int64)); return true }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, ids) {
		t.Fatalf("scan order:\n%v\nwant\n%v", got, ids)
	}

	t.Run("composite key order", func(t *testing.T) {
		visits := mustCreate("visits", "city:string,at:timestamp,n:int64,w:float64", "city,at,n")
		type tuple struct {
			city string
			at   time.Time
			n    int64
		}
		base := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
		var want []tuple
		for _, city := range []string{"", "a", "a\x00", "a\x00b", "ab", "b"} {
			for _, d := range []time.Duration{-time.Hour, 0, time.Nanosecond} {
				for _, n := range []int64{-2, 3} {
					want = append(want, tuple{city, base.Add(d), n})
				}
			}
		}
		for _, i := range r.Perm(len(want)) {
			w := want[i]
			if err := visits.Put(ctx, table.Row{"city": w.city, "at": w.at, "n": w.n, "w": -1.5}); err != nil {
				t.Fatal(err)
			}
		}
		slices.SortFunc(want, func(a, b tuple) int {
			return cmp.Or(cmp.Compare(a.city, b.city), a.at.Compare(b.at), cmp.Compare(a.n, b.n))
		})
		var got []tuple
		if err := visits.Scan(ctx, 0, func(r table.Row) bool {
			got = append(got, tuple{r["city"].(string), r["at"].(time.Time), r["n"].(int64)})
			return true
		}); err != nil {
			t.Fatal(err)
		}
		if !slices.EqualFunc(got, want, func(a, b tuple) bool { return a.city == b.city && a.at.Equal(b.at) && a.n == b.n }) {
			t.Fatalf("scan order:\n%+v\nwant\n%+v", got, want)
		}
	})

	t.Run("bad rows write nothing", func(t *testing.T) {
		before := rawRows(users)
		for _, js := range []string{
			`{"id":5000,"nope":1}`, // unknown column
			`{"id":"5000"}`,        // wrong type
			`{"name":"x"}`,         // missing key column
			`{"id":5000,"name":` + fmt.Sprintf("%q", string(make([]byte, table.MaxRowBytes))) + `}`, // oversized
		} {
			row, err := table.ParseRowJSON(&users.Desc, []byte(js))
			if err == nil {
				err = users.Put(ctx, row)
			}
			if !errors.Is(err, client.ErrInvalidArgument) {
				t.Errorf("row %.40s…: %v, want InvalidArgument", js, err)
			}
		}
		if err := users.Put(ctx, table.Row{"id": int64(5000), "city": 3}); !errors.Is(err, client.ErrInvalidArgument) {
			t.Errorf("a number for a string column: %v, want InvalidArgument", err)
		}
		if after := rawRows(users); !slices.Equal(after, before) {
			t.Fatalf("refused rows changed the table: %d rows, then %d", len(before), len(after))
		}
	})

	t.Run("concurrent create", func(t *testing.T) {
		const n = 8
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cs := []table.Column{{Name: "k", Type: table.String}, {Name: "who", Type: table.Int64}}
				_, errs[i] = cat.Create(ctx, table.NewDescriptor("contested", cs, []string{"k"}))
			}()
		}
		wg.Wait()
		wins := 0
		for _, err := range errs {
			switch {
			case err == nil:
				wins++
			case !errors.Is(err, table.ErrTableExists):
				t.Errorf("create: %v", err)
			}
		}
		if wins != 1 {
			t.Fatalf("%d of %d concurrent creates won, want exactly 1", wins, n)
		}
	})

	t.Run("drop across ranges", func(t *testing.T) {
		// Split the users table's span in two inside the drop's first page (16 rows), so that the
		// page straddles the boundary whatever the random ids.
		mid := table.EncodeKey(&users.Desc, []any{ids[8]})
		if _, _, err := cl.Split(ctx, mid); err != nil {
			t.Fatal(err)
		}
		ckv := &refusalCountingKV{KV: cl}
		dropper := table.NewCatalog(ckv)
		dropper.Page = 16
		n, err := dropper.Drop(ctx, "users", nil)
		if err != nil || n != len(ids) {
			t.Fatalf("drop: %d rows, %v; want %d", n, err, len(ids))
		}
		if ckv.refused.Load() == 0 {
			t.Fatal("no batch of the drop crossed the split: the test did not exercise the halving")
		}
		if left := rawRows(users); len(left) != 0 {
			t.Fatalf("%d rows left after the drop", len(left))
		}
		if _, err := cat.Describe(ctx, "users"); !errors.Is(err, table.ErrNoTable) {
			t.Fatalf("describe after drop: %v", err)
		}
		if n, err := cat.FinishDrops(ctx, nil); err != nil || n != 0 {
			t.Fatalf("a drop record was left: %d rows, %v", n, err)
		}
		list, err := cat.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, d := range list {
			names = append(names, d.Name)
		}
		if !slices.Equal(names, []string{"contested", "visits"}) {
			t.Fatalf("tables after the drop: %v", names)
		}
	})
}

// refusalCountingKV counts the batch writes the store refused.
type refusalCountingKV struct {
	table.KV
	refused atomic.Int32
}

func (k *refusalCountingKV) BatchWrite(ctx context.Context, muts []*pb.Mutation) error {
	err := k.KV.BatchWrite(ctx, muts)
	if err != nil {
		k.refused.Add(1)
	}
	return err
}
