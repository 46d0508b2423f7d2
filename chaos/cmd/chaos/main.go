// Command chaos runs Shoal's chaos suite N times and prints a summary table (see package chaos and
// docs/design/chaos.md). `make chaos` runs it; every run prints its seed first, and
// `-seed S -runs 1` replays run S.
//
// Runs are numbered by seed: without -seed the first seed comes from the clock and the others follow
// it (seed, seed+1, …). A failed run's node logs and porcupine visualization are kept under -out.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/shoaldb/shoal/chaos"
)

func main() {
	os.Exit(run())
}

func run() int {
	var (
		runs     = flag.Int("runs", 50, "number of runs")
		seed     = flag.Uint64("seed", 0, "seed of the first run (0: from the clock); -seed S -runs 1 replays run S")
		duration = flag.Duration("duration", 30*time.Second, "workload time under the nemesis, per run")
		minAcked = flag.Int("min-acked", 0, "acknowledged writes a run must see: one with fewer goes on under the nemesis for them, up to twice -duration")
		mode     = flag.String("mode", "auto", "auto, netns or loopback")
		nodes    = flag.Int("nodes", 3, "nodes per cluster")
		workers  = flag.Int("workers", 6, "concurrent clients")
		bin      = flag.String("bin", "bin/shoal", "shoal binary the nodes run (CGO_ENABLED=0 build)")
		out      = flag.String("out", "bench-results/chaos", "directory for the logs and visualizations of failed runs")
		verbose  = flag.Bool("v", false, "print every run's progress lines, not only those of failed runs")
		failFast = flag.Bool("failfast", false, "stop after the first failed run")
		keep     = flag.Bool("keep", false, "keep the logs of every run under -out, not only those of failed runs")
		overload = flag.String("overload", "after", "the overload benchmark (admission control on vs off, peak RSS per node): after the runs, only (no runs), or off")
		ovFactor = flag.Float64("overload-factor", 10, "overload: offered write rate as a multiple of the sustainable one")
		ovDur    = flag.Duration("overload-duration", 30*time.Second, "overload: how long the overload is offered")
		ovValue  = flag.Int("overload-value-bytes", 1024, "overload: size of each written value")
		ovTO     = flag.Duration("overload-timeout", 10*time.Second, "overload: each offered write's deadline")
		ovArgs   = flag.String("overload-node-args", "", "overload: more `shoal start` flags for every node, space-separated (e.g. \"--max-inflight-writes 512\")")
	)
	flag.Parse()
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano()) % 1_000_000_000
	}
	binPath, err := filepath.Abs(*bin)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if _, err := os.Stat(binPath); err != nil {
		fmt.Fprintf(os.Stderr, "chaos: %v (run make build first)\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	switch *overload {
	case "after", "only", "off":
	default:
		fmt.Fprintf(os.Stderr, "chaos: -overload %q: use after, only or off\n", *overload)
		return 2
	}
	if *overload == "only" {
		*runs = 0
	}
	fmt.Printf("chaos: %d runs, seeds %d..%d, %v each, %d nodes, mode %s\n", *runs, *seed, *seed+uint64(*runs)-1, *duration, *nodes, *mode)
	start := time.Now()
	var reports []*chaos.Report
	failed := 0
	for i := 0; i < *runs && ctx.Err() == nil; i++ {
		s := *seed + uint64(i)
		fmt.Printf("=== run %d/%d seed %d\n", i+1, *runs, s)
		base := chaos.Config{Bin: binPath, Mode: *mode, Nodes: *nodes, Workers: *workers, Duration: *duration, MinAcked: *minAcked}
		rep, err := one(ctx, s, base, *out, *verbose, *keep)
		if rep == nil {
			rep = &chaos.Report{Seed: s}
		}
		if err != nil {
			rep.Problems = append(rep.Problems, "run: "+err.Error())
		}
		fmt.Println(rep.Summary())
		reports = append(reports, rep)
		if !rep.OK() {
			failed++
			if *failFast {
				break
			}
		}
	}
	if *runs > 0 {
		printTable(reports, time.Since(start))
	}
	overloadFailed := false
	if *overload != "off" && ctx.Err() == nil {
		overloadFailed = !overloadBench(ctx, binPath, *out, *ovFactor, *ovDur, *ovValue, *ovTO, strings.Fields(*ovArgs))
	}
	if ctx.Err() != nil {
		fmt.Println("chaos: interrupted")
		return 1
	}
	if failed > 0 {
		fmt.Printf("chaos: %d of %d runs FAILED (logs under %s)\n", failed, len(reports), *out)
		return 1
	}
	if overloadFailed {
		return 1
	}
	fmt.Printf("chaos: all %d runs passed\n", len(reports))
	return 0
}

