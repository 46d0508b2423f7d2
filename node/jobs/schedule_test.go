package jobs

import (
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/pb"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestDecide(t *testing.T) {
	const every = 10 * time.Second
	job := &pb.ScanJob{EveryMs: every.Milliseconds(), CreatedUnixMs: t0.UnixMilli()}
	at := func(k float64) time.Time { return t0.Add(time.Duration(k * float64(every))) }
	for _, tc := range []struct {
		name string
		next time.Time // zero: before the first run
		busy bool
		now  time.Time
		want Decision
	}{
		{name: "first run due at creation", now: t0, want: Decision{Start: true, Due: t0, Next: at(1)}},
		{name: "first run, a tick late", now: at(0.1), want: Decision{Start: true, Due: t0, Next: at(1)}},
		{name: "not due yet", next: at(1), now: at(0.9)},
		{name: "due exactly now", next: at(1), now: at(1), want: Decision{Start: true, Due: at(1), Next: at(2)}},
		{name: "due but the last run still goes", next: at(1), busy: true, now: at(1.5)},
		{name: "the last run overran: start late for the same due time", next: at(2), now: at(2.5), want: Decision{Start: true, Due: at(2), Next: at(3)}},
		{name: "nobody ran it for a while: the latest due time, the others skipped", next: at(1), now: at(3.2), want: Decision{Start: true, Due: at(3), Next: at(4), Skipped: 2}},
		{name: "a next due time before creation is ignored", next: at(-3), now: t0, want: Decision{Start: true, Due: t0, Next: at(1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Decide(job, tc.next, tc.busy, tc.now)
			if got.Start != tc.want.Start || !got.Due.Equal(tc.want.Due) || !got.Next.Equal(tc.want.Next) || got.Skipped != tc.want.Skipped {
				t.Fatalf("Decide = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestLateness(t *testing.T) {
	for _, tc := range []struct {
		name     string
		finished time.Duration // after due
		deadline time.Duration
		onTime   bool
		late     time.Duration
	}{
		{"well before", time.Second, time.Minute, true, 0},
		{"exactly at the deadline", time.Minute, time.Minute, true, 0},
		{"late", 90 * time.Second, time.Minute, false, 30 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			onTime, late := Lateness(t0, tc.deadline, t0.Add(tc.finished))
			if onTime != tc.onTime || late != tc.late {
				t.Fatalf("Lateness = %v, %v; want %v, %v", onTime, late, tc.onTime, tc.late)
			}
		})
	}
}

func TestHeldElsewhere(t *testing.T) {
	const stale = 5 * time.Second
	run := func(node uint64, silent time.Duration) *pb.JobRun {
		return &pb.JobRun{NodeId: node, ProgressUnixMs: t0.Add(-silent).UnixMilli()}
	}
	for _, tc := range []struct {
		name string
		run  *pb.JobRun
		want bool
	}{
		{"no run", nil, false},
		{"another node, recording progress", run(2, time.Second), true},
		{"another node, silent too long", run(2, 6*time.Second), false},
		{"this node's run it no longer knows (a restart)", run(1, 0), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := heldElsewhere(tc.run, 1, t0, stale); got != tc.want {
				t.Fatalf("heldElsewhere = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRunGoing: a run this node ran when the tick read the job's state counts as going even once it has
// ended, so that the tick never abandons it over the outcome it recorded meanwhile.
func TestRunGoing(t *testing.T) {
	const stale = 5 * time.Second
	mine := &pb.JobRun{NodeId: 1, ProgressUnixMs: t0.UnixMilli()}
	for _, tc := range []struct {
		name               string
		running, ranAtRead bool
		run                *pb.JobRun
		want               bool
	}{
		{"running here now", true, true, mine, true},
		{"ended between the read and the check: the state read is stale", false, true, mine, true},
		{"not running here at the read: the state read is its last", false, false, mine, false},
		{"another node's, recording progress", false, false, &pb.JobRun{NodeId: 2, ProgressUnixMs: t0.UnixMilli()}, true},
		{"no run", false, false, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := runGoing(tc.running, tc.ranAtRead, tc.run, 1, t0, stale); got != tc.want {
				t.Fatalf("runGoing = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	good := func() *pb.ScanJob {
		return &pb.ScanJob{Name: "j", Start: []byte("a"), End: []byte("b"), EveryMs: 60000, DeadlineMs: 10000, Count: true}
	}
	for _, tc := range []struct {
		name    string
		edit    func(j *pb.ScanJob)
		err     string // "" when valid
		warning string
	}{
		{name: "valid", edit: func(*pb.ScanJob) {}},
		{name: "open end", edit: func(j *pb.ScanJob) { j.End = nil }},
		{name: "table", edit: func(j *pb.ScanJob) { j.Start, j.End, j.Table = nil, nil, "t" }},
		{name: "no name", edit: func(j *pb.ScanJob) { j.Name = "" }, err: "needs a name"},
		{name: "bad name", edit: func(j *pb.ScanJob) { j.Name = "a b" }, err: "use letters"},
		{name: "empty span", edit: func(j *pb.ScanJob) { j.End = []byte("a") }, err: "is empty"},
		{name: "reversed span", edit: func(j *pb.ScanJob) { j.Start = []byte("c") }, err: "is empty"},
		{name: "span and table", edit: func(j *pb.ScanJob) { j.Table = "t" }, err: "not both"},
		{name: "nothing to read", edit: func(j *pb.ScanJob) { j.Start, j.End = nil, nil }, err: "--span"},
		{name: "negative deadline", edit: func(j *pb.ScanJob) { j.DeadlineMs = -1 }, err: "must not be negative"},
		{name: "negative rate", edit: func(j *pb.ScanJob) { j.RateBytes = -1 }, err: "must not be negative"},
		{name: "period too short", edit: func(j *pb.ScanJob) { j.EveryMs = 10 }, err: "at least 1s"},
		{name: "no deadline", edit: func(j *pb.ScanJob) { j.DeadlineMs = 0 }, err: "positive deadline"},
		{name: "count and export", edit: func(j *pb.ScanJob) { j.OutputDir = "/tmp/x" }, err: "not both"},
		{name: "neither count nor export", edit: func(j *pb.ScanJob) { j.Count = false }, err: "--count or --output"},
		{name: "relative output", edit: func(j *pb.ScanJob) { j.Count, j.OutputDir = false, "out" }, err: "absolute"},
		{name: "deadline as long as the period", edit: func(j *pb.ScanJob) { j.DeadlineMs = j.EveryMs }, warning: "not shorter than the period"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := good()
			tc.edit(j)
			warning, err := check(j)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("check: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "INVALID_ARGUMENT")):
				t.Fatalf("check = %v, want an INVALID_ARGUMENT error with %q", err, tc.err)
			case !strings.Contains(warning, tc.warning) || (tc.warning == "" && warning != ""):
				t.Fatalf("warning = %q, want %q", warning, tc.warning)
			}
		})
	}
}
