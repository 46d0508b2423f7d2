// Package client is Shoal's public Go client. It owns routing and retries: a cache of range
// descriptors and their leaders (filled by RangeLookup and refreshed on NotLeader/RangeMoved), one gRPC
// connection per node, and the rules that decide which failures are safe to retry. It never holds data
// and never decides an outcome the server did not report: a write whose outcome is unknown is returned as
// ErrAmbiguous or ErrTimeout, never retried behind the caller's back.
//
// Retry rules, per attempt (bounded by Config.MaxAttempts and the caller's context):
//
//   - NOT_LEADER: follow the leader hint at once if the server gave one, else re-look the range up.
//   - RANGE_MOVED: drop the cached range and re-look it up.
//   - UNAVAILABLE, OVERLOADED, or a transport failure before the request was sent: back off and retry.
//     The server guarantees it did not propose the request, so this is safe for every operation.
//   - AMBIGUOUS, TIMEOUT, or a transport failure after the request was sent: writes (Put, Delete,
//     CompareAndSwap, CompareAndDelete, BatchWrite, Split, TransferLeader) return the typed error at once;
//     reads (Get, Scan, Lookup, Nodes, Ranges) back off and retry.
//   - INVALID_ARGUMENT, UNAUTHENTICATED, INTERNAL: returned at once.
//
// Invariant: a write is sent again only after an attempt that definitely did not apply it.
package client

import (
	"context"
	"crypto/tls"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/shoaldb/shoal/pb"
)

// DefaultAddr is the gRPC address used when Config.Addrs is empty.
const DefaultAddr = "127.0.0.1:26257"

// Defaults applied by New to zero fields of Config.
const (
	// DefaultRequestTimeout bounds one attempt (one RPC to one node).
	DefaultRequestTimeout = 5 * time.Second
	// DefaultMaxAttempts bounds the attempts of one operation.
	DefaultMaxAttempts = 30
)

// Backoff bounds between retries: the first wait is about minBackoff, doubling up to maxBackoff, each
// with jitter.
const (
	minBackoff = 10 * time.Millisecond
	maxBackoff = 500 * time.Millisecond
)

// Config configures a Client. The zero value talks to DefaultAddr without auth or TLS.
type Config struct {
	// Addrs are the gRPC addresses of any nodes of the cluster, used to look ranges up; the client
	// learns the other nodes from the answers. Default: [DefaultAddr].
	Addrs []string
	// AuthToken, when set, is sent with every request as gRPC metadata "authorization: Bearer <token>".
	AuthToken string
	// DialOptions replace the default dial options (insecure transport credentials) entirely; include
	// transport credentials when setting them (or set TLS).
	DialOptions []grpc.DialOption
	// TLS, when set, makes the client dial over TLS with this configuration (see LoadTLS for a cluster
	// started with --certs-dir). Its credentials replace any given in DialOptions.
	TLS *tls.Config
	// RequestTimeout bounds each attempt (one RPC to one node). Default: DefaultRequestTimeout.
	RequestTimeout time.Duration
	// MaxAttempts bounds the attempts of one operation, counting range lookups that fail. Retries back
	// off from 10ms, doubling up to 500ms, with jitter. Default: DefaultMaxAttempts.
	MaxAttempts int
	// FailFast makes an operation fail at once with ErrUnavailable when the client has not reached any
	// node yet and every address of Addrs either refused the connection or is not a gRPC server (an
	// HTTP port, say): nothing was sent, and retrying would only wait. Command-line tools set it, so
	// that a wrong or stopped address is reported in milliseconds. Default false: a client started
	// beside its cluster waits for the nodes to come up, within MaxAttempts and its context.
	FailFast bool
	// ReadImbalance is γ for reads any replica may serve: the read stays on the replica with the
	// lowest recent latency unless 1 − (least load)/(its load) exceeds γ, where a node's load is the
	// client's outstanding requests there plus one, times their recent latency (see chooseReplica).
	// 1 always reads at the lowest-latency replica; negative always at the least loaded. Default (0):
	// DefaultReadImbalance.
	ReadImbalance float64
}

