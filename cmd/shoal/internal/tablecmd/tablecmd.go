// Package tablecmd is `shoal table` and `shoal row`: the commands that create, describe, list and
// drop tables and put, get, delete and scan their rows. It only parses arguments, dials a client
// and prints; the encoding, validation and catalog belong to package table. Its command shapes
// and output formats are a contract that scripts rely on.
package tablecmd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/cmd/shoal/internal/cli"
	"github.com/shoaldb/shoal/table"
)

// Commands returns the root's `table` and `row` commands.
func Commands() []*cobra.Command { return []*cobra.Command{tableCmd, rowCmd} }

// dial connects to the cluster the root's flags name, as every client command does; ctx bounds
// the dialing. Tests replace it.
var dial = func(ctx context.Context) (table.KV, func() error, error) {
	var addrs []string
	for _, a := range strings.Split(cli.Global.Host, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return nil, nil, cli.Usage(errors.New("--host is empty"))
	}
	var tlsCfg *tls.Config
	if cli.Global.CertsDir != "" {
		var err error
		if tlsCfg, err = client.LoadTLS(cli.Global.CertsDir); err != nil {
			return nil, nil, fmt.Errorf("--certs-dir: %w", err)
		}
	}
	reqTimeout := min(client.DefaultRequestTimeout, cli.Global.Timeout)
	// FailFast: a wrong or stopped --host is reported at once instead of after the retries.
	c, err := client.New(ctx, client.Config{Addrs: addrs, AuthToken: cli.Global.AuthToken, TLS: tlsCfg, RequestTimeout: reqTimeout, FailFast: true})
	if err != nil {
		return nil, nil, err
	}
	return c, c.Close, nil
}

// withCatalog dials the cluster and runs fn with its catalog, under a context bounded by --timeout.
func withCatalog(cmd *cobra.Command, fn func(ctx context.Context, cat *table.Catalog) error) error {
	return withKV(cmd, func(ctx context.Context, kv table.KV) error { return fn(ctx, table.NewCatalog(kv)) })
}

// withKV dials the cluster and runs fn with the connection, under a context bounded by --timeout.
func withKV(cmd *cobra.Command, fn func(ctx context.Context, kv table.KV) error) error {
	if err := cli.ValidateGlobal(cmd, nil); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(parentContext(cmd), cli.Global.Timeout)
	defer cancel()
	kv, closeKV, err := dial(ctx)
	if err != nil {
		return err
	}
	// Closing only drops the connections; every request of the command has returned by then.
	defer func() { _ = closeKV() }()
	return fn(ctx, kv)
}

// withTable is withCatalog with the table named name opened.
func withTable(cmd *cobra.Command, name string, fn func(ctx context.Context, t *table.Table) error) error {
	return withCatalog(cmd, func(ctx context.Context, cat *table.Catalog) error {
		t, err := cat.Open(ctx, name)
		if err != nil {
			return err
		}
		return fn(ctx, t)
	})
}

// withRow is withTable for a command on one row, `CMD TABLE KEY…`: fn gets the primary key. A wrong
// count of key values is a usage error, a value that does not parse an invalid argument.
func withRow(cmd *cobra.Command, a []string, fn func(ctx context.Context, t *table.Table, key []any) error) error {
	return withTable(cmd, a[0], func(ctx context.Context, t *table.Table) error {
		args := a[1:]
		if len(args) != len(t.Desc.PrimaryKey) {
			return cli.Usage(fmt.Errorf("%s: table %q has the primary key (%s): give %d value(s) in that order, %d given",
				cmd.Name(), t.Desc.Name, strings.Join(t.Desc.PrimaryKey, ", "), len(t.Desc.PrimaryKey), len(args)))
		}
		key, err := table.ParseKey(&t.Desc, args)
		if err != nil {
			return err
		}
		return fn(ctx, t, key)
	})
}

// ok prints a command's success: OK, or {"ok":true}.
func ok(cmd *cobra.Command) error {
	if cli.JSON() {
		return cli.WriteJSON(cmd.OutOrStdout(), map[string]any{"ok": true})
	}
	_, err := fmt.Fprintln(cmd.OutOrStdout(), "OK")
	return err
}
