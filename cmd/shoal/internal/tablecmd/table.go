package tablecmd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/cmd/shoal/internal/cli"
	"github.com/shoaldb/shoal/table"
)

var tableCmd = &cobra.Command{
	Use:   "table",
	Short: "Create, describe, list and drop tables (typed rows on the key-value store)",
	Long: `A table has typed columns (int64, float64, string, bytes, timestamp) and a primary key, an
ordered list of its columns. Its rows are stored under /t/<table-id>/ in primary-key order, so a
scan returns them sorted by the key. Read and write rows with "shoal row".

  create NAME --columns C:TYPE,… --primary-key C[,C…]
  describe NAME, list, drop NAME

See docs/design/tables.md for the encoding and the limits.`,
	Example: `  shoal table create users --columns id:int64,name:string,city:string --primary-key id
  shoal table describe users --format json
  shoal table list
  shoal table drop users`,
	Args: cobra.ArbitraryArgs,
	RunE: cli.GroupRunE,
}

var createFlags struct{ columns, primaryKey string }

var tableCreateCmd = &cobra.Command{
	Use:   "create NAME --columns C:TYPE,… --primary-key C[,C…]",
	Short: "Create a table",
	Long: `Create the table NAME with the columns given in order (NAME:TYPE, TYPE one of int64, float64,
string, bytes, timestamp) and the primary key given as an ordered list of those columns. Names are
letters, digits and '_', starting with a letter or '_'. Fails if a table of that name exists; of
two concurrent creates of one name exactly one succeeds. Prints the table's id (with --format json
its descriptor).`,
	Example: `  shoal table create users --columns id:int64,name:string,city:string --primary-key id
  shoal table create visits --columns city:string,at:timestamp,user:int64 --primary-key city,at`,
	Args: cli.Args(cobra.ExactArgs(1)),
	RunE: func(cmd *cobra.Command, a []string) error {
		if createFlags.columns == "" || createFlags.primaryKey == "" {
			return cli.Usage(errors.New("create: --columns and --primary-key are required"))
		}
		cols, err := table.ParseColumns(createFlags.columns)
		if err != nil {
			return cli.Usage(fmt.Errorf("--columns: %w", err))
		}
		d := table.NewDescriptor(a[0], cols, table.ParseKeyList(createFlags.primaryKey))
		if err := d.Validate(); err != nil {
			return cli.Usage(err)
		}
		return withCatalog(cmd, func(ctx context.Context, cat *table.Catalog) error {
			d, err := cat.Create(ctx, d)
			if err != nil {
				return err
			}
			if cli.JSON() {
				return cli.WriteJSON(cmd.OutOrStdout(), d)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "created table %s (id %d)\n", d.Name, d.ID)
			return err
		})
	},
}

var tableDescribeCmd = &cobra.Command{
	Use:   "describe NAME",
	Short: "Print a table's columns and primary key",
	Long: `Print the table's id, columns (name, type, and the position in the primary key) and primary
key. With --format json print its descriptor: {"version","name","id","columns":[{"name","type","id"}],
"primary_key":[…],"created_unix_ms"}.`,
	Example: `  shoal table describe users
  shoal table describe users --format json`,
	Args: cli.Args(cobra.ExactArgs(1)),
	RunE: func(cmd *cobra.Command, a []string) error {
		return withCatalog(cmd, func(ctx context.Context, cat *table.Catalog) error {
			d, err := cat.Describe(ctx, a[0])
			if err != nil {
				return err
			}
			if cli.JSON() {
				return cli.WriteJSON(cmd.OutOrStdout(), d)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "table %s (id %d), primary key (%s)\n", d.Name, d.ID, strings.Join(d.PrimaryKey, ", "))
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "COLUMN\tTYPE\tKEY")
			for _, c := range d.Columns {
				key := ""
				for i, k := range d.PrimaryKey {
					if k == c.Name {
						key = fmt.Sprint(i + 1)
					}
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, c.Type, key)
			}
			return tw.Flush()
		})
	},
}

var tableListCmd = &cobra.Command{
	Use:   "list",
	Short: "List the tables",
	Long:  `List every table by name with its id, columns and primary key. With --format json print an array of descriptors (as "describe" prints them).`,
	Args:  cli.Args(cobra.NoArgs),
	RunE: func(cmd *cobra.Command, a []string) error {
		return withCatalog(cmd, func(ctx context.Context, cat *table.Catalog) error {
			list, err := cat.List(ctx)
			if err != nil {
				return err
			}
			if cli.JSON() {
				if list == nil {
					list = []table.Descriptor{}
				}
				return cli.WriteJSON(cmd.OutOrStdout(), list)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tID\tCOLUMNS\tPRIMARY KEY")
			for _, d := range list {
				var cols []string
				for _, c := range d.Columns {
					cols = append(cols, c.Name+":"+c.Type.String())
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", d.Name, d.ID, strings.Join(cols, ","), strings.Join(d.PrimaryKey, ","))
			}
			return tw.Flush()
		})
	},
}

var tableDropCmd = &cobra.Command{
	Use:   "drop NAME",
	Short: "Drop a table: its descriptor, then its rows",
	Long: `Drop the table: remove its descriptor (from then on no command finds it), then delete its rows a
page at a time, printing progress on stderr (at most a line a second). A drop that is interrupted
(a timeout: raise --timeout for a large table) leaves a record; the next drop of any table finishes
it. Table ids are never reused, so rows left behind never appear in a new table of the same name.`,
	Example: `  shoal table drop users
  shoal table drop events --timeout 10m`,
	Args: cli.Args(cobra.ExactArgs(1)),
	RunE: func(cmd *cobra.Command, a []string) error {
		return withCatalog(cmd, func(ctx context.Context, cat *table.Catalog) error {
			// One progress line a second at most: a page is 500 rows, a large table many pages.
			var last time.Time
			progress := func(n int) {
				if time.Since(last) >= time.Second {
					last = time.Now()
					fmt.Fprintf(cmd.ErrOrStderr(), "deleted %d rows\n", n)
				}
			}
			n, err := cat.Drop(ctx, a[0], progress)
			if err != nil {
				return err
			}
			if _, err := cat.FinishDrops(ctx, progress); err != nil {
				return fmt.Errorf("table %s dropped (%d rows); finishing an earlier drop: %w", a[0], n, err)
			}
			if cli.JSON() {
				return cli.WriteJSON(cmd.OutOrStdout(), map[string]any{"dropped": a[0], "rows": n})
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "dropped table %s (%d rows)\n", a[0], n)
			return err
		})
	},
}

func init() {
	tableCreateCmd.Flags().StringVar(&createFlags.columns, "columns", "", "the columns in order: NAME:TYPE,… (TYPE: int64, float64, string, bytes, timestamp)")
	tableCreateCmd.Flags().StringVar(&createFlags.primaryKey, "primary-key", "", "the primary key's columns in key order: C[,C…]")
	tableCmd.AddCommand(tableCreateCmd, tableDescribeCmd, tableListCmd, tableDropCmd)
}
