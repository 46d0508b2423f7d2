package tablecmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/cmd/shoal/internal/cli"
	"github.com/shoaldb/shoal/table"
)

var rowCmd = &cobra.Command{
	Use:   "row",
	Short: "Put, get, delete and scan a table's rows",
	Long: `Read and write the rows of a table (see "shoal table"). Rows are JSON objects, one member per
column: int64 and float64 as numbers, string as a string, bytes as base64, timestamp as an RFC 3339
string (2024-05-06T07:08:09Z); a missing or null non-key column is NULL. A primary key is given as
one argument per key column, in key order, written the same way (bytes in base64).

  put TABLE JSON, get TABLE KEY…, del TABLE KEY…, scan TABLE [--limit N]

A row that does not fit the table (an unknown column, a wrong type, a missing key column, over
the size limits) is refused with "invalid argument" and nothing is written.`,
	Example: `  shoal row put users '{"id":1,"name":"ann","city":"oslo"}'
  shoal row get users 1 --format json
  shoal row del users 1
  shoal row scan users --limit 10`,
	Args: cobra.ArbitraryArgs,
	RunE: cli.GroupRunE,
}

var rowPutCmd = &cobra.Command{
	Use:   "put TABLE JSON | put TABLE -",
	Short: "Write a row (replacing the row with its primary key)",
	Long: `Write the row given as a JSON object (with "-", read from standard input), replacing any row
with the same primary key. Prints OK. If the outcome is unknown (the range's leader failed
mid-write) it fails with "ambiguous" or "timeout": read the row back before retrying.`,
	Example: `  shoal row put users '{"id":1,"name":"ann","city":"oslo"}'
  echo '{"id":2,"name":"bo"}' | shoal row put users -`,
	Args: cli.Args(cobra.ExactArgs(2)),
	RunE: func(cmd *cobra.Command, a []string) error {
		js := []byte(a[1])
		if a[1] == "-" {
			var err error
			if js, err = io.ReadAll(cmd.InOrStdin()); err != nil {
				return fmt.Errorf("reading the row from stdin: %w", err)
			}
		}
		return withTable(cmd, a[0], func(ctx context.Context, t *table.Table) error {
			row, err := table.ParseRowJSON(&t.Desc, js)
			if err != nil {
				return err
			}
			if err := t.Put(ctx, row); err != nil {
				return err
			}
			return ok(cmd)
		})
	},
}

var rowGetCmd = &cobra.Command{
	Use:   "get TABLE KEY…",
	Short: "Print the row with a primary key",
	Long: `Print the row whose primary key is KEY… (one value per key column, in key order): with --format
json as one JSON object, else as COLUMN VALUE lines. If there is no such row, fail with "not found"
(exit code 1).`,
	Example: `  shoal row get users 1 --format json
  shoal row get visits oslo 2024-05-06T07:08:09Z`,
	Args: cli.Args(cobra.MinimumNArgs(2)),
	RunE: func(cmd *cobra.Command, a []string) error {
		return withRow(cmd, a, func(ctx context.Context, t *table.Table, key []any) error {
			row, found, err := t.Get(ctx, key...)
			if err != nil {
				return err
			}
			if !found {
				return fmt.Errorf("not found: table %s has no row with primary key (%s)", t.Desc.Name, strings.Join(a[1:], ", "))
			}
			w := cmd.OutOrStdout()
			if cli.JSON() {
				return cli.WriteJSON(w, table.RowJSON(&t.Desc, row))
			}
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			for _, c := range t.Desc.Columns {
				fmt.Fprintf(tw, "%s\t%s\n", c.Name, table.FormatValue(row[c.Name]))
			}
			return tw.Flush()
		})
	},
}

var rowDelCmd = &cobra.Command{
	Use:   "del TABLE KEY…",
	Short: "Delete the row with a primary key",
	Long:  `Delete the row whose primary key is KEY… and print "deleted", or "not found" if there was none (both exit 0).`,
	Example: `  shoal row del users 1
  shoal row del visits oslo 2024-05-06T07:08:09Z`,
	Args: cli.Args(cobra.MinimumNArgs(2)),
	RunE: func(cmd *cobra.Command, a []string) error {
		return withRow(cmd, a, func(ctx context.Context, t *table.Table, key []any) error {
			found, err := t.Delete(ctx, key...)
			if err != nil {
				return err
			}
			if cli.JSON() {
				return cli.WriteJSON(cmd.OutOrStdout(), map[string]any{"deleted": found})
			}
			msg := "deleted"
			if !found {
				msg = "not found"
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), msg)
			return err
		})
	},
}

var scanFlags struct{ limit int }

var rowScanCmd = &cobra.Command{
	Use:   "scan TABLE [--limit N]",
	Short: "Print a table's rows in primary-key order",
	Long: `Print the table's rows in primary-key order, at most --limit of them (0: all): with --format json
as one JSON array of row objects, else as an aligned table with a header. Each range is read
linearizably on its own: a scan is not a snapshot of the whole table.`,
	Example: `  shoal row scan users
  shoal row scan users --limit 100 --format json`,
	Args: cli.Args(cobra.ExactArgs(1)),
	RunE: func(cmd *cobra.Command, a []string) error {
		if scanFlags.limit < 0 {
			return cli.Usage(errors.New("--limit must not be negative"))
		}
		return withTable(cmd, a[0], func(ctx context.Context, t *table.Table) error {
			w := cmd.OutOrStdout()
			if cli.JSON() {
				rows := []json.RawMessage{}
				if err := t.Scan(ctx, scanFlags.limit, func(r table.Row) bool {
					rows = append(rows, table.RowJSON(&t.Desc, r))
					return true
				}); err != nil {
					return err
				}
				return cli.WriteJSON(w, rows)
			}
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			var names []string
			for _, c := range t.Desc.Columns {
				names = append(names, strings.ToUpper(c.Name))
			}
			fmt.Fprintln(tw, strings.Join(names, "\t"))
			err := t.Scan(ctx, scanFlags.limit, func(r table.Row) bool {
				vals := make([]string, len(t.Desc.Columns))
				for i, c := range t.Desc.Columns {
					vals[i] = table.FormatValue(r[c.Name])
				}
				fmt.Fprintln(tw, strings.Join(vals, "\t"))
				return true
			})
			if ferr := tw.Flush(); err == nil {
				err = ferr
			}
			return err
		})
	},
}

func init() {
	rowScanCmd.Flags().IntVar(&scanFlags.limit, "limit", 0, "print at most this many rows (0: all)")
	rowCmd.AddCommand(rowPutCmd, rowGetCmd, rowDelCmd, rowScanCmd)
}
