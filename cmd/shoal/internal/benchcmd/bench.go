package benchcmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/magiconair/properties"
	goycsb "github.com/pingcap/go-ycsb/pkg/ycsb"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/bench/ycsb"
	"github.com/shoaldb/shoal/cmd/shoal/internal/cli"
)

// benchCmd groups the benchmark commands.
var benchCmd = &cobra.Command{
	Use:   "bench",
	Short: "Run benchmarks: YCSB workloads against Shoal or a peer system, and compare their reports",
	Args:  cobra.ArbitraryArgs,
	RunE:  cli.GroupRunE,
}

// ycsbFlags are the flags of `bench ycsb`.
var ycsbFlags struct {
	tenants          string
	workload         string
	target           string
	hosts            string
	records          int64
	ops              int64
	threads          int
	rate             float64
	load             bool
	timeline         string
	timelineInterval time.Duration
	maxDuration      time.Duration
	distribution     string
	props            propList
	progressInterval time.Duration
	redisMode        string
	system           string
}

var benchYCSBCmd = &cobra.Command{
	Use:   "ycsb",
	Short: "Run a YCSB workload (core a-f, or write-heavy update and insert): load the records, then run the operations",
	Long: `Run one of YCSB's core workloads with go-ycsb's workload generator: a load phase that inserts
--records records (skip it with --load=false), then a run phase of --ops operations, on --threads
concurrent workers. Each phase stops after --max-duration at the latest.

Workloads (a-f as upstream YCSB defines them; 10 fields of 100 bytes per record):
` + workloadHelp() + `
Targets:
  grpc  Shoal through its gRPC API and Go client (--hosts: node gRPC addresses; default --host)
  table Shoal's tables (shoal table): a YCSB table is a table with a string primary key and bytes
        columns field0…, created on first use; a record is a row (same --hosts as grpc)
  resp  a RESP server through go-ycsb's redis binding (go-redis): Shoal's RESP listeners with
        --redis-mode cluster (the default; --hosts: any of the nodes' RESP addresses, the slot map
        comes from CLUSTER SLOTS), or a single redis-server with --redis-mode plain (--hosts: one
        address; default 127.0.0.1:6379; label the report with --system redis). Records are
        strings (one key holding the record's JSON). Workload e cannot run: the binding has no
        range scans.
  etcd  an etcd cluster through go-ycsb's etcd binding (--hosts: client URLs' host:port)

The report gives the throughput and, per operation, count, errors and p50/p95/p99/p99.9 latency in
milliseconds (from HdrHistograms); --format json prints it as one JSON object, --timeline FILE
writes points (throughput, p50, p99) as JSON, one a second or one per --timeline-interval. Progress goes to stderr. Extra go-ycsb
properties can be set with --prop (e.g. --prop writeallfields=true, --prop fieldlength=1000).

Each record is one key (TABLE/KEY) holding all its fields. A YCSB update writes one field by
default: Shoal's binding merges it into the record with a read and a compare-and-swap, while
go-ycsb's etcd binding overwrites the record with that field alone. With --prop writeallfields=true
every update writes the whole record, a single put on both, which is how scripts/bench-peers.sh
compares them (go-ycsb's redis binding reads and rewrites the record on a partial update, and SETs
it on a whole one).`,
	Example: `  shoal bench ycsb --workload a --hosts 127.0.0.1:26257 --records 10000 --ops 100000 --threads 16
  shoal bench ycsb --workload b --target etcd --hosts 127.0.0.1:2379 --format json > etcd-b.json
  shoal bench ycsb --workload c --target resp --hosts 127.0.0.1:6380,127.0.0.1:6381,127.0.0.1:6382
  shoal bench ycsb --workload c --target resp --redis-mode plain --hosts 127.0.0.1:6379 --system redis`,
	Args: cli.Args(cobra.NoArgs),
	RunE: runBenchYCSB,
}

// compareFlags are the flags of `bench compare`.
var compareFlags struct {
	baseline string
	title    string
	notes    propList
	out      string
}

var benchCompareCmd = &cobra.Command{
	Use:     "compare REPORT.json...",
	Short:   "Render YCSB reports (bench ycsb --format json) as a Markdown comparison against a baseline system",
	Example: `  shoal bench compare --baseline etcd --out docs/benchmarks.md bench-results/*.json`,
	Args:    cli.Args(cobra.MinimumNArgs(1)),
	RunE:    runBenchCompare,
}

