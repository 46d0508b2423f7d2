package client_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/client/clienttest"
)

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := l.Addr().String()
	l.Close()
	return a
}

// TestFailFast holds the command-line contract: an address with nothing behind it, or an HTTP port,
// fails at once as unavailable (nothing was sent), for routed and unrouted calls alike.
func TestFailFast(t *testing.T) {
	web := httptest.NewServer(http.NotFoundHandler())
	defer web.Close()
	refused, httpAddr := closedAddr(t), strings.TrimPrefix(web.URL, "http://")
	for _, tc := range []struct {
		name  string
		addrs []string
		want  []string
	}{
		{"refused", []string{refused}, []string{"connection refused"}},
		{"http port", []string{httpAddr}, []string{"HTTP/1.1, not gRPC", "--http port"}},
		{"both", []string{refused, httpAddr}, []string{"connection refused", "not gRPC"}},
	} {
		c, err := client.New(context.Background(), client.Config{Addrs: tc.addrs, FailFast: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range []struct {
			name string
			call func(context.Context) error
		}{
			{"get", func(ctx context.Context) error { _, _, err := c.Get(ctx, []byte("k")); return err }},
			{"put", func(ctx context.Context) error { return c.Put(ctx, []byte("k"), []byte("v")) }},
			{"nodes", func(ctx context.Context) error { _, err := c.Nodes(ctx); return err }},
			{"lookup", func(ctx context.Context) error { _, err := c.Lookup(ctx, []byte("k")); return err }},
		} {
			// At once: long before the context ends, which a client that retries would reach.
			const deadline = 30 * time.Second
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			start := time.Now()
			err := op.call(ctx)
			took := time.Since(start)
			cancel()
			if !errors.Is(err, client.ErrUnavailable) || took > deadline/3 {
				t.Errorf("%s %s: %v after %v; want unavailable at once", tc.name, op.name, err, took)
				continue
			}
			for _, w := range append(tc.want, "nothing was sent") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s %s: %q lacks %q", tc.name, op.name, err, w)
				}
			}
		}
		c.Close()
	}
}

// TestFailFastOnlyBeforeContact: without FailFast a refused address is retried (a node may be
// starting), and once a node has answered, FailFast no longer cuts retries short (a node restarting
// behind one address is ridden out).
func TestFailFastOnlyBeforeContact(t *testing.T) {
	c, err := client.New(context.Background(), client.Config{Addrs: []string{closedAddr(t)}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, _, err := c.Get(ctx, []byte("k")); !errors.Is(err, client.ErrTimeout) {
		t.Errorf("without FailFast: %v, want a timeout after retries", err)
	}

	cl := clienttest.New(t, 2)
	fc := newClient(t, cl, client.Config{Addrs: cl.Addrs(), FailFast: true})
	if _, err := fc.Nodes(context.Background()); err != nil {
		t.Fatal(err)
	}
	cl.StopNode(1)
	if _, err := fc.Nodes(ctx2s(t)); err != nil {
		t.Errorf("after contact, one node stopped: %v", err)
	}
}

func ctx2s(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	t.Cleanup(cancel)
	return c
}
