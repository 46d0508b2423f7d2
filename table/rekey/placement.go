package rekey

import (
	"bytes"
	"context"
	"fmt"
	"math/big"
	"slices"
	"sort"
	"time"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/plan/rekeyplan"
	"github.com/shoaldb/shoal/table"
)

// Placement strategies for the new keyspace's ranges (Morphus §2.3).
const (
	// PlaceBalanced caps every node at ⌈m/N⌉ new ranges and moves the fewest bytes under the cap
	// (Hungarian matching, Lemma 2.2): the default.
	PlaceBalanced = "balanced"
	// PlaceGreedy leads each new range from the node that leads most of its rows now (fewest
	// bytes, Lemma 2.1), however many ranges that piles on one node.
	PlaceGreedy = "greedy"
	// PlaceRandom deals the new ranges to the nodes' ⌈m/N⌉ slots at random (the thesis's baseline).
	PlaceRandom = "random"
	// PlaceNone neither splits nor places the new keyspace: it grows by size-based splits.
	PlaceNone = "none"
)

// Placements are the strategies a re-key accepts.
func Placements() []string { return []string{PlaceBalanced, PlaceGreedy, PlaceRandom, PlaceNone} }

// maxCompared is how many new ranges Balanced's plan is still computed for beside another strategy.
const maxCompared = 300

// metaRangeID is the meta range's id (pb: range 1 is special): its span is not user keys.
const metaRangeID = 1

// PolicyName is the name re-key operators carry in the autopilot's decision log.
const PolicyName = "rekey"

// PlacementReport is what the placement of the new keyspace planned and asked for.
type PlacementReport struct {
	Strategy    string `json:"strategy"`
	NewRanges   int    `json:"new_ranges"`
	SampledRows int    `json:"sampled_rows"`
	// TableBytes and EstimatedRows are the table's rows and their bytes (keys and values, as the
	// copy moves them) estimated from the sample: how many rows each probe read over how much of
	// its range's key space they cover. When the key space is too uneven to tell, EstimatedRows is
	// 0 and TableBytes the engine's compressed size on disk.
	TableBytes    float64 `json:"table_bytes"`
	EstimatedRows int64   `json:"estimated_rows"`
	// Predicted is the bytes each strategy would move (rows whose old range's leader is not their
	// new range's leader), and "unplaced" where the leaders stand after the splits, on one sample.
	Predicted map[string]float64 `json:"predicted_bytes_moved"`
	// Leaders is the plan: new range → node; Submitted, InPlace, Refused what the autopilot did with it.
	Leaders                     map[uint64]uint64 `json:"leaders"`
	Submitted, InPlace, Refused int
	Refusals                    []string      `json:"refusals,omitempty"` // why, for each refused
	Placed                      int           `json:"placed"`             // leaderships where planned when the copy started
	Took                        time.Duration `json:"took_ns"`
}

// sampleProbes is how many points of each old range the sample reads from, and sampleRows about
// how many rows it reads in all: enough for quantiles of a few hundred ranges.
const (
	sampleProbes = 8
	sampleRows   = 8192
)

// oldRange is an old keyspace's range: its span, its leader, its estimated bytes.
type oldRange struct {
	id         uint64
	start, end []byte
	leader     uint64
	bytes      float64 // the engine's estimate of its size on disk, then the sample's of its rows
	rows       float64 // estimated by the sample (0: it cannot tell)
	// sampleRows and sampleBytes are what the sample read of it.
	sampleRows  int
	sampleBytes float64
}

// sampled is one row of the sample: its key in the new keyspace, the old range it is in, and the
// bytes it stands for.
type sampled struct {
	newKey []byte
	old    int
	weight float64
}

