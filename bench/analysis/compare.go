package analysis

import (
	"fmt"
	"io"
	"math"
	"text/tabwriter"

	"github.com/shoaldb/shoal/bench/benchutil"
	"github.com/shoaldb/shoal/bench/report"
	"github.com/shoaldb/shoal/bench/scenario"
)

// A join's SLO score is a count of a handful of seconds, and one invocation's mean moves more than
// two strategies differ: a claim "B breaks the SLO twice as often as A" needs the runs paired as
// they ran, side by side, and an interval over the pairs. When the old nodes break the SLO without
// any join, the ratio a strategy can reach is bounded: a control run (the node starts, the policy is
// off) measures that floor in the same invocations.

// CompareOptions choose what Compare pairs and how it scores.
type CompareOptions struct {
	// A and B are the variants compared; ratios are B's figure over A's.
	A, B string
	// Control, if set, is a variant without the mechanism (no-join): its SLO score over a window of
	// A's join length from its own node start is the floor.
	Control string
	// ThresholdMs, if > 0, is one SLO threshold for every run instead of each run's own.
	ThresholdMs float64
	// Resamples of the bootstrap (default 10 000).
	Resamples int
}

// ComparedRun is one run's score: the 1-s windows whose p99 exceeded the threshold from StartS to
// EndS and their summed excess; the chapter's 2-s score and the join's figures as its report has
// them (not for a control, whose window is not its report's).
type ComparedRun struct {
	Report            string  `json:"report"`
	Variant           string  `json:"variant"`
	StartS            float64 `json:"start_s"`
	EndS              float64 `json:"end_s"`
	ThresholdMs       float64 `json:"threshold_ms"`
	Windows           int     `json:"windows"`
	ExcessMs          float64 `json:"excess_ms"`
	ChapterViolations int     `json:"chapter_violations"`
	ChapterExcessMs   float64 `json:"chapter_excess_ms"`
	ThroughputRatio   float64 `json:"throughput_ratio"`
	FirstServedS      float64 `json:"first_served_s"`
	JoinS             float64 `json:"join_s"`
}

// ComparedPair is the k-th run of A and of B (and of the control) of one report.
type ComparedPair struct {
	A       ComparedRun  `json:"a"`
	B       ComparedRun  `json:"b"`
	Control *ComparedRun `json:"control,omitempty"`
}

// Ratio is a figure's mean over the pairs for two of the runs, Num / Den, with a 95 % bootstrap
// interval. Ratio is absent when Den is 0, Hi when more than 2.5 % of the resamples had a
// denominator of 0.
type Ratio struct {
	Figure string   `json:"figure"`
	What   string   `json:"what"` // e.g. "parallel / incremental"
	Num    float64  `json:"num_mean"`
	Den    float64  `json:"den_mean"`
	Ratio  *float64 `json:"ratio,omitempty"`
	Lo     *float64 `json:"lo,omitempty"`
	Hi     *float64 `json:"hi,omitempty"`
}

// Comparison is what Compare returns: every pair's scores, the ratios B / A of every score and, with
// a control, A / floor and B / floor (in a surge scenario the control never relieves the surge, so
// its floor includes the overload a join removes); Skipped names the pairs left out.
type Comparison struct {
	Options CompareOptions `json:"options"`
	Pairs   []ComparedPair `json:"pairs"`
	Ratios  []Ratio        `json:"ratios"`
	Skipped []string       `json:"skipped,omitempty"`
}

// Compare pairs the runs of opts.A and opts.B (and opts.Control) in each report, in the order they
// ran, and computes the ratios of their SLO scores over all pairs.
func Compare(paths []string, opts CompareOptions) (*Comparison, error) {
	if opts.A == "" || opts.B == "" || opts.A == opts.B {
		return nil, fmt.Errorf("compare: two different variants are needed, got %q and %q", opts.A, opts.B)
	}
	if opts.Resamples <= 0 {
		opts.Resamples = 10000
	}
	c := &Comparison{Options: opts}
	for _, p := range paths {
		rep, err := readReport("compare", p)
		if err != nil {
			return nil, err
		}
		by := map[string][]scenario.RunReport{}
		for _, r := range rep.Runs {
			if r.Join != nil && r.Join.SLOThresholdMs > 0 {
				by[r.Variant] = append(by[r.Variant], r)
			}
		}
		as, bs, cs := by[opts.A], by[opts.B], by[opts.Control]
		for k := 0; k < len(as) && k < len(bs); k++ {
			if !as[k].Join.Done || !bs[k].Join.Done {
				c.Skipped = append(c.Skipped, fmt.Sprintf("%s: pair %d: a join did not finish", p, k+1))
				continue
			}
			pair := ComparedPair{A: scoreRun(p, as[k], opts.ThresholdMs, 0), B: scoreRun(p, bs[k], opts.ThresholdMs, 0)}
			if opts.Control != "" {
				if k >= len(cs) {
					c.Skipped = append(c.Skipped, fmt.Sprintf("%s: pair %d: no %s run", p, k+1, opts.Control))
					continue
				}
				ctl := scoreRun(p, cs[k], opts.ThresholdMs, pair.A.EndS-pair.A.StartS)
				pair.Control = &ctl
			}
			c.Pairs = append(c.Pairs, pair)
		}
	}
	if len(c.Pairs) == 0 {
		return nil, fmt.Errorf("compare: no report holds runs of %s and %s (and %q) with a join's score", opts.A, opts.B, opts.Control)
	}
	for _, s := range []struct {
		name    string
		control bool
		f       func(ComparedRun) float64
	}{
		{"windows", true, func(r ComparedRun) float64 { return float64(r.Windows) }},
		{"excess_ms", true, func(r ComparedRun) float64 { return r.ExcessMs }},
		{"chapter_violations", false, func(r ComparedRun) float64 { return float64(r.ChapterViolations) }},
		{"chapter_excess_ms", false, func(r ComparedRun) float64 { return r.ChapterExcessMs }},
	} {
		a := func(i int) float64 { return s.f(c.Pairs[i].A) }
		b := func(i int) float64 { return s.f(c.Pairs[i].B) }
		c.Ratios = append(c.Ratios, c.ratio(s.name, opts.B+" / "+opts.A, b, a))
		if opts.Control != "" && s.control {
			floor := func(i int) float64 { return s.f(*c.Pairs[i].Control) }
			c.Ratios = append(c.Ratios, c.ratio(s.name, opts.A+" / floor", a, floor), c.ratio(s.name, opts.B+" / floor", b, floor))
		}
	}
	return c, nil
}

