package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/cmd/shoal/internal/cli"
	"github.com/shoaldb/shoal/server"
)

// certFlags are the flags of `shoal cert create-*` (each subcommand registers its own copies, bound to
// these variables).
var certFlags struct {
	certsDir  string
	overwrite bool
	days      int
	hosts     []string
}

var certCmd = &cobra.Command{
	Use:   "cert",
	Short: "Create the certificates for mutual TLS (CA, node, client)",
	Long: `Create the certificates that "shoal start --certs-dir" and client commands' --certs-dir use.
Keys are ECDSA P-256; certificates are X.509 signed by a CA of your own, kept in the same directory.

  create-ca      ca.crt and ca.key (mode 0600): the cluster's certificate authority
  create-node    node.crt and node.key, signed by the CA, for the hosts nodes and clients dial
  create-client  client.crt and client.key, signed by the CA, for client commands and programs

A node reads ca.crt, node.crt and node.key; a client reads ca.crt, client.crt and client.key. ca.key is
only needed to sign: keep it off the nodes where you can. Existing files are never replaced unless
--overwrite is given.`,
	Example: `  shoal cert create-ca --certs-dir certs
  shoal cert create-node --certs-dir certs --host 127.0.0.1 --host localhost --host node1.example.com
  shoal cert create-client --certs-dir certs
  shoal start --data-dir d --bootstrap --certs-dir certs
  shoal --certs-dir certs put k v`,
	Args: cobra.ArbitraryArgs,
	RunE: cli.GroupRunE,
}

var certCreateCACmd = &cobra.Command{
	Use:   "create-ca --certs-dir DIR",
	Short: "Create the cluster's certificate authority (ca.crt, ca.key)",
	Long: `Create a new certificate authority in DIR (created if missing): ca.crt, the certificate every
node and client trusts, and ca.key (mode 0600), the key that signs node and client certificates.
Copy ca.crt to every node and client; keep ca.key safe. Refuses to replace existing files unless
--overwrite is given (a new CA invalidates every certificate signed by the old one).`,
	Example: `  shoal cert create-ca --certs-dir certs`,
	Args:    cli.Args(cobra.NoArgs),
	RunE: func(cmd *cobra.Command, _ []string) error {
		return runCertCreate(cmd, func(o server.CertOptions) ([]string, error) { return server.CreateCA(certFlags.certsDir, o) })
	},
}

var certCreateNodeCmd = &cobra.Command{
	Use:   "create-node --certs-dir DIR --host HOST [--host HOST ...]",
	Short: "Create a node certificate signed by the CA (node.crt, node.key)",
	Long: `Create node.crt and node.key (mode 0600) in DIR, signed by the CA in DIR (ca.crt, ca.key).
The certificate is valid for every --host: give each IP address and DNS name that other nodes and
clients dial this node by (its --advertise or --listen host; also localhost/127.0.0.1 for local use).
A node presents it both as server (gRPC, HTTPS, RESP over TLS) and as client to other nodes. One
certificate may serve several nodes if it lists all their hosts.`,
	Example: `  shoal cert create-node --certs-dir certs --host 127.0.0.1 --host localhost
  shoal cert create-node --certs-dir certs --host 10.0.0.1,node1.example.com --overwrite`,
	Args: cli.Args(cobra.NoArgs),
	RunE: func(cmd *cobra.Command, _ []string) error {
		if len(certFlags.hosts) == 0 {
			return cli.Usage(errors.New("create-node needs at least one --host (an IP address or DNS name nodes and clients dial)"))
		}
		return runCertCreate(cmd, func(o server.CertOptions) ([]string, error) {
			return server.CreateNodeCert(certFlags.certsDir, certFlags.hosts, o)
		})
	},
}

var certCreateClientCmd = &cobra.Command{
	Use:   "create-client --certs-dir DIR",
	Short: "Create a client certificate signed by the CA (client.crt, client.key)",
	Long: `Create client.crt and client.key (mode 0600) in DIR, signed by the CA in DIR (ca.crt, ca.key).
Client commands given --certs-dir DIR present it to nodes started with --certs-dir, which require it
on gRPC; Go programs load it with client.LoadTLS(DIR).`,
	Example: `  shoal cert create-client --certs-dir certs
  shoal --certs-dir certs --host 10.0.0.1:26257 get k`,
	Args: cli.Args(cobra.NoArgs),
	RunE: func(cmd *cobra.Command, _ []string) error {
		return runCertCreate(cmd, func(o server.CertOptions) ([]string, error) { return server.CreateClientCert(certFlags.certsDir, o) })
	},
}

func init() {
	for _, c := range []*cobra.Command{certCreateCACmd, certCreateNodeCmd, certCreateClientCmd} {
		f := c.Flags()
		f.SortFlags = false
		// Shadows the root's client --certs-dir: here it is the directory written to.
		f.StringVar(&certFlags.certsDir, "certs-dir", "", "directory of the certificates (required; created if missing)")
		if c == certCreateNodeCmd {
			f.StringSliceVar(&certFlags.hosts, "host", nil, "IP address or DNS name the node is dialled by (repeat, or comma-separate)")
		}
		days := 5 * 365
		if c == certCreateCACmd {
			days = 10 * 365
		}
		f.IntVar(&certFlags.days, "days", days, "validity in days (a certificate never outlives its CA)")
		f.BoolVar(&certFlags.overwrite, "overwrite", false, "replace existing files")
		_ = c.MarkFlagRequired("certs-dir")
		certCmd.AddCommand(c)
	}
	rootCmd.AddCommand(certCmd)
}

// runCertCreate validates the common flags, runs create and prints the files written: one path a line,
// or a JSON array with --format json.
func runCertCreate(cmd *cobra.Command, create func(server.CertOptions) ([]string, error)) error {
	if err := cli.ValidateGlobal(cmd, nil); err != nil {
		return err
	}
	if strings.TrimSpace(certFlags.certsDir) == "" {
		return cli.Usage(errors.New("--certs-dir is empty"))
	}
	if certFlags.days <= 0 {
		return cli.Usage(fmt.Errorf("invalid --days %d: must be positive", certFlags.days))
	}
	paths, err := create(server.CertOptions{
		Lifetime:  time.Duration(certFlags.days) * 24 * time.Hour,
		Overwrite: certFlags.overwrite,
	})
	if err != nil {
		return err
	}
	return printPaths(cmd.OutOrStdout(), paths)
}

func printPaths(w io.Writer, paths []string) error {
	if cli.JSON() {
		b, err := json.Marshal(paths)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	for _, p := range paths {
		if _, err := fmt.Fprintf(w, "wrote %s\n", p); err != nil {
			return err
		}
	}
	return nil
}
