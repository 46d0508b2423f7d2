package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestCertCommands runs create-ca, create-node and create-client, checks the files and that existing
// files are kept unless --overwrite, and that the client commands' --certs-dir loads the result.
func TestCertCommands(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	code, _, errOut := shoal(t, "cert", "create-node", "--certs-dir", dir, "--host", "127.0.0.1")
	if code != exitRuntime || !strings.Contains(errOut, "create-ca") {
		t.Fatalf("create-node without a CA: %d %q", code, errOut)
	}
	code, out, errOut := shoal(t, "cert", "create-ca", "--certs-dir", dir)
	if code != 0 || !strings.Contains(out, filepath.Join(dir, "ca.key")) {
		t.Fatalf("create-ca: %d %q %q", code, out, errOut)
	}
	if code, _, errOut := shoal(t, "cert", "create-node", "--certs-dir", dir); code != exitUsage || !strings.Contains(errOut, "--host") {
		t.Fatalf("create-node without --host: %d %q", code, errOut)
	}
	if code, _, errOut := shoal(t, "cert", "create-ca"); code != exitUsage || !strings.Contains(errOut, "certs-dir") {
		t.Fatalf("create-ca without --certs-dir: %d %q", code, errOut)
	}
	code, out, errOut = shoal(t, "--format", "json", "cert", "create-node", "--certs-dir", dir, "--host", "127.0.0.1,localhost", "--host", "db.example.com", "--days", "30")
	var paths []string
	if code != 0 || json.Unmarshal([]byte(out), &paths) != nil || len(paths) != 2 {
		t.Fatalf("create-node --format json: %d %q %q", code, out, errOut)
	}
	if code, _, errOut := shoal(t, "cert", "create-client", "--certs-dir", dir); code != 0 {
		t.Fatalf("create-client: %d %q", code, errOut)
	}

	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "node.crt"), filepath.Join(dir, "node.key"))
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(pair.Certificate[0])
	if strings.Join(leaf.DNSNames, ",") != "localhost,db.example.com" || len(leaf.IPAddresses) != 1 || leaf.IPAddresses[0].String() != "127.0.0.1" {
		t.Fatalf("node certificate names: DNS %v, IP %v", leaf.DNSNames, leaf.IPAddresses)
	}
	if days := leaf.NotAfter.Sub(leaf.NotBefore).Hours() / 24; days < 30 || days > 31 {
		t.Fatalf("--days 30 gave a certificate valid %.1f days", days)
	}
	for _, name := range []string{"ca.key", "node.key", "client.key"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v, want mode 0600", name, fi.Mode(), err)
		}
	}

	before, _ := os.ReadFile(filepath.Join(dir, "ca.key"))
	code, _, errOut = shoal(t, "cert", "create-ca", "--certs-dir", dir)
	if after, _ := os.ReadFile(filepath.Join(dir, "ca.key")); code != exitRuntime || !strings.Contains(errOut, "--overwrite") || string(after) != string(before) {
		t.Fatalf("create-ca over an existing CA: %d %q (key changed: %v)", code, errOut, string(after) != string(before))
	}
	if code, _, errOut := shoal(t, "cert", "create-client", "--certs-dir", dir, "--overwrite"); code != 0 {
		t.Fatalf("create-client --overwrite: %d %q", code, errOut)
	}

	// The client commands take the directory (here nothing listens, so the command fails to connect,
	// not to load the certificates); a directory without the files is refused with the file's name.
	if code, _, errOut := shoal(t, "--certs-dir", t.TempDir(), "get", "k"); code != exitRuntime || !strings.Contains(errOut, "ca.crt") {
		t.Fatalf("get with an empty --certs-dir: %d %q", code, errOut)
	}
	if code, _, errOut := shoal(t, "--certs-dir", dir, "--host", "127.0.0.1:1", "--timeout", "300ms", "get", "k"); code != exitRuntime || strings.Contains(errOut, "certs-dir:") {
		t.Fatalf("get with a valid --certs-dir and no node: %d %q", code, errOut)
	}
}

func TestCertHelp(t *testing.T) {
	for _, c := range []*cobra.Command{certCmd, certCreateCACmd, certCreateNodeCmd, certCreateClientCmd} {
		if c.Short == "" || c.Long == "" || c.Example == "" {
			t.Errorf("%s: Short, Long and Example must all be set", c.CommandPath())
		}
	}
	code, out, _ := shoal(t, "cert", "create-node", "--help")
	if code != 0 || !strings.Contains(out, "--host") || !strings.Contains(out, "--overwrite") || !strings.Contains(out, "--certs-dir") {
		t.Errorf("cert create-node --help: %d\n%s", code, out)
	}
	code, out, _ = shoal(t, "start", "--help")
	if code != 0 || !strings.Contains(out, "--certs-dir") || !strings.Contains(out, "mutual") {
		t.Errorf("start --help does not explain --certs-dir: %d\n%s", code, out)
	}
}

func TestStartPrintConfigCertsDir(t *testing.T) {
	code, out, errOut := shoal(t, "start", "--data-dir", "d", "--http", "off", "--certs-dir", "/etc/shoal/certs", "--print-config")
	var cfg map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &cfg) != nil || cfg["certs_dir"] != "/etc/shoal/certs" {
		t.Fatalf("--print-config with --certs-dir: %d %q %q", code, out, errOut)
	}
	code, out, _ = shoal(t, "start", "--data-dir", "d", "--http", "off", "--print-config")
	if json.Unmarshal([]byte(out), &cfg) != nil || code != 0 || cfg["certs_dir"] != "" {
		t.Fatalf("--print-config without --certs-dir: %d %q", code, out)
	}
}
