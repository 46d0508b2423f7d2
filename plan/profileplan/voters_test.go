package profileplan

import "testing"

func TestVoterMove(t *testing.T) {
	profiles := map[uint64]Class{1: Read, 2: Read, 3: Write, 4: ReadWrite, 5: Scan, 6: Default}
	profile := func(n uint64) Class { return profiles[n] }
	for _, tc := range []struct {
		name       string
		class      Class
		keep       uint64
		voters     []uint64
		candidates []uint64
		from, to   uint64
		ok         bool
	}{
		{"write range off a read node to the write node", Write, 3, []uint64{3, 1, 5}, []uint64{2, 4}, 1, 4, true},
		{"the write node first", ReadWrite, 4, []uint64{4, 1, 2}, []uint64{5, 3}, 1, 3, true},
		{"the worst voter moves", Write, 4, []uint64{4, 5, 2}, []uint64{3}, 2, 3, true},
		{"the planned leader's node stays even on a read node", Write, 1, []uint64{1, 3, 4}, []uint64{5}, 0, 0, false},
		{"no better node free", Write, 3, []uint64{3, 4, 5}, []uint64{1, 2}, 0, 0, false},
		{"equal rank is no move", Write, 3, []uint64{3, 4, 5}, []uint64{6}, 0, 0, false},
		{"a read range stays", Read, 1, []uint64{1, 3, 4}, []uint64{2}, 0, 0, false},
		{"a scan range stays", Scan, 5, []uint64{5, 3, 4}, []uint64{1}, 0, 0, false},
		{"candidates in the caller's order break ties", Write, 3, []uint64{3, 1, 2}, []uint64{6, 5, 4}, 1, 4, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			from, to, ok := VoterMove(tc.class, tc.keep, tc.voters, tc.candidates, profile)
			if ok != tc.ok || (ok && (from != tc.from || to != tc.to)) {
				t.Fatalf("VoterMove = n%d → n%d, %v; want n%d → n%d, %v", from, to, ok, tc.from, tc.to, tc.ok)
			}
		})
	}
}
