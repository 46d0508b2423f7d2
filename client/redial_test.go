package client

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
)

// TestWakeRedialsANodeNamedLeader: the connection to a node that was down waits out a reconnect
// backoff; wake (called when a server names the node as a range's leader) dials it again at once and
// waits for it, and does nothing to an address never dialled.
func TestWakeRedialsANodeNamedLeader(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens: the connection fails and backs off
	c, err := New(context.Background(), Config{Addrs: []string{addr}, DialOptions: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if c.conns.wake(ctx, addr, time.Second) {
		t.Fatal("wake of an address never dialled")
	}
	if _, err := c.conns.get(addr); err != nil {
		t.Fatal(err)
	}
	c.conns.mu.Lock()
	cc := c.conns.conns[addr]
	c.conns.mu.Unlock()
	cc.Connect()
	for s := cc.GetState(); s != connectivity.TransientFailure; s = cc.GetState() {
		if !cc.WaitForStateChange(ctx, s) {
			t.Fatalf("connection to a closed port stayed %v", s)
		}
	}
	if c.conns.wake(ctx, addr, 0) {
		t.Fatal("wake reports a connection up while nothing listens")
	}
	// The node is back at its address.
	l, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the port was taken meanwhile: %v", err)
	}
	srv := grpc.NewServer()
	go srv.Serve(l)
	defer srv.Stop()
	if !c.conns.wake(ctx, addr, 20*time.Second) {
		t.Fatalf("wake did not bring the connection up; state %v", cc.GetState())
	}
	if s := cc.GetState(); s != connectivity.Ready {
		t.Fatalf("state %v after wake, want ready", s)
	}
}
