package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/shoaldb/shoal/client"
)

// Files of a certificates directory. `shoal cert create-ca` writes the CA pair, `create-node` the node
// pair (signed by the CA), `create-client` the client pair. A node started with --certs-dir reads
// ca.crt, node.crt and node.key; a client reads ca.crt, client.crt and client.key (client.LoadTLS).
// ca.key is only needed to sign new certificates: keep it off the nodes if you can.
const (
	CACertFile     = client.CACertFile
	CAKeyFile      = "ca.key"
	NodeCertFile   = "node.crt"
	NodeKeyFile    = "node.key"
	ClientCertFile = client.ClientCertFile
	ClientKeyFile  = client.ClientKeyFile
)

// Default lifetimes of generated certificates.
const (
	DefaultCALifetime   = 10 * 365 * 24 * time.Hour
	DefaultCertLifetime = 5 * 365 * 24 * time.Hour
)

// ErrCertExists is returned (wrapped) by the Create functions when a file they would write exists and
// overwrite is false.
var ErrCertExists = errors.New("certificate file exists")

// CertOptions tune certificate creation; the zero value takes the defaults.
type CertOptions struct {
	// Lifetime is how long the certificate is valid from now (default DefaultCALifetime for the CA,
	// DefaultCertLifetime otherwise).
	Lifetime time.Duration
	// Overwrite replaces existing files; without it an existing file is an error wrapping ErrCertExists.
	Overwrite bool
	// Now is the creation time (default time.Now); for tests.
	Now time.Time
}

func (o CertOptions) now() time.Time {
	if o.Now.IsZero() {
		return time.Now()
	}
	return o.Now
}

// CreateCA creates a new certificate authority in dir (created 0700 if missing): ca.crt and ca.key
// (mode 0600), an ECDSA P-256 key. It returns the paths written.
func CreateCA(dir string, o CertOptions) ([]string, error) {
	if o.Lifetime == 0 {
		o.Lifetime = DefaultCALifetime
	}
	paths := []string{filepath.Join(dir, CACertFile), filepath.Join(dir, CAKeyFile)}
	if err := prepare(dir, paths, o.Overwrite); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	now := o.now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{Organization: []string{"Shoal"}, CommonName: "Shoal CA"},
		NotBefore:             now.Add(-time.Hour), // tolerate clock skew between machines
		NotAfter:              now.Add(o.Lifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("create CA certificate: %w", err)
	}
	if err := writePair(paths[0], paths[1], der, key, o.Overwrite); err != nil {
		return nil, err
	}
	return paths, nil
}

// CreateNodeCert creates node.crt and node.key in dir, signed by the CA in dir (ca.crt, ca.key). The
// certificate is valid for every host given (IP addresses and DNS names: each address nodes and clients
// dial, i.e. every --advertise host) and serves both as the node's server certificate and as its client
// certificate towards other nodes.
func CreateNodeCert(dir string, hosts []string, o CertOptions) ([]string, error) {
	var ips []net.IP
	var names []string
	for _, h := range hosts {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		if ip := net.ParseIP(h); ip != nil {
			ips = append(ips, ip)
		} else if strings.ContainsAny(h, ":/ \t") {
			return nil, fmt.Errorf("invalid host %q: give an IP address or DNS name without port", h)
		} else {
			names = append(names, h)
		}
	}
	if len(ips)+len(names) == 0 {
		return nil, errors.New("a node certificate needs at least one host (IP address or DNS name) that nodes and clients dial")
	}
	cn := "shoal node"
	if len(names) > 0 {
		cn = names[0]
	}
	return createLeaf(dir, NodeCertFile, NodeKeyFile, o, &x509.Certificate{
		Subject:     pkix.Name{Organization: []string{"Shoal"}, OrganizationalUnit: []string{"node"}, CommonName: cn},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: ips,
		DNSNames:    names,
	})
}

