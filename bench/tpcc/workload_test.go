package tpcc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/table"
	"github.com/shoaldb/shoal/table/tabletest"
)

// loadSmall loads a small workload into an in-memory store split into several ranges.
func loadSmall(t *testing.T, s Sizes) (*tabletest.KV, *Tables) {
	t.Helper()
	ctx := context.Background()
	kv := tabletest.New("/t/3", "/t/7/", "/t/9")
	rep, err := Load(ctx, kv, s, LoadOptions{Threads: 3, Batch: 64, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	// Rows() counts 10 lines per order on average; the load drew 5..15.
	if want := s.Rows(); rep.Rows < want*8/10 || rep.Rows > want*12/10 {
		t.Fatalf("loaded %d rows, expected about %d", rep.Rows, want)
	}
	tabs, err := OpenTables(ctx, table.NewCatalog(kv), DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	return kv, tabs
}

func TestLoadThenCheck(t *testing.T) {
	ctx := context.Background()
	s := Sizes{Warehouses: 2, Items: 40, Customers: 20}
	kv, tabs := loadSmall(t, s)
	if err := Check(ctx, tabs, s); err != nil {
		t.Fatalf("fresh load: %v", err)
	}
	if err := CheckSizes(ctx, tabs, s); err != nil {
		t.Fatal(err)
	}
	if err := CheckSizes(ctx, tabs, Sizes{Warehouses: 2, Items: 100000, Customers: 20}); err == nil || !strings.Contains(err.Error(), "give the load's sizes") {
		t.Fatalf("other sizes accepted: %v", err)
	}
	if _, err := Load(ctx, kv, s, LoadOptions{}); !errors.Is(err, ErrTablesExist) {
		t.Fatalf("second load: %v, want ErrTablesExist", err)
	}
	// Each district: 20 orders, the last 30 % (15..20) undelivered.
	n := 0
	if err := tabs.NewOrder.ScanPrefix(ctx, table.Row{"no_w_id": int64(2), "no_d_id": int64(4)}, 0, false, func(r table.Row) bool {
		if o := r["no_o_id"].(int64); o != int64(15+n) {
			t.Errorf("new_order %d, want %d", o, 15+n)
		}
		n++
		return true
	}); err != nil || n != 6 {
		t.Fatalf("new_order rows of a district: %d (%v), want 6", n, err)
	}
}

// TestTransactionsKeepConsistency runs every transaction many times, one at a time, then the mix on
// four terminals, and checks the data after each; then breaks the data three ways and checks that
// Check sees each.
func TestTransactionsKeepConsistency(t *testing.T) {
	ctx := context.Background()
	s := Sizes{Warehouses: 2, Items: 40, Customers: 30}
	kv, tabs := loadSmall(t, s)
	wk := NewWorker(tabs, s, NewInput(9), 1)
	rollbacks := 0
	for i := range 300 {
		k := Kinds()[i%int(numKinds)]
		rb, err := wk.Run(ctx, k)
		if err != nil {
			t.Fatalf("%v: %v", k, err)
		}
		if rb {
			rollbacks++
		}
	}
	if err := Check(ctx, tabs, s); err != nil {
		t.Fatalf("after single transactions: %v", err)
	}
	dr, _, _ := tabs.District.Get(ctx, int64(1), int64(1))
	if dr["d_next_o_id"].(int64) <= 31 {
		t.Errorf("district 1 took no new order: next id %v", dr["d_next_o_id"])
	}

	// The mix on a store slowed down so that concurrent transactions overlap on the districts'
	// rows: a payment's write of a district must not roll back a new order's id.
	rep, err := Run(ctx, slowKV{kv}, s, RunOptions{Threads: 16, Duration: time.Second, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Errors != 0 || rep.Total == 0 || rep.TpmC <= 0 {
		t.Fatalf("run: %d transactions, %d errors (%s), tpmC %v", rep.Total, rep.Errors, rep.FirstError, rep.TpmC)
	}
	if err := Check(ctx, tabs, s); err != nil {
		t.Fatalf("after the mix: %v", err)
	}

	for _, tc := range []struct {
		name   string
		break_ func() error
		want   string
	}{
		{"a lost order line", func() error { _, err := tabs.OrderLine.Delete(ctx, int64(2), int64(3), int64(5), int64(1)); return err }, "lines, o_ol_cnt"},
		{"a hole in the new orders", func() error {
			var second []any
			n := 0
			if err := tabs.NewOrder.ScanPrefix(ctx, table.Row{"no_w_id": int64(2), "no_d_id": int64(5)}, 2, false, func(r table.Row) bool {
				if n++; n == 2 {
					second = []any{r["no_w_id"], r["no_d_id"], r["no_o_id"]}
				}
				return true
			}); err != nil || second == nil {
				return fmt.Errorf("fewer than two new orders (%v)", err)
			}
			_, err := tabs.NewOrder.Delete(ctx, second...)
			return err
		}, "no new_order row"},
		{"a district ahead of its orders", func() error {
			dr, _, err := tabs.District.Get(ctx, int64(2), int64(6))
			if err != nil {
				return err
			}
			dr["d_next_o_id"] = dr["d_next_o_id"].(int64) + 1
			return tabs.District.Put(ctx, dr)
		}, "is missing (next order id"},
	} {
		if err := tc.break_(); err != nil {
			t.Fatal(err)
		}
		if err := Check(ctx, tabs, s); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Check says %v, want %q", tc.name, err, tc.want)
		}
	}
}

// slowKV makes every write take a little longer, widening the window between a transaction's read
// of a row and its write back.
type slowKV struct{ *tabletest.KV }

func (s slowKV) Put(ctx context.Context, key, value []byte) error {
	time.Sleep(300 * time.Microsecond)
	return s.KV.Put(ctx, key, value)
}

func TestLoadProgress(t *testing.T) {
	var out strings.Builder
	s := Sizes{Warehouses: 1, Items: 20, Customers: 10}
	rep, err := Load(context.Background(), tabletest.New(), s, LoadOptions{Progress: &out, ProgressInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("load: %d rows in ", rep.Rows); !strings.Contains(out.String(), want) {
		t.Fatalf("progress %q lacks the final line %q", out.String(), want)
	}
}
