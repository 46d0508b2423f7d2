// Package jobcmd is `shoal job`: the commands that add, list, show and remove scan jobs (recurring
// counts or exports of a span or a table, each run due by a deadline). It only parses arguments,
// dials a client and prints; the jobs' validation, storage and runs belong to the cluster (package
// node/jobs). Its command shapes and output formats are a contract that scripts rely on.
package jobcmd

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/cmd/shoal/internal/cli"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/server/apijson"
)

// Commands returns the root's `job` command.
func Commands() []*cobra.Command { return []*cobra.Command{jobCmd} }

// Jobs is what the commands need of the cluster (*client.Client); tests replace dial.
type Jobs interface {
	AddJob(ctx context.Context, job *pb.ScanJob) (*pb.ScanJob, string, error)
	RemoveJob(ctx context.Context, name string) (bool, error)
	Jobs(ctx context.Context, name string) ([]*pb.JobState, error)
}

// dial connects to the cluster the root's flags name; ctx bounds the dialing.
var dial = func(ctx context.Context) (Jobs, func() error, error) {
	cfg, err := cli.ClientConfig()
	if err != nil {
		return nil, nil, err
	}
	c, err := client.New(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	return c, c.Close, nil
}

// withJobs dials the cluster and runs fn, under a context bounded by --timeout.
func withJobs(cmd *cobra.Command, fn func(ctx context.Context, j Jobs) error) error {
	if err := cli.ValidateGlobal(cmd, nil); err != nil {
		return err
	}
	parent := cmd.Context()
	if parent == nil {
		parent = context.Background()
	}
	ctx, cancel := context.WithTimeout(parent, cli.Global.Timeout)
	defer cancel()
	j, closeJobs, err := dial(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = closeJobs() }()
	return fn(ctx, j)
}

var jobCmd = &cobra.Command{
	Use:   "job",
	Short: "Recurring scan jobs: counts or exports of a span or a table, each run due by a deadline",
	Long: `A scan job reads a key span (or a table's rows) every period and counts its rows or exports them
to a file; each run must be done a deadline after it is due. The jobs are stored in the cluster and
run by the node leading the meta range, which reads the span range by range at a paced rate. A run
still going when the next is due delays that one (it starts late, never twice at once).`,
	Args: cobra.ArbitraryArgs,
	RunE: cli.GroupRunE,
}

var addFlags struct {
	span, table, output string
	every, deadline     time.Duration
	count               bool
	rate                int64
}

var addCmd = &cobra.Command{
	Use:   "add NAME (--span START..END | --table T) --every D --deadline D (--count | --output DIR)",
	Short: "Add a scan job (its first run is due at once)",
	Long: `Add a scan job. --span START..END reads [START, END) (an empty END reads to the last key);
--table T reads the table's rows (resolved again at every run). --count counts the rows; --output DIR
writes each run's rows as JSON lines ({"key","value"}, non-UTF-8 bytes in base64 with
"key_encoding"/"value_encoding") to DIR/NAME-<due time>.jsonl on the node that runs it (DIR must be
absolute). --rate bounds the run's reads in bytes per second (0: the node's default). A deadline not
shorter than the period is allowed, with a warning. With --format json, print the stored job.`,
	Example: `  shoal job add nightly-users --span user/..user0 --every 24h --deadline 1h --output /var/lib/shoal/exports
  shoal job add orders-count --table orders --every 1h --deadline 10m --count`,
	Args: cli.Args(cobra.ExactArgs(1)),
	RunE: func(cmd *cobra.Command, args []string) error {
		f := addFlags
		job := &pb.ScanJob{Name: args[0], Table: f.table, EveryMs: f.every.Milliseconds(), DeadlineMs: f.deadline.Milliseconds(),
			Count: f.count, OutputDir: f.output, RateBytes: f.rate}
		if f.span != "" {
			start, end, ok := strings.Cut(f.span, "..")
			if !ok {
				return cli.Usage(fmt.Errorf("invalid --span %q: write START..END", f.span))
			}
			job.Start, job.End = []byte(start), []byte(end)
		}
		return withJobs(cmd, func(ctx context.Context, j Jobs) error {
			stored, warning, err := j.AddJob(ctx, job)
			if err != nil {
				return err
			}
			if warning != "" {
				fmt.Fprintln(cmd.ErrOrStderr(), "warning:", warning)
			}
			if cli.JSON() {
				return cli.WriteJSON(cmd.OutOrStdout(), apijson.Job(&pb.JobState{Job: stored, NextDueUnixMs: stored.CreatedUnixMs}))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "added job %s: %s every %v, due within %v\n", stored.Name, what(stored), f.every, f.deadline)
			return nil
		})
	},
}

var listCmd = &cobra.Command{
	Use:   "list",
	Short: "List the scan jobs with their next run and last outcome",
	Long:  `List the scan jobs. With --format json, print an array of the objects 'job status' prints.`,
	Args:  cli.Args(cobra.NoArgs),
	RunE: func(cmd *cobra.Command, _ []string) error {
		return withJobs(cmd, func(ctx context.Context, j Jobs) error {
			jobs, err := j.Jobs(ctx, "")
			if err != nil {
				return err
			}
			out := apijson.JobsJSON(jobs)
			if cli.JSON() {
				return cli.WriteJSON(cmd.OutOrStdout(), out)
			}
			return printList(cmd.OutOrStdout(), out)
		})
	},
}

var statusCmd = &cobra.Command{
	Use:   "status NAME",
	Short: "Show a scan job: the run in progress and the last outcomes",
	Long: `Show a scan job: its settings, the run in progress (rows, bytes and ranges read so far, as its node
last recorded them) and the last runs (started, finished, rows, bytes, on time or late by how much).
With --format json, print the object /api/jobs lists: {"name","span","table","every","deadline","action",
"output_dir","rate_bytes","created","next_due","runs","on_time","late","last_failed","skipped","refused",
"admission","running","last"}; a run has "outcome" (running, on time, late or failed).`,
	Args: cli.Args(cobra.ExactArgs(1)),
	RunE: func(cmd *cobra.Command, args []string) error {
		return withJobs(cmd, func(ctx context.Context, j Jobs) error {
			jobs, err := j.Jobs(ctx, args[0])
			if err != nil {
				return err
			}
			if len(jobs) == 0 {
				return fmt.Errorf("no scan job named %q: `shoal job list` shows them", args[0])
			}
			v := apijson.Job(jobs[0])
			if cli.JSON() {
				return cli.WriteJSON(cmd.OutOrStdout(), v)
			}
			return printStatus(cmd.OutOrStdout(), v)
		})
	},
}

var removeCmd = &cobra.Command{
	Use:   "remove NAME",
	Short: "Remove a scan job and its recorded runs (a run going on stops)",
	Args:  cli.Args(cobra.ExactArgs(1)),
	RunE: func(cmd *cobra.Command, args []string) error {
		return withJobs(cmd, func(ctx context.Context, j Jobs) error {
			found, err := j.RemoveJob(ctx, args[0])
			if err != nil {
				return err
			}
			if !found {
				return fmt.Errorf("no scan job named %q: `shoal job list` shows them", args[0])
			}
			if cli.JSON() {
				return cli.WriteJSON(cmd.OutOrStdout(), map[string]any{"name": args[0], "removed": true})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed job %s\n", args[0])
			return nil
		})
	},
}

func init() {
	f := addCmd.Flags()
	f.StringVar(&addFlags.span, "span", "", "the key span to read, START..END (END empty: to the last key)")
	f.StringVar(&addFlags.table, "table", "", "the table whose rows to read")
	f.DurationVar(&addFlags.every, "every", 0, "the period between runs (at least 1s)")
	f.DurationVar(&addFlags.deadline, "deadline", 0, "how long after it is due a run must be done")
	f.BoolVar(&addFlags.count, "count", false, "count the rows")
	f.StringVar(&addFlags.output, "output", "", "export the rows to this absolute directory on the running node")
	f.Int64Var(&addFlags.rate, "rate", 0, "bytes per second a run reads at most (0: the node's default)")
	jobCmd.AddCommand(addCmd, listCmd, statusCmd, removeCmd)
}

// what says what a job does.
func what(j *pb.ScanJob) string {
	src := fmt.Sprintf("span %s", spanText(j.Start, j.End))
	if j.Table != "" {
		src = "table " + j.Table
	}
	if j.Count {
		return "count the rows of " + src
	}
	return "export " + src + " to " + j.OutputDir
}

func spanText(start, end []byte) string { return fmt.Sprintf("%q..%q", start, end) }

func printList(w io.Writer, jobs []apijson.JobJSON) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tREADS\tEVERY\tDEADLINE\tDOES\tNEXT DUE\tRUNS\tLATE\tLAST")
	for _, j := range jobs {
		src := j.Span.Start + ".." + j.Span.End
		if j.Table != "" {
			src = "table " + j.Table
		}
		last := "-"
		switch {
		case j.Running != nil:
			last = fmt.Sprintf("running on node %d: %d rows", j.Running.Node, j.Running.Rows)
		case len(j.Last) > 0:
			last = outcome(j.Last[0])
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", j.Name, src, j.Every, j.Deadline, j.Action, j.NextDue, j.Runs, j.Late, last)
	}
	return tw.Flush()
}

func outcome(r apijson.RunJSON) string {
	switch {
	case r.Error != "":
		return "failed: " + r.Error
	case r.OnTime:
		return fmt.Sprintf("on time, %d rows", r.Rows)
	default:
		return fmt.Sprintf("late by %v, %d rows", time.Duration(r.LateMs)*time.Millisecond, r.Rows)
	}
}

func printStatus(w io.Writer, j apijson.JobJSON) error {
	fmt.Fprintf(w, "job %s: %s, every %s, due within %s\n", j.Name, j.Action, j.Every, j.Deadline)
	if j.Table != "" {
		fmt.Fprintf(w, "  table %s, span %s..%s\n", j.Table, j.Span.Start, j.Span.End)
	} else {
		fmt.Fprintf(w, "  span %s..%s\n", j.Span.Start, j.Span.End)
	}
	fmt.Fprintf(w, "  created %s, next due %s; %d runs, %d late, %d due times skipped\n", j.Created, j.NextDue, j.Runs, j.Late, j.Skipped)
	if j.Admission != "" {
		fmt.Fprintf(w, "  prefetch plan: %s; %d due times refused\n", j.Admission, j.Refused)
	}
	if r := j.Running; r != nil {
		fmt.Fprintf(w, "  running on node %d since %s (due %s): %d rows, %s, ranges %d of %d read\n",
			r.Node, r.Started, r.Due, r.Rows, cli.HumanBytes(uint64(r.Bytes)), r.RangesDone, r.RangesTotal)
	}
	if len(j.Last) == 0 {
		fmt.Fprintln(w, "  no finished run yet")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  DUE\tSTARTED\tFINISHED\tNODE\tROWS\tBYTES\tOUTCOME")
	for _, r := range j.Last {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%d\t%s\t%s\n", r.Due, r.Started, r.Finished, r.Node, r.Rows, cli.HumanBytes(uint64(r.Bytes)), outcome(r))
	}
	return tw.Flush()
}
