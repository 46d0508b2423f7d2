package test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/server/resp"
	"github.com/shoaldb/shoal/test/testcluster"
)

// TestTxnCrossRange: a transaction over keys of two ranges is refused with the typed error and
// writes nothing; a split inside a Redis hash slot moves to the slot's start, so a {tag}'s keys stay
// in one range and a transaction over them still runs.
func TestTxnCrossRange(t *testing.T) {
	c := testcluster.StartSafe(t, testcluster.Options{Nodes: 1})
	cl := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, _, err := cl.Split(ctx, []byte("m")); err != nil {
		t.Fatal(err)
	}
	put := func(k string) *pb.TxnOp { return &pb.TxnOp{Type: pb.TxnOp_PUT, Key: []byte(k), Value: []byte("1")} }
	_, err := cl.Txn(ctx, &pb.TxnRequest{Success: []*pb.TxnOp{put("a"), put("z")}})
	if !errors.Is(err, client.ErrCrossRange) {
		t.Fatalf("txn over two ranges: %v, want ErrCrossRange", err)
	}
	if _, found, _ := cl.Get(ctx, []byte("a")); found {
		t.Fatal("a refused transaction wrote a key")
	}
	ka, kb := resp.KeyFor([]byte("{acct}a")), resp.KeyFor([]byte("{acct}b"))
	_, right, err := cl.Split(ctx, kb) // inside the slot of {acct}: the split moves to the slot's start
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Compare(right.StartKey, ka) > 0 || !bytes.Equal(right.StartKey, ka[:4]) {
		t.Fatalf("split at a {tag} key started the right range at %x, want the slot's start %x", right.StartKey, ka[:4])
	}
	if _, err := cl.Txn(ctx, &pb.TxnRequest{Success: []*pb.TxnOp{put(string(ka)), put(string(kb))}}); err != nil {
		t.Fatalf("txn within one hash slot: %v", err)
	}
}

// TestTxnBankUnderLeaderKills moves money between accounts of one hash tag with transactions (half
// as compare-on-mod-index read-modify-writes, half as paired increments) while the nemesis kills the
// range's leader; every atomic read of all accounts, and the final one, sums to the starting total.
func TestTxnBankUnderLeaderKills(t *testing.T) {
	if testing.Short() {
		t.Skip("a 10 s run under leader kills")
	}
	const accounts, start = 5, 100
	c := testcluster.StartSafe(t, testcluster.Options{Nodes: 3})
	admin := c.Client()
	testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(admin, 3) })
	keys := make([][]byte, accounts)
	var init []*pb.TxnOp
	for i := range keys {
		keys[i] = resp.KeyFor(fmt.Appendf(nil, "{bank}acct%d", i))
		init = append(init, &pb.TxnOp{Type: pb.TxnOp_PUT, Key: keys[i], Value: []byte(strconv.Itoa(start))})
	}
	ctx := context.Background()
	if _, err := admin.Txn(ctx, &pb.TxnRequest{Success: init}); err != nil {
		t.Fatal(err)
	}
	readAll := &pb.TxnRequest{}
	for _, k := range keys {
		readAll.Success = append(readAll.Success, &pb.TxnOp{Type: pb.TxnOp_GET, Key: k})
	}
	total := func(cl *client.Client) (int, error) {
		ctx, cancel := context.WithTimeout(ctx, 8*time.Second)
		defer cancel()
		r, err := cl.Txn(ctx, readAll)
		if err != nil {
			return 0, err
		}
		sum := 0
		for _, res := range r.Results {
			n, _ := strconv.Atoi(string(res.Value))
			sum += n
		}
		return sum, nil
	}
	deadline := time.Now().Add(10 * time.Second)
	var wg sync.WaitGroup
	var transfers, reads atomic.Int64
	errs := make(chan error, 8)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			cl := c.NewClient(2*time.Second, 40)
			for time.Now().Before(deadline) {
				if w == 0 {
					if sum, err := total(cl); err == nil {
						reads.Add(1)
						if sum != accounts*start {
							errs <- fmt.Errorf("an atomic read of every account sums to %d, want %d", sum, accounts*start)
							return
						}
					}
					continue
				}
				from, to := rng.IntN(accounts), rng.IntN(accounts)
				if from == to {
					continue
				}
				amt := int64(1 + rng.IntN(5))
				tctx, cancel := context.WithTimeout(ctx, 8*time.Second)
				var err error
				if rng.IntN(2) == 0 {
					_, err = cl.Txn(tctx, &pb.TxnRequest{Success: []*pb.TxnOp{
						{Type: pb.TxnOp_INCR, Key: keys[from], Delta: -amt}, {Type: pb.TxnOp_INCR, Key: keys[to], Delta: amt}}})
				} else {
					err = transferCAS(tctx, cl, keys[from], keys[to], amt)
				}
				cancel()
				if err == nil {
					transfers.Add(1)
				}
			}
		}(w)
	}
	env := &nemesisEnv{c: c, admin: admin, keys: []string{string(keys[0])}, deadline: deadline, rng: rand.New(rand.NewPCG(3, 4)),
		logf: func(f string, a ...any) { t.Logf(f, a...) }}
	kills, err := killLeaders(env)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	if err != nil {
		t.Fatal(err)
	}
	testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(admin, 3) })
	sum, err := total(admin)
	if err != nil || sum != accounts*start {
		t.Fatalf("final total %d, %v; want %d", sum, err, accounts*start)
	}
	t.Logf("%d transfers, %d atomic reads of every account, %d leader kills: total %d throughout", transfers.Load(), reads.Load(), kills, sum)
}

