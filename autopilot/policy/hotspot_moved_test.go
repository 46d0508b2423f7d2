package policy

import (
	"testing"
	"time"

	"github.com/shoaldb/shoal/autopilot/model"
)

// A node given a range of another node's open hot spot counts it as that hot spot's, not its own,
// when that range is most of its load; a node hot with load of its own starts its own.
func TestHotspotMoved(t *testing.T) {
	p := NewHotspotOffload(HotspotOffloadConfig{})
	c, err := model.ParseCluster(`
node 1 cpu=95
node 2 cpu=90
node 3 cpu=90
node 4 cpu=10
range 2 [a,c) voters=1,2,3 leader=2 reads=3000
range 3 [c,e) voters=1,3,4 leader=3 reads=100
range 4 [e,g) voters=1,3,4 leader=3 reads=2000
`)
	if err != nil {
		t.Fatal(err)
	}
	p.episodes[1] = &episode{since: c.Now.Add(-10 * time.Second), ranges: []uint64{2, 3}}
	if !p.moved(c, 2) {
		t.Error("n2's load is all r2, n1's hot spot: moved")
	}
	if p.moved(c, 3) {
		t.Error("n3 leads r3 of n1's hot spot, but most of its load is r4: its own")
	}
	if p.moved(c, 4) {
		t.Error("n4 leads nothing of it")
	}
}
