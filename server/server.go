// Package server owns the network listeners of one node — gRPC, HTTP and RESP — and the node
// process's lifecycle: open the store, listen, start the node, serve, and stop everything in order.
//
// It never routes or stores data itself: every request is served by the node (package node), which
// registers its services on the gRPC server this package runs.
//
// Shutdown order (Run, once its context is cancelled): the RESP listener (its connections closed,
// in-flight commands cancelled), the node's leaderships handed over, its client requests in flight
// answered (new ones refused), node.Stop, then gRPC GracefulStop (bounded by
// grpcStopTimeout, then Stop), then HTTP Shutdown, then the engine's Close. The engine closes last so
// that nothing can write to it after it is closed.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/node"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/server/resp"
	"github.com/shoaldb/shoal/transport"
)

const (
	// drainTimeout bounds the leadership handoff on shutdown.
	drainTimeout = 5 * time.Second
	// requestDrainTimeout bounds the wait for client requests in flight on shutdown.
	requestDrainTimeout = 2 * time.Second
	// grpcStopTimeout bounds GracefulStop: long-lived raft streams from peers would otherwise hold it.
	grpcStopTimeout = time.Second
	// httpStopTimeout bounds HTTP Shutdown (a slow /debug/pprof/profile, a stuck dashboard).
	httpStopTimeout = 5 * time.Second
	// readHeaderTimeout bounds how long an HTTP client may take to send its request headers.
	readHeaderTimeout = 10 * time.Second
)

// Run runs one node until ctx is cancelled, then stops it cleanly and returns nil; it returns early with
// the first fatal error (invalid configuration, missing store, a port in use, a listener failing, the
// node failing to start).
//
// It opens the store (creating it only when cfg.Bootstrap or cfg.Join is set), listens on the gRPC and
// HTTP addresses, creates and starts the node, and writes one line to out once the node serves:
//
//	shoal node <id> ready grpc=<advertised gRPC addr> http=<HTTP addr or "off">
//
// With cfg.CertsDir every listener uses TLS with the node certificate (gRPC requiring client
// certificates of the CA, HTTP as HTTPS, RESP over TLS) and node-to-node gRPC presents it and verifies
// peers against the CA; the certificates are read once, before the store is opened.
//
// Signal handling is the caller's: cancel ctx on SIGINT/SIGTERM.
func Run(ctx context.Context, cfg Config, out io.Writer) error {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("invalid configuration: %w", err)
	}
	p := &process{cfg: cfg, metrics: newMetrics(), auth: newTokenChecker(cfg.Node.AuthToken)}
	if cfg.CertsDir != "" {
		t, err := loadNodeTLS(cfg.CertsDir)
		if err != nil {
			return err
		}
		p.tls = t
	}
	err := p.run(ctx, out)
	if stopErr := p.stop(); err == nil {
		err = stopErr
	}
	return err
}

// process is one running node and its listeners. Fields are set as run gets further; stop undoes
// whatever was done.
type process struct {
	cfg     Config
	metrics *metrics
	auth    tokenChecker
	tls     *nodeTLS // nil without --certs-dir
	ready   atomic.Bool

	grpcLis    net.Listener
	httpLis    net.Listener
	respLis    net.Listener
	respAddr   string       // advertised RESP address ("" when off)
	resp       *resp.Server // the RESP listener, once the node serves
	watch      *watchService
	grpcServer *grpc.Server
	httpServer *http.Server
	node       *node.Node
	started    bool // node.Start was called (so node.Stop is due)

	fatal chan error // listener failures while serving
}