// transferCAS reads both balances and writes both only if neither changed since (compares on their
// modification indexes).
func transferCAS(ctx context.Context, cl *client.Client, from, to []byte, amt int64) error {
	r, err := cl.Txn(ctx, &pb.TxnRequest{Success: []*pb.TxnOp{{Type: pb.TxnOp_GET, Key: from}, {Type: pb.TxnOp_GET, Key: to}}})
	if err != nil {
		return err
	}
	f, _ := strconv.ParseInt(string(r.Results[0].Value), 10, 64)
	g, _ := strconv.ParseInt(string(r.Results[1].Value), 10, 64)
	_, err = cl.Txn(ctx, &pb.TxnRequest{
		Compares: []*pb.Compare{
			{Key: from, Target: pb.Compare_MOD_INDEX, Op: pb.Compare_EQUAL, Number: r.Results[0].ModIndex},
			{Key: to, Target: pb.Compare_MOD_INDEX, Op: pb.Compare_EQUAL, Number: r.Results[1].ModIndex}},
		Success: []*pb.TxnOp{
			{Type: pb.TxnOp_PUT, Key: from, Value: strconv.AppendInt(nil, f-amt, 10)},
			{Type: pb.TxnOp_PUT, Key: to, Value: strconv.AppendInt(nil, g+amt, 10)}},
	})
	return err
}

// A porcupine model of two keys a and b under transactions: a read of both, a compare-on-a that
// writes both or reads both, and a put of b.

type txnInput struct {
	kind     string // read, swap, put
	expected string // swap: a's expected value ("" = absent)
	value    string // swap, put
}

type txnOutput struct {
	unknown, succeeded bool
	a, b               string // "" = absent
}

type txnState struct{ a, b string }

var txnModel = porcupine.Model{
	Init: func() any { return txnState{} },
	Step: func(s, i, o any) (bool, any) {
		st, in, out := s.(txnState), i.(txnInput), o.(txnOutput)
		switch in.kind {
		case "read":
			return out.a == st.a && out.b == st.b, st
		case "put":
			return true, txnState{a: st.a, b: in.value}
		}
		match := st.a == in.expected
		next := st
		if match {
			next = txnState{a: in.value, b: in.value}
		}
		switch {
		case out.unknown:
			return true, next
		case out.succeeded:
			return match, next
		}
		return !match && out.a == st.a && out.b == st.b, st
	},
	DescribeOperation: func(i, o any) string {
		in, out := i.(txnInput), o.(txnOutput)
		if out.unknown {
			return fmt.Sprintf("%s(%q, %q) → ?", in.kind, in.expected, in.value)
		}
		return fmt.Sprintf("%s(%q, %q) → ok=%v a=%q b=%q", in.kind, in.expected, in.value, out.succeeded, out.a, out.b)
	},
}

