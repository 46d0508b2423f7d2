package resp_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestMultiExec drives MULTI, EXEC, DISCARD, WATCH and UNWATCH with go-redis on a plain and a
// cluster connection, and the commands of this file with redis-cli when it is installed.
func TestMultiExec(t *testing.T) {
	c := startCluster(t, 3)
	ctx := tctx(t)
	rc := c.plain(t, 1)
	cc := c.clusterClient(t, nil)
	for name, cl := range map[string]redis.UniversalClient{"plain": rc, "cluster": cc} {
		t.Run(name, func(t *testing.T) {
			k := func(s string) string { return "{" + name + "}" + s }
			cmds, err := cl.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Set(ctx, k("a"), "1", 0)
				p.IncrBy(ctx, k("a"), 41)
				p.Expire(ctx, k("a"), 60e9)
				p.Append(ctx, k("b"), "xy")
				p.Get(ctx, k("a"))
				p.TTL(ctx, k("a"))
				return nil
			})
			if err != nil {
				t.Fatalf("MULTI/EXEC: %v", err)
			}
			got := fmt.Sprintln(cmds[1].(*redis.IntCmd).Val(), cmds[3].(*redis.IntCmd).Val(), cmds[4].(*redis.StringCmd).Val(), cmds[5].(*redis.DurationCmd).Val())
			if got != "42 2 42 1m0s\n" {
				t.Errorf("EXEC replies %q, want 42 2 42 1m0s", got)
			}
			// A watched key changed by another client: EXEC answers nil and nothing is written.
			err = cl.Watch(ctx, func(tx *redis.Tx) error {
				if err := cl.Set(ctx, k("a"), "changed", 0).Err(); err != nil {
					return err
				}
				_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
					p.Set(ctx, k("b"), "lost", 0)
					return nil
				})
				return err
			}, k("a"))
			if !errors.Is(err, redis.TxFailedErr) {
				t.Errorf("EXEC after a watched key changed: %v, want %v", err, redis.TxFailedErr)
			}
			if v, _ := cl.Get(ctx, k("b")).Result(); v != "xy" {
				t.Errorf("b = %q after the failed EXEC, want xy", v)
			}
			// Unchanged watched key: EXEC runs.
			err = cl.Watch(ctx, func(tx *redis.Tx) error {
				_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
					p.Set(ctx, k("b"), "won", 0)
					return nil
				})
				return err
			}, k("a"), k("missing"))
			if err != nil {
				t.Errorf("EXEC with unchanged watched keys: %v", err)
			}
		})
	}
	t.Run("raw", func(t *testing.T) {
		r := dialRaw(t, c.nodes[0].respAddr)
		for _, s := range []struct{ send, want string }{
			{"EXEC\r\n", "-ERR EXEC without MULTI"},
			{"DISCARD\r\n", "-ERR DISCARD without MULTI"},
			{"MULTI\r\n", "+OK"},
			{"MULTI\r\n", "-ERR MULTI calls can not be nested"},
			{"WATCH x\r\n", "-ERR WATCH inside MULTI is not allowed"},
			{"SET {r}a 1\r\n", "+QUEUED"},
			{"SET {r}b 2\r\n", "+QUEUED"},
			{"DISCARD\r\n", "+OK"},
			{"EXISTS {r}a\r\n", ":0"},
			{"MULTI\r\n", "+OK"},
			{"EXEC\r\n", "[]"},
			{"MULTI\r\n", "+OK"},
			{"SET {r}a 1\r\n", "+QUEUED"},
			{"SET {other}a 1\r\n", "-CROSSSLOT*"},
			{"EXEC\r\n", "-EXECABORT*"},
			{"MULTI\r\n", "+OK"},
			{"HSET {r}h f v\r\n", "-ERR 'hset' is not supported inside MULTI*"},
			{"EXEC\r\n", "-EXECABORT*"},
			{"MULTI\r\n", "+OK"},
			{"SET {r}a\r\n", "-ERR wrong number of arguments*"},
			{"EXEC\r\n", "-EXECABORT*"},
			{"WATCH {r}a {other}b\r\n", "-CROSSSLOT*"},
			{"UNWATCH\r\n", "+OK"},
			{"MULTI\r\n", "+OK"},
			{"INCR {r}n\r\n", "+QUEUED"},
			{"SET {r}s notanumber\r\n", "+QUEUED"},
			{"INCR {r}s\r\n", "+QUEUED"},
			{"GET {r}n\r\n", "+QUEUED"},
			{"EXEC\r\n", "[:1 +OK -ERR value is not an integer or out of range 1]"},
		} {
			r.send(s.send)
			r.expect(s.want)
		}
	})
	t.Run("redis-cli", func(t *testing.T) {
		cli, err := exec.LookPath("redis-cli")
		if err != nil {
			t.Skip("redis-cli not installed")
		}
		host, port, _ := strings.Cut(c.nodes[0].respAddr, ":")
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"set", "cli:t", "v", "EX", "100"}, "OK"},
			{[]string{"ttl", "cli:t"}, "100"},
			{[]string{"pexpire", "cli:t", "50000"}, "1"},
			{[]string{"persist", "cli:t"}, "1"},
			{[]string{"ttl", "cli:t"}, "-1"},
			{[]string{"ttl", "cli:none"}, "-2"},
			{[]string{"setex", "cli:t", "30", "w"}, "OK"},
			{[]string{"psetex", "cli:t", "30000", "w"}, "OK"},
			{[]string{"expireat", "cli:t", "4102444800"}, "1"},
			{[]string{"getex", "cli:t", "persist"}, "w"},
			{[]string{"getset", "cli:t", "5"}, "w"},
			{[]string{"incrbyfloat", "cli:t", "0.5"}, "5.5"},
			{[]string{"append", "cli:t", "x"}, "4"},
			{[]string{"strlen", "cli:t"}, "4"},
			{[]string{"getdel", "cli:t"}, "5.5x"},
			{[]string{"incr", "cli:n"}, "1"},
			{[]string{"decrby", "cli:n", "3"}, "-2"},
		} {
			out, err := exec.Command(cli, append([]string{"-h", host, "-p", port}, tc.args...)...).CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != tc.want {
				t.Errorf("redis-cli %v = %q, %v; want %q", tc.args, out, err, tc.want)
			}
		}
	})
}

// TestMultiIncrementsNotLost runs concurrent WATCH/GET/MULTI/SET/EXEC increments (the optimistic
// pattern of Redis's documentation) and checks that none is lost.
func TestMultiIncrementsNotLost(t *testing.T) {
	c := startCluster(t, 3)
	ctx := tctx(t)
	const workers, each = 4, 10
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			cl := c.plain(t, w%len(c.nodes))
			for i := 0; i < each; i++ {
				for {
					err := cl.Watch(ctx, func(tx *redis.Tx) error {
						n, err := tx.Get(ctx, "{w}n").Int()
						if err != nil && !errors.Is(err, redis.Nil) {
							return err
						}
						_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
							p.Set(ctx, "{w}n", n+1, 0)
							return nil
						})
						return err
					}, "{w}n")
					if errors.Is(err, redis.TxFailedErr) {
						continue
					}
					if err != nil {
						errs <- err
						return
					}
					break
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n, err := c.plain(t, 0).Get(context.Background(), "{w}n").Int(); err != nil || n != workers*each {
		t.Fatalf("counter = %d, %v; want %d", n, err, workers*each)
	}
}
