package model

import "testing"

// The text form carries a node's cache and a range's access statistics.
func TestParseAccess(t *testing.T) {
	c, err := ParseCluster(`
node 1 cache=64MiB/4KiB cpu=50
range 2 [a,m) voters=1 reads=100 hist=50x2,0.5x100 hits=90/100 scanblocks=30
`)
	if err != nil {
		t.Fatal(err)
	}
	n, r := c.Node(1), c.Range(2)
	if n.CacheBlocks() != 16384 {
		t.Fatalf("cache blocks %.0f, want 16384", n.CacheBlocks())
	}
	a := r.Access
	if a == nil || len(a.Hist) != 2 || a.Hist[1] != (AccessBucket{Rate: 0.5, Blocks: 100}) || a.ScanBlocksQPS != 30 {
		t.Fatalf("access %+v", a)
	}
	if h, ok := a.HitRatio(); !ok || h != 0.9 {
		t.Fatalf("hit ratio %v %v", h, ok)
	}
	if _, err := ParseCluster("range 2 [a,m) voters=1 hits=9/3"); err == nil {
		t.Fatal("more hits than reads parsed")
	}
	n.CPUPercent, n.CPUCores, n.DiskBusy = 100, 4, 0.3
	if u := n.MeasuredUsage(); u < 0.549 || u > 0.551 {
		t.Fatalf("measured usage %.3f, want 0.55", u)
	}
}