// run opens the store, listens, serves, starts the node, then serves until ctx ends or something
// fails; the caller undoes it with stop, whatever run returned.
func (p *process) run(ctx context.Context, out io.Writer) error {
	// Open the store first: a missing or locked store is refused before anything listens.
	nc := p.cfg.Node
	if p.tls != nil {
		nc.DialOptions = []grpc.DialOption{p.tls.dialOption()}
	}
	var err error
	p.node, err = node.New(nc)
	if err != nil {
		return err // the node's errors say what to do (--bootstrap/--join, directory in use, corrupt)
	}

	advertise, httpAddr, err := p.listen()
	if err != nil {
		return err
	}
	p.buildServers(advertise, httpAddr)
	// Serve before Start: joining and the first raft elections need the gRPC server up, and /healthz
	// answers 503 until the node is ready.
	p.serve()
	if done, err := p.startNode(ctx); done || err != nil {
		return err
	}
	if err := p.serveRESP(advertise); err != nil {
		return err
	}
	p.ready.Store(true)
	fmt.Fprintf(out, "shoal node %d ready grpc=%s http=%s\n", p.node.NodeID(), advertise, httpAddr)
	return p.wait(ctx)
}

// buildServers makes the gRPC and HTTP servers of the node and registers its metrics.
func (p *process) buildServers(advertise, httpAddr string) {
	cfg := p.cfg
	p.node.Advertise(advertise, httpAdvertised(httpAddr), p.respAddr)
	p.metrics.reg.MustRegister(newNodeCollector(p.node.Metrics))
	if h := p.node.Hints(); h != nil {
		p.metrics.reg.MustRegister(h.Collectors()...) // shoal_hints_*
	}
	hist := p.node.History()
	if hist != nil {
		// The history records the listeners' request latencies and adds its gauges (range health,
		// store volume) to /metrics.
		hist.SetLatencySource(p.metrics.requestHistograms)
		p.metrics.reg.MustRegister(hist)
	}
	p.grpcServer = grpc.NewServer(p.grpcOptions()...)
	p.node.RegisterServices(p.grpcServer)
	p.watch = &watchService{newClient: func() (*client.Client, error) {
		return client.New(context.Background(), client.Config{Addrs: []string{advertise}, AuthToken: cfg.Node.AuthToken, DialOptions: p.respDialOptions()})
	}}
	pb.RegisterWatcherServer(p.grpcServer, p.watch)
	p.httpServer = &http.Server{
		Handler: newHTTPHandler(httpDeps{
			status:     p.node,
			ready:      &p.ready,
			stopping:   p.node.Stopping,
			catchingUp: p.node.CatchingUp,
			metrics:    p.metrics.handler(),
			auth:       p.auth,
			history:    hist,
		}),
		ReadHeaderTimeout: readHeaderTimeout,
	}
	if p.tls != nil {
		p.httpServer.TLSConfig = p.tls.serverConfig(tls.VerifyClientCertIfGiven)
	}
}

// serve starts the gRPC and HTTP servers on their listeners; a server that fails sends on p.fatal.
func (p *process) serve() {
	p.fatal = make(chan error, 3)
	go func() {
		if err := p.grpcServer.Serve(p.grpcLis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			p.fatal <- fmt.Errorf("gRPC server on %s: %w", p.grpcLis.Addr(), err)
		}
	}()
	if p.httpLis != nil {
		go func() {
			serve := p.httpServer.Serve
			if p.tls != nil {
				serve = func(l net.Listener) error { return p.httpServer.ServeTLS(l, "", "") } // TLSConfig holds the certificate
			}
			if err := serve(p.httpLis); err != nil && !errors.Is(err, http.ErrServerClosed) {
				p.fatal <- fmt.Errorf("HTTP server on %s: %w", p.httpLis.Addr(), err)
			}
		}()
	}
}

// startNode starts the node; done reports that ctx ended first (a stop while starting, not a
// failure), err that the start or a server failed.
func (p *process) startNode(ctx context.Context) (done bool, err error) {
	startCtx, cancelStart := context.WithCancel(ctx)
	defer cancelStart()
	started := make(chan error, 1)
	p.started = true
	go func() { started <- p.node.Start(startCtx) }()
	select {
	case err := <-started:
		if err != nil {
			if ctx.Err() != nil {
				return true, nil // stopped while starting: not a failure
			}
			return true, fmt.Errorf("start node: %w", err)
		}
	case err := <-p.fatal:
		cancelStart()
		<-started
		return true, err
	case <-ctx.Done():
		<-started // Start honours its context
		return true, nil
	}
	return false, nil
}

