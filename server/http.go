package server

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"net/http"
	"net/http/pprof"
	"sync/atomic"
	"time"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/server/apijson"
)

//go:embed web/index.html
var dashboardHTML []byte

// clusterStatus is the part of the node's public API that the HTTP endpoints read (kv.Node serves it as
// part of pb.ShoalServer).
type clusterStatus interface {
	Nodes(context.Context, *pb.NodesRequest) (*pb.NodesResponse, error)
	Ranges(context.Context, *pb.RangesRequest) (*pb.RangesResponse, error)
	Decisions(context.Context, *pb.DecisionsRequest) (*pb.DecisionsResponse, error)
}

// apiTimeout bounds one /api/ call into the node (a cluster without quorum must not hang the page).
const apiTimeout = 5 * time.Second

// errorJSON is the body of every HTTP error answer.
type errorJSON struct {
	Error string `json:"error"`
}

// httpDeps is what the HTTP handler needs from the running node.
type httpDeps struct {
	status  clusterStatus
	ready   *atomic.Bool
	metrics http.Handler
	auth    tokenChecker
}

// newHTTPHandler builds the node's HTTP surface:
//
//	/healthz       200 "ok" once the node serves, 503 before (open)
//	/metrics       Prometheus exposition (open)
//	/api/nodes     node list, JSON (token)
//	/api/ranges    range list, JSON (token)
//	/api/decisions the autopilot's decision log, JSON (token)
//	/debug/pprof/  Go profiling (token)
//	/              the dashboard page (open; it sends the token, if the user gives one, to /api/)
func newHTTPHandler(d httpDeps) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if !d.ready.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte("not ready\n"))
			return
		}
		w.Write([]byte("ok\n"))
	})
	mux.Handle("GET /metrics", d.metrics)
	mux.HandleFunc("GET /api/nodes", func(w http.ResponseWriter, r *http.Request) {
		if !d.ready.Load() {
			writeJSON(w, http.StatusServiceUnavailable, errorJSON{Error: "node is not serving yet"})
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
		defer cancel()
		resp, err := d.status.Nodes(ctx, &pb.NodesRequest{})
		if msg, code := apiError(err, resp.GetError()); code != 0 {
			writeJSON(w, code, errorJSON{Error: "list nodes: " + msg})
			return
		}
		writeJSON(w, http.StatusOK, apijson.NodesJSON(resp.GetNodes()))
	})
	mux.HandleFunc("GET /api/ranges", func(w http.ResponseWriter, r *http.Request) {
		if !d.ready.Load() {
			writeJSON(w, http.StatusServiceUnavailable, errorJSON{Error: "node is not serving yet"})
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
		defer cancel()
		resp, err := d.status.Ranges(ctx, &pb.RangesRequest{})
		if msg, code := apiError(err, resp.GetError()); code != 0 {
			writeJSON(w, code, errorJSON{Error: "list ranges: " + msg})
			return
		}
		writeJSON(w, http.StatusOK, apijson.RangesJSON(resp.GetRanges()))
	})
	mux.HandleFunc("GET /api/decisions", func(w http.ResponseWriter, r *http.Request) {
		if !d.ready.Load() {
			writeJSON(w, http.StatusServiceUnavailable, errorJSON{Error: "node is not serving yet"})
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
		defer cancel()
		resp, err := d.status.Decisions(ctx, &pb.DecisionsRequest{})
		if msg, code := apiError(err, resp.GetError()); code != 0 {
			writeJSON(w, code, errorJSON{Error: "decision log: " + msg})
			return
		}
		raw := resp.GetEntriesJson()
		if len(raw) == 0 || string(raw) == "null" {
			raw = []byte("[]")
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.Write(append(raw, '\n'))
	})
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, errorJSON{Error: "no such API endpoint: " + r.URL.Path})
	})
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(dashboardHTML)
	})
	return d.auth.httpMiddleware(mux, "/api/", "/debug/")
}

// apiError turns a failed admin call into a message and an HTTP status (0 when the call succeeded).
func apiError(err error, perr *pb.Error) (string, int) {
	switch {
	case err != nil:
		return err.Error(), http.StatusBadGateway
	case perr != nil && perr.GetCode() != pb.ErrorCode_OK:
		code := http.StatusServiceUnavailable
		if perr.GetCode() == pb.ErrorCode_INVALID_ARGUMENT {
			code = http.StatusBadRequest
		}
		return perr.GetCode().String() + ": " + perr.GetMessage(), code
	}
	return "", 0
}

// writeJSON writes v as a JSON answer with the given status, encoded as the CLI's --format json does
// (compact, HTML characters unescaped, one trailing newline), so both print the same bytes.
func writeJSON(w http.ResponseWriter, code int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		code = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString(`{"error":"encode response"}` + "\n")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	w.Write(buf.Bytes())
}
