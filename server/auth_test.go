package server

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/shoaldb/shoal/node"
	"github.com/shoaldb/shoal/pb"
)

const testToken = "tok-7f3a9c-very-secret"

// fakeShoal answers Get with the key as value.
type fakeShoal struct{ pb.UnimplementedShoalServer }

func (fakeShoal) Get(_ context.Context, r *pb.GetRequest) (*pb.GetResponse, error) {
	return &pb.GetResponse{Found: true, Value: r.Key}, nil
}

// fakeRaft acknowledges every batch of a raft stream.
type fakeRaft struct {
	pb.UnimplementedRaftTransportServer
}

func (fakeRaft) RaftStream(s grpc.BidiStreamingServer[pb.RaftMessageBatch, pb.RaftStreamAck]) error {
	for {
		if _, err := s.Recv(); err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
		if err := s.Send(&pb.RaftStreamAck{}); err != nil {
			return err
		}
	}
}

// startFakeGRPC serves the fakes with the same server options Run uses, over an in-memory listener.
func startFakeGRPC(t *testing.T, token string) (*process, *grpc.ClientConn) {
	t.Helper()
	p := &process{cfg: Config{Node: node.Config{AuthToken: token}}.WithDefaults(), metrics: newMetrics(), auth: newTokenChecker(token)}
	s := grpc.NewServer(p.grpcOptions()...)
	pb.RegisterShoalServer(s, fakeShoal{})
	pb.RegisterRaftTransportServer(s, fakeRaft{})
	lis := bufconn.Listen(1 << 20)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return p, conn
}

func withAuth(v string) context.Context {
	if v == "" {
		return context.Background()
	}
	return metadata.AppendToOutgoingContext(context.Background(), "authorization", v)
}

func TestGRPCAuth(t *testing.T) {
	p, conn := startFakeGRPC(t, testToken)
	c := pb.NewShoalClient(conn)
	for _, tc := range []struct {
		name, header string
		ok           bool
	}{
		{"missing", "", false},
		{"wrong", "Bearer wrong-" + testToken, false},
		{"prefix of token", "Bearer " + testToken[:5], false},
		{"no bearer", testToken, false},
		{"basic scheme", "Basic " + testToken, false},
		{"right", "Bearer " + testToken, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Unary.
			resp, err := c.Get(withAuth(tc.header), &pb.GetRequest{Key: []byte("k")})
			checkAuthResult(t, "unary", err, tc.ok)
			if tc.ok && string(resp.GetValue()) != "k" {
				t.Fatalf("Get = %v", resp)
			}
			// Stream.
			stream, err := pb.NewRaftTransportClient(conn).RaftStream(withAuth(tc.header))
			if err != nil {
				t.Fatal(err)
			}
			if err := stream.Send(&pb.RaftMessageBatch{}); err != nil && err != io.EOF {
				t.Fatal(err)
			}
			_, err = stream.Recv()
			checkAuthResult(t, "stream", err, tc.ok)
			stream.CloseSend()
		})
	}
	// The metrics interceptor runs before auth: refused calls are counted.
	m := "/shoal.Shoal/Get"
	if got := metricValue(t, p.metrics, "shoal_grpc_requests_total", "method", m, "code", "Unauthenticated"); got != 5 {
		t.Errorf("Unauthenticated Get count = %v, want 5", got)
	}
	if got := metricValue(t, p.metrics, "shoal_grpc_requests_total", "method", m, "code", "OK"); got != 1 {
		t.Errorf("OK Get count = %v, want 1", got)
	}
	if got := metricValue(t, p.metrics, "shoal_grpc_request_duration_seconds", "method", m); got != 6 {
		t.Errorf("latency samples = %v, want 6", got)
	}
}

func checkAuthResult(t *testing.T, kind string, err error, wantOK bool) {
	t.Helper()
	if wantOK {
		if err != nil {
			t.Fatalf("%s: %v, want success", kind, err)
		}
		return
	}
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("%s: %v, want Unauthenticated", kind, err)
	}
	if msg := status.Convert(err).Message(); strings.Contains(msg, testToken) || strings.Contains(msg, testToken[:5]) {
		t.Fatalf("%s: error message echoes the token: %q", kind, msg)
	}
}

func TestGRPCNoAuth(t *testing.T) {
	_, conn := startFakeGRPC(t, "")
	if _, err := pb.NewShoalClient(conn).Get(context.Background(), &pb.GetRequest{Key: []byte("k")}); err != nil {
		t.Fatalf("without a configured token every call passes: %v", err)
	}
}

func TestTokenCheckerSeveralValues(t *testing.T) {
	c := newTokenChecker(testToken)
	if r := c.check([]string{"Bearer nope", "Bearer " + testToken}); r != "" {
		t.Fatalf("a matching value among several must pass: %s", r)
	}
	if r := c.check([]string{"Bearer "}); r == "" {
		t.Fatal("an empty bearer must not pass")
	}
}

// metricValue gathers m's registry and returns the counter value (or histogram sample count) of the
// series of family name with the given label pairs; -1 if there is none.
func metricValue(t *testing.T, m *metrics, name string, labels ...string) float64 {
	t.Helper()
	fams, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	series:
		for _, s := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range s.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if got[labels[i]] != labels[i+1] {
					continue series
				}
			}
			if h := s.GetHistogram(); h != nil {
				return float64(h.GetSampleCount())
			}
			return s.GetCounter().GetValue()
		}
	}
	return -1
}