// CreateClientCert creates client.crt and client.key in dir, signed by the CA in dir: the certificate a
// client presents to nodes started with --certs-dir.
func CreateClientCert(dir string, o CertOptions) ([]string, error) {
	return createLeaf(dir, ClientCertFile, ClientKeyFile, o, &x509.Certificate{
		Subject:     pkix.Name{Organization: []string{"Shoal"}, OrganizationalUnit: []string{"client"}, CommonName: "shoal client"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

// createLeaf signs tmpl (subject, usages and names set) with the CA in dir and writes the pair.
func createLeaf(dir, certName, keyName string, o CertOptions, tmpl *x509.Certificate) ([]string, error) {
	if o.Lifetime == 0 {
		o.Lifetime = DefaultCertLifetime
	}
	paths := []string{filepath.Join(dir, certName), filepath.Join(dir, keyName)}
	if err := prepare(dir, paths, o.Overwrite); err != nil {
		return nil, err
	}
	caCert, caKey, err := loadCA(dir)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	if tmpl.SerialNumber, err = newSerial(); err != nil {
		return nil, err
	}
	now := o.now()
	tmpl.NotBefore = now.Add(-time.Hour)
	tmpl.NotAfter = now.Add(o.Lifetime)
	if tmpl.NotAfter.After(caCert.NotAfter) {
		tmpl.NotAfter = caCert.NotAfter // a certificate cannot outlive its CA
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.BasicConstraintsValid = true
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("sign %s: %w", certName, err)
	}
	if err := writePair(paths[0], paths[1], der, key, o.Overwrite); err != nil {
		return nil, err
	}
	return paths, nil
}

// loadCA reads the CA pair from dir.
func loadCA(dir string) (*x509.Certificate, any, error) {
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, CACertFile), filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, nil, fmt.Errorf("load the CA from %s (%s, %s; create it with `shoal cert create-ca`): %w", dir, CACertFile, CAKeyFile, err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, nil, err
	}
	if !cert.IsCA {
		return nil, nil, fmt.Errorf("%s is not a CA certificate", filepath.Join(dir, CACertFile))
	}
	return cert, pair.PrivateKey, nil
}

// prepare creates dir if needed and, unless overwrite, refuses paths that exist.
func prepare(dir string, paths []string, overwrite bool) error {
	if dir == "" {
		return errors.New("no certificates directory given (--certs-dir)")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if overwrite {
		return nil
	}
	for _, p := range paths {
		if _, err := os.Lstat(p); err == nil {
			return fmt.Errorf("%s: %w (pass --overwrite to replace it)", p, ErrCertExists)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// writePair writes the certificate (0644) and the key (0600) as PEM. The key is written first, each
// through a temporary file renamed into place (or, without overwrite, linked so that a file created
// meanwhile is not replaced).
func writePair(certPath, keyPath string, der []byte, key *ecdsa.PrivateKey, overwrite bool) error {
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := writeFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600, overwrite); err != nil {
		return err
	}
	return writeFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644, overwrite)
}

func writeFile(path string, data []byte, mode os.FileMode, overwrite bool) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	defer os.Remove(name)
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if overwrite {
		return os.Rename(name, path)
	}
	if err := os.Link(name, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s: %w (pass --overwrite to replace it)", path, ErrCertExists)
		}
		return err
	}
	return nil
}

func newSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

// nodeTLS is a node's TLS material, loaded once at start from --certs-dir.
type nodeTLS struct {
	cert tls.Certificate
	cas  *x509.CertPool
}

// loadNodeTLS reads ca.crt, node.crt and node.key from dir and checks that the node certificate is
// signed by the CA and usable both as server and as client certificate.
func loadNodeTLS(dir string) (*nodeTLS, error) {
	cas, err := client.LoadCAPool(filepath.Join(dir, CACertFile))
	if err != nil {
		return nil, fmt.Errorf("--certs-dir %s: %w (create the CA with `shoal cert create-ca`)", dir, err)
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, NodeCertFile), filepath.Join(dir, NodeKeyFile))
	if err != nil {
		return nil, fmt.Errorf("--certs-dir %s: load %s and %s (create them with `shoal cert create-node --host ...`): %w", dir, NodeCertFile, NodeKeyFile, err)
	}
	leaf := cert.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("--certs-dir %s: %s: %w", dir, NodeCertFile, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: cas, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return nil, fmt.Errorf("--certs-dir %s: %s is not a valid server certificate of the CA in %s: %w", dir, NodeCertFile, CACertFile, err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: cas, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return nil, fmt.Errorf("--certs-dir %s: %s is not a valid client certificate of the CA in %s (nodes present it to each other): %w", dir, NodeCertFile, CACertFile, err)
	}
	return &nodeTLS{cert: cert, cas: cas}, nil
}

// serverConfig is the TLS configuration of a listener: the node certificate, and client certificates
// verified against the CA, required or (for HTTP and RESP) checked only when given.
func (t *nodeTLS) serverConfig(clientAuth tls.ClientAuthType) *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{t.cert},
		ClientCAs:    t.cas,
		ClientAuth:   clientAuth,
		MinVersion:   tls.VersionTLS12,
	}
}

// clientConfig is the TLS configuration of node-to-node dials: the node certificate as client
// certificate, and the peer verified against the CA (and the dialled host against its names).
func (t *nodeTLS) clientConfig() *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{t.cert},
		RootCAs:      t.cas,
		MinVersion:   tls.VersionTLS12,
	}
}

// grpcServerOption makes the gRPC server require and verify client certificates (mutual TLS).
func (t *nodeTLS) grpcServerOption() grpc.ServerOption {
	return grpc.Creds(credentials.NewTLS(t.serverConfig(tls.RequireAndVerifyClientCert)))
}

// dialOption is the transport credentials of node-to-node gRPC (kv, the raft transport, RESP forwarding).
func (t *nodeTLS) dialOption() grpc.DialOption {
	return grpc.WithTransportCredentials(credentials.NewTLS(t.clientConfig()))
}
