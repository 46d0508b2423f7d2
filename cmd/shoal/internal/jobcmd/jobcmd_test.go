package jobcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/cmd/shoal/internal/cli"
	"github.com/shoaldb/shoal/pb"
)

// fakeJobs keeps jobs in memory and the last job added.
type fakeJobs struct {
	jobs  map[string]*pb.JobState
	added *pb.ScanJob
}

func (f *fakeJobs) AddJob(_ context.Context, job *pb.ScanJob) (*pb.ScanJob, string, error) {
	f.added = job
	job.CreatedUnixMs = t0.UnixMilli()
	f.jobs[job.Name] = &pb.JobState{Job: job}
	warning := ""
	if job.DeadlineMs >= job.EveryMs {
		warning = "deadline not shorter than the period"
	}
	return job, warning, nil
}

func (f *fakeJobs) RemoveJob(_ context.Context, name string) (bool, error) {
	_, ok := f.jobs[name]
	delete(f.jobs, name)
	return ok, nil
}

func (f *fakeJobs) Jobs(_ context.Context, name string) ([]*pb.JobState, error) {
	var out []*pb.JobState
	for n, st := range f.jobs {
		if name == "" || n == name {
			out = append(out, st)
		}
	}
	return out, nil
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// run executes `shoal ARGS…` against f with a root that has the real root's client flags.
func run(t *testing.T, f *fakeJobs, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	dial = func(context.Context) (Jobs, func() error, error) { return f, func() error { return nil }, nil }
	root := &cobra.Command{Use: "shoal", SilenceUsage: true, SilenceErrors: true}
	pf := root.PersistentFlags()
	pf.StringVar(&cli.Global.Host, "host", "127.0.0.1:26257", "")
	pf.StringVar(&cli.Global.Format, "format", "text", "")
	pf.DurationVar(&cli.Global.Timeout, "timeout", 10*time.Second, "")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return cli.Usage(err) })
	root.AddCommand(Commands()...)
	addFlags.span, addFlags.table, addFlags.output, addFlags.every, addFlags.deadline, addFlags.count, addFlags.rate = "", "", "", 0, 0, false, 0
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err = root.Execute()
	for _, c := range Commands() {
		root.RemoveCommand(c)
	}
	return out.String(), errOut.String(), err
}

func TestAdd(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		want     *pb.ScanJob // nil: refused before any call
		usage    bool
		stdout   string
		warnings string
	}{
		{name: "span count", args: []string{"job", "add", "c", "--span", "a..b", "--every", "1h", "--deadline", "10m", "--count"},
			want:   &pb.ScanJob{Name: "c", Start: []byte("a"), End: []byte("b"), EveryMs: 3600000, DeadlineMs: 600000, Count: true},
			stdout: "added job c: count the rows of span \"a\"..\"b\" every 1h0m0s, due within 10m0s\n"},
		{name: "open span export", args: []string{"job", "add", "x", "--span", "a..", "--every", "1m", "--deadline", "2m", "--output", "/tmp/e", "--rate", "1000"},
			want:     &pb.ScanJob{Name: "x", Start: []byte("a"), EveryMs: 60000, DeadlineMs: 120000, OutputDir: "/tmp/e", RateBytes: 1000},
			warnings: "warning: deadline not shorter than the period\n"},
		{name: "table", args: []string{"job", "add", "t", "--table", "orders", "--every", "1h", "--deadline", "1m", "--count"},
			want: &pb.ScanJob{Name: "t", Table: "orders", EveryMs: 3600000, DeadlineMs: 60000, Count: true}},
		{name: "span without ..", args: []string{"job", "add", "c", "--span", "ab", "--every", "1h", "--deadline", "1m", "--count"}, usage: true},
		{name: "no name", args: []string{"job", "add", "--span", "a..b"}, usage: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeJobs{jobs: map[string]*pb.JobState{}}
			stdout, stderr, err := run(t, f, tc.args...)
			if tc.usage {
				var u cli.UsageError
				if !errors.As(err, &u) || f.added != nil {
					t.Fatalf("err = %v (added %v), want a usage error before any call", err, f.added)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := proto(f.added)
			if want := proto(tc.want); got.String() != want.String() {
				t.Fatalf("sent %v, want %v", got, want)
			}
			if tc.stdout != "" && stdout != tc.stdout {
				t.Fatalf("stdout %q, want %q", stdout, tc.stdout)
			}
			if stderr != tc.warnings {
				t.Fatalf("stderr %q, want %q", stderr, tc.warnings)
			}
		})
	}
}

// proto copies the fields a command sets.
func proto(j *pb.ScanJob) *pb.ScanJob {
	return &pb.ScanJob{Name: j.Name, Start: j.Start, End: j.End, Table: j.Table, EveryMs: j.EveryMs, DeadlineMs: j.DeadlineMs,
		Count: j.Count, OutputDir: j.OutputDir, RateBytes: j.RateBytes}
}

// TestStatusListRemove pins the JSON shape of status and list, the text of a late run, and the
// errors for a job that does not exist.
func TestStatusListRemove(t *testing.T) {
	f := &fakeJobs{jobs: map[string]*pb.JobState{"c": {
		Job:           &pb.ScanJob{Name: "c", Start: []byte("a"), End: []byte("b"), EveryMs: 2000, DeadlineMs: 1000, Count: true, CreatedUnixMs: t0.UnixMilli()},
		NextDueUnixMs: t0.Add(4 * time.Second).UnixMilli(), Runs: 2, Late: 1,
		Running: &pb.JobRun{DueUnixMs: t0.Add(2 * time.Second).UnixMilli(), StartedUnixMs: t0.Add(2 * time.Second).UnixMilli(), NodeId: 3, Rows: 5, RangesDone: 1, RangesTotal: 2},
		Last: []*pb.JobRun{{DueUnixMs: t0.UnixMilli(), StartedUnixMs: t0.UnixMilli(), FinishedUnixMs: t0.Add(1500 * time.Millisecond).UnixMilli(),
			NodeId: 1, Rows: 10, Bytes: 100, LateMs: 500}},
	}}}
	out, _, err := run(t, f, "job", "status", "c", "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"name", "span", "every", "deadline", "action", "created", "next_due", "runs", "late", "skipped", "running", "last"} {
		if _, ok := v[k]; !ok {
			t.Fatalf("status JSON lacks %q: %s", k, out)
		}
	}
	if v["every"] != "2s" || v["action"] != "count" || v["running"].(map[string]any)["rows"] != 5.0 {
		t.Fatalf("status JSON: %s", out)
	}
	out, _, err = run(t, f, "job", "status", "c")
	if err != nil || !strings.Contains(out, "late by 500ms, 10 rows") || !strings.Contains(out, "running on node 3") || !strings.Contains(out, "ranges 1 of 2") {
		t.Fatalf("status text: %q, %v", out, err)
	}
	out, _, err = run(t, f, "job", "list", "--format", "json")
	if err != nil || !strings.HasPrefix(out, "[{") {
		t.Fatalf("list JSON: %q, %v", out, err)
	}
	if _, _, err := run(t, f, "job", "status", "nope"); err == nil || !strings.Contains(err.Error(), "no scan job named") {
		t.Fatalf("status of a missing job: %v", err)
	}
	if out, _, err := run(t, f, "job", "remove", "c"); err != nil || out != "removed job c\n" {
		t.Fatalf("remove: %q, %v", out, err)
	}
	if _, _, err := run(t, f, "job", "remove", "c"); err == nil || !strings.Contains(err.Error(), "no scan job named") {
		t.Fatalf("second remove: %v", err)
	}
}
