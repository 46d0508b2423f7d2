package tpcc

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/shoaldb/shoal/table"
)

// TestSchemaKeys checks the primary keys against the spec and the key layout the transactions'
// prefix scans rely on: a district's rows of a table are contiguous and in order id order, orders
// of one district sort before the next district's, and the last order of a customer is the last
// key under its index prefix.
func TestSchemaKeys(t *testing.T) {
	ds, err := Descriptors("x_")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		WarehouseTable: {"w_id"}, DistrictTable: {"d_w_id", "d_id"}, CustomerTable: {"c_w_id", "c_d_id", "c_id"},
		NewOrderTable: {"no_w_id", "no_d_id", "no_o_id"}, OrderTable: {"o_w_id", "o_d_id", "o_id"},
		OrderLineTable: {"ol_w_id", "ol_d_id", "ol_o_id", "ol_number"}, ItemTable: {"i_id"}, StockTable: {"s_w_id", "s_i_id"},
		HistoryTable: {"h_c_w_id", "h_c_d_id", "h_c_id", "h_id"}, CustomerByNameTable: {"c_w_id", "c_d_id", "c_last", "c_first", "c_id"},
		OrderByCustomerTable: {"o_w_id", "o_d_id", "o_c_id", "o_id"},
	}
	byName := map[string]table.Descriptor{}
	for i, d := range ds {
		if !strings.HasPrefix(d.Name, "x_") {
			t.Errorf("table %s lacks the prefix", d.Name)
		}
		d.ID = uint64(100 + i)
		byName[strings.TrimPrefix(d.Name, "x_")] = d
	}
	if len(byName) != len(want) {
		t.Fatalf("%d tables, want %d", len(byName), len(want))
	}
	for name, pk := range want {
		if d, ok := byName[name]; !ok || !slices.Equal(d.PrimaryKey, pk) {
			t.Errorf("table %s: primary key %v, want %v", name, d.PrimaryKey, pk)
		}
	}

	ol := byName[OrderLineTable]
	key := func(w, d, o, n int64) []byte { return table.EncodeKey(&ol, []any{w, d, o, n}) }
	// Tuples in order; their keys must be in the same order.
	tuples := [][4]int64{{1, 1, 1, 1}, {1, 1, 1, 15}, {1, 1, 2, 1}, {1, 1, 255, 3}, {1, 1, 256, 1}, {1, 1, 3001, 1}, {1, 2, 1, 1}, {1, 10, 9, 9}, {2, 1, 1, 1}}
	for i := 1; i < len(tuples); i++ {
		a, b := tuples[i-1], tuples[i]
		if bytes.Compare(key(a[0], a[1], a[2], a[3]), key(b[0], b[1], b[2], b[3])) >= 0 {
			t.Errorf("order line key %v does not sort before %v", a, b)
		}
	}
	// A district's lines share the prefix of its first key columns; the next district's do not.
	p := table.EncodeKey(&ol, []any{int64(1), int64(1), int64(0), int64(0)})[:len(table.TablePrefix(ol.ID))+16]
	if !bytes.HasPrefix(key(1, 1, 3001, 15), p) || bytes.HasPrefix(key(1, 2, 1, 1), p) {
		t.Errorf("district prefix %x does not bound the district's order lines", p)
	}
}
