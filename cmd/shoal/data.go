package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/cmd/shoal/internal/cli"
	"github.com/shoaldb/shoal/server/apijson"
	"github.com/shoaldb/shoal/server/resp"
)

// kvJSON is one key-value pair in JSON output. Keys and values follow the convention of every key
// Shoal prints (apijson.Key): the text itself when readable, else base64 with key_encoding or
// value_encoding "base64".
type kvJSON struct {
	Key         string `json:"key"`
	KeyEncoding string `json:"key_encoding,omitempty"`
	// Redis names a key the RESP listener stored (redis:NAME, or redis:NAME[FIELD] for a hash field).
	Redis         string `json:"redis,omitempty"`
	Value         string `json:"value"`
	ValueEncoding string `json:"value_encoding,omitempty"`
}

func newKVJSON(k, v []byte) kvJSON {
	var j kvJSON
	j.Key, j.KeyEncoding = apijson.Key(k)
	if n, ok := resp.NameOf(k); ok {
		j.Redis = n.String()
	}
	j.Value, j.ValueEncoding = apijson.Key(v)
	return j
}

// keyText is a key in text output: a key the RESP listener stored by its Redis name (redis:NAME),
// any other key as valueText prints it.
func keyText(b []byte) string {
	if n, ok := resp.NameOf(b); ok {
		return n.String()
	}
	return valueText(b)
}

// valueText is a value in text output: itself when readable, else quoted with Go escapes.
func valueText(b []byte) string {
	if apijson.Readable(b) {
		return string(b)
	}
	return strconv.Quote(string(b))
}

var putFlags struct {
	valueFile string
	ttl       time.Duration
}

var putCmd = &cobra.Command{
	Use:   "put KEY VALUE | put KEY - | put KEY --value-file FILE",
	Short: "Set KEY to VALUE (or to what stdin or a file holds)",
	Long: `Set KEY to VALUE. With "-" as VALUE the value is read from standard input, with --value-file
from a file, byte for byte (a trailing newline included), so binary values and values too long for
a command line go in whole. The write is acknowledged once it is durable on a quorum of the key's
range. If the outcome is unknown (the leader failed mid-write) the command fails with "ambiguous" or
"timeout": read the key back before retrying. With --ttl the key expires that long after the range's
leader takes the write (see "shoal ttl").`,
	Example: `  shoal put user1 alice
  shoal put session42 token --ttl 60s
  echo -n '{"name":"Ada"}' | shoal put user2 -
  shoal put logo --value-file logo.png`,
	Args: cli.Args(cobra.RangeArgs(1, 2)),
	RunE: func(cmd *cobra.Command, a []string) error {
		value, err := putValue(cmd, a)
		if err != nil {
			return err
		}
		return withSession(cmd, func(s *session) error {
			put := func() error { return s.c.Put(s.ctx, []byte(a[0]), value) }
			if putFlags.ttl != 0 {
				put = func() error { return s.c.PutTTL(s.ctx, []byte(a[0]), value, putFlags.ttl) }
			}
			if err := put(); err != nil {
				return err
			}
			if cli.JSON() {
				return cli.WriteJSON(cmd.OutOrStdout(), map[string]any{"ok": true})
			}
			_, err := fmt.Fprintln(cmd.OutOrStdout(), "OK")
			return err
		})
	},
}

var getFlags struct{ prefix bool }