func init() {
	f := benchYCSBCmd.Flags()
	f.StringVar(&ycsbFlags.workload, "workload", "a", "workload: a, b, c, d, e, f (YCSB's core), update or insert (write-heavy)")
	f.StringVar(&ycsbFlags.target, "target", ycsb.TargetGRPC, "system to benchmark: grpc, table, resp or etcd")
	f.StringVar(&ycsbFlags.hosts, "hosts", "", "comma-separated addresses of the target (default: --host for grpc, 127.0.0.1:6379 for resp, 127.0.0.1:2379 for etcd)")
	f.StringVar(&ycsbFlags.redisMode, "redis-mode", ycsb.RedisModeCluster, "client mode of --target resp: cluster (Redis Cluster client: CLUSTER SLOTS, MOVED) or plain (one connection pool to one address)")
	f.StringVar(&ycsbFlags.system, "system", "", "system name in the report (default: shoal for grpc and resp, etcd for etcd; e.g. redis for resp against a redis-server)")
	f.Int64Var(&ycsbFlags.records, "records", 10000, "records to load and to choose keys from")
	f.Int64Var(&ycsbFlags.ops, "ops", 100000, "operations of the run phase")
	f.IntVar(&ycsbFlags.threads, "threads", 16, "concurrent workers")
	f.Float64Var(&ycsbFlags.rate, "rate", 0, "pace the run phase at this many operations a second over all workers, as YCSB's target does (0: as fast as the store answers)")
	f.BoolVar(&ycsbFlags.load, "load", true, "run the load phase before the run phase")
	f.StringVar(&ycsbFlags.timeline, "timeline", "", "write a timeline of both phases to this JSON file (a point per --timeline-interval: operations, throughput, p50 and p99)")
	f.DurationVar(&ycsbFlags.timelineInterval, "timeline-interval", time.Second, "the length of one point of --timeline (at least 10ms)")
	f.DurationVar(&ycsbFlags.maxDuration, "max-duration", ycsb.DefaultMaxDuration, "stop each phase after this long")
	f.StringVar(&ycsbFlags.tenants, "tenants", "", "run several workloads at once, each on its own key prefix (a tenant), reported apart: WORKLOAD[:DISTRIBUTION],... e.g. a:zipfian,e:uniform,c:hotspot (replaces --workload and --distribution)")
	f.StringVar(&ycsbFlags.distribution, "distribution", "", "request distribution (uniform, zipfian, latest, hotspot, sequential, exponential); default: the workload's")
	f.Var(&ycsbFlags.props, "prop", "go-ycsb property KEY=VALUE, overriding the workload's (repeatable)")
	f.DurationVar(&ycsbFlags.progressInterval, "progress-interval", ycsb.DefaultProgressInterval, "how often to print progress on stderr")

	c := benchCompareCmd.Flags()
	c.StringVar(&compareFlags.baseline, "baseline", ycsb.TargetEtcd, "system the others are compared with")
	c.StringVar(&compareFlags.title, "title", "Benchmarks", "document title")
	c.Var(&compareFlags.notes, "note", "a line for the document's Setup section (repeatable)")
	c.StringVar(&compareFlags.out, "out", "", "write the document to this file instead of stdout")

	benchCmd.AddCommand(benchYCSBCmd, benchCompareCmd)
}

func workloadHelp() string {
	var b strings.Builder
	for _, w := range ycsb.Workloads() {
		fmt.Fprintf(&b, "  %s  %s\n", w, ycsb.DescribeWorkload(w))
	}
	return b.String()
}

// propList is a repeatable string flag. Its default prints as "", and setting "" empties it, so that
// resetting a flag to its default (as tests do) clears it.
type propList []string

func (p *propList) String() string { return strings.Join(*p, ",") }
func (p *propList) Type() string   { return "stringArray" }
func (p *propList) Set(v string) error {
	if v == "" {
		*p = nil
		return nil
	}
	*p = append(*p, v)
	return nil
}

func runBenchYCSB(cmd *cobra.Command, _ []string) error {
	if err := cli.ValidateGlobal(cmd, nil); err != nil {
		return err
	}
	fl := ycsbFlags
	cfg, err := ycsbConfig(cmd)
	if err != nil {
		return err
	}
	p, err := cfg.Properties()
	if err != nil {
		return cli.Usage(err)
	}

	parent := cmd.Context()
	if parent == nil {
		parent = context.Background()
	}
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	defer stop()

	db, err := openYCSB(ctx, cfg, p)
	if err != nil {
		return err
	}
	defer db.Close()
	if fl.target == ycsb.TargetEtcd && ycsb.IsScanWorkload(fl.workload) {
		fmt.Fprintln(cmd.ErrOrStderr(), "warning: go-ycsb's etcd binding fails its scans (it compares the range's total key count with the scan limit); expect SCAN errors")
	}
	if fl.tenants != "" {
		return runTenants(cmd, ctx, fl.tenants, cfg, db)
	}
	rep, runErr := ycsb.Run(ctx, cfg, db)
	if rep == nil {
		return runErr
	}
	if err := writeYCSBReport(cmd, rep); err != nil {
		return err
	}
	if runErr != nil {
		if errors.Is(runErr, context.Canceled) {
			return errors.New("interrupted: the report covers the operations done so far")
		}
		return runErr
	}
	return nil
}