// serveRESP serves the Redis protocol once the node does (with --resp): its commands go straight to
// the node's API.
func (p *process) serveRESP(advertise string) error {
	if p.respLis == nil {
		return nil
	}
	var err error
	p.resp, err = resp.New(resp.Config{
		Node:          p.node,
		GRPCAddr:      advertise,
		Advertise:     p.respAddr,
		AuthToken:     p.cfg.Node.AuthToken,
		MaxKeyBytes:   p.cfg.Node.KV.MaxKeyBytes,
		MaxValueBytes: p.cfg.Node.KV.MaxValueBytes,
		DialOptions:   p.respDialOptions(),
		Observe:       p.metrics.observeRESP,
	})
	if err != nil {
		return err
	}
	go func() {
		if err := p.resp.Serve(p.respLis); err != nil {
			p.fatal <- fmt.Errorf("RESP server on %s: %w", p.respLis.Addr(), err)
		}
	}()
	return nil
}

// wait serves until ctx ends, a server fails, or the raft loop stops on a storage failure.
func (p *process) wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case err := <-p.fatal:
		return err
	case <-p.node.Store().Stopped():
		// The raft loop stopped on a storage failure (replica.Store.fatal): fail-stop the process
		// rather than keep serving with a node that can acknowledge nothing.
		if ctx.Err() != nil {
			return nil
		}
		return errors.New("the node's raft loop stopped after a storage failure (see the FATAL line above); fix the cause and restart the node")
	}
}

// listen opens the gRPC, HTTP and RESP listeners and returns the advertised gRPC and HTTP addresses:
// the listeners' real ones (port 0 resolved), an unspecified host replaced.
func (p *process) listen() (advertise, httpAddr string, err error) {
	cfg := p.cfg
	p.grpcLis, err = net.Listen("tcp", cfg.Listen)
	if err != nil {
		return "", "", fmt.Errorf("listen for gRPC on %s: %w (is another node using this port? pick another with --listen)", cfg.Listen, err)
	}
	advertise = cfg.Advertise
	if advertise == "" {
		advertise = advertisedAddr(p.grpcLis.Addr(), "")
	}
	httpAddr = HTTPOff
	if cfg.HTTP != HTTPOff {
		p.httpLis, err = net.Listen("tcp", cfg.HTTP)
		if err != nil {
			return "", "", fmt.Errorf("listen for HTTP on %s: %w (pick another port with --http, or --http %s)", cfg.HTTP, err, HTTPOff)
		}
		host, _, _ := net.SplitHostPort(advertise)
		httpAddr = advertisedAddr(p.httpLis.Addr(), host)
	}
	if cfg.RESP != "" {
		p.respLis, err = net.Listen("tcp", cfg.RESP)
		if err != nil {
			return "", "", fmt.Errorf("listen for RESP on %s: %w (pick another port with --resp)", cfg.RESP, err)
		}
		host, _, _ := net.SplitHostPort(advertise)
		p.respAddr = advertisedAddr(p.respLis.Addr(), host)
		if p.tls != nil {
			p.respLis = tls.NewListener(p.respLis, p.tls.serverConfig(tls.VerifyClientCertIfGiven))
		}
	}
	return advertise, httpAddr, nil
}

// grpcOptions are the gRPC server's options: message limits, metrics and (with a token) authentication.
// The metrics interceptor runs first, so refused calls are counted too.
func (p *process) grpcOptions() []grpc.ServerOption {
	n := p.cfg.grpcMaxMsgBytes()
	// WaitForHandlers: Stop waits for running handlers, so the engine is never closed under one.
	opts := []grpc.ServerOption{grpc.MaxRecvMsgSize(n), grpc.MaxSendMsgSize(n), grpc.WaitForHandlers(true), transport.StreamWorkers()}
	if p.tls != nil {
		opts = append(opts, p.tls.grpcServerOption())
	}
	if p.auth.on {
		opts = append(opts,
			grpc.ChainUnaryInterceptor(p.metrics.unaryInterceptor, p.auth.unaryInterceptor),
			grpc.ChainStreamInterceptor(p.auth.streamInterceptor))
	} else {
		opts = append(opts, grpc.ChainUnaryInterceptor(p.metrics.unaryInterceptor))
	}
	return opts
}