// overloadBench runs the overload benchmark, prints its table and writes it to out/overload.txt;
// false if it failed or lost an acknowledged write.
func overloadBench(ctx context.Context, bin, out string, factor float64, d time.Duration, valueBytes int, timeout time.Duration, nodeArgs []string) bool {
	fmt.Printf("=== overload benchmark: %.0fx the sustainable write rate for %v, admission on then off\n", factor, d)
	dir, err := os.MkdirTemp("", "shoal-overload-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return false
	}
	defer os.RemoveAll(dir)
	rep, err := chaos.RunOverload(ctx, chaos.OverloadConfig{Bin: bin, Dir: dir, Factor: factor, Duration: d, ValueBytes: valueBytes, RequestTimeout: timeout, NodeArgs: nodeArgs, ProfileDir: out, Log: os.Stdout})
	ok := err == nil
	if rep != nil {
		table := rep.Table()
		fmt.Print(table)
		if werr := os.MkdirAll(out, 0o755); werr == nil {
			_ = os.WriteFile(filepath.Join(out, "overload.txt"), []byte(table), 0o644)
		}
		for _, p := range rep.Phases {
			if p.Lost > 0 {
				fmt.Printf("overload: admission %v lost %d acknowledged writes\n", p.Admission, p.Lost)
				ok = false
			}
		}
	}
	if err != nil {
		fmt.Printf("overload: %v\n", err)
	}
	return ok
}

// slowAfter is the unavailability (max-gap or recovery) beyond which a passing run's logs are kept.
const slowAfter = 15 * time.Second

// one runs seed s of the run base describes in a temporary directory, keeping its logs under out if
// it fails.
func one(ctx context.Context, s uint64, base chaos.Config, out string, verbose, keepAll bool) (*chaos.Report, error) {
	dir, err := os.MkdirTemp("", fmt.Sprintf("shoal-chaos-%d-", s))
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var log strings.Builder
	w := &tee{buf: &log, verbose: verbose}
	cfg := base
	cfg.Seed, cfg.Dir, cfg.Log = s, dir, w
	rep, err := chaos.Run(ctx, cfg)
	failed := err != nil || rep == nil || !rep.OK()
	// A run that passed but left the workload without a successful operation, or the cluster
	// unhealthy after the final heal, for a long time is worth a look: its logs are kept too.
	slow := rep != nil && (rep.MaxGap > slowAfter || rep.Recovery > slowAfter)
	if slow {
		fmt.Printf("SLOW: max-gap %.1fs from %.1fs, recovery %.1fs\n", rep.MaxGap.Seconds(), rep.GapAt.Seconds(), rep.Recovery.Seconds())
	}
	if failed || slow || keepAll {
		keep := filepath.Join(out, fmt.Sprintf("seed-%d", s))
		if kerr := chaos.KeepLogs(dir, keep); kerr == nil {
			os.WriteFile(filepath.Join(keep, "run.log"), []byte(log.String()), 0o644)
		}
		if failed && !verbose {
			fmt.Print(log.String())
		}
		fmt.Printf("logs kept in %s\n", keep)
	}
	return rep, err
}

// tee keeps a run's progress lines and prints them too with -v.
type tee struct {
	buf     *strings.Builder
	verbose bool
}

func (t *tee) Write(p []byte) (int, error) {
	if t.verbose {
		os.Stdout.Write(p)
	}
	return t.buf.Write(p)
}

// printTable prints one row per run and the totals.
func printTable(reports []*chaos.Report, wall time.Duration) {
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "seed\tmode\tresult\tops\tlinearizable\tacked\tlost\tactions\tproblems\tmax-gap\trecovery\twall\t")
	totalActs := map[string]int{}
	var ops, acked, lost, viol int
	for _, r := range reports {
		acts := 0
		for k, v := range r.Actions {
			totalActs[k] += v
			if !strings.HasSuffix(k, " refused") && !strings.HasSuffix(k, " failed") {
				acts += v
			}
		}
		res := "pass"
		if !r.OK() {
			res = "FAIL"
			viol++
		}
		ops += r.HistoryOps
		acked += r.AckedWrites
		lost += len(r.Lost)
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%d\t%d\t%d\t%d\t%.1fs\t%.1fs\t%.1fs\t\n", r.Seed, r.Mode, res, r.HistoryOps, r.Linearizable,
			r.AckedWrites, len(r.Lost), acts, len(r.Problems), r.MaxGap.Seconds(), r.Recovery.Seconds(), r.Wall.Seconds())
	}
	tw.Flush()
	keys := make([]string, 0, len(totalActs))
	for k := range totalActs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, totalActs[k]))
	}
	slow := 0
	for _, r := range reports {
		if r.MaxGap > slowAfter || r.Recovery > slowAfter {
			slow++
		}
	}
	fmt.Printf("total: %d runs, %d failed, %d slow (over %v without a successful operation or to recover), %d operations checked, %d acknowledged unique writes, %d lost, wall %v\n",
		len(reports), viol, slow, slowAfter, ops, acked, lost, wall.Round(time.Second))
	fmt.Printf("nemesis: %s\n", strings.Join(parts, " "))
}