// ycsbConfig checks the flags of `bench ycsb` and makes the run's configuration; a bad flag is a
// usage error.
func ycsbConfig(cmd *cobra.Command) (ycsb.Config, error) {
	fl := ycsbFlags
	switch fl.target {
	case ycsb.TargetGRPC, ycsb.TargetTable, ycsb.TargetEtcd, ycsb.TargetRESP:
	default:
		return ycsb.Config{}, cli.Usage(fmt.Errorf("invalid --target %q: use grpc, table, resp or etcd", fl.target))
	}
	redisMode := ""
	switch {
	case fl.target == ycsb.TargetRESP:
		if fl.redisMode != ycsb.RedisModeCluster && fl.redisMode != ycsb.RedisModePlain {
			return ycsb.Config{}, cli.Usage(fmt.Errorf("invalid --redis-mode %q: use cluster or plain", fl.redisMode))
		}
		redisMode = fl.redisMode
	case cmd.Flags().Changed("redis-mode"):
		return ycsb.Config{}, cli.Usage(fmt.Errorf("--redis-mode applies to --target resp only"))
	}
	props := map[string]string{}
	for _, kv := range fl.props {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return ycsb.Config{}, cli.Usage(fmt.Errorf("invalid --prop %q: use KEY=VALUE", kv))
		}
		props[strings.TrimSpace(k)] = v
	}
	if fl.distribution != "" {
		props["requestdistribution"] = fl.distribution
	}
	if fl.timelineInterval < 10*time.Millisecond {
		return ycsb.Config{}, cli.Usage(fmt.Errorf("invalid --timeline-interval %v: must be at least 10ms", fl.timelineInterval))
	}
	if fl.maxDuration <= 0 {
		return ycsb.Config{}, cli.Usage(fmt.Errorf("invalid --max-duration %v: must be positive", fl.maxDuration))
	}
	if fl.progressInterval <= 0 {
		return ycsb.Config{}, cli.Usage(fmt.Errorf("invalid --progress-interval %v: must be positive", fl.progressInterval))
	}
	hostList := fl.hosts
	if hostList == "" && fl.target == ycsb.TargetGRPC {
		hostList = cli.Global.Host
	}
	hosts := splitHosts(hostList)
	if len(hosts) == 0 {
		hosts = ycsb.DefaultHosts(fl.target)
	}
	cfg := ycsb.Config{
		Workload: fl.workload, Target: fl.target, Hosts: hosts, System: strings.TrimSpace(fl.system), RedisMode: redisMode,
		Records: fl.records, Ops: fl.ops, Threads: fl.threads, Rate: fl.rate, Load: fl.load,
		MaxDuration: fl.maxDuration, Timeline: fl.timeline != "", TimelineInterval: fl.timelineInterval, Props: props,
		Progress: cmd.ErrOrStderr(), ProgressInterval: fl.progressInterval,
	}
	return cfg, nil
}

// openYCSB opens the run's binding and checks that its target answers (30 s at most).
func openYCSB(ctx context.Context, cfg ycsb.Config, p *properties.Properties) (goycsb.DB, error) {
	fl, hosts := ycsbFlags, cfg.Hosts
	db, err := ycsb.Open(fl.target, hosts, cli.Global.AuthToken, p)
	if err != nil {
		if fl.target == ycsb.TargetRESP { // the redis binding pings its server when it is created
			return nil, fmt.Errorf("%s at %s does not answer: %w", fl.target, strings.Join(hosts, ","), err)
		}
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = ycsb.Probe(pctx, db, p)
	cancel()
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("%s at %s does not answer: %w", fl.target, strings.Join(hosts, ","), err)
	}
	return db, nil
}

