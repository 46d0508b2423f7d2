package prefetch

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/optimize/convex/lp"
)

// ErrInfeasible is returned (wrapped) by LowerBound when no schedule can fetch the needed runs' spans
// by their deadlines within the node budgets.
var ErrInfeasible = errors.New("prefetch: the runs cannot all be served on time within the budgets")

// LowerBound is the LP relaxation's least peak disk bandwidth (bytes/s) at which every run r with
// need[r] gets its span by its deadline; need is indexed like the runs Instance.Runs(opt) returns, and a
// nil need means every run. Like the chapter's LP it lets a copy be partly prefetched; it also lets the
// rate vary from slot to slot, counts in the cache only the bytes fetched so far and only until the
// copy's first run, and lets any read of an item serve all its runs. So it is at most the peak of any
// schedule that serves those runs on time within the node budgets (the peak Evaluate reports, for a
// schedule without cache overflow).
//
// Variables: v[i][t], the bytes/s fetched for item i in slot t, from its earliest prefetch slot to the
// earliest deadline of a needed run of it. Per node, minimize P such that in each slot Σ v ≤ P and
// Σ v ≤ the bandwidth budget; bytes fetched before an item's first run, with the other items', fit the
// cache budget until that run; and each item has its size fetched by that earliest deadline. Nodes share
// nothing but P, so each node is solved alone and the bound is their maximum.
func LowerBound(in *Instance, opt Options, need []bool) (float64, error) {
	if err := in.Validate(); err != nil {
		return 0, err
	}
	runs, items := in.Runs(opt)
	if need != nil && len(need) != len(runs) {
		return 0, fmt.Errorf("prefetch: lower bound: %d needs for %d runs", len(need), len(runs))
	}
	by := make([]int, len(items)) // item → the earliest deadline of a needed run; 0 if none
	for r, run := range runs {
		if need == nil || need[r] {
			if d := by[run.Item]; d == 0 || run.Deadline < d {
				by[run.Item] = run.Deadline
			}
		}
	}
	bound := 0.0
	for n := range in.Nodes {
		// Every schedule's peak counts the base load, also in slots no item may be fetched in.
		for t := 0; t < in.Horizon; t++ {
			bound = max(bound, in.base(n, t))
		}
		var mine []int
		for i, it := range items {
			if it.Node == n && by[i] > 0 {
				mine = append(mine, i)
			}
		}
		if len(mine) == 0 {
			continue
		}
		p, err := nodeBound(in, items, by, mine, n, opt.BoundRows)
		if err != nil {
			return 0, fmt.Errorf("prefetch: lower bound on node %d: %w", n, err)
		}
		bound = max(bound, p)
	}
	return bound, nil
}

// maxRows caps a node's LP by default (Options.BoundRows): gonum's simplex factorizes its dense basis
// at every step, so the cost grows with the cube of the rows.
const maxRows = 60

// perturb is the scale of the perturbations of the right-hand sides, in units of the largest item.
const perturb = 1e-9

// nodeBound solves node n's LP over blocks of slots, the shortest blocks that keep it within rows
// (one slot each on small instances, where the bound is the slot LP itself). Over a block the LP asks
// only that the bytes fetched average at most P and fit the block's total budget, and checks the cache
// at the block's last slot: a relaxation of the slot LP, so still a lower bound.
func nodeBound(in *Instance, items []Item, by, mine []int, n, rows int) (float64, error) {
	if rows <= 0 {
		rows = maxRows
	}
	for k := 1; ; k++ {
		l := buildLP(in, items, by, mine, n, k)
		if len(l.b) <= rows || k >= in.Horizon {
			return l.solve(in, items, mine)
		}
	}
}

// nodeLP is one node's LP in standard form (A·x = b, x ≥ 0), in units where the largest item is 1:
// column 0 is P, then X[i][β] (an item's bytes fetched in block β), then a slack per row and an
// artificial per ≥ row (the size rows, and the peak rows of blocks with a base load) whose big cost
// drives it out — slacks and artificials make the first basis, so no phase one is needed.
type nodeLP struct {
	A              *mat.Dense
	b, c           []float64
	basic          []int
	art            []int // by row: its artificial's column (the ≥ rows), or −1
	vars, sizeRow  int
	unit, rateUnit float64
}

