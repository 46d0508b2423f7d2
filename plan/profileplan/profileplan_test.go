package profileplan

import (
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		m    Mix
		want Class
	}{
		{Mix{Reads: 95, Writes: 5}, Read},
		{Mix{Reads: 95, Writes: 5, Scans: 90}, Scan},
		{Mix{Reads: 95, Writes: 5, Scans: 40}, Read},
		{Mix{Reads: 10, Writes: 90}, Write},
		{Mix{Reads: 50, Writes: 50}, ReadWrite},
		{Mix{Reads: 60, Writes: 40}, ReadWrite}, // 60 % is not more than 60 %
		{Mix{}, ReadWrite},
	} {
		if got := Classify(tc.m); got != tc.want {
			t.Errorf("Classify(%+v) = %s, want %s", tc.m, got, tc.want)
		}
	}
}

// A range keeps its class while its mix stays within Band of it, and changes once past it: F's
// reads swinging between 55 % and 70 % keep it read (or read/write) whichever it started as.
func TestReclassify(t *testing.T) {
	for _, tc := range []struct {
		had  Class
		m    Mix
		want Class
	}{
		{Read, Mix{Reads: 55, Writes: 45}, Read},           // below 60 %, within the band
		{Read, Mix{Reads: 49, Writes: 51}, ReadWrite},      // past it
		{ReadWrite, Mix{Reads: 68, Writes: 32}, ReadWrite}, // above 60 %, within the band
		{ReadWrite, Mix{Reads: 71, Writes: 29}, Read},
		{ReadWrite, Mix{Reads: 25, Writes: 75}, Write},
		{Write, Mix{Reads: 45, Writes: 55}, Write},
		{Write, Mix{Reads: 60, Writes: 40}, ReadWrite},
		{Scan, Mix{Reads: 90, Scans: 55, Writes: 10}, Scan}, // 61 % of reads scans, then 55/90
		{Scan, Mix{Reads: 90, Scans: 40, Writes: 10}, Read},
		{Read, Mix{Reads: 90, Scans: 62, Writes: 10}, Read}, // 69 % scans: not past 70 %
		{Read, Mix{Reads: 90, Scans: 72, Writes: 10}, Scan},
		{"", Mix{Reads: 55, Writes: 45}, ReadWrite},
		{Read, Mix{}, ReadWrite},
	} {
		if got := Reclassify(tc.had, tc.m); got != tc.want {
			t.Errorf("Reclassify(%s, %+v) = %s, want %s", tc.had, tc.m, got, tc.want)
		}
	}
}

// The hysteresis widens with the noise of few requests: an A range (half reads) whose sampled mix
// shows 80 % reads keeps read/write on 54 requests, turns read on thousands, and the band never
// passes MaxBand.
func TestNoiseBand(t *testing.T) {
	m := Mix{Reads: 80, Writes: 20}
	if got := ReclassifyBand(ReadWrite, m, NoiseBand(54)); got != ReadWrite {
		t.Errorf("80 %% reads on 54 requests (band %.2f): %s, want readwrite", NoiseBand(54), got)
	}
	if got := ReclassifyBand(ReadWrite, m, NoiseBand(5400)); got != Read {
		t.Errorf("80 %% reads on 5 400 requests (band %.2f): %s, want read", NoiseBand(5400), got)
	}
	if b := NoiseBand(1e9); b < Band || b > Band+0.001 {
		t.Errorf("band on a billion requests %.4f, want Band", b)
	}
	if NoiseBand(0) != MaxBand || NoiseBand(1) != MaxBand {
		t.Errorf("band on no or one request %.2f, %.2f, want MaxBand", NoiseBand(0), NoiseBand(1))
	}
	if got := ReclassifyBand(Write, Mix{Reads: 95, Writes: 5}, NoiseBand(1)); got != Read {
		t.Errorf("a write range at 95 %% reads on one request: %s, want read (past MaxBand)", got)
	}
}

// A spike in one sample does not flip a range's class once smoothed; six samples make it ready.
func TestSmoother(t *testing.T) {
	var s Smoother
	for range 5 {
		s.Observe(Mix{Reads: 90, Writes: 10})
	}
	if s.Ready() {
		t.Fatal("ready after 5 samples")
	}
	s.Observe(Mix{Reads: 10, Writes: 90}) // one write-heavy spike
	if !s.Ready() || Classify(s.Mix()) == Write {
		t.Fatalf("after a spike: ready %v, mix %+v (%s)", s.Ready(), s.Mix(), Classify(s.Mix()))
	}
}

