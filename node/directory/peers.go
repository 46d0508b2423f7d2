package directory

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/shoaldb/shoal/pb"
)

// Peers pools gRPC connections to other nodes for node-internal calls.
type Peers struct {
	mu    sync.Mutex
	opts  []grpc.DialOption
	conns map[string]*grpc.ClientConn
	token string
}

// NewPeers dials with opts plus, when token is set, the cluster's auth token on every call.
func NewPeers(opts []grpc.DialOption, token string) *Peers {
	return &Peers{opts: opts, conns: map[string]*grpc.ClientConn{}, token: token}
}

// tokenCreds attaches the cluster's auth token to every node-to-node call, unary and streaming (raft
// messages and snapshots included). Without TLS the token travels in clear text, as it does for
// clients; --certs-dir is the way to protect it.
type tokenCreds string

func (t tokenCreds) GetRequestMetadata(ctx context.Context, uri ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(t)}, nil
}

func (t tokenCreds) RequireTransportSecurity() bool { return false }

// WithToken returns opts plus per-call credentials carrying token (opts unchanged when token is "").
func WithToken(opts []grpc.DialOption, token string) []grpc.DialOption {
	out := append([]grpc.DialOption(nil), opts...)
	if token != "" {
		out = append(out, grpc.WithPerRPCCredentials(tokenCreds(token)))
	}
	return out
}

// Client returns a client of the public API over the pooled connection to addr.
func (p *Peers) Client(addr string) (pb.ShoalClient, error) {
	c, err := p.Conn(addr)
	if err != nil {
		return nil, err
	}
	return pb.NewShoalClient(c), nil
}

// Conn returns the pooled connection to addr, dialling it with the node's options (TLS, auth token)
// the first time.
func (p *Peers) Conn(addr string) (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.conns[addr]; ok {
		return c, nil
	}
	// A peer restarts in seconds; gRPC's default reconnect backoff (1 s growing to 2 min) would leave
	// calls to it (forwarded requests, the autopilot's warm-up checks and transfers) failing for
	// seconds after it serves again.
	opts := append([]grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
		MinConnectTimeout: 5 * time.Second,
	})}, WithToken(p.opts, p.token)...)
	c, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, err
	}
	p.conns[addr] = c
	return c, nil
}

// Close closes every pooled connection.
func (p *Peers) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for a, c := range p.conns {
		c.Close()
		delete(p.conns, a)
	}
}
