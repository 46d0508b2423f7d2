package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/cmd/shoal/internal/cli"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/server/apijson"
	"github.com/shoaldb/shoal/table"
)

var watchFlags struct {
	span        bool
	from        string
	duration    time.Duration
	checkpoints bool
	initial     bool
	table       string
}

// watchJSON is one line of watch's JSON output.
type watchJSON struct {
	Kind          string `json:"kind"`
	Initial       bool   `json:"initial,omitempty"`
	Key           string `json:"key,omitempty"`
	KeyEncoding   string `json:"key_encoding,omitempty"`
	Value         string `json:"value,omitempty"`
	ValueEncoding string `json:"value_encoding,omitempty"`
	ExpireAtMs    int64  `json:"expire_at_unix_ms,omitempty"`
	Version       uint64 `json:"version,omitempty"`
	RangeID       uint64 `json:"range_id,omitempty"`
	Index         uint64 `json:"index,omitempty"`
	Seq           uint32 `json:"seq,omitempty"`
	Cursor        string `json:"cursor,omitempty"`
	// Row (a table's PUT) and PrimaryKey (its DELETE or EXPIRE), with --table.
	Row        json.RawMessage `json:"row,omitempty"`
	PrimaryKey json.RawMessage `json:"primary_key,omitempty"`
}

var watchCmd = &cobra.Command{
	Use:     "watch PREFIX | watch --span START END | watch --table TABLE",
	Aliases: []string{"changefeed"},
	Short:   "Print every change to the keys under PREFIX (or in [START, END)) as it is applied",
	Long: `Print every put, delete and expiration of the keys that start with PREFIX (with --span: the keys in
[START, END), an empty END meaning no bound) from now on, or from --from CURSOR, until interrupted
(Ctrl-C) or --for has passed. Changes of one key come in the order they were applied, each at
least once; the watch follows the span's ranges through splits, merges, replica moves and leader
changes. With --initial it first prints the span's keys as they are when it starts. Text output:
"PUT key value", "DELETE key", "EXPIRE key" (and "INITIAL key value") lines. With --format json, one
JSON object per line: kind, key, value (base64 with key_encoding/value_encoding when not text),
version, expire_at_unix_ms, and range_id, index and seq, the change's position (a reader that sees
a position it has seen already drops the change). With --table, the changes of a table's rows: a
PUT's "row" and a DELETE's or EXPIRE's "primary_key" as JSON objects (text: one per line).

A cursor resumes a watch where it stopped: it is printed to standard error when the watch ends,
and with --checkpoints also as it advances (JSON: {"kind":"CHECKPOINT","cursor":...} lines). Each
replica keeps its recent changes in a bounded, in-memory window: a watch that stopped too long ago
fails with "watch lost its position"; re-read the span (shoal scan) and watch from now.`,
	Example: `  shoal watch user/
  shoal watch --span a m --format json --checkpoints
  shoal changefeed user/ --from "$CURSOR" --for 1m
  shoal changefeed --table users --initial --format json`,
	Args: cli.Args(cobra.RangeArgs(0, 2)),
	RunE: func(cmd *cobra.Command, a []string) error {
		var start, end []byte
		switch {
		case watchFlags.table != "" && len(a) == 0 && !watchFlags.span:
			return withSession(cmd, func(s *session) error {
				d, err := table.NewCatalog(s.c).Describe(s.ctx, watchFlags.table)
				if err != nil {
					return err
				}
				start, end = table.TableSpan(d.ID)
				return runWatch(cmd, s.c, start, end, &d)
			})
		case watchFlags.table != "":
			return cli.Usage(fmt.Errorf("watch --table TABLE takes no other argument; usage: %s", cmd.UseLine()))
		case watchFlags.span && len(a) == 2:
			start, end = []byte(a[0]), []byte(a[1])
		case !watchFlags.span && len(a) == 1:
			start, end = prefixSpan(a[0])
		default:
			return cli.Usage(fmt.Errorf("watch takes one PREFIX, or START END with --span; usage: %s", cmd.UseLine()))
		}
		if watchFlags.duration < 0 {
			return cli.Usage(fmt.Errorf("invalid --for %s: must be positive (0: until interrupted)", watchFlags.duration))
		}
		return withSession(cmd, func(s *session) error { return runWatch(cmd, s.c, start, end, nil) })
	},
}

