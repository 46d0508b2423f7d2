package server

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/shoaldb/shoal/node/history"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/version"
)

// metrics is the node's Prometheus registry. It is per node (not the global default registry) so that
// several nodes in one process (tests) each expose their own.
type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec

	respCommands *prometheus.CounterVec
	respLatency  *prometheus.HistogramVec

	// requestReg holds only the four request metrics above: the node's history reads them every few
	// seconds without gathering the whole registry.
	requestReg *prometheus.Registry
}

// Label values of shoal_grpc_requests_total.
const (
	noError       = "none" // error: the response carries no typed error
	keyspaceUser  = "user" // keyspace: a request to a user range (or routed by key)
	keyspaceMeta  = "meta" // keyspace: a read of the meta range (the cluster's own lookups)
	keyspaceNone  = "none" // keyspace: not a range request (heartbeats, admin calls)
	metaRangeID   = history.MetaRangeID
	buildInfoName = "shoal_build_info"
)

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shoal_grpc_requests_total",
			Help: "Unary gRPC requests served, by full method name, gRPC status code (code), Shoal's typed error code carried in the response (error: NOT_LEADER, RANGE_MOVED, OVERLOADED, ...; none without one) and key space (keyspace: user, meta for the cluster's own reads of the meta range, none for calls that address no range).",
		}, []string{"method", "code", "error", "keyspace"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "shoal_grpc_request_duration_seconds",
			Help:    "Latency of unary gRPC requests, by full method name and key space (as shoal_grpc_requests_total).",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18), // 50µs .. ~6.5s
		}, []string{"method", "keyspace"}),
	}
	m.respCommands = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shoal_resp_commands_total",
		Help: "RESP commands served, by command and outcome (ok or error).",
	}, []string{"command", "outcome"})
	m.respLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "shoal_resp_command_duration_seconds",
		Help:    "Latency of RESP commands, by command.",
		Buckets: prometheus.ExponentialBuckets(20e-6, 2, 19), // 20µs .. ~5s
	}, []string{"command"})
	build := version.Get()
	revision := build.Revision
	if revision == "" {
		revision = "unknown"
	}
	info := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: buildInfoName,
		Help: "Always 1; its labels say which build of Shoal this node runs (version as `shoal version` prints it, VCS revision, Go version).",
	}, []string{"version", "revision", "goversion"})
	info.WithLabelValues(version.String(), revision, build.GoVersion).Set(1)
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.requests,
		m.latency,
		m.respCommands,
		m.respLatency,
		info,
	)
	m.requestReg = prometheus.NewRegistry()
	m.requestReg.MustRegister(m.requests, m.latency, m.respCommands, m.respLatency)
	return m
}

// unaryInterceptor records the count and latency of every unary call, refused ones included (it runs
// before authentication).
func (m *metrics) unaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := handler(ctx, req)
	ks := requestKeyspace(req)
	m.latency.WithLabelValues(info.FullMethod, ks).Observe(time.Since(start).Seconds())
	errCode := noError
	if r, ok := resp.(interface{ GetError() *pb.Error }); ok && err == nil {
		// Shoal's typed errors travel in the response, beside an OK gRPC status.
		if e := r.GetError(); e != nil && e.GetCode() != pb.ErrorCode_OK {
			errCode = e.GetCode().String()
		}
	}
	m.requests.WithLabelValues(info.FullMethod, status.Code(err).String(), errCode, ks).Inc()
	return resp, err
}

// requestKeyspace says whom a request serves: a user range, the meta range (nodes forwarding their
// reads of it to its leader: internal polling, not user traffic) or no range at all.
func requestKeyspace(req any) string {
	h, ok := req.(interface{ GetHeader() *pb.RequestHeader })
	if !ok {
		return keyspaceNone
	}
	if h.GetHeader().GetRangeId() == metaRangeID {
		return keyspaceMeta
	}
	return keyspaceUser
}

// observeRESP records one RESP command.
func (m *metrics) observeRESP(command string, took time.Duration, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	m.respCommands.WithLabelValues(command, outcome).Inc()
	m.respLatency.WithLabelValues(command).Observe(took.Seconds())
}

// handler serves the registry in the Prometheus exposition format. It also carries the registry to
// newHTTPHandler, which adds the node's history to it (metricsHandler).
func (m *metrics) handler() http.Handler {
	return &metricsHandler{Handler: promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg}), m: m}
}

// metricsHandler is the /metrics handler of a node's own registry.
type metricsHandler struct {
	http.Handler
	m *metrics
}

// requestHistograms reads the data requests' cumulative latency histograms, gRPC and RESP (the
// node history's latency source).
func (m *metrics) requestHistograms() (grpc, resp history.Histogram) {
	fams, err := m.requestReg.Gather()
	if err != nil {
		return grpc, resp
	}
	byName := map[string]*familyT{}
	for _, f := range fams {
		byName[f.GetName()] = f
	}
	rs := summarizeRequests(byName)
	return rs.GRPC.histogram(), rs.RESP.histogram()
}