func TestGroups(t *testing.T) {
	for _, tc := range []struct {
		name string
		load map[Class]float64
		n    int
		want map[Class]int
	}{
		{"proportional", map[Class]float64{Read: 50, Write: 30, Scan: 20}, 10, map[Class]int{Read: 5, Write: 3, Scan: 2}},
		{"a small class keeps one node", map[Class]float64{Read: 97, Scan: 3}, 5, map[Class]int{Read: 4, Scan: 1}},
		{"largest remainders", map[Class]float64{Read: 1, Write: 1, ReadWrite: 1}, 5, map[Class]int{Read: 2, Write: 2, ReadWrite: 1}},
		{"fewer nodes than classes", map[Class]float64{Read: 5, Write: 3, Scan: 1, ReadWrite: 2}, 2, map[Class]int{Read: 1, Write: 1}},
		{"no load", map[Class]float64{}, 3, map[Class]int{}},
	} {
		got := Groups(tc.load, tc.n)
		sum := 0
		for _, k := range got {
			sum += k
		}
		for _, c := range Classes {
			if got[c] != tc.want[c] {
				t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
				break
			}
		}
		if len(tc.load) > 0 && sum != tc.n {
			t.Errorf("%s: %d nodes given of %d", tc.name, sum, tc.n)
		}
	}
	if got := Merge(Write, map[Class]int{Read: 1, ReadWrite: 1}); got != ReadWrite {
		t.Errorf("Merge(write) = %s, want readwrite", got)
	}
}

// LPT keeps its cap — but on a node left at or below the mean load, rather than a range beside a
// node above it — and stays within Graham's 4/3 of the optimal makespan (checked by brute force on
// small random instances).
func TestLPT(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		n, k := 3+rng.IntN(6), 2+rng.IntN(2)
		var rs []Range
		for i := range n {
			rs = append(rs, Range{ID: uint64(i + 1), Mix: Mix{Reads: float64(1 + rng.IntN(100))}})
		}
		sets, loads := LPT(rs, k, n) // no count cap: Graham's bound
		got := slices.Max(loads)
		opt := bruteMakespan(rs, k)
		if got > opt*4/3+1e-9 {
			t.Fatalf("trial %d: LPT makespan %v, optimum %v", trial, got, opt)
		}
		placed := 0
		for _, s := range sets {
			placed += len(s)
		}
		if placed != n {
			t.Fatalf("trial %d: %d ranges assigned of %d", trial, placed, n)
		}
		capped, cloads := LPT(rs, k, 0)
		total := 0.0
		for _, r := range rs {
			total += r.Mix.Cost()
		}
		for i, s := range capped {
			if len(s) > (n+k-1)/k && cloads[i] > total/float64(k)+1e-9 {
				t.Fatalf("trial %d: %d ranges on a node, cap %d, its load %v above the mean %v", trial, len(s), (n+k-1)/k, cloads[i], total/float64(k))
			}
		}
	}
}

func bruteMakespan(rs []Range, k int) float64 {
	best := -1.0
	load := make([]float64, k)
	var walk func(i int)
	walk = func(i int) {
		if i == len(rs) {
			if m := slices.Max(load); best < 0 || m < best {
				best = m
			}
			return
		}
		for j := range k {
			load[j] += rs[i].Mix.Cost()
			walk(i + 1)
			load[j] -= rs[i].Mix.Cost()
		}
	}
	walk(0)
	return best
}

