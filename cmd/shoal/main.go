// Command shoal is Shoal's one binary: it runs nodes (start, demo), talks to a cluster (put, get, del,
// scan, cas) and administers it (admin …). The client commands hold no business logic: routing, retries
// and error classification belong to package client; this file only parses flags, builds a client and
// prints results. Its output formats and exit codes are a contract (DESIGN.md §5): exit 0 on success,
// 1 on a runtime error (or a missing key for get, a failed comparison for cas), 2 on a usage error.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/cmd/shoal/internal/benchcmd"
	"github.com/shoaldb/shoal/cmd/shoal/internal/cli"
	"github.com/shoaldb/shoal/cmd/shoal/internal/jobcmd"
	"github.com/shoaldb/shoal/cmd/shoal/internal/tablecmd"
)

// Exit codes.
const (
	exitOK      = 0
	exitRuntime = 1
	exitUsage   = 2
)

// rootCmd is the `shoal` command. Other files of this package add their commands to it (or to
// adminCmd) from their own init functions, e.g. rootCmd.AddCommand(startCmd).
var rootCmd = &cobra.Command{
	Use:   "shoal",
	Short: "Shoal: a sharded, Raft-replicated key-value store with an autopilot",
	Long: `Shoal is a range-sharded, Raft-replicated key-value store with an autopilot.

Run a node with "shoal start", a local cluster with "shoal demo", read and write keys with
put/get/del/scan/cas, and inspect or steer the cluster with "shoal admin". Client commands talk
to any node's gRPC address (--host); the client finds each key's range and its leader by itself.
A cluster started with --auth-token or --certs-dir needs the same flags on client commands
(--certs-dir: the directory with ca.crt, client.crt and client.key; see "shoal cert").

Exit codes: 0 success; 1 runtime error (and "get" of a missing key, "cas" that did not swap);
2 usage error.`,
	Example: `  shoal put user1 alice
  shoal get user1
  shoal --host 10.0.0.1:26257,10.0.0.2:26257 scan user user~ --limit 10 --format json
  shoal admin ranges`,
	SilenceUsage:      true,
	SilenceErrors:     true,
	Args:              cobra.ArbitraryArgs,
	RunE:              cli.GroupRunE,
	PersistentPreRunE: cli.ValidateGlobal,
}

// adminCmd groups the cluster administration commands; other files may add theirs to it.
var adminCmd = &cobra.Command{
	Use:   "admin",
	Short: "Inspect and steer the cluster: nodes, ranges, the autopilot, drains, backups",
	Long: `Inspect and steer the cluster through any node (--host). Text output is aligned tables; with
--format json every listing is an array of objects (the same as the HTTP API's).

  Cluster state     nodes, ranges, decisions (the autopilot's log), join-status NODE
  Ranges            split KEY, merge KEY, transfer-leader RANGE NODE
  Nodes             drain NODE, decommission NODE, activate NODE (undoes either)
  Autopilot         policy list, policy set NAME on|off, zone-config [--lead-zone Z --start K --end K]
  Background work   compact NODE, backup NODE DIR, maintenance NODE --task T --duration D,
                    quorum-risk (the chance that busy nodes leave a range without a free majority)

NODE is a node id and RANGE a range id, as "admin nodes" and "admin ranges" show them.`,
	Example: `  shoal admin nodes
  shoal admin ranges --format json
  shoal admin split user5
  shoal admin transfer-leader 3 2
  shoal admin drain 2 --wait`,
	Args: cobra.ArbitraryArgs,
	RunE: cli.GroupRunE,
}

func init() {
	pf := rootCmd.PersistentFlags()
	pf.StringVar(&cli.Global.Host, "host", client.DefaultAddr, "gRPC address of any node; a comma-separated list is tried in turn")
	pf.StringVar(&cli.Global.Format, "format", "text", "output format: text or json")
	pf.StringVar(&cli.Global.AuthToken, "auth-token", "", "auth token of the cluster, if it requires one")
	pf.StringVar(&cli.Global.CertsDir, "certs-dir", "", "dial over mutual TLS with ca.crt, client.crt and client.key from this directory (shoal cert)")
	pf.DurationVar(&cli.Global.Timeout, "timeout", 10*time.Second, "give up on the command after this long")
	rootCmd.CompletionOptions.HiddenDefaultCmd = true
	rootCmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return cli.Usage(err) })
	rootCmd.AddCommand(adminCmd)
	rootCmd.AddCommand(benchcmd.Commands()...)
	rootCmd.AddCommand(tablecmd.Commands()...)
	rootCmd.AddCommand(jobcmd.Commands()...)
}