var getCmd = &cobra.Command{
	Use:   "get KEY | get --prefix PREFIX",
	Short: "Print the value of KEY, or every key starting with PREFIX",
	Long: `Print the value of KEY (a linearizable read from the range's leader; --consistency replica or
bounded lets other replicas serve it), as it is stored. If KEY does not exist, print "not found" on
stderr and exit with code 1. With --format json, print
{"key","value"}: readable keys and values as text, others in base64 with "key_encoding" or
"value_encoding": "base64".

With --prefix, print every key that starts with PREFIX and its value, as "scan --prefix" does (exit 0
even when there is none).`,
	Example: `  shoal get user1
  shoal get user1 --format json
  shoal get --prefix user/ --format json`,
	Args: cli.Args(cobra.ExactArgs(1)),
	RunE: func(cmd *cobra.Command, a []string) error {
		if getFlags.prefix {
			if redisKey {
				return cli.Usage(errors.New("get: --prefix and --redis do not go together (a Redis key is stored under its hash slot; list them with redis-cli SCAN)"))
			}
			start, end := prefixSpan(a[0])
			return scanAndPrint(cmd, start, end, 0, false)
		}
		ro, err := readOpts()
		if err != nil {
			return err
		}
		return withSession(cmd, func(s *session) error {
			v, found, err := s.c.Get(s.ctx, []byte(a[0]), ro...)
			if err != nil {
				return err
			}
			if !found {
				fmt.Fprintln(cmd.ErrOrStderr(), "not found")
				return exitCode(exitRuntime)
			}
			if cli.JSON() {
				return cli.WriteJSON(cmd.OutOrStdout(), newKVJSON([]byte(a[0]), v))
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), string(v))
			return err
		})
	},
}