// withDefaults fills the zero fields and validates the rest.
func (cfg Config) withDefaults() (Config, error) {
	var addrs []string
	for _, a := range cfg.Addrs {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		addrs = []string{DefaultAddr}
	}
	cfg.Addrs = addrs
	if cfg.RequestTimeout < 0 {
		return cfg, newError(pb.ErrorCode_INVALID_ARGUMENT, fmt.Sprintf("client config: RequestTimeout %v is negative", cfg.RequestTimeout), nil)
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.MaxAttempts < 0 {
		return cfg, newError(pb.ErrorCode_INVALID_ARGUMENT, fmt.Sprintf("client config: MaxAttempts %d is negative", cfg.MaxAttempts), nil)
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.ReadImbalance > 1 {
		return cfg, newError(pb.ErrorCode_INVALID_ARGUMENT, fmt.Sprintf("client config: ReadImbalance %v is above 1", cfg.ReadImbalance), nil)
	}
	if cfg.ReadImbalance == 0 {
		cfg.ReadImbalance = DefaultReadImbalance
	}
	if cfg.TLS != nil {
		// Applied last, so these transport credentials win over any in DialOptions.
		cfg.DialOptions = append(append([]grpc.DialOption(nil), cfg.DialOptions...),
			grpc.WithTransportCredentials(credentials.NewTLS(cfg.TLS)))
	}
	if len(cfg.DialOptions) == 0 {
		cfg.DialOptions = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	return cfg, nil
}

// Client is a Shoal client. It is safe for concurrent use; create one per process and share it.
type Client struct {
	cfg   Config
	cache *rangeCache
	conns *connPool
	sent  sentTracker
	loads *loadTracker // outstanding replica reads and their latency, per node

	reached atomic.Bool // some node has answered (FailFast applies only before)

	mu          sync.Mutex
	lastGood    string               // the address that answered the last range lookup
	suspects    map[string]time.Time // addresses whose last attempt failed in transport, and when
	unreachable map[string]string    // addresses that refused the connection or are not gRPC: why
	followerN   uint64               // where ties between replicas start, rotating
}

// New returns a client for the cluster reachable at cfg.Addrs. It does not contact the cluster:
// connections are made on first use, so New fails only on an invalid Config.
func New(ctx context.Context, cfg Config) (*Client, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Client{
		cfg:         cfg,
		cache:       newRangeCache(),
		loads:       newLoadTracker(),
		suspects:    make(map[string]time.Time),
		unreachable: make(map[string]string),
	}
	// gRPC's default reconnect backoff (1 s growing to 2 min) leaves the connection to a node that
	// was down for a few seconds failing for seconds more after it serves again; meanwhile the ranges
	// it leads again can only be reached through retries. A node restarts in seconds: redial soon.
	opts := []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           grpcbackoff.Config{BaseDelay: redialMin, Multiplier: 1.6, Jitter: 0.2, MaxDelay: redialMax},
		MinConnectTimeout: 5 * time.Second,
	})}
	opts = append(opts, cfg.DialOptions...)
	// Responses may carry values up to the server's limit (8 MiB by default) or a scan's budget.
	opts = append(opts, grpc.WithStatsHandler(&c.sent), grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxResponseBytes)))
	if cfg.AuthToken != "" {
		opts = append(opts, grpc.WithChainUnaryInterceptor(authInterceptor(cfg.AuthToken)),
			grpc.WithChainStreamInterceptor(authStreamInterceptor(cfg.AuthToken)))
	}
	c.conns = newConnPool(opts)
	return c, nil
}

// maxResponseBytes bounds one response the client accepts: above any value the server stores.
const maxResponseBytes = 64 << 20

// Close closes every connection. Calls made after Close return ErrClosed.
func (c *Client) Close() error {
	return c.conns.close()
}

// authInterceptor attaches the bearer token to every unary call.
func authInterceptor(token string) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}

func authStreamInterceptor(token string) grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
		return streamer(ctx, desc, cc, method, opts...)
	}
}

// connPool keeps one *grpc.ClientConn per address, created on first use and reused.
type connPool struct {
	opts []grpc.DialOption

	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn
	closed bool
}

