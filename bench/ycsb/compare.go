package ycsb

import (
	"fmt"
	"sort"
	"strings"
)

// CompareOptions shape the Markdown document Compare writes.
type CompareOptions struct {
	// Title is the document's heading. Default: "Benchmarks".
	Title string
	// Baseline is the system the others are divided by, or several separated by commas (e.g.
	// "etcd,redis"): each baseline that has reports gets its own ratio columns. Default: "etcd".
	Baseline string
	// Notes are lines (Markdown) listed under "Setup", before the parameters the reports share.
	Notes []string
}

// Compare renders reports as a Markdown document: one row per system and workload with the
// throughput, the p99 latency of each operation, the errors (a line when there were none), and each
// system's throughput over each baseline's on the same workload. The reports themselves keep every
// operation's full latency breakdown.
func Compare(reports []*Report, opts CompareOptions) string {
	if opts.Title == "" {
		opts.Title = "Benchmarks"
	}
	if opts.Baseline == "" {
		opts.Baseline = TargetEtcd
	}
	var named []string
	rank := map[string]int{} // baselines by position; others are absent
	for _, b := range strings.Split(opts.Baseline, ",") {
		if b = strings.TrimSpace(b); b != "" {
			if _, dup := rank[b]; !dup {
				rank[b] = len(named)
				named = append(named, b)
			}
		}
	}
	rs := sortedReports(reports, rank)
	baseline, ops := baselineReports(rs, rank)
	// The baselines with reports get ratio columns; with none, the first named one still does (its
	// cells are "—"), as a document with a single baseline always had them.
	var bases []string
	for _, b := range named {
		if baseline[b] != nil {
			bases = append(bases, b)
		}
	}
	if len(bases) == 0 && len(named) > 0 {
		bases = named[:1]
	}

	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n", opts.Title)
	b.WriteString("## Setup\n\n")
	for _, n := range opts.Notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	for _, n := range sharedParams(rs) {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	b.WriteString("\n## Results\n\n")
	failed := errorsAny(rs)
	if !failed {
		b.WriteString("No operation failed in any run.\n\n")
	}
	writeResults(&b, rs, ops, bases, baseline, failed)
	if len(rs) > 0 && truncatedAny(rs) {
		b.WriteString("\nA report marked (truncated) hit its maximum duration before finishing its operations.\n")
	}
	return b.String()
}

// sortedReports orders the reports by workload, then the systems that are no baseline by name, then
// the baselines in the order given (rank).
func sortedReports(reports []*Report, rank map[string]int) []*Report {
	rs := append([]*Report(nil), reports...)
	sort.SliceStable(rs, func(i, j int) bool {
		if rs[i].Workload != rs[j].Workload {
			return rs[i].Workload < rs[j].Workload
		}
		bi, iok := rank[rs[i].System]
		bj, jok := rank[rs[j].System]
		switch {
		case iok != jok:
			return jok // the baselines last within a workload
		case iok && bi != bj:
			return bi < bj // in the order given
		}
		return rs[i].System < rs[j].System
	})
	return rs
}

// baselineReports indexes each baseline's first report per workload (baseline[b][workload]) and
// lists the operations any report has.
func baselineReports(rs []*Report, rank map[string]int) (map[string]map[string]*Report, []string) {
	baseline := map[string]map[string]*Report{}
	allOps := map[string]OpStats{}
	for _, r := range rs {
		if _, ok := rank[r.System]; ok {
			if baseline[r.System] == nil {
				baseline[r.System] = map[string]*Report{}
			}
			if baseline[r.System][r.Workload] == nil {
				baseline[r.System][r.Workload] = r
			}
		}
		for op := range r.Operations {
			allOps[op] = OpStats{}
		}
	}
	return baseline, opNames(allOps)
}

// writeResults writes the results table: a row per report, a p99 column per operation, the errors
// (when any failed) and the throughput over each baseline's on the same workload.
func writeResults(b *strings.Builder, rs []*Report, ops, bases []string, baseline map[string]map[string]*Report, failed bool) {
	header := []string{"Workload", "System", "Throughput (ops/s)"}
	align := []string{"---", "---", "---:"}
	for _, op := range ops {
		header = append(header, op+" p99 (ms)")
		align = append(align, "---:")
	}
	if failed {
		header = append(header, "Errors")
		align = append(align, "---:")
	}
	for _, base := range bases {
		header = append(header, fmt.Sprintf("Throughput / %s", base))
		align = append(align, "---:")
	}
	writeRow(b, header)
	writeRow(b, align)
	for _, r := range rs {
		row := []string{strings.ToUpper(r.Workload), systemLabel(r), fmt.Sprintf("%.0f", r.Throughput)}
		for _, op := range ops {
			if s, ok := r.Operations[op]; ok && s.Count > s.Errors {
				row = append(row, fmt.Sprintf("%.2f", s.P99Ms))
			} else {
				row = append(row, "—")
			}
		}
		if failed {
			row = append(row, fmt.Sprintf("%d", r.Errors))
		}
		for _, bs := range bases {
			base := baseline[bs][r.Workload]
			if base == nil || base == r || r.System == bs {
				row = append(row, "—")
			} else {
				row = append(row, ratio(r.Throughput, base.Throughput))
			}
		}
		writeRow(b, row)
	}
}

func writeRow(b *strings.Builder, cells []string) {
	b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
}

// systemLabel names a report's system and, for Shoal, its front end.
func systemLabel(r *Report) string {
	l := r.System
	if r.System == "shoal" && r.Target != "" {
		l = fmt.Sprintf("shoal (%s)", r.Target)
	}
	if r.Truncated {
		l += " (truncated)"
	}
	return l
}

func ratio(a, b float64) string {
	if b <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

func errorsAny(rs []*Report) bool {
	for _, r := range rs {
		if r.Errors > 0 {
			return true
		}
	}
	return false
}

func truncatedAny(rs []*Report) bool {
	for _, r := range rs {
		if r.Truncated {
			return true
		}
	}
	return false
}

// sharedParams describes the parameters every report has in common.
func sharedParams(rs []*Report) []string {
	if len(rs) == 0 {
		return nil
	}
	same := func(f func(*Report) string) (string, bool) {
		v := f(rs[0])
		for _, r := range rs[1:] {
			if f(r) != v {
				return "", false
			}
		}
		return v, true
	}
	var out []string
	add := func(label string, f func(*Report) string) {
		if v, ok := same(f); ok && v != "" {
			out = append(out, fmt.Sprintf("%s: %s", label, v))
		}
	}
	add("Records", func(r *Report) string { return fmt.Sprint(r.Records) })
	add("Operations per run", func(r *Report) string { return fmt.Sprint(r.Ops) })
	add("Client threads", func(r *Report) string { return fmt.Sprint(r.Threads) })
	add("Request distribution", func(r *Report) string { return r.Distribution })
	add("Fields per record × bytes per field", func(r *Report) string {
		return fmt.Sprintf("%s × %s", r.Properties["fieldcount"], r.Properties["fieldlength"])
	})
	add("writeallfields", func(r *Report) string { return r.Properties["writeallfields"] })
	add("readallfields", func(r *Report) string { return r.Properties["readallfields"] })
	return out
}
