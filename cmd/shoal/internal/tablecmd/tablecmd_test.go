package tablecmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/cmd/shoal/internal/cli"
	"github.com/shoaldb/shoal/table"
	"github.com/shoaldb/shoal/table/tabletest"
)

// run executes `shoal ARGS…` against kv with a root that has the real root's client flags.
func run(t *testing.T, kv *tabletest.KV, args ...string) (string, error) {
	t.Helper()
	dial = func(context.Context) (table.KV, func() error, error) { return kv, func() error { return nil }, nil }
	root := &cobra.Command{Use: "shoal", SilenceUsage: true, SilenceErrors: true}
	pf := root.PersistentFlags()
	pf.StringVar(&cli.Global.Host, "host", "127.0.0.1:26257", "")
	pf.StringVar(&cli.Global.Format, "format", "text", "")
	pf.DurationVar(&cli.Global.Timeout, "timeout", 10*time.Second, "")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return cli.Usage(err) })
	root.AddCommand(Commands()...)
	scanFlags.limit, createFlags.columns, createFlags.primaryKey = 0, "", ""
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&bytes.Buffer{})
	root.SetArgs(args)
	err := root.Execute()
	for _, c := range Commands() {
		root.RemoveCommand(c)
	}
	return out.String(), err
}

// TestOutputShapes pins the output that scripts rely on: the row as one JSON object with the
// columns in order, scan as a JSON array in primary-key order, the text forms.
func TestOutputShapes(t *testing.T) {
	kv := tabletest.New()
	steps := []struct {
		args []string
		want string
	}{
		{[]string{"table", "create", "users", "--columns", "id:int64,name:string,city:string", "--primary-key", "id"}, "created table users (id 1)\n"},
		{[]string{"row", "put", "users", `{"id":1,"name":"ann","city":"oslo"}`}, "OK\n"},
		{[]string{"row", "put", "users", `{"city":"rome","id":-2,"name":"bo"}`, "--format", "json"}, `{"ok":true}` + "\n"},
		{[]string{"row", "get", "users", "1", "--format", "json"}, `{"id":1,"name":"ann","city":"oslo"}` + "\n"},
		{[]string{"row", "get", "users", "1"}, "id    1\nname  ann\ncity  oslo\n"},
		{[]string{"row", "scan", "users", "--format", "json"}, `[{"id":-2,"name":"bo","city":"rome"},{"id":1,"name":"ann","city":"oslo"}]` + "\n"},
		{[]string{"row", "scan", "users", "--limit", "1"}, "ID  NAME  CITY\n-2  bo    rome\n"},
		{[]string{"table", "list"}, "NAME   ID  COLUMNS                           PRIMARY KEY\nusers  1   id:int64,name:string,city:string  id\n"},
		{[]string{"table", "describe", "users"}, "table users (id 1), primary key (id)\nCOLUMN  TYPE    KEY\nid      int64   1\nname    string  \ncity    string  \n"},
		{[]string{"row", "del", "users", "1"}, "deleted\n"},
		{[]string{"row", "del", "users", "1"}, "not found\n"},
		{[]string{"table", "drop", "users"}, "dropped table users (1 rows)\n"},
		{[]string{"table", "list", "--format", "json"}, "[]\n"},
	}
	for _, s := range steps {
		out, err := run(t, kv, s.args...)
		if err != nil || out != s.want {
			t.Fatalf("shoal %s:\n%q (%v)\nwant\n%q", strings.Join(s.args, " "), out, err, s.want)
		}
	}
}

// TestErrors: mistakes in the command line are usage errors (exit code 2); rows that do not fit the
// table are INVALID_ARGUMENT; a missing row or table is a plain runtime error.
func TestErrors(t *testing.T) {
	kv := tabletest.New()
	if _, err := run(t, kv, "table", "create", "t", "--columns", "a:string,b:int64", "--primary-key", "a,b"); err != nil {
		t.Fatal(err)
	}
	var ue cli.UsageError
	for _, args := range [][]string{
		{"table", "create", "x", "--columns", "id:int32", "--primary-key", "id"},
		{"table", "create", "x", "--columns", "id:int64"},
		{"table", "create", "x", "--columns", "id:int64", "--primary-key", "nope"},
		{"table", "describe"},
		{"row", "get", "t", "only-one"},
		{"row", "del", "t"},
		{"row", "scan", "t", "--limit", "-1"},
		{"row", "put", "t"},
	} {
		if _, err := run(t, kv, args...); !errors.As(err, &ue) {
			t.Errorf("shoal %s: %v, want a usage error", strings.Join(args, " "), err)
		}
	}
	for _, args := range [][]string{
		{"row", "put", "t", `{"a":"x"}`},
		{"row", "put", "t", `{"a":"x","b":1,"c":2}`},
		{"row", "get", "t", "x", "1.5"},
	} {
		if _, err := run(t, kv, args...); !errors.Is(err, client.ErrInvalidArgument) || errors.As(err, &ue) {
			t.Errorf("shoal %s: %v, want InvalidArgument", strings.Join(args, " "), err)
		}
	}
	for _, args := range [][]string{{"row", "get", "t", "x", "1"}, {"table", "describe", "nope"}, {"row", "scan", "nope"}} {
		if _, err := run(t, kv, args...); err == nil || errors.As(err, &ue) || errors.Is(err, client.ErrInvalidArgument) {
			t.Errorf("shoal %s: %v, want a runtime error", strings.Join(args, " "), err)
		}
	}
	out, err := run(t, kv, "table", "create", "x", "--columns", "id:int64", "--primary-key", "id", "--format", "json")
	var d table.Descriptor
	if err != nil || json.Unmarshal([]byte(out), &d) != nil || d.Name != "x" || d.ID == 0 {
		t.Fatalf("create --format json: %q, %v", out, err)
	}
}

func TestProgressLine(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	for _, tc := range []struct {
		st   table.RekeyState
		want []string
	}{
		{table.RekeyState{Phase: "copy", Rows: 250, EstimatedRows: 1000, Changes: 7, UpdatedUnixMs: 998_000},
			[]string{"copy: [#######.......................]  25%", "250 of ~1000 rows copied", "7 changes followed", "recorded 2s ago"}},
		{table.RekeyState{Phase: "catch-up", Rows: 1200, EstimatedRows: 1000, UpdatedUnixMs: 1_000_000},
			[]string{"[##############################] 100%"}},
		{table.RekeyState{Phase: "copy", Rows: 42, UpdatedUnixMs: 999_000},
			[]string{"copy: 42 rows copied, 0 changes followed"}},
	} {
		got := progressLine(&tc.st, now)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("progressLine(%+v) = %q, want it to contain %q", tc.st, got, w)
			}
		}
	}
}
