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

	"github.com/shoaldb/shoal/pb"
)

// metrics is the node's Prometheus registry. It is per node (not the global default registry) so that
// several nodes in one process (tests) each expose their own.
type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec

	respCommands *prometheus.CounterVec
	respLatency  *prometheus.HistogramVec
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shoal_grpc_requests_total",
			Help: "Unary gRPC requests served, by full method name and outcome (a gRPC status code, or Shoal's typed error code such as NOT_LEADER).",
		}, []string{"method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "shoal_grpc_request_duration_seconds",
			Help:    "Latency of unary gRPC requests, by full method name.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18), // 50µs .. ~6.5s
		}, []string{"method"}),
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
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.requests,
		m.latency,
		m.respCommands,
		m.respLatency,
	)
	return m
}

// unaryInterceptor records the count and latency of every unary call, refused ones included (it runs
// before authentication).
func (m *metrics) unaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := handler(ctx, req)
	m.latency.WithLabelValues(info.FullMethod).Observe(time.Since(start).Seconds())
	code := status.Code(err).String()
	if r, ok := resp.(interface{ GetError() *pb.Error }); ok && err == nil {
		if e := r.GetError(); e != nil {
			// Shoal's typed errors travel in the response, not as gRPC status codes.
			code = e.GetCode().String()
		}
	}
	m.requests.WithLabelValues(info.FullMethod, code).Inc()
	return resp, err
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

// handler serves the registry in the Prometheus exposition format.
func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}
