package test

import (
	"context"
	"testing"
	"time"

	"github.com/shoaldb/shoal/bench/tpcc"
	"github.com/shoaldb/shoal/table"
	"github.com/shoaldb/shoal/test/testcluster"
)

// TestTPCC loads one small warehouse into a real 3-node cluster, runs the TPC-C-like mix on four
// terminals, then every transaction a few times on one, and checks the conditions that hold without
// transactions once nothing runs and nothing failed: each district's orders are 1 … d_next_o_id − 1,
// every order has its o_ol_cnt lines and its index row, the new_order rows are a suffix of the
// orders and exactly the undelivered ones.
func TestTPCC(t *testing.T) {
	c := testcluster.StartSafe(t, testcluster.Options{Nodes: 3})
	cl := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	s := tpcc.Sizes{Warehouses: 1, Items: 200, Customers: 60}

	lr, err := tpcc.Load(ctx, cl, s, tpcc.LoadOptions{Threads: 4, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	tabs, err := tpcc.OpenTables(ctx, table.NewCatalog(cl), tpcc.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if err := tpcc.Check(ctx, tabs, s); err != nil {
		t.Fatalf("after the load of %d rows: %v", lr.Rows, err)
	}

	d := 4 * time.Second
	if raceEnabled {
		d = 2 * time.Second
	}
	rep, err := tpcc.Run(ctx, cl, s, tpcc.RunOptions{Threads: 4, Duration: d, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Total == 0 || rep.Errors != 0 {
		t.Fatalf("the mix: %d transactions, %d errors (%v, first: %s)", rep.Total, rep.Errors, rep.ErrorKinds, rep.FirstError)
	}
	t.Logf("the mix: %d transactions in %.1f s, tpmC %.0f", rep.Total, rep.Seconds, rep.TpmC)

	// One terminal runs each transaction in turn, so that every kind ran on the cluster.
	wk := tpcc.NewWorker(tabs, s, tpcc.NewInput(3), 1)
	for i := range 4 * len(tpcc.Kinds()) {
		k := tpcc.Kinds()[i%len(tpcc.Kinds())]
		if _, err := wk.Run(ctx, k); err != nil {
			t.Fatalf("%v: %v", k, err)
		}
	}
	if err := tpcc.Check(ctx, tabs, s); err != nil {
		t.Fatalf("after the run: %v", err)
	}
	dr, found, err := tabs.District.Get(ctx, int64(1), int64(1))
	if err != nil || !found {
		t.Fatalf("district 1: %v %v", found, err)
	}
	t.Logf("district 1's next order id: %v (the load left %d)", dr["d_next_o_id"], s.Customers+1)
}
