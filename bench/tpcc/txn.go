package tpcc

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/shoaldb/shoal/table"
)

// ErrMissingRow: a row the workload's data must hold is not there (the sizes given to the run are
// not the load's, or the tables were changed by something else).
var ErrMissingRow = errors.New("row missing")

// Worker runs transactions for one terminal: a home warehouse, its own inputs.
type Worker struct {
	t  *Tables
	s  Sizes
	in *Input
	w  int64
}

// NewWorker returns a terminal of home warehouse w drawing inputs from in.
func NewWorker(t *Tables, s Sizes, in *Input, w int64) *Worker {
	return &Worker{t: t, s: s, in: in, w: w}
}

// Run runs one transaction of kind k and reports whether it was a new-order rolled back (an
// invalid item: nothing written, by design).
func (wk *Worker) Run(ctx context.Context, k Kind) (rolledBack bool, err error) {
	switch k {
	case NewOrder:
		return wk.NewOrder(ctx)
	case Payment:
		return false, wk.Payment(ctx)
	case OrderStatus:
		return false, wk.OrderStatus(ctx)
	case Delivery:
		return false, wk.Delivery(ctx)
	case StockLevel:
		_, err := wk.StockLevel(ctx)
		return false, err
	}
	return false, fmt.Errorf("unknown transaction %v", k)
}

// get reads the row of t with key, which must exist.
func get(ctx context.Context, t *table.Table, key ...any) (table.Row, error) {
	row, found, err := t.Get(ctx, key...)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("%s %v: %w (were the tables loaded with these sizes?)", t.Desc.Name, key, ErrMissingRow)
	}
	return row, nil
}

type orderLineInput struct {
	item, supplyW, qty int64
}

// NewOrder is TPC-C's new-order (clause 2.4): an order of 5–15 lines for a customer of a random
// district of the home warehouse; items by NURand, 1 % of the orders naming an unused item in
// their last line (rolled back: nothing is written, as the items are all read before any write);
// each line supplied by another warehouse with 1 % chance when there are several. The order id is
// taken from the district by a compare-and-put; the rows are then written order, lines (with the
// stock updates), new_order, customer index, so that a reader who finds the new_order or the index
// row finds the order whole.
func (wk *Worker) NewOrder(ctx context.Context) (rolledBack bool, err error) {
	in, w := wk.in, wk.w
	d, c := in.Uniform(1, Districts), in.CustomerID(wk.s.Customers)
	lines := make([]orderLineInput, in.Uniform(5, 15))
	rollback := in.Percent(1)
	allLocal := int64(1)
	for i := range lines {
		l := orderLineInput{item: in.ItemID(wk.s.Items), supplyW: w, qty: in.Uniform(1, 10)}
		if wk.s.Warehouses > 1 && in.Percent(1) {
			l.supplyW, allLocal = in.OtherWarehouse(w, wk.s.Warehouses), 0
		}
		lines[i] = l
	}
	if rollback {
		lines[len(lines)-1].item = int64(wk.s.Items) + 1
	}
	if _, err := get(ctx, wk.t.Warehouse, w); err != nil {
		return false, err
	}
	if _, err := get(ctx, wk.t.Customer, w, d, c); err != nil {
		return false, err
	}
	prices := make([]float64, len(lines))
	for i, l := range lines {
		item, found, err := wk.t.Item.Get(ctx, l.item)
		if err != nil {
			return false, err
		}
		if !found {
			return true, nil
		}
		prices[i] = item["i_price"].(float64)
	}
	o, err := wk.takeOrderID(ctx, w, d)
	if err != nil {
		return false, err
	}
	now := time.Now().UTC()
	if err := wk.t.Order.Put(ctx, table.Row{"o_w_id": w, "o_d_id": d, "o_id": o, "o_c_id": c, "o_entry_d": now, "o_ol_cnt": int64(len(lines)), "o_all_local": allLocal}); err != nil {
		return false, err
	}
	for i, l := range lines {
		s, err := get(ctx, wk.t.Stock, l.supplyW, l.item)
		if err != nil {
			return false, err
		}
		s = maps.Clone(s)
		if q := s["s_quantity"].(int64); q >= l.qty+10 {
			s["s_quantity"] = q - l.qty
		} else {
			s["s_quantity"] = q - l.qty + 91
		}
		s["s_ytd"] = s["s_ytd"].(int64) + l.qty
		s["s_order_cnt"] = s["s_order_cnt"].(int64) + 1
		if l.supplyW != w {
			s["s_remote_cnt"] = s["s_remote_cnt"].(int64) + 1
		}
		if err := wk.t.Stock.Put(ctx, s); err != nil {
			return false, err
		}
		if err := wk.t.OrderLine.Put(ctx, table.Row{"ol_w_id": w, "ol_d_id": d, "ol_o_id": o, "ol_number": int64(i + 1), "ol_i_id": l.item,
			"ol_supply_w_id": l.supplyW, "ol_quantity": l.qty, "ol_amount": float64(l.qty) * prices[i], "ol_dist_info": s[distColumns[d-1]]}); err != nil {
			return false, err
		}
	}
	if err := wk.t.NewOrder.Put(ctx, table.Row{"no_w_id": w, "no_d_id": d, "no_o_id": o}); err != nil {
		return false, err
	}
	return false, wk.t.OrderByCustomer.Put(ctx, table.Row{"o_w_id": w, "o_d_id": d, "o_c_id": c, "o_id": o})
}

