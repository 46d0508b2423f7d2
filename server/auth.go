package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// authHeader is the gRPC metadata key and HTTP header that carry the token.
const authHeader = "authorization"

// bearerPrefix precedes the token in the authorization value.
const bearerPrefix = "Bearer "

// tokenChecker checks "Bearer <token>" credentials in constant time. The zero token disables checks.
type tokenChecker struct {
	want [sha256.Size]byte
	on   bool
}

func newTokenChecker(token string) tokenChecker {
	if token == "" {
		return tokenChecker{}
	}
	return tokenChecker{want: sha256.Sum256([]byte(token)), on: true}
}

// check returns "" if the authorization values carry the token, else the reason to refuse. The reason
// never contains what the caller sent. Tokens are compared as SHA-256 digests so that the comparison
// takes the same time whatever the length of the guess.
func (t tokenChecker) check(values []string) string {
	if !t.on {
		return ""
	}
	if len(values) == 0 {
		return "missing authorization: this cluster requires an auth token (client commands take --auth-token)"
	}
	ok := 0
	for _, v := range values {
		tok, found := strings.CutPrefix(v, bearerPrefix)
		if !found {
			continue
		}
		got := sha256.Sum256([]byte(tok))
		ok |= subtle.ConstantTimeCompare(got[:], t.want[:])
	}
	if ok != 1 {
		return `invalid authorization: expected "Bearer <token>" with this cluster's auth token`
	}
	return ""
}

func (t tokenChecker) checkContext(ctx context.Context) error {
	md, _ := metadata.FromIncomingContext(ctx)
	if reason := t.check(md.Get(authHeader)); reason != "" {
		return status.Error(codes.Unauthenticated, reason)
	}
	return nil
}

// unaryInterceptor refuses unary calls without the token.
func (t tokenChecker) unaryInterceptor(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := t.checkContext(ctx); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// streamInterceptor refuses streams without the token.
func (t tokenChecker) streamInterceptor(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := t.checkContext(ss.Context()); err != nil {
		return err
	}
	return handler(srv, ss)
}

// httpMiddleware requires the token on paths under the given prefixes and lets every other path through.
func (t tokenChecker) httpMiddleware(next http.Handler, prefixes ...string) http.Handler {
	if !t.on {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, p := range prefixes {
			if strings.HasPrefix(r.URL.Path, p) {
				if reason := t.check(r.Header.Values(authHeader)); reason != "" {
					w.Header().Set("WWW-Authenticate", `Bearer realm="shoal"`)
					writeJSON(w, http.StatusUnauthorized, errorJSON{Error: reason})
					return
				}
				break
			}
		}
		next.ServeHTTP(w, r)
	})
}