// clientFlagsHidden makes cmd's help leave out the root's client flags (--host, --format, --timeout,
// ...): cmd runs a node, not a client, and takes none of them.
func clientFlagsHidden(cmd *cobra.Command) {
	cmd.SetHelpFunc(func(c *cobra.Command, a []string) {
		var shown []*pflag.Flag
		rootCmd.PersistentFlags().VisitAll(func(f *pflag.Flag) {
			if !f.Hidden {
				f.Hidden = true
				shown = append(shown, f)
			}
		})
		defer func() {
			for _, f := range shown {
				f.Hidden = false
			}
		}()
		rootCmd.HelpFunc()(c, a)
	})
}

// exitCode ends the command with a code, its message (if any) already printed.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit code %d", int(e)) }

// session is what a client command needs: a context bounded by --timeout and a connected client.
type session struct {
	ctx    context.Context
	cancel context.CancelFunc
	c      *client.Client
}

// newSession validates the global flags (again: a command's own hooks may shadow the root's) and
// builds a client from them.
func newSession(cmd *cobra.Command) (*session, error) {
	if err := cli.ValidateGlobal(cmd, nil); err != nil {
		return nil, err
	}
	var addrs []string
	for _, a := range strings.Split(cli.Global.Host, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return nil, cli.Usage(errors.New("--host is empty"))
	}
	reqTimeout := client.DefaultRequestTimeout
	if cli.Global.Timeout < reqTimeout {
		reqTimeout = cli.Global.Timeout
	}
	parent := cmd.Context()
	if parent == nil {
		parent = context.Background()
	}
	var tlsCfg *tls.Config
	if cli.Global.CertsDir != "" {
		var err error
		if tlsCfg, err = client.LoadTLS(cli.Global.CertsDir); err != nil {
			return nil, fmt.Errorf("--certs-dir: %w", err)
		}
	}
	ctx, cancel := context.WithTimeout(parent, cli.Global.Timeout)
	// FailFast: a wrong or stopped --host is reported at once instead of after the retries.
	c, err := client.New(ctx, client.Config{Addrs: addrs, AuthToken: cli.Global.AuthToken, TLS: tlsCfg, RequestTimeout: reqTimeout, FailFast: true})
	if err != nil {
		cancel()
		return nil, err
	}
	return &session{ctx: ctx, cancel: cancel, c: c}, nil
}

// withSession runs fn with a new session, which it closes when fn returns.
func withSession(cmd *cobra.Command, fn func(s *session) error) error {
	s, err := newSession(cmd)
	if err != nil {
		return err
	}
	defer s.close()
	return fn(s)
}

// close releases the session.
func (s *session) close() {
	_ = s.c.Close()
	s.cancel()
}

// run executes the root command with argv and returns the process exit code. Errors are printed to
// stderr as "Error: <message>".
func run(ctx context.Context, argv []string, stdout, stderr io.Writer) int {
	rootCmd.SetArgs(argv)
	rootCmd.SetOut(stdout)
	rootCmd.SetErr(stderr)
	cmd, err := rootCmd.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	var code exitCode
	if errors.As(err, &code) {
		return int(code)
	}
	fmt.Fprintf(stderr, "Error: %v\n", err)
	// The error of a refused connection or an HTTP port (nothing was sent) already says what to do.
	if (errors.Is(err, client.ErrUnavailable) || errors.Is(err, client.ErrTimeout)) && !strings.Contains(err.Error(), "nothing was sent") {
		fmt.Fprintf(stderr, "Check that a Shoal node is reachable at --host %s and that its ranges have a quorum (shoal admin nodes).\n", cli.Global.Host)
		if cli.Global.CertsDir == "" {
			fmt.Fprintln(stderr, "If the cluster was started with --certs-dir (TLS), give --certs-dir with its ca.crt, client.crt and client.key.")
		}
	}
	var ue cli.UsageError
	if errors.As(err, &ue) || isCobraUsageError(err) {
		if cmd == nil {
			cmd = rootCmd
		}
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		return exitUsage
	}
	return exitRuntime
}

// isCobraUsageError recognizes the usage errors cobra reports without a hook to type them.
func isCobraUsageError(err error) bool {
	msg := err.Error()
	return strings.HasPrefix(msg, "unknown command") || strings.HasPrefix(msg, "unknown flag") ||
		strings.HasPrefix(msg, "unknown shorthand flag") || strings.Contains(msg, "required flag")
}

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}
