package test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"

	"github.com/shoaldb/shoal/server/resp"
	"github.com/shoaldb/shoal/test/testcluster"
)

// The model of WATCH k; GET k; MULTI; SET k v; EXEC on one key whose writes all carry new values: an
// EXEC that succeeded ran on the value its GET saw (nothing was written in between); one that failed
// changed nothing (the GET may already have seen the write that failed it); plain GETs see the latest
// value.

type watchInput struct {
	kind     string // get, watchset
	expected string // watchset: what the GET after WATCH saw ("" = absent)
	value    string
}

type watchOutput struct {
	value       string
	ok, unknown bool
}

var watchModel = porcupine.Model{
	Init: func() any { return "" },
	Step: func(s, i, o any) (bool, any) {
		st, in, out := s.(string), i.(watchInput), o.(watchOutput)
		if in.kind == "get" {
			return out.value == st, st
		}
		switch {
		case out.unknown:
			if st == in.expected {
				return true, in.value
			}
			return true, st
		case out.ok:
			return st == in.expected, in.value
		}
		return true, st
	},
	DescribeOperation: func(i, o any) string {
		in, out := i.(watchInput), o.(watchOutput)
		if in.kind == "get" {
			return fmt.Sprintf("get → %q", out.value)
		}
		return fmt.Sprintf("watch-set(%q → %q) ok=%v unknown=%v", in.expected, in.value, out.ok, out.unknown)
	},
}

// TestRESPWatchUnderLeaderChanges runs WATCH/GET/MULTI/SET/EXEC rounds and GETs through a RESP
// listener while the nemesis kills and restarts the key's range leader (never the listener's node,
// whose leadership it hands away first), and checks the history with porcupine.
func TestRESPWatchUnderLeaderChanges(t *testing.T) {
	if testing.Short() {
		t.Skip("a 10 s run under leader kills")
	}
	c := testcluster.StartSafe(t, testcluster.Options{Nodes: 3})
	admin := c.Client()
	testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(admin, 3) })
	front, err := resp.New(resp.Config{Node: c.Nodes[0].Node, GRPCAddr: c.Nodes[0].Addr})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go front.Serve(lis)
	t.Cleanup(func() { front.Close() })

	const key = "{w}k"
	deadline := time.Now().Add(10 * time.Second)
	t0 := time.Now()
	var (
		mu  sync.Mutex
		ops []porcupine.Operation
		wg  sync.WaitGroup
	)
	record := func(cid int, in watchInput, out watchOutput, call, ret int64) {
		mu.Lock()
		ops = append(ops, porcupine.Operation{ClientId: cid, Input: in, Output: out, Call: call, Return: ret})
		mu.Unlock()
	}
	now := func() int64 { return int64(time.Since(t0)) }
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rc := redis.NewClient(&redis.Options{Addr: lis.Addr().String(), MaxRetries: -1, ReadTimeout: 20 * time.Second})
			defer rc.Close()
			rng := rand.New(rand.NewPCG(uint64(w), 11))
			cid := w * 1000
			for seq := 0; time.Now().Before(deadline); seq++ {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				if rng.IntN(3) == 0 {
					call := now()
					v, err := rc.Get(ctx, key).Result()
					if err == nil || errors.Is(err, redis.Nil) {
						record(cid, watchInput{kind: "get"}, watchOutput{value: v}, call, now())
					}
					cancel()
					continue
				}
				in := watchInput{kind: "watchset", value: fmt.Sprintf("w%d.%d", w, seq)}
				var call int64
				getOK := false
				err := rc.Watch(ctx, func(tx *redis.Tx) error {
					gcall := now()
					v, err := tx.Get(ctx, key).Result()
					if err != nil && !errors.Is(err, redis.Nil) {
						return err
					}
					record(cid, watchInput{kind: "get"}, watchOutput{value: v}, gcall, now())
					in.expected, getOK = v, true
					call = now()
					_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
						p.Set(ctx, key, in.value, 0)
						return nil
					})
					return err
				}, key)
				cancel()
				if !getOK {
					continue
				}
				switch {
				case err == nil:
					record(cid, in, watchOutput{ok: true}, call, now())
				case errors.Is(err, redis.TxFailedErr), strings.HasPrefix(err.Error(), "TRYAGAIN"):
					record(cid, in, watchOutput{}, call, now()) // nothing written
				default: // AMBIGUOUS, a timeout, a broken connection: the write may have happened
					record(cid, in, watchOutput{unknown: true}, call, 1<<62)
					cid++
				}
			}
		}(w)
	}
	kills, err := killLeadersSparing(c, admin, []byte(resp.KeyFor([]byte(key))), 0, deadline)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	res, _ := porcupine.CheckOperationsVerbose(watchModel, ops, time.Minute)
	t.Logf("porcupine: %s on %d operations with %d leader kills", res, len(ops), kills)
	if res != porcupine.Ok {
		if d := os.Getenv("SHOAL_TEST_ARTIFACTS"); d != "" {
			var b strings.Builder
			for _, op := range ops {
				fmt.Fprintf(&b, "%d %d %d %s\n", op.ClientId, op.Call, op.Return, watchModel.DescribeOperation(op.Input, op.Output))
			}
			_ = os.WriteFile(filepath.Join(d, "watch-history.txt"), []byte(b.String()), 0o644)
		}
		t.Fatal("WATCH/MULTI/EXEC history is not linearizable")
	}
}

// killLeadersSparing kills and restarts key's range leader until the deadline; when node spare
// leads, it hands the leadership to another node instead.
func killLeadersSparing(c *testcluster.Cluster, admin interface {
	TransferLeader(context.Context, uint64, uint64) error
}, key []byte, spare int, deadline time.Time) (int, error) {
	kills := 0
	time.Sleep(time.Second)
	for time.Now().Before(deadline.Add(-2 * time.Second)) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		rs, err := testcluster.RangeOf(ctx, c.Client(), key)
		if err != nil || rs.GetLeaderNodeId() == 0 {
			cancel()
			time.Sleep(200 * time.Millisecond)
			continue
		}
		idx := c.NodeIndex(rs.GetLeaderNodeId())
		if idx == spare {
			for _, rd := range rs.GetDesc().GetReplicas() {
				if i := c.NodeIndex(rd.NodeId); i != spare && i >= 0 && c.Alive(i) {
					_ = admin.TransferLeader(ctx, rs.GetDesc().GetRangeId(), rd.NodeId)
					break
				}
			}
			cancel()
			time.Sleep(300 * time.Millisecond)
			continue
		}
		cancel()
		if idx < 0 || !c.Alive(idx) {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		if err := c.KillWait(idx); err != nil {
			return kills, err
		}
		kills++
		time.Sleep(time.Second)
		if err := c.TryRestart(idx); err != nil {
			return kills, err
		}
		time.Sleep(1500 * time.Millisecond)
	}
	return kills, nil
}