// A mixed cluster: every range is placed once, the groups follow the load, and planning again from
// the planned layout moves nothing and changes no profile.
func TestMakeIsStable(t *testing.T) {
	var rs []Range
	for i := range 24 {
		m := []Mix{{Reads: 95, Writes: 5}, {Reads: 10, Writes: 90}, {Reads: 50, Writes: 50}, {Reads: 90, Writes: 10, Scans: 85}}[i%4]
		m.Reads, m.Writes, m.Scans = m.Reads*float64(1+i%3), m.Writes*float64(1+i%3), m.Scans*float64(1+i%3)
		rs = append(rs, Range{ID: uint64(i + 1), Mix: m})
	}
	var nodes []Node
	for i := range 8 {
		n := Node{ID: uint64(i + 1), Profile: Default}
		for j := i; j < 24; j += 8 {
			n.Ranges = append(n.Ranges, uint64(j+1))
		}
		nodes = append(nodes, n)
	}
	p, err := Make(rs, nodes)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("classes %v shares %v groups %v: %d moves, %d reprofiled", p.Classes, p.Shares, p.Groups, p.Moves, p.Reprofiled)
	seen := map[uint64]bool{}
	for _, a := range p.Assignments {
		for _, r := range a.Ranges {
			if seen[r] {
				t.Fatalf("range %d placed twice", r)
			}
			seen[r] = true
			if c := Classify(rs[r-1].Mix); Merge(c, p.Groups) != a.Profile {
				t.Fatalf("range %d (%s) on a %s node", r, c, a.Profile)
			}
		}
	}
	if len(seen) != len(rs) || p.Reprofiled != 8 {
		t.Fatalf("%d ranges placed of %d, %d nodes reprofiled of 8", len(seen), len(rs), p.Reprofiled)
	}
	next := make([]Node, len(p.Assignments))
	for i, a := range p.Assignments {
		next[i] = Node{ID: a.Node, Profile: a.Profile, Ranges: a.Ranges}
	}
	again, err := Make(rs, next)
	if err != nil {
		t.Fatal(err)
	}
	if again.Moves != 0 || again.Reprofiled != 0 {
		t.Fatalf("planning again from the plan: %d moves, %d reprofiled", again.Moves, again.Reprofiled)
	}
}

// A scan weighs the bytes of the rows it returns: by requests the scan range is a sixth of the load
// and gets one node of five; by its rows' bytes (100 scans a second of 333 KiB each, about 330 rows
// of 1 KiB: 1 040 units of 32 KiB, ten point reads a scan), half, and its group grows.
func TestMakeWeighsScansByRowBytes(t *testing.T) {
	rs := []Range{
		{ID: 1, Mix: Mix{Reads: 500, Writes: 20}},
		{ID: 2, Mix: Mix{Reads: 500, Writes: 20}},
		{ID: 3, Mix: Mix{Reads: 100, Scans: 100}},
		{ID: 4, Mix: Mix{Reads: 100, Scans: 100}},
	}
	var nodes []Node
	for i := range 5 {
		nodes = append(nodes, Node{ID: uint64(i + 1), Profile: Default})
	}
	groups := func() map[Class]int {
		p, err := Make(rs, nodes)
		if err != nil {
			t.Fatal(err)
		}
		return p.Groups
	}
	if g := groups(); g[Scan] != 1 || g[Read] != 4 {
		t.Fatalf("scans unmeasured: groups %v, want read 4, scan 1", g)
	}
	rs[2].Mix.ScanBytes, rs[3].Mix.ScanBytes = 1040*RefBlockBytes, 1040*RefBlockBytes
	if m := rs[2].Mix; m.Cost() != 1040 || m.Total() != 100 || Classify(m) != Scan {
		t.Fatalf("mix %+v: cost %g, requests %g, class %s", m, m.Cost(), m.Total(), Classify(m))
	}
	if g := groups(); g[Scan] != 3 || g[Read] != 2 {
		t.Fatalf("scans by their rows' bytes: groups %v, want read 2, scan 3", g)
	}
}

// A range planned on a node without a voter of it goes to a node of its group that holds one, when
// the group's highest load rises by at most VoterSlack; never to a node of another profile.
func TestMakePrefersNodesHoldingAVoter(t *testing.T) {
	read := func(id uint64, q float64, voters ...uint64) Range {
		return Range{ID: id, Mix: Mix{Reads: q}, Voters: voters}
	}
	rs := []Range{
		read(1, 100, 1, 2, 3), read(2, 100, 1, 2, 3),
		read(3, 10, 2, 3), // LPT puts it beside r1, on n1, which holds no voter of it
		read(4, 10, 3),    // only the write node holds a voter
		{ID: 5, Mix: Mix{Writes: 100}, Voters: []uint64{1, 2, 3}},
	}
	nodes := []Node{{ID: 1, Profile: Read, Ranges: []uint64{1}}, {ID: 2, Profile: Read, Ranges: []uint64{2}},
		{ID: 3, Profile: Write, Ranges: []uint64{5}}}
	p, err := Make(rs, nodes)
	if err != nil {
		t.Fatal(err)
	}
	on := map[uint64]uint64{}
	load := map[uint64]float64{}
	for _, a := range p.Assignments {
		for _, r := range a.Ranges {
			on[r] = a.Node
		}
		load[a.Node] = a.Load
	}
	if on[1] != 1 || on[2] != 2 || on[5] != 3 || on[3] != 2 || on[4] != 2 {
		t.Fatalf("ranges on nodes %v: want r1 n1, r2 and r3 n2 (a voter of r3), r4 n2 (LPT's), r5 n3", on)
	}
	if load[2] > 110*(1+VoterSlack) || load[1] != 100 {
		t.Fatalf("read loads %v: LPT's highest was 110", load)
	}
}