// place splits the new keyspace where a sample of the table says it will hold equal bytes, one
// range per old range (at least one per node), and asks the autopilot to lead each new range from
// the node strategy chooses. The copy then writes each row where the plan put its range.
func place(ctx context.Context, c *client.Client, old, nd table.Descriptor, strategy string, seed uint64) (*PlacementReport, error) {
	t0 := time.Now()
	rep := &PlacementReport{Strategy: strategy, Predicted: map[string]float64{}}
	ostart, oend := table.TableSpan(old.ID)
	olds, nodes, err := spanRanges(ctx, c, ostart, oend)
	if err != nil {
		return nil, err
	}
	if nodes, err = leaders(ctx, c, nodes); err != nil {
		return nil, err
	}
	sample, err := takeSample(ctx, c, old, nd, olds)
	if err != nil {
		return nil, err
	}
	rep.SampledRows = len(sample)
	rows := 0.0
	for _, r := range olds {
		rep.TableBytes += r.bytes
		rows += r.rows
	}
	rep.EstimatedRows = int64(rows)
	if len(sample) == 0 || len(nodes) == 0 {
		rep.Took = time.Since(t0)
		return rep, nil // an empty table: nothing to place
	}
	for _, key := range boundaries(sample, max(len(olds), len(nodes))) {
		if err := rangeBoundary(ctx, c, key); err != nil {
			return nil, fmt.Errorf("split the new keyspace: %w", err)
		}
	}
	nstart, nend := table.TableSpan(nd.ID)
	news, _, err := spanRanges(ctx, c, nstart, nend)
	if err != nil {
		return nil, err
	}
	rep.NewRanges = len(news)
	in, current := placementInput(sample, olds, news, nodes)
	plans := map[string][]int{"unplaced": current}
	if plans[PlaceGreedy], err = rekeyplan.Greedy(in); err != nil {
		return nil, err
	}
	// Balanced is a Hungarian assignment, cubic in the new ranges: beside another strategy it is
	// computed for the comparison only while that stays cheap.
	if strategy == PlaceBalanced || len(news) <= maxCompared {
		if plans[PlaceBalanced], err = rekeyplan.Balanced(in); err != nil {
			return nil, err
		}
	}
	if plans[PlaceRandom], err = rekeyplan.Random(in, seed); err != nil {
		return nil, err
	}
	for name, p := range plans {
		rep.Predicted[name] = in.Moved(p)
	}
	rep.Leaders = map[uint64]uint64{}
	for i, j := range plans[strategy] {
		rep.Leaders[news[i].id] = nodes[j]
	}
	others := ""
	for _, name := range []string{PlaceGreedy, PlaceBalanced, PlaceRandom, "unplaced"} {
		if b, ok := rep.Predicted[name]; ok {
			others += fmt.Sprintf(", %s %s", name, mib(b))
		}
	}
	reason := fmt.Sprintf("re-key %s: %s placement of %d new ranges, predicted %s moved (%s)",
		old.Name, strategy, len(news), mib(rep.Predicted[strategy]), others[2:])
	resp, err := c.PlaceLeaders(ctx, PolicyName, reason, rep.Leaders)
	if err != nil {
		return nil, fmt.Errorf("place the new ranges' leaders: %w", err)
	}
	rep.Submitted, rep.InPlace, rep.Refused = int(resp.GetSubmitted()), int(resp.GetInPlace()), int(resp.GetRefused())
	rep.Refusals = resp.GetReasons()
	rep.Placed = waitPlaced(ctx, c, rep.Leaders, rep.Submitted+rep.InPlace, 15*time.Second)
	rep.Took = time.Since(t0)
	return rep, nil
}

func mib(b float64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.2f GiB", b/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", b/(1<<20))
	}
	return fmt.Sprintf("%.1f KiB", b/(1<<10))
}