// takeOrderID returns district (w, d)'s next order id and advances it.
func (wk *Worker) takeOrderID(ctx context.Context, w, d int64) (int64, error) {
	var o int64
	err := updateDistrict(ctx, wk.t.District, w, d, func(r table.Row) {
		o = r["d_next_o_id"].(int64)
		r["d_next_o_id"] = o + 1
	})
	return o, err
}

// updateDistrict changes district (w, d)'s row with change by a compare-and-put, read again and
// retried until it applies. Every write of a district row goes this way: the row holds the order
// id counter, which a plain write-back of a row read before another's increment would roll back.
func updateDistrict(ctx context.Context, t *table.Table, w, d int64, change func(table.Row)) error {
	for {
		row, err := get(ctx, t, w, d)
		if err != nil {
			return err
		}
		next := maps.Clone(row)
		change(next)
		ok, err := t.CompareAndPut(ctx, row, next)
		if err != nil || ok {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// customer picks a customer of (w, d) as payment and order-status do: 60 % by last name (the
// middle one, by first name, of those with the name), else by id.
func (wk *Worker) customer(ctx context.Context, w, d int64) (table.Row, error) {
	if !wk.in.Percent(60) {
		return get(ctx, wk.t.Customer, w, d, wk.in.CustomerID(wk.s.Customers))
	}
	last := LastName(wk.in.LastNameNumber(wk.s.Customers))
	var ids []int64
	err := wk.t.CustomerByName.ScanPrefix(ctx, table.Row{"c_w_id": w, "c_d_id": d, "c_last": last}, 0, false, func(r table.Row) bool {
		ids = append(ids, r["c_id"].(int64))
		return true
	})
	if err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("no customer of warehouse %d district %d is named %s: %w", w, d, last, ErrMissingRow)
	}
	return get(ctx, wk.t.Customer, w, d, ids[(len(ids)-1)/2])
}

// Payment is TPC-C's payment (clause 2.5): a payment of 1–5 000 to the home warehouse and a random
// district, by a customer of that district or, with 15 % chance when there are several
// warehouses, of a random district of another. Warehouse and customer are each read and written
// back (concurrent payments lose each other's updates of w_ytd and of a customer's balance); the
// district is updated by a compare-and-put (updateDistrict).
func (wk *Worker) Payment(ctx context.Context) error {
	in, w := wk.in, wk.w
	d := in.Uniform(1, Districts)
	cw, cd := w, d
	if wk.s.Warehouses > 1 && in.Percent(15) {
		cw, cd = in.OtherWarehouse(w, wk.s.Warehouses), in.Uniform(1, Districts)
	}
	amount := in.Float(1, 5000)
	wr, err := get(ctx, wk.t.Warehouse, w)
	if err != nil {
		return err
	}
	wr = maps.Clone(wr)
	wr["w_ytd"] = wr["w_ytd"].(float64) + amount
	if err := wk.t.Warehouse.Put(ctx, wr); err != nil {
		return err
	}
	var dName string
	if err := updateDistrict(ctx, wk.t.District, w, d, func(r table.Row) {
		r["d_ytd"] = r["d_ytd"].(float64) + amount
		dName = r["d_name"].(string)
	}); err != nil {
		return err
	}
	cr, err := wk.customer(ctx, cw, cd)
	if err != nil {
		return err
	}
	cr = maps.Clone(cr)
	cr["c_balance"] = cr["c_balance"].(float64) - amount
	cr["c_ytd_payment"] = cr["c_ytd_payment"].(float64) + amount
	cr["c_payment_cnt"] = cr["c_payment_cnt"].(int64) + 1
	if cr["c_credit"] == "BC" {
		data := fmt.Sprintf("%d %d %d %d %d %.2f|%s", cr["c_id"], cd, cw, d, w, amount, cr["c_data"])
		cr["c_data"] = data[:min(len(data), 500)]
	}
	if err := wk.t.Customer.Put(ctx, cr); err != nil {
		return err
	}
	return wk.t.History.Put(ctx, table.Row{"h_c_w_id": cw, "h_c_d_id": cd, "h_c_id": cr["c_id"], "h_id": in.Int63(), "h_d_id": d, "h_w_id": w,
		"h_date": time.Now().UTC(), "h_amount": amount, "h_data": wr["w_name"].(string) + "    " + dName})
}

// OrderStatus is TPC-C's order-status (clause 2.6): a customer of a random district (60 % by last
// name), their last order (a reverse prefix scan of the order index, limit 1) and its lines (a
// prefix scan of order_line).
func (wk *Worker) OrderStatus(ctx context.Context) error {
	w, d := wk.w, wk.in.Uniform(1, Districts)
	cr, err := wk.customer(ctx, w, d)
	if err != nil {
		return err
	}
	o := int64(-1)
	err = wk.t.OrderByCustomer.ScanPrefix(ctx, table.Row{"o_w_id": w, "o_d_id": d, "o_c_id": cr["c_id"]}, 1, true, func(r table.Row) bool {
		o = r["o_id"].(int64)
		return false
	})
	if err != nil || o < 0 {
		return err // a customer without orders has no status to show
	}
	if _, err := get(ctx, wk.t.Order, w, d, o); err != nil {
		return err
	}
	return wk.t.OrderLine.ScanPrefix(ctx, table.Row{"ol_w_id": w, "ol_d_id": d, "ol_o_id": o}, 0, false, func(table.Row) bool { return true })
}

// Delivery is TPC-C's delivery (clause 2.7), run at once rather than queued: for each district of
// the home warehouse, the oldest undelivered order (a prefix scan of new_order, limit 1) is
// claimed by deleting its new_order row (see claimOldest), given a carrier, its lines a delivery
// date, and its customer the lines' total. A district with nothing to claim is skipped, as the
// spec allows.
func (wk *Worker) Delivery(ctx context.Context) error {
	w, carrier, now := wk.w, wk.in.Uniform(1, 10), time.Now().UTC()
	for d := int64(1); d <= Districts; d++ {
		o, err := wk.claimOldest(ctx, w, d)
		if err != nil {
			return err
		}
		if o < 0 {
			continue // nothing to deliver in this district
		}
		or, err := get(ctx, wk.t.Order, w, d, o)
		if err != nil {
			return err
		}
		or = maps.Clone(or)
		or["o_carrier_id"] = carrier
		if err := wk.t.Order.Put(ctx, or); err != nil {
			return err
		}
		var lines []table.Row
		if err := wk.t.OrderLine.ScanPrefix(ctx, table.Row{"ol_w_id": w, "ol_d_id": d, "ol_o_id": o}, 0, false, func(r table.Row) bool {
			lines = append(lines, r)
			return true
		}); err != nil {
			return err
		}
		total := 0.0
		for _, l := range lines {
			total += l["ol_amount"].(float64)
			l["ol_delivery_d"] = now
			if err := wk.t.OrderLine.Put(ctx, l); err != nil {
				return err
			}
		}
		cr, err := get(ctx, wk.t.Customer, w, d, or["o_c_id"])
		if err != nil {
			return err
		}
		cr = maps.Clone(cr)
		cr["c_balance"] = cr["c_balance"].(float64) + total
		cr["c_delivery_cnt"] = cr["c_delivery_cnt"].(int64) + 1
		if err := wk.t.Customer.Put(ctx, cr); err != nil {
			return err
		}
	}
	return nil
}

// lostAfter is how long after its entry an order is delivered even though the order before it is
// not: longer than any transaction runs (RunOptions.TxnTimeout's default), so that a new order
// that failed half-way stops no district's deliveries for good.
const lostAfter = time.Minute

// claimOldest deletes the oldest new_order row of (w, d) and returns its order id, or -1 when the
// district has none to deliver. A row another delivery deleted first is skipped for the next. An
// order is claimed only once the order before it has its carrier: new orders may finish out of
// id order (the later one's new_order row written first), and delivering in id order keeps the
// delivered orders a prefix of the district's orders (unless the order before was lost: lostAfter).
func (wk *Worker) claimOldest(ctx context.Context, w, d int64) (int64, error) {
	for {
		o := int64(-1)
		if err := wk.t.NewOrder.ScanPrefix(ctx, table.Row{"no_w_id": w, "no_d_id": d}, 1, false, func(r table.Row) bool {
			o = r["no_o_id"].(int64)
			return false
		}); err != nil || o < 0 {
			return o, err
		}
		if o > 1 {
			prev, found, err := wk.t.Order.Get(ctx, w, d, o-1)
			if err != nil {
				return -1, err
			}
			if _, delivered := prev["o_carrier_id"]; !found || !delivered {
				// The order before is still being written or delivered, or a transaction failed
				// half-way; after lostAfter it cannot be running any more.
				cur, found, err := wk.t.Order.Get(ctx, w, d, o)
				if err != nil {
					return -1, err
				}
				if !found || time.Since(cur["o_entry_d"].(time.Time)) < lostAfter {
					return -1, nil
				}
			}
		}
		claimed, err := wk.t.NewOrder.Delete(ctx, w, d, o)
		if err != nil || claimed {
			return o, err
		}
	}
}

// StockLevel is TPC-C's stock-level (clause 2.8): of the items in the last 20 orders of a random
// district of the home warehouse (a reverse prefix scan of the district's order lines, stopping
// below the 20th order from the district's next order id), how many have less stock in the home
// warehouse than a threshold of 10–20.
func (wk *Worker) StockLevel(ctx context.Context) (int, error) {
	w, d, threshold := wk.w, wk.in.Uniform(1, Districts), wk.in.Uniform(10, 20)
	dr, err := get(ctx, wk.t.District, w, d)
	if err != nil {
		return 0, err
	}
	next := dr["d_next_o_id"].(int64)
	items := map[int64]bool{}
	if err := wk.t.OrderLine.ScanPrefix(ctx, table.Row{"ol_w_id": w, "ol_d_id": d}, 0, true, func(r table.Row) bool {
		o := r["ol_o_id"].(int64)
		if o < next-20 {
			return false
		}
		if o < next {
			items[r["ol_i_id"].(int64)] = true
		}
		return true
	}); err != nil {
		return 0, err
	}
	low := 0
	for i := range items {
		s, err := get(ctx, wk.t.Stock, w, i)
		if err != nil {
			return 0, err
		}
		if s["s_quantity"].(int64) < threshold {
			low++
		}
	}
	return low, nil
}
