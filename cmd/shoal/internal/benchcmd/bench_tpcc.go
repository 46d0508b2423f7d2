package benchcmd

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/bench/tpcc"
	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/cmd/shoal/internal/cli"
	"github.com/shoaldb/shoal/table"
)

var tpccFlags struct {
	hosts      string
	prefix     string
	warehouses int
	items      int
	customers  int
	load       bool
	noLoad     bool
	threads    int
	duration   time.Duration
	rate       float64
	out        string
	check      bool
	seed       uint64
}

var benchTPCCCmd = &cobra.Command{
	Use:   "tpcc",
	Short: "Run a TPC-C-like mix over tables (non-transactional): load warehouses, then run the five transactions",
	Long: `Load TPC-C's tables for --warehouses warehouses (skip with --no-load), then run TPC-C's mix of
five transactions on --threads terminals for --duration, and report per transaction type the count,
errors and p50/p95/p99 latency, and tpmC (new orders written per minute).

NOT TRANSACTIONAL. Like PyTPCC's HBase driver, each transaction is a sequence of row gets, puts,
deletes and prefix scans on Shoal's tables, each atomic on its own, with no atomicity or isolation
across them: concurrent payments lose updates of w_ytd and of customers' balances, a stock-level
may count the lines of an order half written. Single-row atomic steps keep the data usable: every
write of a district row (it holds the next order id) is a compare-and-put, and a delivery claims
an order by deleting its new_order row, in order id order. The figures are not TPC-C results.

Mix (TPC-C clause 5.2.3; inputs as clause 2: NURand customer and item ids, 60 % of customers by
last name):
  new_order     45 %  5-15 lines; 1 % roll back on an unused item (nothing written); a line's
                      supplier is another warehouse 1 % of the time when W > 1
  payment       43 %  the customer is of another warehouse 15 % of the time when W > 1
  order_status   4 %  the customer's last order: a reverse prefix scan of the order index
  delivery       4 %  per district, the oldest new_order: a prefix scan, limit 1
  stock_level    4 %  the district's last 20 orders: a reverse prefix scan of its order lines

Tables (names start with --prefix): warehouse, district, customer, history, new_order, order,
order_line, item, stock with the spec's primary keys, and two index tables, customer_by_name and
order_by_customer. Sizes per warehouse: 10 districts, --customers customers per district (spec
3000) each with one initial order (the last 30 % undelivered), --items items (spec 100000, shared)
and as many stock rows. A run must be given the sizes of the load (checked).

Closed loop by default; --rate R starts R transactions a second over all terminals (open loop,
latency from when each was due). Progress goes to stderr; --format json prints the report as
JSON, --out FILE also writes it to FILE as JSON. --duration 0 loads only. --check verifies the
data at rest after the run (orders dense up to each district's next id, every order with its
lines, new orders a suffix of the orders); it holds when no transaction failed.`,
	Example: `  shoal bench tpcc --hosts 127.0.0.1:26257 --warehouses 1 --threads 8 --duration 60s
  shoal bench tpcc --warehouses 2 --items 10000 --customers 300 --duration 0       # load only
  shoal bench tpcc --no-load --warehouses 2 --items 10000 --customers 300 --rate 200 --format json --out run.json`,
	Args: cli.Args(cobra.NoArgs),
	RunE: runBenchTPCC,
}

func init() {
	f := benchTPCCCmd.Flags()
	f.StringVar(&tpccFlags.hosts, "hosts", "", "comma-separated node gRPC addresses (default: --host)")
	f.StringVar(&tpccFlags.prefix, "prefix", tpcc.DefaultPrefix, "start of the tables' names")
	f.IntVar(&tpccFlags.warehouses, "warehouses", 1, "warehouses (W)")
	f.IntVar(&tpccFlags.items, "items", tpcc.SpecItems, "items, and stock rows per warehouse (spec: 100000)")
	f.IntVar(&tpccFlags.customers, "customers", tpcc.SpecCustomers, "customers per district, and initial orders (spec: 3000)")
	f.BoolVar(&tpccFlags.load, "load", true, "create and load the tables before the run (they must not exist)")
	f.BoolVar(&tpccFlags.noLoad, "no-load", false, "run on tables loaded before (same sizes)")
	f.IntVar(&tpccFlags.threads, "threads", 8, "terminals (and concurrent load batches); terminal i's home warehouse is i mod W + 1")
	f.DurationVar(&tpccFlags.duration, "duration", time.Minute, "how long to start transactions (0: load only)")
	f.Float64Var(&tpccFlags.rate, "rate", 0, "transactions a second over all terminals (open loop); 0: closed loop")
	f.StringVar(&tpccFlags.out, "out", "", "also write the report to this file, as JSON")
	f.BoolVar(&tpccFlags.check, "check", false, "after the run, check the consistency conditions of the data at rest")
	f.Uint64Var(&tpccFlags.seed, "seed", 0, "seed of the generated data and inputs (0: the time)")
	benchCmd.AddCommand(benchTPCCCmd)
}

// tpccReport is the command's report: the load's and the run's.
type tpccReport struct {
	*tpcc.Report
	Check string `json:"check,omitempty"`
}