// respDialOptions are the dial options of the RESP listener's forwarding client: nil (resp's insecure
// default) without TLS; with TLS the node's credentials and message limits that fit the largest value.
func (p *process) respDialOptions() []grpc.DialOption {
	if p.tls == nil {
		return nil
	}
	n := min(p.cfg.grpcMaxMsgBytes(), math.MaxInt32)
	return []grpc.DialOption{p.tls.dialOption(), grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(n), grpc.MaxCallSendMsgSize(n))}
}

// stop undoes run in order: node, gRPC, HTTP, engine. It returns the first error.
func (p *process) stop() error {
	p.ready.Store(false)
	var errs []error
	// RESP first: its in-flight commands are cancelled and its connections closed while the node still
	// serves, so no command runs against a stopped node.
	if p.resp != nil {
		p.resp.Close()
	} else if p.respLis != nil {
		p.respLis.Close()
	}
	if p.node != nil && p.started {
		p.drainNode()
		p.node.Stop()
	}
	if p.watch != nil {
		p.watch.close() // ends the watch streams, which GracefulStop would wait for
	}
	if p.grpcServer != nil {
		done := make(chan struct{})
		go func() {
			p.grpcServer.GracefulStop()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(grpcStopTimeout):
			p.grpcServer.Stop()
			<-done
		}
	} else if p.grpcLis != nil {
		p.grpcLis.Close()
	}
	if p.httpServer != nil && p.httpLis != nil {
		ctx, cancel := context.WithTimeout(context.Background(), httpStopTimeout)
		if err := p.httpServer.Shutdown(ctx); err != nil {
			p.httpServer.Close()
		}
		cancel()
	} else if p.httpLis != nil {
		p.httpLis.Close()
	}
	if p.node != nil {
		if err := p.node.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// drainNode hands the node's leaderships to peers, then lets its client requests in flight answer
// while new ones are refused, each step bounded; what is left when a bound runs out is reported, and
// the stop goes on.
func (p *process) drainNode() {
	// Hand leaderships to peers first so clients retry once instead of waiting for an election.
	// DrainLeaderships returns at once when no other live node can take them (a single node).
	ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	if left := p.node.DrainLeaderships(ctx); left > 0 {
		if ctx.Err() != nil {
			fmt.Fprintf(os.Stderr, "shoal: %d leaderships still here after %v of draining; stopping anyway\n", left, drainTimeout)
		} else {
			fmt.Fprintf(os.Stderr, "shoal: no other live node can take this node's %d leaderships; stopping without moving them\n", left)
		}
	}
	cancel()
	ctx, cancel = context.WithTimeout(context.Background(), requestDrainTimeout)
	if left := p.node.DrainRequests(ctx); left > 0 {
		fmt.Fprintf(os.Stderr, "shoal: %d client requests still running after %v; stopping anyway\n", left, requestDrainTimeout)
	}
	cancel()
}

// advertisedAddr is the address to advertise for a listener: its real address, with an unspecified
// host (0.0.0.0, ::) replaced by host, or else by the machine's hostname.
func advertisedAddr(a net.Addr, host string) string {
	h, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	if isUnspecified(h) {
		h = host
		if isUnspecified(h) {
			if name, err := os.Hostname(); err == nil && name != "" {
				h = name
			} else {
				h = "127.0.0.1"
			}
		}
	}
	return net.JoinHostPort(h, port)
}

// httpAdvertised is the HTTP address put in the node's descriptor ("" when HTTP is off).
func httpAdvertised(addr string) string {
	if addr == HTTPOff {
		return ""
	}
	return addr
}
