package tpcc

import (
	"context"
	"errors"
	"fmt"

	"github.com/shoaldb/shoal/table"
)

// Check verifies conditions of the data at rest that hold without transactions as long as every
// transaction ran to its end (no failures, nothing running): for each district, the orders are
// exactly 1 … d_next_o_id − 1; each has o_ol_cnt lines and no lines belong to a missing order; the
// new_order rows are a suffix of the orders (none delivered: no carrier, lines without a delivery
// date) and every order before them is delivered (a carrier, dated lines); each order is in the
// customer index under its customer. (TPC-C's w_ytd = Σ d_ytd does not hold: payments lose
// updates of w_ytd without transactions.) It returns every violation found, joined.
func Check(ctx context.Context, t *Tables, s Sizes) error {
	var errs []error
	for w := int64(1); w <= int64(s.Warehouses); w++ {
		for d := int64(1); d <= Districts; d++ {
			if err := checkDistrict(ctx, t, w, d); err != nil {
				errs = append(errs, fmt.Errorf("warehouse %d district %d: %w", w, d, err))
			}
		}
	}
	return errors.Join(errs...)
}

type orderState struct {
	c, lines, wantLines int64
	carrier, dated      bool
	undatedLines        int64
	newOrder, indexed   bool
}

func checkDistrict(ctx context.Context, t *Tables, w, d int64) error {
	dr, err := get(ctx, t.District, w, d)
	if err != nil {
		return err
	}
	next := dr["d_next_o_id"].(int64)
	orders := map[int64]*orderState{}
	var errs []error
	scan := func(tb *table.Table, prefix table.Row, fn func(table.Row)) {
		if err := tb.ScanPrefix(ctx, prefix, 0, false, func(r table.Row) bool { fn(r); return true }); err != nil {
			errs = append(errs, err)
		}
	}
	scan(t.Order, table.Row{"o_w_id": w, "o_d_id": d}, func(r table.Row) {
		_, carrier := r["o_carrier_id"]
		orders[r["o_id"].(int64)] = &orderState{c: r["o_c_id"].(int64), wantLines: r["o_ol_cnt"].(int64), carrier: carrier}
	})
	for o := int64(1); o < next; o++ {
		if orders[o] == nil {
			errs = append(errs, fmt.Errorf("order %d is missing (next order id %d)", o, next))
		}
	}
	for o := range orders {
		if o >= next {
			errs = append(errs, fmt.Errorf("order %d is at or past the next order id %d", o, next))
		}
	}
	scan(t.OrderLine, table.Row{"ol_w_id": w, "ol_d_id": d}, func(r table.Row) {
		o := r["ol_o_id"].(int64)
		st := orders[o]
		if st == nil {
			errs = append(errs, fmt.Errorf("order line %d of a missing order %d", r["ol_number"], o))
			return
		}
		st.lines++
		if _, dated := r["ol_delivery_d"]; !dated {
			st.undatedLines++
		}
	})
	firstNew := next
	scan(t.NewOrder, table.Row{"no_w_id": w, "no_d_id": d}, func(r table.Row) {
		o := r["no_o_id"].(int64)
		firstNew = min(firstNew, o)
		if st := orders[o]; st != nil {
			st.newOrder = true
		} else {
			errs = append(errs, fmt.Errorf("new_order %d of a missing order", o))
		}
	})
	scan(t.OrderByCustomer, table.Row{"o_w_id": w, "o_d_id": d}, func(r table.Row) {
		o := r["o_id"].(int64)
		if st := orders[o]; st == nil || st.c != r["o_c_id"].(int64) {
			errs = append(errs, fmt.Errorf("index row (customer %d, order %d) matches no order of that customer", r["o_c_id"], o))
		} else {
			st.indexed = true
		}
	})
	for o, st := range orders {
		undelivered := o >= firstNew
		switch {
		case st.lines != st.wantLines:
			errs = append(errs, fmt.Errorf("order %d has %d lines, o_ol_cnt %d", o, st.lines, st.wantLines))
		case !st.indexed:
			errs = append(errs, fmt.Errorf("order %d is not in the customer index", o))
		case undelivered && !st.newOrder:
			errs = append(errs, fmt.Errorf("order %d has no new_order row though the new orders start at %d", o, firstNew))
		case undelivered && (st.carrier || st.undatedLines != st.lines):
			errs = append(errs, fmt.Errorf("undelivered order %d has a carrier (%v) or dated lines (%d of %d undated)", o, st.carrier, st.undatedLines, st.lines))
		case !undelivered && (!st.carrier || st.undatedLines != 0):
			errs = append(errs, fmt.Errorf("delivered order %d has no carrier (%v) or undated lines (%d)", o, !st.carrier, st.undatedLines))
		}
		if len(errs) > 20 {
			errs = append(errs, errors.New("more violations not listed"))
			break
		}
	}
	return errors.Join(errs...)
}