// spanRanges returns the ranges within [start, end) in key order, and the nodes holding their
// voters (sorted).
func spanRanges(ctx context.Context, c *client.Client, start, end []byte) ([]oldRange, []uint64, error) {
	all, err := c.Ranges(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("list ranges: %w", err)
	}
	var out []oldRange
	seen := map[uint64]bool{}
	var nodes []uint64
	for _, rs := range all {
		d := rs.GetDesc()
		if d.GetRangeId() == metaRangeID {
			continue
		}
		s, e := d.GetStartKey(), d.GetEndKey()
		if (len(e) > 0 && bytes.Compare(e, start) <= 0) || bytes.Compare(s, end) >= 0 {
			continue
		}
		s = maxKey(s, start)
		if len(e) == 0 || bytes.Compare(e, end) > 0 {
			e = end
		}
		out = append(out, oldRange{id: d.GetRangeId(), start: s, end: e, leader: rs.GetLeaderNodeId(), bytes: float64(rs.GetApproxBytes())})
		for _, r := range d.GetReplicas() {
			if !r.GetLearner() && !seen[r.GetNodeId()] {
				seen[r.GetNodeId()] = true
				nodes = append(nodes, r.GetNodeId())
			}
		}
	}
	sort.Slice(out, func(a, b int) bool { return bytes.Compare(out[a].start, out[b].start) < 0 })
	slices.Sort(nodes)
	return out, nodes, nil
}

func maxKey(a, b []byte) []byte {
	if bytes.Compare(a, b) >= 0 {
		return a
	}
	return b
}

// leaders are the nodes of nodes that may lead a range: live, neither draining nor leaving (the
// drain and decommission policies would move a leadership placed there away again).
func leaders(ctx context.Context, c *client.Client, nodes []uint64) ([]uint64, error) {
	st, err := c.Nodes(ctx)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	ok := map[uint64]bool{}
	for _, n := range st {
		ok[n.GetDesc().GetNodeId()] = n.GetLive() && !n.GetDraining() && !n.GetDecommissioned() && n.GetState() != "decommissioning"
	}
	return slices.DeleteFunc(nodes, func(n uint64) bool { return !ok[n] }), nil
}

// takeSample reads a few rows at sampleProbes evenly spread points of every old range and maps
// each to its key under the new primary key; each row stands for its range's bytes over the
// range's sample.
func takeSample(ctx context.Context, c *client.Client, old, nd table.Descriptor, olds []oldRange) ([]sampled, error) {
	per := max(8, sampleRows/max(1, len(olds))/sampleProbes)
	var perRange [][]sampled
	for i := range olds {
		rows, err := sampleRange(ctx, c, old, nd, &olds[i], i, per)
		if err != nil {
			return nil, err
		}
		if len(rows) > 0 {
			perRange = append(perRange, rows)
		}
	}
	// The ranges' rows times their sample's mean row: their bytes as the copy moves them. A key
	// space the rows fill unevenly (a composite key: (grp, id) leaves a gap of 2^64 between groups)
	// makes the density meaningless, off either way; then no count is claimed, and the ranges
	// weigh by the engine's (compressed) size on disk, which at least orders them right.
	plausible := true
	for _, r := range olds {
		if r.sampleRows == 0 || r.bytes == 0 {
			continue
		}
		// Rows take between half (the engine's overhead on incompressible data) and
		// maxCompression times their size on disk.
		if raw := r.rows * r.sampleBytes / float64(r.sampleRows); raw > maxCompression*r.bytes || raw < r.bytes/2 {
			plausible = false
		}
	}
	var out []sampled
	for _, rows := range perRange {
		if len(rows) == 0 {
			continue
		}
		r := &olds[rows[0].old]
		switch {
		case plausible:
			r.bytes = r.rows * r.sampleBytes / float64(r.sampleRows)
		default:
			r.rows = 0
			if r.bytes == 0 {
				r.bytes = r.sampleBytes
			}
		}
		for k := range rows {
			rows[k].weight *= r.bytes / r.sampleBytes
		}
		out = append(out, rows...)
	}
	return out, nil
}

// maxCompression bounds how much smaller than its rows a range can be on disk: a row estimate
// beyond it is the key space's shape, not the data.
const maxCompression = 50

