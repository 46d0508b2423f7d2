package client

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeTestCerts writes a CA and a client pair signed by it to dir, as `shoal cert` would.
func writeTestCerts(t *testing.T, dir string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "client"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalPKCS8PrivateKey(key)
	for name, blk := range map[string]*pem.Block{
		CACertFile:     {Type: "CERTIFICATE", Bytes: caDER},
		ClientCertFile: {Type: "CERTIFICATE", Bytes: der},
		ClientKeyFile:  {Type: "PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(blk), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLoadTLS(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadTLS(""); err == nil {
		t.Fatal("LoadTLS of no directory succeeded")
	}
	if _, err := LoadTLS(dir); err == nil || !strings.Contains(err.Error(), CACertFile) {
		t.Fatalf("LoadTLS of an empty directory = %v, want an error naming %s", err, CACertFile)
	}
	writeTestCerts(t, dir)
	cfg, err := LoadTLS(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Certificates) != 1 || cfg.RootCAs == nil || cfg.InsecureSkipVerify || cfg.MinVersion < tls.VersionTLS12 {
		t.Fatalf("LoadTLS = %+v", cfg)
	}

	if err := os.Remove(filepath.Join(dir, ClientKeyFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadTLS(dir); err == nil || !strings.Contains(err.Error(), "create-client") {
		t.Fatalf("LoadTLS without client.key = %v, want a hint to create the client certificate", err)
	}
	if err := os.WriteFile(filepath.Join(dir, CACertFile), []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadTLS(dir); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Fatalf("LoadTLS with a garbage ca.crt = %v", err)
	}
}

// TestConfigTLS: Config.TLS adds TLS transport credentials after any DialOptions (the last transport
// credentials win), and without it the default stays insecure.
func TestConfigTLS(t *testing.T) {
	plain, err := Config{}.withDefaults()
	if err != nil || len(plain.DialOptions) != 1 {
		t.Fatalf("default dial options = %v, %v", plain.DialOptions, err)
	}
	withTLS, err := Config{TLS: &tls.Config{}}.withDefaults()
	if err != nil || len(withTLS.DialOptions) != 1 {
		t.Fatalf("dial options with TLS = %v, %v", withTLS.DialOptions, err)
	}
	both, err := Config{TLS: &tls.Config{}, DialOptions: plain.DialOptions}.withDefaults()
	if err != nil || len(both.DialOptions) != 2 {
		t.Fatalf("dial options with TLS and DialOptions = %v, %v", both.DialOptions, err)
	}
	if len(plain.DialOptions) != 1 {
		t.Fatal("withDefaults modified the caller's DialOptions")
	}
}
