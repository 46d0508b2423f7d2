package model

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

const text = `
now 2m
node 1 cpu=35 disk=40GiB/500GiB task=compaction:running:light:in=16MiB:age=30s
node 2 draining task=backup:pending
node 3 dead
node 4 silent=3s
range 1 [,) voters=1,2,3 system
range 2 [a,m) voters=1,2,3 learners=4 leader=2 bytes=64MiB reads=2000 writes=500
range 3 [m,) voters=2,3,4 bytes=1MiB
range 4 [,a) voters=1,2,4 leader=4
`

func TestParseDerivesNodeTotals(t *testing.T) {
	c, err := ParseCluster(text)
	if err != nil {
		t.Fatal(err)
	}
	if c.Now != TextEpoch.Add(2*time.Minute) {
		t.Fatalf("now %v", c.Now)
	}
	n2 := c.Node(2)
	if n2.Replicas != 4 || n2.Voters != 4 || n2.Leaders != 2 || n2.QPS != 2500 || n2.Bytes != 65<<20 {
		t.Fatalf("n2 totals %+v", *n2)
	}
	if n4 := c.Node(4); n4.Replicas != 3 || n4.Voters != 2 || !n4.Live {
		t.Fatalf("n4 %+v", *n4)
	}
	if c.Node(2).Active() || !c.Node(1).Active() || c.Node(3).Active() {
		t.Fatal("Active wrong")
	}
	if !c.Node(3).Dead(c.Now, 0) || c.Node(4).Dead(c.Now, 0) || c.Node(3).Dead(c.Now, 2*time.Minute) {
		t.Fatal("Dead wrong")
	}
	if ts := c.Node(1).Tasks; len(ts) != 1 || ts[0].Heavy || ts[0].Bytes != 16<<20 || c.Now.Sub(ts[0].Since) != 30*time.Second ||
		c.Node(1).Busy() || !c.Node(2).Busy() {
		t.Fatalf("tasks n1 %+v, n2 %+v", c.Node(1).Tasks, c.Node(2).Tasks)
	}
	if c.Node(1).DiskFull(0.95) || !c.Node(1).DiskFull(0.05) {
		t.Fatal("DiskFull wrong")
	}
	// Ranges: system first, then by start key.
	var order []uint64
	for _, r := range c.Ranges {
		order = append(order, r.ID)
	}
	if fmt.Sprint(order) != "[1 4 2 3]" {
		t.Fatalf("range order %v", order)
	}
	if r := c.RangeFor([]byte("b")); r == nil || r.ID != 2 {
		t.Fatalf("RangeFor(b) = %v", r)
	}
	if r := c.RangeFor([]byte("")); r == nil || r.ID != 4 {
		t.Fatalf("RangeFor(\"\") = %v", r)
	}
	if r := c.RightNeighbor(c.Range(2)); r == nil || r.ID != 3 {
		t.Fatalf("RightNeighbor(r2) = %v", r)
	}
	if c.RightNeighbor(c.Range(3)) != nil || c.RightNeighbor(c.Range(1)) != nil {
		t.Fatal("neighbour of the last or a system range")
	}
	if got := len(c.RangesIn([]byte("b"), []byte("n"))); got != 2 {
		t.Fatalf("RangesIn(b, n) = %d ranges", got)
	}
}

func TestFormatRoundTrips(t *testing.T) {
	c, err := ParseCluster(text)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := ParseCluster(c.Format())
	if err != nil {
		t.Fatalf("%v\n%s", err, c.Format())
	}
	if c.Format() != c2.Format() {
		t.Fatalf("round trip differs:\n%s\n---\n%s", c.Format(), c2.Format())
	}
}

func TestParseErrorsNameTheLine(t *testing.T) {
	_, err := ParseCluster("node 1\nrange 2 a-m voters=1")
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("error %v, want one naming line 2", err)
	}
	_, err = ParseCluster("node 1\nnode 2 task=compaction:running:size=1")
	if err == nil || !strings.Contains(err.Error(), "line 2") || !strings.Contains(err.Error(), "size=1") {
		t.Fatalf("error %v, want one naming line 2 and the unknown part", err)
	}
}

func TestKeySamplerIsUniform(t *testing.T) {
	s := NewKeySampler(1000, 1)
	// 10 000 requests: key i%10 → each key should hold ~10% of the sample.
	for i := 0; i < 10000; i++ {
		s.Record([]byte{byte('0' + i%10)})
	}
	ks := s.Take(TextEpoch)
	if ks.Requests != 10000 || ks.Size() != 1000 || len(ks.Keys) != 10 {
		t.Fatalf("sample: %d requests, %d sampled, %d keys", ks.Requests, ks.Size(), len(ks.Keys))
	}
	for _, k := range ks.Keys {
		if math.Abs(float64(k.Count)-100) > 40 {
			t.Errorf("key %q sampled %d times, want ~100", k.Key, k.Count)
		}
	}
	if f := ks.FractionBelow([]byte("5")); math.Abs(f-0.5) > 0.06 {
		t.Errorf("FractionBelow(5) = %.3f, want ~0.5", f)
	}
	// A new window starts empty.
	if next := s.Take(TextEpoch); next.Requests != 0 || next.Size() != 0 {
		t.Fatalf("next window %+v", next)
	}
}

func TestByteSizes(t *testing.T) {
	for s, want := range map[string]uint64{"512": 512, "64KiB": 64 << 10, "1.5GiB": 3 << 29, "16MiB": 16 << 20} {
		got, err := ParseBytes(s)
		if err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v", s, got, err)
		}
		if back, _ := ParseBytes(FormatBytes(got)); back != got {
			t.Errorf("FormatBytes(%d) = %q does not round-trip", got, FormatBytes(got))
		}
	}
	if _, err := ParseBytes("ten"); err == nil {
		t.Error("ParseBytes accepted junk")
	}
}
