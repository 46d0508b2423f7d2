package scenario

import (
	"testing"

	"github.com/shoaldb/shoal/bench/report"
)

// A task is heavier than the background when its node's disk traffic, or the bytes its compactions
// wrote, in the task window are at least twice those of the window before it (another node's rise
// does not count for it); a run whose task did not finish fails with why.
func TestTaskChecks(t *testing.T) {
	series := func(before, during int64, node uint64, set func(*NodeSecond, int64)) *RunReport {
		rr := &RunReport{Task: &TaskWindow{StartS: 40, EndS: 60, DurationS: 20, Node: node}}
		for s := 1; s <= 80; s++ {
			b := before
			if s > 40 && s <= 60 {
				b = during
			}
			ns := []NodeSecond{{Node: 1, DiskBytes: 1 << 20, CompactedBytes: 1 << 20}, {Node: 2, DiskBytes: 2 << 20, CompactedBytes: 2 << 20}}
			set(&ns[1], b)
			rr.Series = append(rr.Series, Point{T: float64(s), Nodes: ns})
		}
		return rr
	}
	run := func(before, during int64, node uint64) *RunReport {
		return series(before, during, node, func(n *NodeSecond, b int64) { n.DiskBytes = b })
	}
	compacted := func(before, during int64, node uint64) *RunReport {
		return series(before, during, node, func(n *NodeSecond, b int64) { n.CompactedBytes = b })
	}
	for _, tc := range []struct {
		name    string
		rr      *RunReport
		verdict string
	}{
		{"heavy", run(2<<20, 9<<20, 2), report.Pass},
		{"heavy, the node unnamed", run(2<<20, 9<<20, 0), report.Pass},
		{"as heavy as the background", run(2<<20, 3<<20, 2), report.Fail},
		{"another node rose", run(2<<20, 9<<20, 1), report.Fail},
		{"compactions heavy, the disk flat (the page cache)", compacted(2<<20, 9<<20, 2), report.Pass},
		{"compactions as heavy as before", compacted(2<<20, 3<<20, 2), report.Fail},
	} {
		cs := taskChecks(tc.rr, 10, true)
		if len(cs) != 2 || cs[0].Verdict != report.Pass || cs[1].Verdict != tc.verdict {
			t.Errorf("%s: %v, want task_window pass and event_heavier %s", tc.name, cs, tc.verdict)
		}
	}
	// A backup rewrites nothing: compactions its node ran in the window do not make it heavier.
	backup := compacted(0, 9<<20, 2)
	backup.Events = []EventMark{{T: 40, EndT: 60, Label: string(BackupBusiest), Task: true}}
	if cs := taskChecks(backup, 10, true); len(cs) != 2 || cs[1].Verdict != report.Fail {
		t.Errorf("backup judged by its node's compactions: %v, want event_heavier fail", cs)
	}
	unfinished := &RunReport{Task: &TaskWindow{Missing: "the task was still running when the run ended"}}
	if cs := taskChecks(unfinished, 10, true); len(cs) != 1 || cs[0].Verdict != report.Fail || cs[0].Note == "" {
		t.Errorf("unfinished task: %v", cs)
	}
}

// The runs' steady states must agree within 10 % (each label's median).
func TestAgreementCheck(t *testing.T) {
	run := func(on bool, tput float64) RunReport {
		return RunReport{PolicyOn: on, Validity: &Validity{Steady: Steady{Throughput: tput}}}
	}
	if c := agreementCheck([]RunReport{run(true, 3000), run(false, 3100), run(true, 2000), run(false, 3200), run(true, 3050)}); c.Verdict != report.Pass {
		t.Errorf("medians 3000 vs 3150: %v", c)
	}
	if c := agreementCheck([]RunReport{run(true, 3000), run(false, 3600)}); c.Verdict != report.Fail {
		t.Errorf("3000 vs 3600: %v", c)
	}
}

// The nodes' memtables differ, so that nodes receiving the same writes do not flush in step.
func TestMemTableStagger(t *testing.T) {
	s := shapeFor(4<<20, true, false)
	got := []uint64{s.memTableOf(0), s.memTableOf(1), s.memTableOf(2)}
	if got[0] != 4<<20 || got[1] <= got[0] || got[2] <= got[1] || got[2] > 8<<20 {
		t.Fatalf("memtables %v: want 4 MiB rising by node, under twice that", got)
	}
}
