package policy

import (
	"testing"

	"github.com/shoaldb/shoal/autopilot/model"
)

func TestNarrowsZones(t *testing.T) {
	c, err := model.ParseCluster(`
node 1 locality=zone=a
node 2 locality=zone=b
node 3 locality=zone=c
node 4 locality=zone=a
node 5
range 2 [a,c) voters=1,2,3
`)
	if err != nil {
		t.Fatal(err)
	}
	r := c.Range(2)
	for _, tc := range []struct {
		from, to uint64
		want     bool
	}{
		{2, 4, true},  // b → a, where n1 already is: two zones left
		{1, 4, false}, // a → a: the same zones
		{3, 5, false}, // c → a node with no locality: still three
	} {
		if got := narrowsZones(c, r, tc.from, tc.to); got != tc.want {
			t.Errorf("move n%d → n%d: narrows %v, want %v", tc.from, tc.to, got, tc.want)
		}
	}
}