func newConnPool(opts []grpc.DialOption) *connPool {
	return &connPool{opts: opts, conns: make(map[string]*grpc.ClientConn)}
}

// Reconnect backoff of the connection to one node (the first redial after about redialMin).
const (
	redialMin = 50 * time.Millisecond
	redialMax = time.Second
)

// wake redials addr at once if its connection is waiting out a reconnect backoff: a server just
// named it as a range's leader, so it serves again (a planned restart handing leaderships back).
// With wait > 0 it then waits up to wait (within ctx) for the connection, since until it is up,
// gRPC fails every call at once. It reports whether the connection is up.
func (p *connPool) wake(ctx context.Context, addr string, wait time.Duration) bool {
	p.mu.Lock()
	cc := p.conns[addr]
	p.mu.Unlock()
	if cc == nil {
		return false
	}
	s := cc.GetState()
	if s != connectivity.TransientFailure {
		return s == connectivity.Ready
	}
	cc.ResetConnectBackoff()
	if wait <= 0 {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	// The channel reports transient failure until a connection is ready (pick_first's sticky
	// failure), so wait for Ready itself.
	for s = cc.GetState(); s != connectivity.Ready; s = cc.GetState() {
		if !cc.WaitForStateChange(ctx, s) {
			return false
		}
	}
	return true
}

// wakeWait bounds how long a call waits for the connection to a node named leader to come up.
const wakeWait = 250 * time.Millisecond

// get returns the stub for addr, creating its connection if needed.
func (p *connPool) get(addr string) (pb.ShoalClient, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	cc, ok := p.conns[addr]
	if !ok {
		var err error
		cc, err = grpc.NewClient(addr, p.opts...)
		if err != nil {
			return nil, newError(pb.ErrorCode_UNAVAILABLE, fmt.Sprintf("connect to %s: %v", addr, err), err)
		}
		p.conns[addr] = cc
	}
	return pb.NewShoalClient(cc), nil
}

func (p *connPool) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	var first error
	for addr, cc := range p.conns {
		if err := cc.Close(); err != nil && first == nil {
			first = fmt.Errorf("close connection to %s: %w", addr, err)
		}
	}
	p.conns = nil
	return first
}

// suspectFor is how long an address that failed in transport is avoided when another replica exists.
const suspectFor = time.Second

func (c *Client) markSuspect(addr string) {
	c.mu.Lock()
	c.suspects[addr] = time.Now()
	c.mu.Unlock()
}

// clearSuspect notes that addr answered.
func (c *Client) clearSuspect(addr string) {
	c.reached.Store(true)
	c.mu.Lock()
	delete(c.suspects, addr)
	delete(c.unreachable, addr)
	c.mu.Unlock()
}

// clearSuspectOnly stops avoiding addr without counting it as reached (nothing answered from it yet).
func (c *Client) clearSuspectOnly(addr string) {
	c.mu.Lock()
	delete(c.suspects, addr)
	c.mu.Unlock()
}

// markUnreachable notes why nothing could be sent to addr (FailFast).
func (c *Client) markUnreachable(addr, why string) {
	c.mu.Lock()
	c.unreachable[addr] = why
	c.mu.Unlock()
}

// failFast returns the error that ends an operation at once under FailFast: no node was ever reached
// and every configured address is unreachable. It returns nil otherwise.
func (c *Client) failFast() error {
	if !c.cfg.FailFast || c.reached.Load() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	whys := make([]string, 0, len(c.cfg.Addrs))
	for _, a := range c.cfg.Addrs {
		why, ok := c.unreachable[a]
		if !ok {
			return nil
		}
		whys = append(whys, a+": "+why)
	}
	return newError(pb.ErrorCode_UNAVAILABLE, "no Shoal node could be reached, nothing was sent ("+strings.Join(whys, "; ")+")", nil)
}

func (c *Client) isSuspect(addr string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.suspects[addr]
	if ok && time.Since(t) > suspectFor {
		delete(c.suspects, addr)
		return false
	}
	return ok
}