// sampleRange reads range r (the i-th old range) at sampleProbes points, per rows each, maps the
// rows to the new key, and sets r's sample size and estimated rows.
func sampleRange(ctx context.Context, c *client.Client, old, nd table.Descriptor, r *oldRange, i, per int) ([]sampled, error) {
	// Probes spread over the keys the range holds, not its bounds: a table's last range ends at
	// the next table's prefix, far beyond its last row.
	lo, hi, err := dataBounds(ctx, c, r.start, r.end)
	if err != nil || lo == nil {
		return nil, err // nil, nil: no rows
	}
	ks := newKeySpace(lo, hi)
	seen := map[string]bool{}
	var rows []sampled
	size := 0.0
	var estimates []float64 // the range's rows as each probe sees them
	for p := range sampleProbes {
		from := ks.at(float64(p) / sampleProbes)
		kvs, err := c.Scan(ctx, from, hi, per, false)
		if err != nil {
			return nil, fmt.Errorf("sample the table: %w", err)
		}
		// The rows a probe read over the part of the range they cover estimate its rows: up to the
		// last key read, or to the range's last row when the probe reached it.
		to := hi
		if len(kvs) == per {
			to = kvs[len(kvs)-1].Key
		}
		if f := ks.fraction(from, to); f > 0 {
			estimates = append(estimates, float64(len(kvs))/f)
		}
		for _, kv := range kvs {
			if seen[string(kv.Key)] {
				continue
			}
			seen[string(kv.Key)] = true
			row, err := old.DecodeRow(kv.Key, kv.Value)
			if err != nil {
				return nil, err
			}
			nk, _, err := nd.EncodeRow(row)
			if err != nil {
				return nil, fmt.Errorf("row %q under the new key: %w", kv.Key, err)
			}
			n := float64(len(kv.Key) + len(kv.Value))
			rows = append(rows, sampled{newKey: nk, old: i, weight: n})
			size += n
		}
	}
	r.sampleRows, r.sampleBytes = len(rows), size
	r.rows = float64(len(rows)) // too few keys to tell a density: the sample is the range
	if len(estimates) > 0 {
		// The median: a probe whose rows sit in a sliver of the key space would make the mean
		// absurd.
		slices.Sort(estimates)
		r.rows = max(r.rows, estimates[len(estimates)/2])
	}
	return rows, nil
}

// dataBounds are the first key in [start, end) and the key just after its last (nil: no key).
func dataBounds(ctx context.Context, c *client.Client, start, end []byte) (lo, hi []byte, err error) {
	first, err := c.Scan(ctx, start, end, 1, false)
	if err != nil || len(first) == 0 {
		return nil, nil, wrapSample(err)
	}
	last, err := c.Scan(ctx, start, end, 1, true)
	if err != nil || len(last) == 0 {
		return nil, nil, wrapSample(err)
	}
	return first[0].Key, append(bytes.Clone(last[0].Key), 0), nil
}

func wrapSample(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("sample the table: %w", err)
}

// keySpace reads keys between a and b as numbers: the 16 bytes after their common prefix (b
// empty: the end of the keyspace), so that a span can be cut in fractions and a scan's keys tell
// what fraction of it they cover. Sixteen bytes resolve a composite key's second column (8 bytes of
// an integer column after 8 of the first).
type keySpace struct {
	a      []byte
	p      int
	lo, hi *big.Int
}

const keySpaceBytes = 16

func newKeySpace(a, b []byte) keySpace {
	p := 0
	for p < len(a) && p < len(b) && a[p] == b[p] {
		p++
	}
	ks := keySpace{a: a, p: p}
	ks.lo = ks.word(a)
	if len(b) > 0 {
		ks.hi = ks.word(b)
	} else {
		ks.hi = new(big.Int).Lsh(big.NewInt(1), 8*keySpaceBytes)
	}
	return ks
}

func (ks keySpace) word(k []byte) *big.Int {
	var w [keySpaceBytes]byte
	if len(k) > ks.p {
		copy(w[:], k[ks.p:])
	}
	return new(big.Int).SetBytes(w[:])
}

// width is hi − lo, nil when the span is empty.
func (ks keySpace) width() *big.Int {
	d := new(big.Int).Sub(ks.hi, ks.lo)
	if d.Sign() <= 0 {
		return nil
	}
	return d
}

