package resp

import (
	"fmt"
	"time"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/server/resp/txn"
)

// String commands that read and write in one step (SET's options, the expiry commands, INCR and
// its kin, APPEND, GETDEL …) run as one Shoal transaction on their key's range (package txn builds
// it). MULTI … EXEC queues such commands and runs them all as one transaction; WATCH turns into
// compares of the watched keys' modification indexes. Every key of a block, watched keys included,
// must be in one hash slot (CROSSSLOT otherwise, as Redis Cluster answers), which is one range:
// splits never cut a slot.

var txnEnv = txn.Env{Key: stringKey, Now: func() int64 { return time.Now().UnixMilli() }}

// cmdPlanned runs one string command as a transaction.
func cmdPlanned(o *op, args [][]byte) error {
	cmd := commandTable[string(lowerASCII(nil, args[0]))]
	for _, k := range cmd.keyArgs(args) {
		if err := o.checkKey(k, nil); err != nil {
			return err
		}
	}
	p, err := txn.Build(txnEnv, args)
	if err != nil {
		return replyError(err.Error())
	}
	if p.Key != nil && p.CheckFirst {
		t, err := o.typeOf(p.Key)
		if err != nil {
			return err
		}
		if t == 'h' && p.OnHash(o.c.w) {
			return nil
		}
	}
	resp, err := o.txn(&pb.TxnRequest{Success: p.Ops})
	if err != nil {
		return err
	}
	if p.Key != nil && !p.CheckFirst && !resp.Results[0].Found {
		// The string is absent: a hash of that name answers as its type demands.
		if h, err := o.hashExists(p.Key); err != nil {
			return err
		} else if h && p.OnHash(o.c.w) {
			return nil
		}
	}
	p.Reply(o.c.w, resp.Results)
	return nil
}

// txn runs req on the range of its keys.
func (o *op) txn(req *pb.TxnRequest) (*pb.TxnResponse, error) {
	canMove := o.mayMove.Swap(false)
	resp, err := o.s.node.Txn(o.ctx, req)
	pe := callErr(resp.GetError(), err)
	if pe == nil {
		return resp, nil
	}
	if err := o.refuse(canMove, pe, true); err != nil {
		return nil, err
	}
	return o.s.fwd.Txn(o.ctx, req)
}

// queue adds a command to c's MULTI block, or marks the block aborted with the reason.
func (s *Server) queue(c *conn, cmd *command, args [][]byte) {
	abort := func(msg string) {
		c.multi.Aborted = true
		c.w.Error(msg)
	}
	if !txn.Supported(cmd.name) {
		abort(fmt.Sprintf("ERR '%s' is not supported inside MULTI by Shoal (string commands only)", cmd.name))
		return
	}
	for _, k := range cmd.keyArgs(args) {
		if n := len(groupPrefix(k)) + 1; n > s.cfg.MaxKeyBytes {
			abort(fmt.Sprintf("ERR key too long: %d bytes with Shoal's key encoding, the limit is %d (server flag --max-key-bytes)", n, s.cfg.MaxKeyBytes))
			return
		}
		sl := Slot(k)
		if c.multi.Slot < 0 {
			c.multi.Slot = sl
		}
		if sl != c.multi.Slot || len(c.watched) > 0 && sl != c.watchSlot {
			abort(string(errCrossSlot))
			return
		}
	}
	p, err := txn.Build(txnEnv, args)
	if err != nil {
		abort(err.Error())
		return
	}
	c.multi.Queue(p)
	c.w.Simple("QUEUED")
}

// txnControl are the commands a MULTI block runs at once instead of queueing.
var txnControl = map[string]bool{"multi": true, "exec": true, "discard": true, "watch": true, "unwatch": true, "quit": true}

func cmdMulti(o *op, _ [][]byte) error {
	if o.c.multi != nil {
		return replyError("ERR MULTI calls can not be nested")
	}
	o.c.multi = txn.NewMulti()
	o.c.w.Simple("OK")
	return nil
}

func cmdDiscard(o *op, _ [][]byte) error {
	if o.c.multi == nil {
		return replyError("ERR DISCARD without MULTI")
	}
	o.c.multi, o.c.watched = nil, nil
	o.c.w.Simple("OK")
	return nil
}

func cmdExec(o *op, _ [][]byte) error {
	m, watched := o.c.multi, o.c.watched
	if m == nil {
		return replyError("ERR EXEC without MULTI")
	}
	o.c.multi, o.c.watched = nil, nil
	switch {
	case m.Aborted:
		return replyError("EXECABORT Transaction discarded because of previous errors.")
	case m.Len() == 0 && len(watched) == 0:
		o.c.w.Array(0)
		return nil
	}
	resp, err := o.txn(m.Request(watched))
	if err != nil {
		return err
	}
	m.Reply(o.c.w, resp)
	return nil
}

func cmdWatch(o *op, args [][]byte) error {
	if o.c.multi != nil {
		return replyError("ERR WATCH inside MULTI is not allowed")
	}
	for _, k := range args[1:] {
		if err := o.checkKey(k, nil); err != nil {
			return err
		}
		if len(o.c.watched) == 0 {
			o.c.watchSlot = Slot(k)
		} else if Slot(k) != o.c.watchSlot {
			return errCrossSlot
		}
		sk := stringKey(k)
		found, mod, err := o.modIndex(sk)
		if err != nil {
			return err
		}
		o.c.watched = append(o.c.watched, txn.Watched{Key: sk, Found: found, ModIndex: mod})
	}
	o.c.w.Simple("OK")
	return nil
}

func cmdUnwatch(o *op, _ [][]byte) error {
	o.c.watched = nil
	o.c.w.Simple("OK")
	return nil
}

// modIndex reads whether Shoal key k exists and the raft index of its last write (a linearizable
// read on the leader).
func (o *op) modIndex(k []byte) (bool, uint64, error) {
	canMove := o.mayMove.Swap(false)
	resp, err := o.s.node.Get(o.ctx, &pb.GetRequest{Key: k})
	pe := callErr(resp.GetError(), err)
	if pe == nil {
		return resp.GetFound(), resp.GetModIndex(), nil
	}
	if err := o.refuse(canMove, pe, false); err != nil {
		return false, 0, err
	}
	e, found, err := o.s.fwd.GetEntry(o.ctx, k)
	return found, e.ModIndex, err
}