// runWatch prints the span's changes (as rows of d if not nil) until interrupted or --for passes,
// then the cursor to resume.
func runWatch(cmd *cobra.Command, c *client.Client, start, end []byte, d *table.Descriptor) error {
	// The session's --timeout bounds connecting; the watch itself runs until stopped.
	parent := cmd.Context()
	if parent == nil {
		parent = context.Background()
	}
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if watchFlags.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, watchFlags.duration)
		defer cancel()
	}
	w, errw := cmd.OutOrStdout(), cmd.ErrOrStderr()
	var cursor string
	var opts []client.WatchOption
	if watchFlags.initial {
		opts = append(opts, client.WithInitialScan())
	}
	err := c.Watch(ctx, start, end, watchFlags.from, func(ev client.WatchEvent) error {
		if ev.Kind == pb.RangeFeedEvent_CHECKPOINT {
			if cursor == "" {
				fmt.Fprintf(errw, "watching [%s, %s)\n", valueText(start), valueText(end))
			}
			cursor = ev.Cursor
			if !watchFlags.checkpoints {
				return nil
			}
		}
		if d != nil && ev.Kind != pb.RangeFeedEvent_CHECKPOINT {
			return printRowEvent(w, d, ev)
		}
		return printWatchEvent(w, ev)
	}, opts...)
	if cursor != "" {
		fmt.Fprintf(errw, "resume with: --from %s\n", cursor)
	}
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return nil // interrupted or --for passed: the normal end of a watch
	}
	return err
}

func printWatchEvent(w io.Writer, ev client.WatchEvent) error {
	if cli.JSON() {
		j := watchJSON{Kind: ev.Kind.String(), Initial: ev.Initial, ExpireAtMs: ev.ExpireAtUnixMs, Version: ev.Version, RangeID: ev.RangeID, Index: ev.Index, Seq: ev.Seq, Cursor: ev.Cursor}
		if ev.Kind != pb.RangeFeedEvent_CHECKPOINT {
			j.Key, j.KeyEncoding = apijson.Key(ev.Key)
		}
		if ev.Kind == pb.RangeFeedEvent_PUT {
			j.Value, j.ValueEncoding = apijson.Key(ev.Value)
		}
		return cli.WriteJSON(w, j)
	}
	var err error
	switch ev.Kind {
	case pb.RangeFeedEvent_PUT:
		kind := "PUT"
		if ev.Initial {
			kind = "INITIAL"
		}
		_, err = fmt.Fprintf(w, "%s\t%s\t%s\n", kind, keyText(ev.Key), valueText(ev.Value))
	case pb.RangeFeedEvent_CHECKPOINT:
		_, err = fmt.Fprintf(w, "CHECKPOINT\t%s\n", ev.Cursor)
	default:
		_, err = fmt.Fprintf(w, "%s\t%s\n", ev.Kind, keyText(ev.Key))
	}
	return err
}

// printRowEvent prints a change of table d's rows.
func printRowEvent(w io.Writer, d *table.Descriptor, ev client.WatchEvent) error {
	j := watchJSON{Kind: ev.Kind.String(), Initial: ev.Initial, ExpireAtMs: ev.ExpireAtUnixMs, Version: ev.Version, RangeID: ev.RangeID, Index: ev.Index, Seq: ev.Seq}
	if ev.Kind == pb.RangeFeedEvent_PUT {
		row, err := d.DecodeRow(ev.Key, ev.Value)
		if err != nil {
			return fmt.Errorf("table %q: change at range %d index %d: %w", d.Name, ev.RangeID, ev.Index, err)
		}
		j.Row = table.RowJSON(d, row)
	} else {
		key, err := table.DecodeKey(d, ev.Key)
		if err != nil {
			return fmt.Errorf("table %q: change at range %d index %d: %w", d.Name, ev.RangeID, ev.Index, err)
		}
		kd := *d
		kd.Columns = d.KeyColumns()
		row := table.Row{}
		for i, c := range kd.Columns {
			row[c.Name] = key[i]
		}
		j.PrimaryKey = table.RowJSON(&kd, row)
	}
	if cli.JSON() {
		return cli.WriteJSON(w, j)
	}
	kind, obj := j.Kind, j.Row
	if ev.Initial {
		kind = "INITIAL"
	}
	if obj == nil {
		obj = j.PrimaryKey
	}
	_, err := fmt.Fprintf(w, "%s\t%s\n", kind, obj)
	return err
}

func init() {
	watchCmd.Flags().StringVar(&watchFlags.table, "table", "", "watch the rows of this table (shoal table create)")
	watchCmd.Flags().BoolVar(&watchFlags.span, "span", false, "watch [START, END) instead of a prefix")
	watchCmd.Flags().StringVar(&watchFlags.from, "from", "", "resume from a cursor an earlier watch printed")
	watchCmd.Flags().DurationVar(&watchFlags.duration, "for", 0, "stop after this long (0: until interrupted)")
	watchCmd.Flags().BoolVar(&watchFlags.initial, "initial", false, "first print every key of the span with its value as the watch starts (INITIAL lines; JSON: \"initial\": true), then the changes")
	watchCmd.Flags().BoolVar(&watchFlags.checkpoints, "checkpoints", false, "also print a cursor as the watch advances (at most once a second)")
	rootCmd.AddCommand(watchCmd)
}
