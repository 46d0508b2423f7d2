package profiles

import (
	"fmt"
	"testing"

	"github.com/pingcap/go-ycsb/pkg/util"

	"github.com/shoaldb/shoal/bench/ycsb"
)

// TestSplitKeysCutRecordsEvenly checks that the split keys cut a tenant's hashed record keys (all of
// which begin "user6" for twenty thousand records) into ranges of as many records, and ordered keys
// alike.
func TestSplitKeysCutRecordsEvenly(t *testing.T) {
	const records = 20000
	for _, order := range []string{"hashed", "ordered"} {
		ts, err := ycsb.ParseTenants("a:hotspot", ycsb.Config{Records: records, Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		ts[0].Config.Props["insertorder"] = order
		keys, err := splitKeys(ts[0], records, 4)
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) != 3 {
			t.Fatalf("%s: %d split keys, want 3", order, len(keys))
		}
		counts := make([]int, len(keys)+1)
		for n := range int64(records) {
			k := n
			if order == "hashed" {
				k = util.Hash64(n)
			}
			name, r := fmt.Sprintf("user%d", k), 0
			for r < len(keys) && name >= keys[r] {
				r++
			}
			counts[r]++
		}
		for r, c := range counts {
			if c != records/4 {
				t.Errorf("%s: range %d holds %d records, want %d (split keys %q)", order, r, c, records/4, keys)
			}
		}
	}
}