var ttlCmd = &cobra.Command{
	Use:   "ttl KEY",
	Short: "Print how long KEY has left before it expires",
	Long: `Print the time KEY has left before it expires, as the range's leader sees it (a linearizable
read), e.g. "59.2s"; "no expiry" for a key that never expires. If KEY does not exist (or has expired),
print "not found" on stderr and exit with code 1. With --format json, print {"key","ttl_ms",
"expire_at_unix_ms"} (both -1 without an expiry).`,
	Example: `  shoal put session42 token --ttl 60s
  shoal ttl session42`,
	Args: cli.Args(cobra.ExactArgs(1)),
	RunE: func(cmd *cobra.Command, a []string) error {
		return withSession(cmd, func(s *session) error {
			e, found, err := s.c.GetEntry(s.ctx, []byte(a[0]))
			if err != nil {
				return err
			}
			if !found {
				fmt.Fprintln(cmd.ErrOrStderr(), "not found")
				return exitCode(exitRuntime)
			}
			left, at := int64(-1), int64(-1)
			if e.ExpireAtMs != 0 {
				at, left = e.ExpireAtMs, max(e.ExpireAtMs-time.Now().UnixMilli(), 0)
			}
			if cli.JSON() {
				return cli.WriteJSON(cmd.OutOrStdout(), map[string]any{"key": keyText([]byte(a[0])), "ttl_ms": left, "expire_at_unix_ms": at})
			}
			if left < 0 {
				_, err = fmt.Fprintln(cmd.OutOrStdout(), "no expiry")
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), (time.Duration(left) * time.Millisecond).String())
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
	Args:    cli.Args(cobra.ExactArgs(1)),
	RunE: func(cmd *cobra.Command, a []string) error {
		return withSession(cmd, func(s *session) error {
			found, err := s.c.Delete(s.ctx, []byte(a[0]))
			if err != nil {
				return err
			}
			if cli.JSON() {
				out := map[string]any{"found": found}
				out["key"], out["key_encoding"] = apijson.Key([]byte(a[0]))
				if out["key_encoding"] == "" {
					delete(out, "key_encoding")
				}
				return cli.WriteJSON(cmd.OutOrStdout(), out)
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

var readFlags struct {
	consistency  string
	maxStaleness time.Duration
}

// readOpts turns --consistency and --max-staleness into the client's read options.
func readOpts() ([]client.ReadOption, error) {
	switch readFlags.consistency {
	case "strong":
		return nil, nil
	case "replica":
		return []client.ReadOption{client.ReplicaRead()}, nil
	case "bounded":
		if readFlags.maxStaleness < time.Millisecond {
			return nil, cli.Usage(fmt.Errorf("invalid --max-staleness %s: at least 1ms", readFlags.maxStaleness))
		}
		return []client.ReadOption{client.BoundedStaleness(readFlags.maxStaleness)}, nil
	}
	return nil, cli.Usage(fmt.Errorf("invalid --consistency %q: strong, replica or bounded", readFlags.consistency))
}

var scanFlags struct {
	limit   int
	reverse bool
	prefix  bool
}

var scanCmd = &cobra.Command{
	Use:   "scan START END | scan --prefix PREFIX",
	Short: "Print the keys in [START, END), or starting with PREFIX, with their values",
	Long: `Print the keys in [START, END) and their values, in key order (descending with --reverse),
one "key<TAB>value" per line (a key or value that is not readable text is printed quoted, with Go
escapes). An empty START means the first key, an empty END ("") means no upper bound; with --prefix
the one argument is a prefix and the scan covers the keys that start with it. --limit N stops after
N keys (0: no limit). With --format json, print an array of {"key","value"} (keys and values that
are not readable text in base64, with "key_encoding" or "value_encoding": "base64"). The scan reads
range after range; it is not a snapshot of the whole span.`,
	Example: `  shoal scan user user~ --limit 10
  shoal scan --prefix user/ --limit 10
  shoal scan "" "" --reverse --limit 1
  shoal scan a "" --format json`,
	Args: cli.Args(cobra.RangeArgs(1, 2)),
	RunE: func(cmd *cobra.Command, a []string) error {
		if scanFlags.limit < 0 {
			return cli.Usage(fmt.Errorf("invalid --limit %d: must be 0 (no limit) or more", scanFlags.limit))
		}
		var start, end []byte
		switch {
		case scanFlags.prefix && len(a) == 1:
			start, end = prefixSpan(a[0])
		case !scanFlags.prefix && len(a) == 2:
			start, end = []byte(a[0]), []byte(a[1])
		default:
			return cli.Usage(fmt.Errorf("scan takes START END, or one PREFIX with --prefix; usage: %s", cmd.UseLine()))
		}
		return scanAndPrint(cmd, start, end, scanFlags.limit, scanFlags.reverse)
	},
}

// scanAndPrint runs a scan and prints its pairs as text lines or a JSON array.
func scanAndPrint(cmd *cobra.Command, start, end []byte, limit int, reverse bool) error {
	ro, err := readOpts()
	if err != nil {
		return err
	}
	return withSession(cmd, func(s *session) error {
		kvs, err := s.c.ScanWith(s.ctx, start, end, limit, reverse, ro...)
		if err != nil {
			return err
		}
		w := cmd.OutOrStdout()
		if cli.JSON() {
			out := make([]kvJSON, 0, len(kvs))
			for _, kv := range kvs {
				out = append(out, newKVJSON(kv.GetKey(), kv.GetValue()))
			}
			return cli.WriteJSON(w, out)
		}
		for _, kv := range kvs {
			if _, err := fmt.Fprintf(w, "%s\t%s\n", keyText(kv.GetKey()), valueText(kv.GetValue())); err != nil {
				return err
			}
		}
		return nil
	})
}

// prefixSpan is the span [start, end) of the keys that start with prefix: end is the smallest key
// greater than every such key (empty, meaning no bound, when there is none: a prefix of 0xff bytes).
func prefixSpan(prefix string) (start, end []byte) {
	start = []byte(prefix)
	end = append([]byte(nil), start...)
	for len(end) > 0 {
		if last := len(end) - 1; end[last] < 0xff {
			end[last]++
			return start, end
		}
		end = end[:len(end)-1]
	}
	return start, nil
}

// putValue is the value put writes: the VALUE argument, standard input for "-", or --value-file.
func putValue(cmd *cobra.Command, a []string) ([]byte, error) {
	switch {
	case putFlags.valueFile != "" && len(a) == 2:
		return nil, cli.Usage(errors.New("put: give VALUE or --value-file, not both"))
	case putFlags.valueFile != "":
		b, err := os.ReadFile(putFlags.valueFile)
		if err != nil {
			return nil, cli.Usage(fmt.Errorf("--value-file: %w", err))
		}
		return b, nil
	case len(a) == 1:
		return nil, cli.Usage(fmt.Errorf("put: VALUE missing: give it, \"-\" to read it from standard input, or --value-file FILE; usage: %s", cmd.UseLine()))
	case a[1] == "-":
		b, err := io.ReadAll(cmd.InOrStdin())
		if err != nil {
			return nil, fmt.Errorf("put: read the value from standard input: %w", err)
		}
		return b, nil
	}
	return []byte(a[1]), nil
}

var casFlags struct {
	expectAbsent bool
}

// casJSON is the JSON output of cas. Current is null when the key does not exist or the swap
// happened; CurrentEncoding is "base64" when the current value is not readable text (apijson.Key).
type casJSON struct {
	Swapped         bool    `json:"swapped"`
	Found           bool    `json:"found"`
	Current         *string `json:"current"`
	CurrentEncoding string  `json:"current_encoding,omitempty"`
}

var casCmd = &cobra.Command{
	Use:   "cas KEY EXPECTED NEW",
	Short: "Set KEY to NEW if its value is EXPECTED (compare-and-swap)",
	Long: `Atomically set KEY to NEW if its current value is EXPECTED, or, with --expect-absent, if KEY
does not exist (then EXPECTED may be omitted or given as ""). Prints "swapped" and exits 0, or
says what the current value is and exits 1. With --format json, print {"swapped","found","current"}.`,
	Example: `  shoal cas counter 41 42
  shoal cas lock "" me --expect-absent`,
	Args: cli.Args(cobra.RangeArgs(2, 3)),
	RunE: func(cmd *cobra.Command, a []string) error {
		key, expected, value := a[0], "", ""
		switch {
		case len(a) == 3:
			expected, value = a[1], a[2]
		case casFlags.expectAbsent:
			value = a[1]
		default:
			return cli.Usage(fmt.Errorf("cas takes KEY EXPECTED NEW (EXPECTED may be omitted only with --expect-absent)"))
		}
		if casFlags.expectAbsent && expected != "" {
			return cli.Usage(fmt.Errorf("cas: EXPECTED must be empty with --expect-absent, got %q", expected))
		}
		return withSession(cmd, func(s *session) error {
			swapped, current, found, err := s.c.CompareAndSwap(s.ctx, []byte(key), []byte(expected), casFlags.expectAbsent, []byte(value))
			if err != nil {
				return err
			}
			if cli.JSON() {
				out := casJSON{Swapped: swapped, Found: found}
				if !swapped && found {
					cur, enc := apijson.Key(current)
					out.Current, out.CurrentEncoding = &cur, enc
				}
				if err := cli.WriteJSON(cmd.OutOrStdout(), out); err != nil {
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
	putCmd.Flags().StringVar(&putFlags.valueFile, "value-file", "", "read the value from this file (byte for byte)")
	putCmd.Flags().DurationVar(&putFlags.ttl, "ttl", 0, "expire the key after this long (e.g. 60s, at least 1ms; 0: never)")
	getCmd.Flags().BoolVar(&getFlags.prefix, "prefix", false, "print every key that starts with the argument, with its value")
	for _, c := range []*cobra.Command{getCmd, scanCmd} {
		c.Flags().StringVar(&readFlags.consistency, "consistency", "strong", "strong: linearizable, at the range's leader; replica: linearizable at any replica, a learner too (it asks the leader for its commit index, not the data); bounded: any replica whose state is at most --max-staleness old")
		c.Flags().DurationVar(&readFlags.maxStaleness, "max-staleness", client.DefaultMaxStaleness, "with --consistency bounded: how old the state read may be")
	}
	scanCmd.Flags().IntVar(&scanFlags.limit, "limit", 0, "return at most N keys (0: no limit)")
	scanCmd.Flags().BoolVar(&scanFlags.reverse, "reverse", false, "scan in descending key order")
	scanCmd.Flags().BoolVar(&scanFlags.prefix, "prefix", false, "scan the keys that start with the one argument")
	casCmd.Flags().BoolVar(&casFlags.expectAbsent, "expect-absent", false, "swap only if KEY does not exist")
	rootCmd.AddCommand(putCmd, getCmd, delCmd, scanCmd, casCmd, ttlCmd)
}

// writeJSON prints v as one line of JSON.