// writeYCSBReport writes the run's timeline (--timeline) and its report, as text or JSON, and warns
// of failed operations.
func writeYCSBReport(cmd *cobra.Command, rep *ycsb.Report) error {
	fl := ycsbFlags
	if fl.timeline != "" {
		b, err := json.MarshalIndent(rep.Timeline, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(fl.timeline, append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("write timeline: %w", err)
		}
		rep.Timeline = nil
	}
	out := cmd.OutOrStdout()
	if cli.JSON() {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		printReport(out, rep)
	}
	if rep.Errors > 0 || (rep.Load != nil && rep.Load.Errors > 0) {
		sample := rep.ErrorSample
		if sample == "" && rep.Load != nil {
			sample = rep.Load.ErrorSample
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: some operations failed, e.g. %s\n", sample)
	}
	return nil
}

// printReport writes rep as text.
func printReport(w io.Writer, rep *ycsb.Report) {
	fmt.Fprintf(w, "YCSB workload %s (%s) on %s at %s\n", strings.ToUpper(rep.Workload), ycsb.DescribeWorkload(rep.Workload),
		rep.Target, strings.Join(rep.Hosts, ","))
	fmt.Fprintf(w, "records %d, threads %d, request distribution %s\n\n", rep.Records, rep.Threads, rep.Distribution)
	phase := func(name string, ops, errs int64, dur, tput float64, truncated bool) {
		t := ""
		if truncated {
			t = " (stopped early)"
		}
		fmt.Fprintf(w, "%-5s %d ops in %.2fs: %.0f ops/s, %d errors%s\n", name+":", ops, dur, tput, errs, t)
	}
	if rep.Load != nil {
		phase("load", rep.Load.Ops, rep.Load.Errors, rep.Load.DurationS, rep.Load.Throughput, rep.Load.Truncated)
	}
	phase("run", rep.Ops, rep.Errors, rep.DurationS, rep.Throughput, rep.Truncated)
	fmt.Fprintln(w)
	type line struct {
		name string
		s    ycsb.OpStats
	}
	var lines []line
	if rep.Load != nil {
		for _, op := range (&ycsb.Report{Operations: rep.Load.Operations}).OpNames() {
			lines = append(lines, line{"load " + op, rep.Load.Operations[op]})
		}
	}
	for _, op := range rep.OpNames() {
		lines = append(lines, line{op, rep.Operations[op]})
	}
	width := len("OPERATION")
	for _, l := range lines {
		width = max(width, len(l.name))
	}
	fmt.Fprintf(w, "%-*s %9s %7s %8s %8s %8s %8s %9s %8s\n", width, "OPERATION", "COUNT", "ERRORS", "AVG(ms)", "P50(ms)", "P95(ms)", "P99(ms)", "P99.9(ms)", "MAX(ms)")
	for _, l := range lines {
		s := l.s
		fmt.Fprintf(w, "%-*s %9d %7d %8.2f %8.2f %8.2f %8.2f %9.2f %8.2f\n", width, l.name, s.Count, s.Errors, s.AvgMs, s.P50Ms, s.P95Ms, s.P99Ms, s.P999Ms, s.MaxMs)
	}
}

func runBenchCompare(cmd *cobra.Command, files []string) error {
	var reports []*ycsb.Report
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var r ycsb.Report
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("%s: not a bench ycsb JSON report: %w", f, err)
		}
		if r.Workload == "" || r.System == "" {
			return fmt.Errorf("%s: not a bench ycsb JSON report (no workload or system)", f)
		}
		reports = append(reports, &r)
	}
	doc := ycsb.Compare(reports, ycsb.CompareOptions{Title: compareFlags.title, Baseline: compareFlags.baseline, Notes: compareFlags.notes})
	if compareFlags.out == "" {
		_, err := io.WriteString(cmd.OutOrStdout(), doc)
		return err
	}
	return os.WriteFile(compareFlags.out, []byte(doc), 0o644)
}

// runTenants is bench ycsb --tenants: the tenants' workloads at once, a report each.
func runTenants(cmd *cobra.Command, ctx context.Context, spec string, base ycsb.Config, db goycsb.DB) error {
	if base.Timeline {
		return cli.Usage(errors.New("--timeline is for one workload; drop it with --tenants"))
	}
	base.Progress = nil // one progress line per tenant would interleave
	tenants, err := ycsb.ParseTenants(spec, base)
	if err != nil {
		return cli.Usage(fmt.Errorf("--tenants: %w", err))
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "running %d tenants at once...\n", len(tenants))
	reps, runErr := ycsb.RunTenants(ctx, tenants, db)
	out := cmd.OutOrStdout()
	if cli.JSON() {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(reps); err != nil {
			return err
		}
	} else {
		for i, rep := range reps {
			if rep != nil {
				fmt.Fprintf(out, "== tenant %s\n", tenants[i].Name)
				printReport(out, rep)
			}
		}
	}
	return runErr
}

// splitHosts is a comma-separated list of addresses, blanks dropped.
func splitHosts(list string) []string {
	var out []string
	for _, h := range strings.Split(list, ",") {
		if h = strings.TrimSpace(h); h != "" {
			out = append(out, h)
		}
	}
	return out
}