// A pinned node keeps its profile when a target set has it, even where another node would keep
// more of that set's ranges; unpinned, the matching follows the ranges alone.
func TestMakeKeepsThePinnedNodesProfile(t *testing.T) {
	rs := []Range{
		{ID: 1, Mix: Mix{Reads: 500}}, {ID: 2, Mix: Mix{Reads: 400}},
		{ID: 3, Mix: Mix{Reads: 50, Writes: 50}}, {ID: 4, Mix: Mix{Writes: 300}},
	}
	nodes := []Node{
		{ID: 1, Profile: ReadWrite, Ranges: []uint64{1}}, // the autopilot's node, leading a read range
		{ID: 2, Profile: ReadWrite, Ranges: []uint64{3}},
		{ID: 3, Profile: ReadWrite, Ranges: []uint64{2, 4}},
		{ID: 4, Profile: ReadWrite},
	}
	profiles := func(nodes []Node) map[uint64]Class {
		p, err := Make(rs, nodes)
		if err != nil {
			t.Fatal(err)
		}
		out := map[uint64]Class{}
		for _, a := range p.Assignments {
			out[a.Node] = a.Profile
		}
		return out
	}
	if got := profiles(nodes); got[1] != Read || got[2] != ReadWrite {
		t.Fatalf("unpinned: profiles %v, want n1 read (it leads r1), n2 readwrite (r3)", got)
	}
	nodes[0].Pinned = true
	if got := profiles(nodes); got[1] != ReadWrite || got[2] == ReadWrite {
		t.Fatalf("n1 pinned: profiles %v, want n1 readwrite and n2 another", got)
	}
}

// Update moves only the range whose class changed, to the least loaded node of its group, while
// the groups stay as they were; the ranges of unchanged classes stay where the plan put them,
// though their loads drifted. When the groups change it declines, and Make plans afresh.
func TestUpdateMovesOnlyRangesThatChangedClass(t *testing.T) {
	rs := []Range{
		{ID: 1, Mix: Mix{Reads: 500}}, {ID: 2, Mix: Mix{Reads: 400}}, {ID: 3, Mix: Mix{Reads: 100}},
		{ID: 4, Mix: Mix{Reads: 100}}, {ID: 5, Mix: Mix{Writes: 300}}, {ID: 6, Mix: Mix{Reads: 100, Writes: 100}},
	}
	prev := makeOnDefault(t, rs, 4)
	on := func(p Plan) map[uint64]uint64 {
		out := map[uint64]uint64{}
		for _, a := range p.Assignments {
			for _, r := range a.Ranges {
				out[r] = a.Node
			}
		}
		return out
	}
	before := on(prev)
	now := make([]Node, len(prev.Assignments)) // the cluster as the plan left it
	for i, a := range prev.Assignments {
		now[i] = Node{ID: a.Node, Profile: a.Profile, Ranges: a.Ranges}
	}
	// r2's load drifted and r3 turned write: read 900 → 2 nodes, write 400 → 1, read/write 200 → 1,
	// as before.
	rs[1].Mix.Reads, rs[2].Mix = 700, Mix{Writes: 100}
	p, ok := Update(prev, rs, now)
	if !ok {
		t.Fatalf("groups %v, before %v: Update declined", p.Groups, prev.Groups)
	}
	after := on(p)
	writeNode := before[5]
	for id, n := range after {
		switch {
		case id == 3 && n != writeNode:
			t.Errorf("r3 (now write) on n%d, want the write node n%d", n, writeNode)
		case id != 3 && n != before[id]:
			t.Errorf("r%d moved from n%d to n%d", id, before[id], n)
		}
	}
	if p.Moves != 1 || p.Reprofiled != 0 || len(after) != len(rs) {
		t.Fatalf("%d moves, %d reprofiled, %d ranges placed: want 1, 0, %d", p.Moves, p.Reprofiled, len(after), len(rs))
	}
	// r6 turns read: no read/write range is left, the groups change, Update declines.
	rs[5].Mix = Mix{Reads: 200}
	if _, ok := Update(prev, rs, now); ok {
		t.Fatal("groups changed, Update did not decline")
	}
}

