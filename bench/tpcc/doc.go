// Package tpcc is a TPC-C-like workload over Shoal's tables: the nine tables of TPC-C (warehouse,
// district, customer, history, new_order, order, order_line, item, stock) with the spec's primary
// keys, plus two index tables the store cannot derive (customers by last name, orders by
// customer); a loader; the five transactions as sequences of row operations with TPC-C's input
// generation; a closed- or open-loop runner that reports per-transaction counts, errors,
// p50/p95/p99 and tpmC; and a consistency check of the data at rest.
//
// It is NOT transactional, like PyTPCC's HBase driver: a transaction is a sequence of row gets,
// puts, deletes and prefix scans (package table), each atomic on its own, with no isolation and no
// atomicity across them. Two single-row atomic steps keep the data meaningful under concurrency:
// every write of a district row is a compare-and-put (the row holds the order id counter, so order
// ids are unique and dense), and a delivery claims a new_order row by deleting it (only the deleter delivers it), and
// only once the order before it is delivered (so deliveries keep to order id order even when new
// orders finish out of order).
// Everything else may interleave: payments lose updates of w_ytd and of customers' balances,
// stock counts race, a stock-level may count the lines of an order half written. The figures are therefore not TPC-C results and must
// never be reported as such.
//
// Sizes per warehouse: 10 districts; Customers customers per district (spec: 3 000), each with
// one history row and one initial order of 5–15 lines; the last 30 % of each district's initial
// orders are undelivered (new_order rows); Items items (spec: 100 000) and one stock row per item
// per warehouse. Smaller Items and Customers scale the load down (tests, quick runs); the NURand
// constants A shrink with them so that skewed draws stay inside the ranges.
//
// The package reaches the store only through package table and the Go client; it must never import
// the node layers (kv, replica, storage), start a cluster, or write outside its tables (names
// starting with Config.Prefix).
package tpcc