func buildLP(in *Instance, items []Item, by, mine []int, n, k int) nodeLP {
	sec := in.seconds()
	l := nodeLP{}
	for _, i := range mine {
		l.unit = max(l.unit, items[i].Size)
	}
	l.rateUnit = l.unit / sec
	blocks := (in.Horizon + k - 1) / k
	lo := func(i int) int { return items[i].Earliest / k }
	hi := func(i int) int { return (by[i]-1)/k + 1 } // blocks [lo, hi) overlap [Earliest, by)
	first := map[int]int{}
	l.vars = 1
	for _, i := range mine {
		first[i] = l.vars
		l.vars += hi(i) - lo(i)
	}
	type row struct {
		coef  map[int]float64
		b     float64
		slack float64 // +1: a ≤ row, −1: a ≥ row (with an artificial)
	}
	var rows []row
	for β := 0; β < blocks; β++ {
		from, to := β*k, min((β+1)*k, in.Horizon)
		peak := row{coef: map[int]float64{0: -float64(to - from)}, slack: 1}
		budget := row{coef: map[int]float64{}, slack: 1}
		// The row is the cache at the block's last slot, where earlier copies hold least (Held never
		// rises): the budget of that slot.
		held := row{coef: map[int]float64{}, b: (in.Nodes[n].Cache - in.held(n, to-1)) / l.unit, slack: 1}
		room, heldMax := 0.0, 0.0
		for _, i := range mine {
			if β >= lo(i) && β < hi(i) {
				peak.coef[first[i]+β-lo(i)], budget.coef[first[i]+β-lo(i)] = 1, 1
				room += items[i].Size / l.unit
			}
			if to-1 < items[i].First && β >= lo(i) {
				for γ := lo(i); γ <= min(β, hi(i)-1); γ++ {
					held.coef[first[i]+γ-lo(i)] = 1
				}
				heldMax += items[i].Size / l.unit
			}
		}
		if len(budget.coef) == 0 {
			continue
		}
		base := 0.0
		for t := from; t < to; t++ {
			base += in.base(n, t) / l.rateUnit
			budget.b += max(0, in.budget(n, t)-in.base(n, t)) / l.rateUnit
		}
		if base > 0 {
			// Σ x + base ≤ P·(to−from), as a ≥ row so that its right-hand side stays positive.
			for col, v := range peak.coef {
				peak.coef[col] = -v
			}
			peak.b, peak.slack = base, -1
		}
		rows = append(rows, peak)
		if budget.b < room {
			rows = append(rows, budget)
		}
		if len(held.coef) > 0 && heldMax > held.b {
			rows = append(rows, held)
		}
	}
	l.sizeRow = len(rows)
	for _, i := range mine {
		r := row{coef: map[int]float64{}, b: items[i].Size / l.unit, slack: -1}
		for β := lo(i); β < hi(i); β++ {
			r.coef[first[i]+β-lo(i)] = 1
		}
		rows = append(rows, r)
	}
	m := len(rows)
	arts := 0
	for _, r := range rows {
		if r.slack < 0 {
			arts++
		}
	}
	ncol := l.vars + m + arts
	l.A = mat.NewDense(m, ncol, nil)
	l.b, l.c, l.basic, l.art = make([]float64, m), make([]float64, ncol), make([]int, m), make([]int, m)
	l.c[0] = 1
	bigM := 1e4 * (1 + float64(len(mine)))
	// Peak rows have a zero right-hand side and many rows tie, so the simplex's pivots degenerate and
	// can cycle; distinct tiny perturbations break the ties. Each loosens its row (a ≤ row's bound
	// rises, a ≥ row's falls), so the optimum can only drop, by about perturb: still a lower bound.
	rng := rand.New(rand.NewPCG(uint64(n), uint64(k)))
	for j, r := range rows {
		for col, v := range r.coef {
			l.A.Set(j, col, v)
		}
		l.b[j] = r.b + r.slack*perturb*(1+rng.Float64())
		l.A.Set(j, l.vars+j, r.slack)
		l.basic[j], l.art[j] = l.vars+j, -1
		if r.slack < 0 {
			art := l.vars + m + arts - 1
			arts--
			l.A.Set(j, art, 1)
			l.c[art] = bigM
			l.basic[j], l.art[j] = art, art
		}
	}
	return l
}

func (l nodeLP) solve(in *Instance, items []Item, mine []int) (float64, error) {
	m, ncol := l.A.Dims()
	_, x, err := lp.Simplex(l.c, l.A, l.b, 1e-10, l.basic)
	if err != nil {
		return 0, fmt.Errorf("simplex over %d rows and %d columns: %w", m, ncol, err)
	}
	for j := l.sizeRow; j < m; j++ {
		if x[l.art[j]] > 1e-7 {
			return 0, fmt.Errorf("span %s: %w", in.Spans[items[mine[j-l.sizeRow]].Span].ID, ErrInfeasible)
		}
	}
	return math.Max(x[0], 0) * l.rateUnit, nil
}
