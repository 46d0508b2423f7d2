package resp

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/kv"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/server/resp/txn"
	"github.com/shoaldb/shoal/server/resp/wire"
)

// Node is what the listener needs from the node it fronts; *node.Node implements it. The data methods are
// the node's public API (pb.ShoalServer): they serve requests for ranges this node leads and answer
// NOT_LEADER/RANGE_MOVED otherwise.
type Node interface {
	Get(context.Context, *pb.GetRequest) (*pb.GetResponse, error)
	Put(context.Context, *pb.PutRequest) (*pb.PutResponse, error)
	Delete(context.Context, *pb.DeleteRequest) (*pb.DeleteResponse, error)
	CompareAndSwap(context.Context, *pb.CompareAndSwapRequest) (*pb.CompareAndSwapResponse, error)
	BatchWrite(context.Context, *pb.BatchWriteRequest) (*pb.BatchWriteResponse, error)
	Scan(context.Context, *pb.ScanRequest) (*pb.ScanResponse, error)
	Txn(context.Context, *pb.TxnRequest) (*pb.TxnResponse, error)
	Ranges(context.Context, *pb.RangesRequest) (*pb.RangesResponse, error)
	Nodes(context.Context, *pb.NodesRequest) (*pb.NodesResponse, error)
	NodeID() uint64
	ClusterID() string
}

// Defaults of Config.
const (
	DefaultCommandTimeout = 15 * time.Second
	DefaultMaxClients     = 10000
)

// Config configures a Server.
type Config struct {
	// Node is the local node (required).
	Node Node
	// GRPCAddr is the node's gRPC address: the forwarding client (package client) starts there to reach
	// ranges this node does not lead (required).
	GRPCAddr string
	// Advertise is this listener's address as other nodes and clients see it; it is used when the
	// node's descriptor does not carry one yet. Default: the listening address.
	Advertise string
	// AuthToken, when set, must be given with AUTH (or HELLO ... AUTH) before any other command; it is
	// also the token of the forwarding client's gRPC calls.
	AuthToken string
	// MaxKeyBytes and MaxValueBytes are the node's limits (defaults kv.DefaultMaxKeyBytes and
	// kv.DefaultMaxValueBytes). A command with a bulk string longer than MaxValueBytes is refused
	// with the value's size and the limit; an encoded key longer than MaxKeyBytes is refused.
	MaxKeyBytes, MaxValueBytes int
	// CommandTimeout bounds one command (default 15s).
	CommandTimeout time.Duration
	// MaxClients bounds open connections (default 10000); more are refused like Redis does.
	MaxClients int
	// DialOptions are the forwarding client's gRPC dial options (default: insecure, with message
	// limits that fit MaxValueBytes).
	DialOptions []grpc.DialOption
	// Observe, if set, is called after every known command with its name, duration and error (for
	// metrics).
	Observe func(command string, took time.Duration, err error)
	Logger  *slog.Logger
}

// Server is a RESP listener in front of one node. Create it with New, run Serve, stop it with Close.
type Server struct {
	cfg     Config
	node    Node
	fwd     *client.Client
	authOn  bool
	authSum [sha256.Size]byte
	log     *slog.Logger
	started time.Time

	ctx    context.Context // cancelled by Close: in-flight commands stop
	cancel context.CancelFunc

	mu     sync.Mutex
	lis    map[net.Listener]struct{}
	conns  map[*conn]struct{}
	closed bool
	wg     sync.WaitGroup
	nextID atomic.Int64

	slots     slotCache
	commands  atomic.Int64 // commands processed, for INFO
	advertise string       // guarded by mu
}

// New validates cfg and creates the forwarding client; nothing listens until Serve.
func New(cfg Config) (*Server, error) {
	if cfg.Node == nil {
		return nil, errors.New("resp: Config.Node is required")
	}
	if cfg.GRPCAddr == "" {
		return nil, errors.New("resp: Config.GRPCAddr is required")
	}
	if cfg.MaxKeyBytes <= 0 {
		cfg.MaxKeyBytes = kv.DefaultMaxKeyBytes
	}
	if cfg.MaxValueBytes <= 0 {
		cfg.MaxValueBytes = kv.DefaultMaxValueBytes
	}
	if cfg.CommandTimeout <= 0 {
		cfg.CommandTimeout = DefaultCommandTimeout
	}
	if cfg.MaxClients <= 0 {
		cfg.MaxClients = DefaultMaxClients
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if len(cfg.DialOptions) == 0 {
		n := cfg.MaxValueBytes + cfg.MaxKeyBytes + 1<<20
		if n < 16<<20 {
			n = 16 << 20
		}
		if n > math.MaxInt32 {
			n = math.MaxInt32
		}
		cfg.DialOptions = []grpc.DialOption{
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(n), grpc.MaxCallSendMsgSize(n)),
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	fwd, err := client.New(ctx, client.Config{Addrs: []string{cfg.GRPCAddr}, AuthToken: cfg.AuthToken, DialOptions: cfg.DialOptions})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("resp: forwarding client: %w", err)
	}
	s := &Server{cfg: cfg, node: cfg.Node, fwd: fwd, log: cfg.Logger, started: time.Now(), ctx: ctx, cancel: cancel,
		lis: map[net.Listener]struct{}{}, conns: map[*conn]struct{}{}, advertise: cfg.Advertise}
	if cfg.AuthToken != "" {
		s.authOn = true
		s.authSum = sha256.Sum256([]byte(cfg.AuthToken))
	}
	return s, nil
}

// Serve accepts connections on lis until Close (then it returns nil) or until lis fails. Each
// connection is served by one goroutine owned by the Server.
func (s *Server) Serve(lis net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		lis.Close()
		return nil
	}
	s.lis[lis] = struct{}{}
	if s.advertise == "" {
		s.advertise = lis.Addr().String()
	}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	var backoff time.Duration
	for {
		nc, err := lis.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			return fmt.Errorf("resp: accept on %s: %w", lis.Addr(), err)
		}
		backoff = 0
		s.startConn(nc)
	}
}