// Alg. 1: nodes are added 1, 2, 4, 8 while the cluster stays overloaded, one removed at a time when
// it is underloaded, and the step starts again at 1.
func TestResizer(t *testing.T) {
	r := Resizer{Threshold: 0.5}
	var got []int
	got = append(got, r.Next(0.1, false)) // first round, few sub-optimal nodes: reconfigure only
	for range 4 {
		got = append(got, r.Next(0.8, false))
	}
	got = append(got, r.Next(0.1, true), r.Next(0.1, true), r.Next(0.1, false))
	if want := []int{0, 1, 2, 4, 8, -1, -1, 1}; !slices.Equal(got, want) {
		t.Fatalf("steps %v, want %v", got, want)
	}
}

// The groups stay while the loads ask for each class's within one node of them: a class made faster
// by the plan (more scans done) does not take the read group's second node. A class that appears
// plans afresh.
func TestUpdateKeepsGroupsWithinOneNode(t *testing.T) {
	rs := []Range{
		{ID: 1, Mix: Mix{Reads: 600}}, {ID: 2, Mix: Mix{Reads: 300}}, {ID: 3, Mix: Mix{Reads: 200, Scans: 200}},
		{ID: 4, Mix: Mix{Writes: 150}}, {ID: 5, Mix: Mix{Reads: 100, Writes: 100}},
	}
	prev := makeOnDefault(t, rs, 5)
	if prev.Groups[Read] != 2 || prev.Groups[Scan] != 1 {
		t.Fatalf("groups %v: want read 2, scan 1", prev.Groups)
	}
	now := make([]Node, len(prev.Assignments))
	for i, a := range prev.Assignments {
		now[i] = Node{ID: a.Node, Profile: a.Profile, Ranges: a.Ranges}
	}
	// Scans tripled and reads halved: the loads alone would give scan two nodes and read one.
	rs[0].Mix.Reads, rs[1].Mix.Reads, rs[2].Mix = 300, 150, Mix{Reads: 900, Scans: 900}
	if g, _ := grouped(rs, 5); g.Groups[Scan] != 2 || g.Groups[Read] != 1 {
		t.Fatalf("groups by load %v: want scan 2, read 1", g.Groups)
	}
	p, ok := Update(prev, rs, now)
	if !ok || !maps.Equal(p.Groups, prev.Groups) || p.Reprofiled != 0 || p.Moves != 0 {
		t.Fatalf("Update: ok %v, groups %v (before %v), %d reprofiled, %d moves: want the groups kept, nothing changed",
			ok, p.Groups, prev.Groups, p.Reprofiled, p.Moves)
	}
	rs = append(rs, Range{ID: 6, Mix: Mix{Writes: 50}}) // no new class: kept
	if _, ok := Update(prev, rs, now); !ok {
		t.Fatal("a write range added to the write group: Update declined")
	}
	rs[3].Mix = Mix{Reads: 150} // the write class is gone
	rs[5].Mix = Mix{Reads: 50}
	if _, ok := Update(prev, rs, now); ok {
		t.Fatal("the write class gone: Update kept the groups")
	}
}

// makeOnDefault is Make's plan of rs on n nodes n1… running the default profile.
func makeOnDefault(t *testing.T, rs []Range, n int) Plan {
	t.Helper()
	var nodes []Node
	for i := range n {
		nodes = append(nodes, Node{ID: uint64(i + 1), Profile: Default})
	}
	p, err := Make(rs, nodes)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A hot range's node leads it alone: the cap (⌈5/2⌉ = 3) gives way rather than put a fifth range
// beside it, and a reclassified range with a voter there goes to the other node of its group.
func TestLPTKeepsAHotRangeAlone(t *testing.T) {
	read := func(id uint64, q float64, voters ...uint64) Range {
		return Range{ID: id, Mix: Mix{Reads: q}, Voters: voters}
	}
	rs := []Range{read(1, 95), read(2, 15), read(3, 14), read(4, 12), read(5, 10)}
	sets, loads := LPT(rs, 2, 0)
	if !slices.Equal(sets[0], []uint64{1}) || len(sets[1]) != 4 {
		t.Fatalf("LPT %v (loads %v): want r1 alone", sets, loads)
	}
	as := []Assignment{{Node: 1, Profile: Read, Ranges: []uint64{1}, Load: 95}, {Node: 2, Profile: Read, Ranges: []uint64{2, 3}, Load: 29}}
	place(as, read(6, 7, 1, 3), Read)
	if len(as[0].Ranges) != 1 {
		t.Fatalf("placed beside the hot range: %+v", as)
	}
}