// at is a key about a fraction f of the way from a to b.
func (ks keySpace) at(f float64) []byte {
	d := ks.width()
	if f <= 0 || d == nil {
		return ks.a
	}
	off, _ := new(big.Float).Mul(new(big.Float).SetInt(d), big.NewFloat(f)).Int(nil)
	x := new(big.Int).Add(ks.lo, off)
	var w [keySpaceBytes]byte
	x.FillBytes(w[:])
	out := append(bytes.Clone(ks.a[:ks.p]), w[:]...)
	if bytes.Compare(out, ks.a) < 0 {
		return ks.a
	}
	return out
}

// fraction is how much of the span lies between keys from and to (0 when it cannot tell).
func (ks keySpace) fraction(from, to []byte) float64 {
	d := ks.width()
	if d == nil {
		return 0
	}
	span := new(big.Int).Sub(ks.word(to), ks.word(from))
	if span.Sign() <= 0 {
		return 0
	}
	f, _ := new(big.Float).Quo(new(big.Float).SetInt(span), new(big.Float).SetInt(d)).Float64()
	return f
}

// between is a key about a fraction f of the way from a to b.
func between(a, b []byte, f float64) []byte { return newKeySpace(a, b).at(f) }

// boundaries are the m−1 new keys that cut the sample into m parts of equal bytes.
func boundaries(sample []sampled, m int) [][]byte {
	s := slices.Clone(sample)
	slices.SortFunc(s, func(a, b sampled) int { return bytes.Compare(a.newKey, b.newKey) })
	total := 0.0
	for _, x := range s {
		total += x.weight
	}
	var out [][]byte
	acc, next := 0.0, 1
	for _, x := range s {
		if next >= m {
			break
		}
		if acc >= total*float64(next)/float64(m) && (len(out) == 0 || bytes.Compare(x.newKey, out[len(out)-1]) > 0) {
			out = append(out, x.newKey)
			next++
		}
		acc += x.weight
	}
	return out
}

// placementInput is the placement problem of the sample: Local[i][j] the bytes of new range i whose
// old range node j leads; and where each new range's leader is now (the "unplaced" plan).
func placementInput(sample []sampled, olds, news []oldRange, nodes []uint64) (rekeyplan.Input, []int) {
	in := rekeyplan.Input{Local: make([][]float64, len(news)), Size: make([]float64, len(news))}
	for i := range in.Local {
		in.Local[i] = make([]float64, len(nodes))
	}
	col := map[uint64]int{}
	for j, n := range nodes {
		col[n] = j
	}
	for _, x := range sample {
		i := sort.Search(len(news), func(k int) bool { return bytes.Compare(news[k].start, x.newKey) > 0 }) - 1
		if i < 0 {
			continue
		}
		in.Size[i] += x.weight
		if j, ok := col[olds[x.old].leader]; ok {
			in.Local[i][j] += x.weight
		}
	}
	current := make([]int, len(news))
	for i, r := range news {
		current[i] = col[r.leader]
	}
	return in, current
}

// waitPlaced waits up to d for want of the planned leaderships (those not refused) and returns how
// many are in place.
func waitPlaced(ctx context.Context, c *client.Client, plan map[uint64]uint64, want int, d time.Duration) int {
	deadline := time.Now().Add(d)
	for {
		placed := 0
		if all, err := c.Ranges(ctx); err == nil {
			for _, rs := range all {
				if n, ok := plan[rs.GetDesc().GetRangeId()]; ok && rs.GetLeaderNodeId() == n {
					placed++
				}
			}
		}
		if placed >= want || time.Now().After(deadline) || ctx.Err() != nil {
			return placed
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkPlacement reports a strategy Run does not know as a bad argument.
func checkPlacement(s string) error {
	if slices.Contains(Placements(), s) {
		return nil
	}
	return fmt.Errorf("placement %q: want one of %v: %w", s, Placements(), client.ErrInvalidArgument)
}