// Close stops accepting, closes every connection (idle ones at once; in-flight commands are cancelled)
// and waits for the connection goroutines. It is idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for l := range s.lis {
		l.Close()
	}
	for c := range s.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	return s.fwd.Close()
}

// conn is one client connection and its per-connection state.
type conn struct {
	id      int64
	nc      net.Conn
	rd      *wire.Reader
	w       *wire.Writer
	created time.Time

	authed   bool
	cluster  bool // issued a CLUSTER (or READONLY/READWRITE/ASKING) command: answer MOVED
	readonly bool // READONLY: reads may be served by any replica, within client.DefaultMaxStaleness
	quit     bool

	multi     *txn.Multi    // an open MULTI block (multi.go)
	watched   []txn.Watched // WATCHed keys, until EXEC, DISCARD or UNWATCH
	watchSlot int           // their hash slot (with watched)

	mu      sync.Mutex // guards the fields below (CLIENT LIST reads them from other goroutines)
	name    string
	libName string
	libVer  string
	lastCmd string
}

func (s *Server) startConn(nc net.Conn) {
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
		tc.SetKeepAlive(true)
	}
	c := &conn{id: s.nextID.Add(1), nc: nc, created: time.Now(), authed: !s.authOn}
	c.rd = wire.NewReader(bufio.NewReaderSize(nc, 16<<10), s.cfg.MaxValueBytes)
	c.w = wire.NewWriter(bufio.NewWriterSize(nc, 16<<10))
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		nc.Close()
		return
	}
	if len(s.conns) >= s.cfg.MaxClients {
		s.mu.Unlock()
		c.w.Error("ERR max number of clients reached")
		c.w.Flush()
		nc.Close()
		return
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	go s.serveConn(c)
}

func (s *Server) serveConn(c *conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.nc.Close()
	}()
	for {
		args, err := c.rd.ReadCommand()
		var te *wire.TooLargeError
		if errors.As(err, &te) {
			// The reader skipped the command: answer it like any refused command and go on.
			c.w.Error(tooLargeReply(te))
			if c.rd.Buffered() == 0 {
				if err := c.w.Flush(); err != nil {
					return
				}
			}
			continue
		}
		if err != nil {
			var pe *wire.ProtocolError
			if errors.As(err, &pe) {
				c.w.Error("ERR " + pe.Error())
				if c.w.Flush() == nil {
					lingerClose(c.nc)
				}
			} else if err != io.EOF && !errors.Is(err, net.ErrClosed) && s.ctx.Err() == nil {
				s.log.Debug("resp: connection read failed", "remote", c.nc.RemoteAddr(), "err", err)
			}
			return
		}
		s.dispatch(c, args)
		if c.quit {
			c.w.Flush()
			return
		}
		if c.rd.Buffered() == 0 {
			if err := c.w.Flush(); err != nil {
				return
			}
		}
	}
}

// tooLargeReply is the error for a command with a bulk string over the node's largest value, worded
// like the node's own refusal of a large value through gRPC.
func tooLargeReply(te *wire.TooLargeError) string {
	return fmt.Sprintf("ERR value is %d bytes; the limit is %d (--max-value-bytes)", te.Size, te.Limit)
}

// Bounds of lingerClose.
const (
	lingerTimeout = 2 * time.Second
	lingerBytes   = 64 << 20
)

// lingerClose ends a connection after a protocol error so that the client reads the error: closing
// a socket with unread input makes the kernel answer with a reset, and the client then loses the
// reply it has not read yet. It half-closes the connection (the client sees the end of the replies)
// and drops what the client still sends, for a bounded time and size, before the caller closes it.
func lingerClose(nc net.Conn) {
	cw, ok := nc.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		return
	}
	nc.SetReadDeadline(time.Now().Add(lingerTimeout))
	io.CopyN(io.Discard, nc, lingerBytes)
}

// checkToken compares a password with the auth token in constant time (as SHA-256 digests, so the time
// does not depend on the guess's length either).
func (s *Server) checkToken(pass []byte) bool {
	got := sha256.Sum256(pass)
	return subtle.ConstantTimeCompare(got[:], s.authSum[:]) == 1
}

// advertised is this listener's address for clients (Config.Advertise, else the first listening address).
func (s *Server) advertised() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.advertise
}

// connCount is the number of open connections.
func (s *Server) connCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// allConns lists the open connections.
func (s *Server) allConns() []*conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		out = append(out, c)
	}
	return out
}