func (c *Comparison) ratio(figure, what string, num, den func(int) float64) Ratio {
	out := Ratio{Figure: figure, What: what}
	for i := range c.Pairs {
		out.Num, out.Den = out.Num+num(i)/float64(len(c.Pairs)), out.Den+den(i)/float64(len(c.Pairs))
	}
	r, lo, hi := bootstrapRatio(len(c.Pairs), num, den, c.Options.Resamples)
	out.Ratio, out.Lo, out.Hi = finite(r), finite(lo), finite(hi)
	return out
}

// finite is x, or nil when x is infinite or not a number (JSON has neither).
func finite(x float64) *float64 {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return nil
	}
	return &x
}

// scoreRun scores r from its join's start to the end of its join's window, or over length seconds
// when length > 0 (a control's floor over another run's join length).
func scoreRun(path string, r scenario.RunReport, thresholdMs, length float64) ComparedRun {
	j := r.Join
	start, end := j.JoinStartS, j.WindowEndS
	if end <= 0 {
		end = start + j.JoinS
	}
	if length > 0 {
		end = start + length
	}
	thr := j.SLOThresholdMs
	if thresholdMs > 0 {
		thr = thresholdMs
	}
	n, ex := report.WindowsOver(r.Series, thr, start, end)
	out := ComparedRun{Report: path, Variant: r.Variant, StartS: start, EndS: end, ThresholdMs: thr, Windows: n, ExcessMs: ex}
	if length <= 0 {
		out.ChapterViolations, out.ChapterExcessMs = j.ChapterViolations, j.ChapterExcessMs
		out.ThroughputRatio, out.FirstServedS, out.JoinS = j.ThroughputRatio, j.FirstServedS, j.JoinS
	}
	return out
}

// Print writes every run's score and then the ratios.
func (c *Comparison) Print(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "report\tvariant\tfrom s\tto s\tthreshold ms\t1-s windows\texcess ms\t2-s windows\t2-s excess ms\tduring/before\tfirst range s\tjoin s\t\n")
	row := func(r ComparedRun, control bool) {
		name := r.Report
		if len(name) > 36 {
			name = "…" + name[len(name)-35:]
		}
		if control {
			fmt.Fprintf(tw, "%s\t%s (floor)\t%.1f\t%.1f\t%.1f\t%d\t%.0f\t\t\t\t\t\t\n", name, r.Variant, r.StartS, r.EndS, r.ThresholdMs, r.Windows, r.ExcessMs)
			return
		}
		fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.1f\t%.1f\t%d\t%.0f\t%d\t%.1f\t%.3f\t%.1f\t%.1f\t\n", name, r.Variant, r.StartS, r.EndS, r.ThresholdMs,
			r.Windows, r.ExcessMs, r.ChapterViolations, r.ChapterExcessMs, r.ThroughputRatio, r.FirstServedS, r.JoinS)
	}
	for _, p := range c.Pairs {
		row(p.A, false)
		row(p.B, false)
		if p.Control != nil {
			row(*p.Control, true)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range c.Skipped {
		fmt.Fprintf(w, "skipped: %s\n", s)
	}
	thr := "each run's own threshold"
	if c.Options.ThresholdMs > 0 {
		thr = fmt.Sprintf("one threshold, %.1f ms", c.Options.ThresholdMs)
	}
	fmt.Fprintf(w, "\n%d pairs, %s; ratios of the means over the pairs, 95 %% bootstrap interval (pairs resampled)\n", len(c.Pairs), thr)
	text := func(x *float64, format string) string {
		if x == nil {
			return "n/a"
		}
		return fmt.Sprintf(format, *x)
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "figure\tratio\tmeans\tratio\t95 %% interval\t\n")
	for _, r := range c.Ratios {
		fmt.Fprintf(tw, "%s\t%s\t%.1f / %.1f\t%s\t[%s, %s]\t\n", r.Figure, r.What, r.Num, r.Den, text(r.Ratio, "%.2fx"), text(r.Lo, "%.2f"), text(r.Hi, "%.2f"))
	}
	return tw.Flush()
}

// Write writes the comparison as indented JSON.
func (c *Comparison) Write(path string) error { return benchutil.WriteJSON(path, c) }
