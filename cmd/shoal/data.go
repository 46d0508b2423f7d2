package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"
)

// kvJSON is one key-value pair in JSON output; keys and values are printed as strings.
type kvJSON struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

var putCmd = &cobra.Command{
	Use:   "put KEY VALUE",
	Short: "Set KEY to VALUE",
	Long: `Set KEY to VALUE. The write is acknowledged once it is durable on a quorum of the key's range.
If the outcome is unknown (the leader failed mid-write) the command fails with "ambiguous" or
"timeout": read the key back before retrying.`,
	Example: `  shoal put user1 alice`,
	Args:    args(cobra.ExactArgs(2)),
	RunE: func(cmd *cobra.Command, a []string) error {
		return withSession(cmd, func(s *session) error {
			if err := s.c.Put(s.ctx, []byte(a[0]), []byte(a[1])); err != nil {
				return err
			}
			if jsonOutput() {
				return writeJSON(cmd.OutOrStdout(), map[string]any{"ok": true})
			}
			_, err := fmt.Fprintln(cmd.OutOrStdout(), "OK")
			return err
		})
	},
}

var getCmd = &cobra.Command{
	Use:   "get KEY",
	Short: "Print the value of KEY",
	Long: `Print the value of KEY (a linearizable read from the range's leader). If KEY does not exist,
print "not found" on stderr and exit with code 1. With --format json, print {"key","value"}.`,
	Example: `  shoal get user1
  shoal get user1 --format json`,
	Args: args(cobra.ExactArgs(1)),
	RunE: func(cmd *cobra.Command, a []string) error {
		return withSession(cmd, func(s *session) error {
			v, found, err := s.c.Get(s.ctx, []byte(a[0]))
			if err != nil {
				return err
			}
			if !found {
				fmt.Fprintln(cmd.ErrOrStderr(), "not found")
				return exitCode(exitRuntime)
			}
			if jsonOutput() {
				return writeJSON(cmd.OutOrStdout(), kvJSON{Key: a[0], Value: string(v)})
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), string(v))
			return err
		})
	},
}

var delCmd = &cobra.Command{
	Use:     "del KEY",
	Aliases: []string{"delete"},
	Short:   "Delete KEY",
	Long: `Delete KEY and print "deleted", or "not found" if it did not exist (both exit 0). With
--format json, print {"key","found"}.`,
	Example: `  shoal del user1`,
	Args:    args(cobra.ExactArgs(1)),
	RunE: func(cmd *cobra.Command, a []string) error {
		return withSession(cmd, func(s *session) error {
			found, err := s.c.Delete(s.ctx, []byte(a[0]))
			if err != nil {
				return err
			}
			if jsonOutput() {
				return writeJSON(cmd.OutOrStdout(), map[string]any{"key": a[0], "found": found})
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

var scanFlags struct {
	limit   int
	reverse bool
}

var scanCmd = &cobra.Command{
	Use:   "scan START END",
	Short: "Print the keys in [START, END) with their values",
	Long: `Print the keys in [START, END) and their values, in key order (descending with --reverse),
one "key<TAB>value" per line. An empty START means the first key, an empty END ("") means no upper
bound. --limit N stops after N keys (0: no limit). With --format json, print an array of
{"key","value"}. The scan reads range after range; it is not a snapshot of the whole span.`,
	Example: `  shoal scan user user~ --limit 10
  shoal scan "" "" --reverse --limit 1
  shoal scan a "" --format json`,
	Args: args(cobra.ExactArgs(2)),
	RunE: func(cmd *cobra.Command, a []string) error {
		if scanFlags.limit < 0 {
			return usageError{fmt.Errorf("invalid --limit %d: must be 0 (no limit) or more", scanFlags.limit)}
		}
		return withSession(cmd, func(s *session) error {
			kvs, err := s.c.Scan(s.ctx, []byte(a[0]), []byte(a[1]), scanFlags.limit, scanFlags.reverse)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if jsonOutput() {
				out := make([]kvJSON, 0, len(kvs))
				for _, kv := range kvs {
					out = append(out, kvJSON{Key: string(kv.GetKey()), Value: string(kv.GetValue())})
				}
				return writeJSON(w, out)
			}
			for _, kv := range kvs {
				if _, err := fmt.Fprintf(w, "%s\t%s\n", kv.GetKey(), kv.GetValue()); err != nil {
					return err
				}
			}
			return nil
		})
	},
}

var casFlags struct {
	expectAbsent bool
}

// casJSON is the JSON output of cas. Current is null when the key does not exist or the swap
// happened.
type casJSON struct {
	Swapped bool    `json:"swapped"`
	Found   bool    `json:"found"`
	Current *string `json:"current"`
}

var casCmd = &cobra.Command{
	Use:   "cas KEY EXPECTED NEW",
	Short: "Set KEY to NEW if its value is EXPECTED (compare-and-swap)",
	Long: `Atomically set KEY to NEW if its current value is EXPECTED, or, with --expect-absent, if KEY
does not exist (then EXPECTED may be omitted or given as ""). Prints "swapped" and exits 0, or
says what the current value is and exits 1. With --format json, print {"swapped","found","current"}.`,
	Example: `  shoal cas counter 41 42
  shoal cas lock "" me --expect-absent`,
	Args: args(cobra.RangeArgs(2, 3)),
	RunE: func(cmd *cobra.Command, a []string) error {
		key, expected, value := a[0], "", ""
		switch {
		case len(a) == 3:
			expected, value = a[1], a[2]
		case casFlags.expectAbsent:
			value = a[1]
		default:
			return usageError{fmt.Errorf("cas takes KEY EXPECTED NEW (EXPECTED may be omitted only with --expect-absent)")}
		}
		if casFlags.expectAbsent && expected != "" {
			return usageError{fmt.Errorf("cas: EXPECTED must be empty with --expect-absent, got %q", expected)}
		}
		return withSession(cmd, func(s *session) error {
			swapped, current, found, err := s.c.CompareAndSwap(s.ctx, []byte(key), []byte(expected), casFlags.expectAbsent, []byte(value))
			if err != nil {
				return err
			}
			if jsonOutput() {
				out := casJSON{Swapped: swapped, Found: found}
				if !swapped && found {
					cur := string(current)
					out.Current = &cur
				}
				if err := writeJSON(cmd.OutOrStdout(), out); err != nil {
					return err
				}
			} else {
				switch {
				case swapped:
					fmt.Fprintln(cmd.OutOrStdout(), "swapped")
				case found:
					fmt.Fprintf(cmd.OutOrStdout(), "not swapped: current value is %s\n", strconv.Quote(string(current)))
				default:
					fmt.Fprintln(cmd.OutOrStdout(), "not swapped: key does not exist")
				}
			}
			if !swapped {
				return exitCode(exitRuntime)
			}
			return nil
		})
	},
}

func init() {
	scanCmd.Flags().IntVar(&scanFlags.limit, "limit", 0, "return at most N keys (0: no limit)")
	scanCmd.Flags().BoolVar(&scanFlags.reverse, "reverse", false, "scan in descending key order")
	casCmd.Flags().BoolVar(&casFlags.expectAbsent, "expect-absent", false, "swap only if KEY does not exist")
	rootCmd.AddCommand(putCmd, getCmd, delCmd, scanCmd, casCmd)
}

// writeJSON prints v as one line of JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