func runBenchTPCC(cmd *cobra.Command, _ []string) error {
	if err := cli.ValidateGlobal(cmd, nil); err != nil {
		return err
	}
	fl := tpccFlags
	if fl.noLoad && cmd.Flags().Changed("load") && fl.load {
		return cli.Usage(errors.New("--load and --no-load contradict each other: give one"))
	}
	load := fl.load && !fl.noLoad
	sizes := tpcc.Sizes{Warehouses: fl.warehouses, Items: fl.items, Customers: fl.customers}
	if err := sizes.Validate(); err != nil {
		return cli.Usage(fmt.Errorf("invalid sizes: %w", err))
	}
	switch {
	case fl.threads < 1:
		return cli.Usage(fmt.Errorf("invalid --threads %d: must be at least 1", fl.threads))
	case fl.duration < 0:
		return cli.Usage(fmt.Errorf("invalid --duration %v: must not be negative", fl.duration))
	case fl.duration == 0 && !load:
		return cli.Usage(errors.New("--duration 0 with --no-load does nothing: give a duration"))
	case fl.rate < 0:
		return cli.Usage(fmt.Errorf("invalid --rate %v: must not be negative (0: closed loop)", fl.rate))
	}
	hosts := fl.hosts
	if hosts == "" {
		hosts = cli.Global.Host
	}
	addrs := splitHosts(hosts)
	if len(addrs) == 0 {
		return cli.Usage(errors.New("--hosts is empty"))
	}

	parent := cmd.Context()
	if parent == nil {
		parent = context.Background()
	}
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	defer stop()
	var tlsCfg *tls.Config
	if cli.Global.CertsDir != "" {
		var err error
		if tlsCfg, err = client.LoadTLS(cli.Global.CertsDir); err != nil {
			return fmt.Errorf("--certs-dir: %w", err)
		}
	}
	// FailFast: a wrong or stopped host is reported at once instead of after the retries.
	c, err := client.New(ctx, client.Config{Addrs: addrs, AuthToken: cli.Global.AuthToken, TLS: tlsCfg, FailFast: true})
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", hosts, err)
	}
	defer c.Close()
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	_, err = table.NewCatalog(c).List(pctx)
	cancel()
	if err != nil {
		return fmt.Errorf("the cluster at %s does not answer: %w", hosts, err)
	}

	stderr := cmd.ErrOrStderr()
	var loadRep *tpcc.LoadReport
	if load {
		fmt.Fprintf(stderr, "load: %d warehouse(s), %d items, %d customers per district, about %d rows\n", sizes.Warehouses, sizes.Items, sizes.Customers, sizes.Rows())
		lr, err := tpcc.Load(ctx, c, sizes, tpcc.LoadOptions{Prefix: fl.prefix, Threads: fl.threads, Progress: stderr, Seed: fl.seed})
		if err != nil {
			return err
		}
		loadRep = &lr
	}
	rep := tpccReport{Report: &tpcc.Report{Workload: "tpcc", Note: tpcc.NonTransactionalNote, Warehouses: sizes.Warehouses, Items: sizes.Items, Customers: sizes.Customers}}
	if fl.duration > 0 {
		fmt.Fprintf(stderr, "run: %d terminals, %v, %s\n", fl.threads, fl.duration, loopName(fl.rate))
		r, err := tpcc.Run(ctx, c, sizes, tpcc.RunOptions{Prefix: fl.prefix, Threads: fl.threads, Duration: fl.duration, Rate: fl.rate, Seed: fl.seed, Progress: stderr})
		if err != nil {
			return err
		}
		rep.Report = r
	}
	rep.Load = loadRep
	var checkErr error
	if fl.check {
		tabs, err := tpcc.OpenTables(ctx, table.NewCatalog(c), fl.prefix)
		if err != nil {
			return err
		}
		rep.Check = "ok"
		if checkErr = tpcc.Check(ctx, tabs, sizes); checkErr != nil {
			rep.Check = checkErr.Error()
		}
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if fl.out != "" {
		if err := os.WriteFile(fl.out, b, 0o644); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
	}
	if cli.JSON() {
		_, err = cmd.OutOrStdout().Write(b)
	} else {
		err = writeTPCCText(cmd.OutOrStdout(), rep, fl.duration > 0)
	}
	if err != nil {
		return err
	}
	if checkErr != nil {
		return fmt.Errorf("consistency check: %w", checkErr)
	}
	return nil
}

func loopName(rate float64) string {
	if rate > 0 {
		return fmt.Sprintf("open loop at %v transactions/s", rate)
	}
	return "closed loop"
}

func writeTPCCText(w io.Writer, rep tpccReport, ran bool) error {
	r := rep.Report
	fmt.Fprintf(w, "tpcc: %d warehouse(s), %d items, %d customers per district\n", r.Warehouses, r.Items, r.Customers)
	fmt.Fprintf(w, "note: %s\n", r.Note)
	if l := r.Load; l != nil {
		fmt.Fprintf(w, "load: %d rows in %.1f s (%.0f rows/s)\n", l.Rows, l.Seconds, l.RowsPerSec)
	}
	if ran {
		fmt.Fprintf(w, "run: %d terminals, %.1f s, %s\n\n", r.Threads, r.Seconds, loopName(r.Rate))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "transaction\tcount\t%\trollbacks\terrors\tp50 ms\tp95 ms\tp99 ms\t")
		for _, t := range r.Txns {
			fmt.Fprintf(tw, "%s\t%d\t%.1f\t%d\t%d\t%.1f\t%.1f\t%.1f\t\n", t.Name, t.Count, t.Percent, t.Rollbacks, t.Errors, t.P50Ms, t.P95Ms, t.P99Ms)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(w, "\ntotal: %d transactions (%.1f/s), %d errors\n", r.Total, r.TxnPerSec, r.Errors)
		fmt.Fprintf(w, "tpmC (new orders a minute): %.0f\n", r.TpmC)
		if r.FirstError != "" {
			fmt.Fprintf(w, "first error: %s\n", r.FirstError)
		}
	}
	if rep.Check != "" {
		fmt.Fprintf(w, "check: %s\n", rep.Check)
	}
	return nil
}
