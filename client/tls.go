package client

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Files of a certificates directory (`shoal cert create-ca|create-node|create-client --certs-dir DIR`).
// A client reads CACertFile, ClientCertFile and ClientKeyFile; a node reads CACertFile and its own pair.
const (
	// CACertFile is the cluster's CA certificate: the only root a client or node trusts.
	CACertFile = "ca.crt"
	// ClientCertFile and ClientKeyFile are a client's certificate (signed by the CA) and private key.
	ClientCertFile = "client.crt"
	ClientKeyFile  = "client.key"
)

// LoadTLS reads a client's TLS configuration from dir: it trusts only the CA in dir/ca.crt (the node
// must present a certificate it signed, valid for the address dialled) and presents dir/client.crt
// with dir/client.key, which the node requires. Use the result as Config.TLS.
func LoadTLS(dir string) (*tls.Config, error) {
	if dir == "" {
		return nil, errors.New("client TLS: no certificates directory given")
	}
	pool, err := LoadCAPool(filepath.Join(dir, CACertFile))
	if err != nil {
		return nil, fmt.Errorf("client TLS: %w", err)
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, ClientCertFile), filepath.Join(dir, ClientKeyFile))
	if err != nil {
		return nil, fmt.Errorf("client TLS: load %s and %s from %s (create them with `shoal cert create-client --certs-dir %s`): %w",
			ClientCertFile, ClientKeyFile, dir, dir, err)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
		MinVersion:   tls.VersionTLS12,
	}, nil
}

// LoadCAPool reads a PEM file of CA certificates into a pool that holds only them (not the system roots).
func LoadCAPool(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read CA certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}