// TestTxnLinearizable checks concurrent transactions on two keys of one range with porcupine while
// the nemesis kills the range's leader.
func TestTxnLinearizable(t *testing.T) {
	if testing.Short() {
		t.Skip("a 10 s run under leader kills")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	c := testcluster.StartSafe(t, testcluster.Options{Nodes: 3})
	admin := c.Client()
	testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(admin, 3) })
	ka, kb := []byte("txn/a"), []byte("txn/b")
	deadline := time.Now().Add(10 * time.Second)
	t0 := time.Now()
	var (
		mu  sync.Mutex
		ops []porcupine.Operation
		wg  sync.WaitGroup
	)
	getBoth := []*pb.TxnOp{{Type: pb.TxnOp_GET, Key: ka}, {Type: pb.TxnOp_GET, Key: kb}}
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			cl := c.NewClient(2*time.Second, 40)
			cid, last := w*1000, ""
			for seq := 0; time.Now().Before(deadline); seq++ {
				in := txnInput{value: fmt.Sprintf("w%d.%d", w, seq)}
				req := &pb.TxnRequest{}
				switch p := rng.IntN(10); {
				case p < 4:
					in.kind, req.Success = "read", getBoth
				case p < 8:
					in.kind, in.expected = "swap", last
					c := &pb.Compare{Key: ka, Target: pb.Compare_VALUE, Op: pb.Compare_EQUAL, Value: []byte(last)}
					if last == "" {
						c = &pb.Compare{Key: ka, Target: pb.Compare_EXISTS, Exists: false}
					}
					req.Compares, req.Failure = []*pb.Compare{c}, getBoth
					req.Success = []*pb.TxnOp{{Type: pb.TxnOp_PUT, Key: ka, Value: []byte(in.value)}, {Type: pb.TxnOp_PUT, Key: kb, Value: []byte(in.value)}}
				default:
					in.kind, req.Success = "put", []*pb.TxnOp{{Type: pb.TxnOp_PUT, Key: kb, Value: []byte(in.value)}}
				}
				ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
				call := int64(time.Since(t0))
				r, err := cl.Txn(ctx, req)
				ret := int64(time.Since(t0))
				cancel()
				var out txnOutput
				switch classify(err) {
				case outOK:
					out.succeeded = r.Succeeded
					if in.kind != "put" && (in.kind == "read" || !r.Succeeded) {
						out.a, out.b = string(r.Results[0].Value), string(r.Results[1].Value)
						last = out.a
					} else if in.kind == "swap" {
						last = in.value
					}
				case outUnknown:
					if in.kind == "read" {
						continue
					}
					out.unknown, ret = true, 1<<62
				case outInvalid:
					t.Errorf("%+v: %v", in, err)
					return
				default:
					continue
				}
				mu.Lock()
				ops = append(ops, porcupine.Operation{ClientId: cid, Input: in, Output: out, Call: call, Return: ret})
				mu.Unlock()
				if out.unknown {
					cid++
				}
			}
		}(w)
	}
	env := &nemesisEnv{c: c, admin: admin, keys: []string{string(ka)}, deadline: deadline, rng: rand.New(rand.NewPCG(seed, 5)),
		logf: func(f string, a ...any) { t.Logf(f, a...) }}
	kills, err := killLeaders(env)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	res, _ := porcupine.CheckOperationsVerbose(txnModel, ops, time.Minute)
	t.Logf("porcupine: %s on %d transactions with %d leader kills", res, len(ops), kills)
	if res != porcupine.Ok {
		t.Fatal("transactions are not linearizable")
	}
}
