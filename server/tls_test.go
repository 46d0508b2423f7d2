package server_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/node"
	"github.com/shoaldb/shoal/replica"
	"github.com/shoaldb/shoal/server"
)

// makeCerts creates a CA, a node certificate for 127.0.0.1/localhost and a client certificate in dir.
func makeCerts(t *testing.T, dir string) {
	t.Helper()
	if _, err := server.CreateCA(dir, server.CertOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := server.CreateNodeCert(dir, []string{"127.0.0.1", "localhost"}, server.CertOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := server.CreateClientCert(dir, server.CertOptions{}); err != nil {
		t.Fatal(err)
	}
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" {
		t.Fatalf("%s: no PEM certificate", path)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCertsRoundTrip creates a CA, a node and a client certificate and checks the chain, the names, the
// key usages, the validity, the file modes, and that nothing is overwritten without Overwrite.
func TestCertsRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	now := time.Now()
	if _, err := server.CreateNodeCert(dir, []string{"127.0.0.1"}, server.CertOptions{}); err == nil || !strings.Contains(err.Error(), "create-ca") {
		t.Fatalf("node certificate without a CA = %v, want an error telling to create the CA", err)
	}
	if _, err := server.CreateCA(dir, server.CertOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := server.CreateNodeCert(dir, nil, server.CertOptions{}); err == nil {
		t.Fatal("node certificate without hosts was created")
	}
	if _, err := server.CreateNodeCert(dir, []string{"127.0.0.1:26257"}, server.CertOptions{}); err == nil {
		t.Fatal("node certificate for a host with a port was created")
	}
	if _, err := server.CreateNodeCert(dir, []string{"127.0.0.1", "localhost", "::1", "n1.example.com"}, server.CertOptions{Lifetime: 48 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := server.CreateClientCert(dir, server.CertOptions{Lifetime: 100 * 365 * 24 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	for name, mode := range map[string]os.FileMode{"ca.crt": 0o644, "ca.key": 0o600, "node.crt": 0o644, "node.key": 0o600, "client.crt": 0o644, "client.key": 0o600} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s mode %v, want %v", name, fi.Mode().Perm(), mode)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 6 {
		t.Errorf("certs dir holds %d entries, want the 6 files (no temporaries left)", len(entries))
	}

	ca := readCert(t, filepath.Join(dir, "ca.crt"))
	if !ca.IsCA || ca.KeyUsage&x509.KeyUsageCertSign == 0 || !ca.NotAfter.After(now.Add(9*365*24*time.Hour)) {
		t.Fatalf("CA: IsCA %v, key usage %v, not after %v", ca.IsCA, ca.KeyUsage, ca.NotAfter)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)

	node := readCert(t, filepath.Join(dir, "node.crt"))
	for _, host := range []string{"127.0.0.1", "localhost", "::1", "n1.example.com"} {
		if _, err := node.Verify(x509.VerifyOptions{Roots: pool, DNSName: host, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("node certificate as server for %s: %v", host, err)
		}
	}
	if _, err := node.Verify(x509.VerifyOptions{Roots: pool, DNSName: "10.0.0.9"}); err == nil {
		t.Error("node certificate verifies for a host it was not made for")
	}
	if _, err := node.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("node certificate as client: %v", err)
	}
	if d := node.NotAfter.Sub(now); d < 47*time.Hour || d > 49*time.Hour {
		t.Errorf("node certificate valid for %v, want 48h", d)
	}
	if node.IsCA {
		t.Error("node certificate is a CA")
	}

	cl := readCert(t, filepath.Join(dir, "client.crt"))
	if _, err := cl.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate: %v", err)
	}
	if _, err := cl.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Error("client certificate verifies as a server certificate")
	}
	if !cl.NotAfter.Equal(ca.NotAfter) {
		t.Errorf("client certificate asked for 100 years ends %v, want capped at the CA's %v", cl.NotAfter, ca.NotAfter)
	}
	if _, err := client.LoadTLS(dir); err != nil {
		t.Errorf("client.LoadTLS on the generated files: %v", err)
	}

	// Nothing is replaced without Overwrite; with it, a new certificate is written.
	for _, create := range []func(server.CertOptions) ([]string, error){
		func(o server.CertOptions) ([]string, error) { return server.CreateCA(dir, o) },
		func(o server.CertOptions) ([]string, error) {
			return server.CreateNodeCert(dir, []string{"127.0.0.1"}, o)
		},
		func(o server.CertOptions) ([]string, error) { return server.CreateClientCert(dir, o) },
	} {
		if _, err := create(server.CertOptions{}); !errors.Is(err, server.ErrCertExists) || !strings.Contains(err.Error(), "--overwrite") {
			t.Errorf("create over existing files = %v, want ErrCertExists mentioning --overwrite", err)
		}
	}
	if got := readCert(t, filepath.Join(dir, "client.crt")); !got.Equal(cl) {
		t.Fatal("client.crt changed by a refused create")
	}
	if _, err := server.CreateClientCert(dir, server.CertOptions{Overwrite: true}); err != nil {
		t.Fatal(err)
	}
	if got := readCert(t, filepath.Join(dir, "client.crt")); got.SerialNumber.Cmp(cl.SerialNumber) == 0 {
		t.Fatal("client.crt not replaced with Overwrite")
	}
}

// TestRunTLSBadCertsDir: a node refuses to start on a missing certificates directory or on a node
// certificate that its CA did not sign, saying what to do.
func TestRunTLSBadCertsDir(t *testing.T) {
	base := t.TempDir()
	err := server.Run(context.Background(), server.Config{Listen: "127.0.0.1:0", HTTP: server.HTTPOff, CertsDir: filepath.Join(base, "missing"), Node: node.Config{DataDir: filepath.Join(base, "d"), Bootstrap: true}}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "create-ca") {
		t.Fatalf("Run with a missing certs dir = %v", err)
	}
	a, b := filepath.Join(base, "a"), filepath.Join(base, "b")
	makeCerts(t, a)
	makeCerts(t, b)
	mixed := filepath.Join(base, "mixed")
	if err := os.MkdirAll(mixed, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct{ src, name string }{{a, "ca.crt"}, {b, "node.crt"}, {b, "node.key"}} {
		data, err := os.ReadFile(filepath.Join(f.src, f.name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(mixed, f.name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	err = server.Run(context.Background(), server.Config{Listen: "127.0.0.1:0", HTTP: server.HTTPOff, CertsDir: mixed, Node: node.Config{DataDir: filepath.Join(base, "d"), Bootstrap: true}}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "not a valid server certificate") {
		t.Fatalf("Run with a node certificate of another CA = %v", err)
	}
}

// TestTLSCluster runs three nodes with mutual TLS (and a token): the cluster replicates every range to
// three voters over TLS, a client with the client certificate is served, HTTPS and RESP over TLS
// answer, and clients without a certificate, with one of another CA, trusting another CA, or in clear
// text are refused with errors that show nothing of the server's key material or files.
func TestTLSCluster(t *testing.T) {
	const token = "tls-test-token"
	base := t.TempDir()
	certs := filepath.Join(base, "server-certs")
	makeCerts(t, certs)
	other := filepath.Join(base, "other-certs")
	makeCerts(t, other)

	cfg := func(name string) server.Config {
		return server.Config{Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", CertsDir: certs, Node: node.Config{DataDir: filepath.Join(base, name), AuthToken: token, Raft: replica.Config{TickInterval: 50 * time.Millisecond}}}
	}
	c1 := cfg("n1")
	c1.Node.Bootstrap = true
	c1.RESP = "127.0.0.1:0"
	first := startNode(t, c1)
	nodes := []*runningNode{first}
	for _, name := range []string{"n2", "n3"} {
		c := cfg(name)
		c.Node.Join = []string{first.grpc}
		nodes = append(nodes, startNode(t, c))
	}
	defer func() {
		for i := len(nodes) - 1; i >= 0; i-- {
			nodes[i].stop(t)
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	tlsCfg, err := client.LoadTLS(certs)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(ctx, client.Config{Addrs: []string{first.grpc}, AuthToken: token, TLS: tlsCfg})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Put(ctx, []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	waitThreeVoters(ctx, t, c, "a TLS cluster")
	// Every node serves the client (each range's leader may be any node).
	for i, n := range nodes {
		ci, err := client.New(ctx, client.Config{Addrs: []string{n.grpc}, AuthToken: token, TLS: tlsCfg})
		if err != nil {
			t.Fatal(err)
		}
		if v, found, err := ci.Get(ctx, []byte("k")); err != nil || !found || string(v) != "v" {
			t.Fatalf("Get through node %d = %q %v %v", i+1, v, found, err)
		}
		ci.Close()
	}

	// Refused clients. None may see the server's files or key material in its error.
	nodeKey, _ := os.ReadFile(filepath.Join(certs, "node.key"))
	caKey, _ := os.ReadFile(filepath.Join(certs, "ca.key"))
	secrets := []string{certs, base, "PRIVATE KEY", token, keyBody(nodeKey), keyBody(caKey)}
	noCert := tlsCfg.Clone()
	noCert.Certificates = nil
	otherTLS, err := client.LoadTLS(other)
	if err != nil {
		t.Fatal(err)
	}
	otherClientCert := tlsCfg.Clone() // trusts the cluster's CA, presents a certificate of another CA
	otherClientCert.Certificates = otherTLS.Certificates
	for _, tc := range []struct {
		name string
		tls  *tls.Config
	}{
		{"no client certificate", noCert},
		{"client certificate of another CA", otherClientCert},
		{"trusting another CA", otherTLS},
		{"clear text", nil},
	} {
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		rc, err := client.New(rctx, client.Config{Addrs: []string{first.grpc}, AuthToken: token, TLS: tc.tls, MaxAttempts: 2, RequestTimeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		err = rc.Put(rctx, []byte("k"), []byte("refused"))
		rc.Close()
		rcancel()
		if err == nil {
			t.Fatalf("%s: Put succeeded", tc.name)
		}
		for _, s := range secrets {
			if s != "" && strings.Contains(err.Error(), s) {
				t.Errorf("%s: error %q shows %q", tc.name, err, s)
			}
		}
		t.Logf("%s: %v", tc.name, err)
	}
	if v, _, err := c.Get(ctx, []byte("k")); err != nil || string(v) != "v" {
		t.Fatalf("a refused client wrote: Get = %q, %v", v, err)
	}

	// HTTPS: health open, API behind the token, clear text refused.
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: tlsCfg.RootCAs}}}
	get := func(url, auth string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("https://"+first.http+"/healthz", ""); code != 200 {
		t.Fatalf("https /healthz = %d %q", code, body)
	}
	if code, _ := get("https://"+first.http+"/api/nodes", ""); code != http.StatusUnauthorized {
		t.Fatalf("https /api/nodes without token = %d, want 401", code)
	}
	if code, body := get("https://"+first.http+"/api/nodes", token); code != 200 || strings.Count(body, `"addr"`) != 3 {
		t.Fatalf("https /api/nodes = %d %s", code, body)
	}
	if resp, err := http.Get("http://" + first.http + "/api/nodes"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Fatal("clear-text HTTP served by a TLS node")
		}
	}

	// RESP over TLS: a Redis client with TLS and the token is served; a clear-text one gets nothing.
	ns, err := c.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	respAddr := ""
	for _, n := range ns {
		if a := n.Desc.GetRespAddr(); a != "" {
			respAddr = a
		}
	}
	if respAddr == "" {
		t.Fatalf("no node advertises its RESP address: %v", ns)
	}
	rc := redis.NewClient(&redis.Options{Addr: respAddr, Password: token, TLSConfig: &tls.Config{RootCAs: tlsCfg.RootCAs}})
	defer rc.Close()
	if err := rc.Set(ctx, "rk", "rv", 0).Err(); err != nil {
		t.Fatalf("RESP SET over TLS: %v", err)
	}
	if v, err := rc.Get(ctx, "rk").Result(); err != nil || v != "rv" {
		t.Fatalf("RESP GET over TLS = %q, %v", v, err)
	}
	plain, err := net.DialTimeout("tcp", respAddr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	plain.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(plain, "PING\r\n")
	b, _ := io.ReadAll(plain)
	plain.Close()
	if strings.Contains(string(b), "PONG") || strings.Contains(string(b), "NOAUTH") {
		t.Fatalf("clear-text RESP client answered: %q", b)
	}
}

// keyBody is the base64 body of a PEM key (its first line of data), to look for in error messages.
func keyBody(pemKey []byte) string {
	lines := strings.Split(string(pemKey), "\n")
	if len(lines) < 2 {
		return ""
	}
	return lines[1]
}
