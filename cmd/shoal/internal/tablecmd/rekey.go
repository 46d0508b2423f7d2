package tablecmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/cmd/shoal/internal/cli"
	"github.com/shoaldb/shoal/table"
	"github.com/shoaldb/shoal/table/rekey"
)

var rekeyFlags struct {
	primaryKey string
	wait       bool
	placement  string
}

var tableRekeyCmd = &cobra.Command{
	Use:   "rekey NAME --primary-key C[,C…] [--wait]",
	Short: "Change a table's primary key online, without refusing a write",
	Long: `Change the table's primary key: copy every row under the new key while the table keeps serving,
follow the writes made meanwhile, hold the table's writes for the moment the last ones are copied
(they wait, they are not refused; typically well under a second), switch the table to the new key
in one step, then delete the old rows. Progress goes to stderr. The command runs the re-key itself
and returns once it has cut over and cleaned up (--wait, the default, says so explicitly); it is
not bounded by --timeout. Interrupted (Ctrl-C, a lost connection), the table keeps serving under
its old key: run the same rekey again to take it over, or rekey-cancel to drop it.

After the cutover, rows are identified by the new key: shoal row get takes its columns, and a write
held across the cutover is applied under the new key (to change a column of the new key, delete
the row and put it again). Clients of the Go table package follow the cutover by themselves.

Before copying, the new keyspace is split where a sample of the rows says it will hold equal
bytes (one range per range of the table now, at least one per node), and the autopilot moves each
new range's leadership where --placement says: balanced (the default) caps every node at
ceil(ranges/nodes) new ranges and among such plans moves the fewest bytes (rows whose old and new
ranges are led from different nodes); greedy moves the fewest bytes however unevenly; random is
the baseline; none leaves the new keyspace to grow by size-based splits. Every plan's predicted
bytes are in the decision log (shoal admin decisions, policy rekey).`,
	Example: `  shoal table rekey users --primary-key city,id --wait
  shoal table rekey-status users
  shoal table rekey-cancel users`,
	Args: cli.Args(cobra.ExactArgs(1)),
	RunE: func(cmd *cobra.Command, a []string) error {
		pk := table.ParseKeyList(rekeyFlags.primaryKey)
		if len(pk) == 0 {
			return cli.Usage(errors.New("rekey: --primary-key is required: the new key's columns in key order"))
		}
		ctx, stop := signal.NotifyContext(parentContext(cmd), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return withStore(cmd, func(c *client.Client) error {
			errw := cmd.ErrOrStderr()
			res, err := rekey.Run(ctx, c, a[0], rekey.Options{PrimaryKey: pk, Placement: rekeyFlags.placement, Progress: func(p rekey.Progress) {
				fmt.Fprintf(errw, "%6.1fs %-8s copied %d rows, %d changes followed, %d old rows deleted\n",
					p.Elapsed.Seconds(), p.Phase, p.Rows, p.Changes, p.Cleaned)
			}})
			if err != nil {
				return err
			}
			if cli.JSON() {
				return cli.WriteJSON(cmd.OutOrStdout(), map[string]any{"table": a[0], "old_id": res.OldID, "new_id": res.NewID,
					"primary_key": res.PrimaryKey, "rows": res.Rows, "changes": res.Changes, "writes_held_ms": res.FenceHeld.Milliseconds(),
					"cutover_ms": res.CutoverAt.Milliseconds(), "total_ms": res.Total.Milliseconds(), "resumed": res.Resumed, "placement": res.Placement})
			}
			if p := res.Placement; p != nil {
				var others []string
				for _, name := range []string{rekey.PlaceGreedy, rekey.PlaceBalanced, rekey.PlaceRandom} {
					if b, ok := p.Predicted[name]; ok {
						others = append(others, name+" "+mib(b))
					}
				}
				fmt.Fprintf(errw, "placement %s: %d new ranges, predicted bytes moved %s (%s); %d leaderships moved by the autopilot, %d in place, %d refused\n",
					p.Strategy, p.NewRanges, mib(p.Predicted[p.Strategy]), strings.Join(others, ", "), p.Submitted, p.InPlace, p.Refused)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "table %s re-keyed to (%s): %d rows copied, %d changes followed, writes held %v, cut over after %v, done in %v\n",
				a[0], strings.Join(res.PrimaryKey, ", "), res.Rows, res.Changes, res.FenceHeld.Round(time.Millisecond),
				res.CutoverAt.Round(time.Millisecond), res.Total.Round(time.Millisecond))
			return err
		})
	},
}

var tableRekeyStatusCmd = &cobra.Command{
	Use:   "rekey-status NAME",
	Short: "Say whether a re-key of the table is under way, and to which key",
	Args:  cli.Args(cobra.ExactArgs(1)),
	RunE: func(cmd *cobra.Command, a []string) error {
		return withCatalog(cmd, func(ctx context.Context, cat *table.Catalog) error {
			d, err := cat.Describe(ctx, a[0])
			if err != nil {
				return err
			}
			if cli.JSON() {
				return cli.WriteJSON(cmd.OutOrStdout(), map[string]any{"table": d.Name, "id": d.ID, "primary_key": d.PrimaryKey,
					"rekey": d.Rekey, "retired_ids": d.RetiredIDs})
			}
			w := cmd.OutOrStdout()
			if st := d.Rekey; st != nil {
				fmt.Fprintf(w, "table %s: re-key to (%s) since %s (new id %d); rerun `shoal table rekey` to take it over, or rekey-cancel\n",
					d.Name, strings.Join(st.PrimaryKey, ", "), time.UnixMilli(st.StartedUnixMs).Format(time.RFC3339), st.NewID)
				if st.UpdatedUnixMs > 0 {
					fmt.Fprintln(w, progressLine(st, time.Now()))
				}
			} else {
				fmt.Fprintf(w, "table %s: no re-key under way; primary key (%s)\n", d.Name, strings.Join(d.PrimaryKey, ", "))
			}
			if len(d.RetiredIDs) > 0 {
				fmt.Fprintf(w, "old rows of ids %v not yet deleted\n", d.RetiredIDs)
			}
			return nil
		})
	},
}

var tableRekeyCancelCmd = &cobra.Command{
	Use:   "rekey-cancel NAME",
	Short: "Cancel a re-key that has not cut over: lift its hold on writes, delete its copy",
	Args:  cli.Args(cobra.ExactArgs(1)),
	RunE: func(cmd *cobra.Command, a []string) error {
		return withStore(cmd, func(c *client.Client) error {
			ctx, cancel := context.WithTimeout(parentContext(cmd), max(cli.Global.Timeout, time.Minute))
			defer cancel()
			if err := rekey.Cancel(ctx, c, a[0]); err != nil {
				return err
			}
			return ok(cmd)
		})
	},
}

// withStore is withKV for the re-key commands, which need the Go client itself (watches, fences),
// not only the catalog's operations. The re-key runs under its own context, not --timeout's.
func withStore(cmd *cobra.Command, fn func(c *client.Client) error) error {
	return withKV(cmd, func(_ context.Context, kv table.KV) error {
		c, isClient := kv.(*client.Client)
		if !isClient {
			return errors.New("re-key: needs a connection to a cluster")
		}
		return fn(c)
	})
}

// progressLine is a re-key's recorded progress: its phase, a bar of rows copied against the
// estimate when there is one, the changes followed, and how old the record is.
func progressLine(st *table.RekeyState, now time.Time) string {
	age := now.Sub(time.UnixMilli(st.UpdatedUnixMs)).Round(time.Second)
	rows := fmt.Sprintf("%d rows copied", st.Rows)
	if st.EstimatedRows > 0 {
		f := min(1, float64(st.Rows)/float64(st.EstimatedRows))
		const width = 30
		done := int(f * width)
		rows = fmt.Sprintf("[%s%s] %3.0f%%  %d of ~%d rows copied", strings.Repeat("#", done), strings.Repeat(".", width-done), 100*f, st.Rows, st.EstimatedRows)
	}
	return fmt.Sprintf("  %s: %s, %d changes followed (recorded %v ago; the fence and cutover take moments after the copy)", st.Phase, rows, st.Changes, age)
}

func mib(b float64) string { return cli.HumanBytes(uint64(b)) }

func parentContext(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}

func init() {
	tableRekeyCmd.Flags().StringVar(&rekeyFlags.primaryKey, "primary-key", "", "the new primary key's columns in key order: C[,C…]")
	tableRekeyCmd.Flags().StringVar(&rekeyFlags.placement, "placement", rekey.PlaceBalanced, "how the new keyspace is split and led: "+strings.Join(rekey.Placements(), ", "))
	tableRekeyCmd.Flags().BoolVar(&rekeyFlags.wait, "wait", true, "return once the table has cut over and the old rows are deleted (the only mode)")
	tableCmd.AddCommand(tableRekeyCmd, tableRekeyStatusCmd, tableRekeyCancelCmd)
}
