package streamhost

import (
	"context"
	"fmt"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/stream"
)

// nodeState is stream.Store on the node: a key whose range this node leads is read and written
// through the node's own request API (in process), any other at its leader through the client. An
// aligned task's own key is served only locally (stream.Misrouted otherwise).
type nodeState struct {
	h       *Host
	aligned bool
}

// misrouted reports a local answer that means the key is not led here (any more).
func misrouted(pe *pb.Error) bool {
	return pe.GetCode() == pb.ErrorCode_NOT_LEADER || pe.GetCode() == pb.ErrorCode_RANGE_MOVED
}

func asErr(pe *pb.Error) error {
	return &client.Error{Code: pe.GetCode(), Message: pe.GetMessage(), LeaderAddr: pe.GetLeaderAddr()}
}

func (s *nodeState) Get(ctx context.Context, key []byte, primary bool) (stream.Entry, error) {
	_, notHere := s.h.leading(key)
	if notHere == nil {
		resp, err := s.h.deps.Local.Get(ctx, &pb.GetRequest{Key: key})
		if err != nil {
			return stream.Entry{}, fmt.Errorf("local read: %w", err)
		}
		if pe := resp.GetError(); pe == nil {
			s.h.localR.Add(1)
			return stream.Entry{Raw: resp.GetValue(), Found: resp.GetFound(), Version: resp.GetVersion()}, nil
		} else if !misrouted(pe) {
			return stream.Entry{}, asErr(pe)
		} else {
			notHere = pe
		}
	}
	if primary && s.aligned {
		return stream.Entry{}, &stream.Misrouted{Err: notHere}
	}
	cl, err := s.h.deps.Remote(ctx)
	if err != nil {
		return stream.Entry{}, err
	}
	e, found, err := cl.GetEntry(ctx, key)
	if err != nil {
		return stream.Entry{}, err
	}
	s.h.remoteR.Add(1)
	return stream.Entry{Raw: e.Value, Found: found, Version: e.Version}, nil
}

func (s *nodeState) Commit(ctx context.Context, req *pb.TxnRequest) (bool, error) {
	key := req.GetCompares()[0].GetKey()
	_, notHere := s.h.leading(key)
	if notHere == nil {
		resp, err := s.h.deps.Local.Txn(ctx, req)
		if err != nil {
			return false, fmt.Errorf("local commit: %w", err)
		}
		if pe := resp.GetError(); pe == nil {
			s.h.localW.Add(1)
			return resp.GetSucceeded(), nil
		} else if !misrouted(pe) {
			return false, asErr(pe)
		} else {
			notHere = pe // not proposed here: safe to send elsewhere
		}
	}
	if s.aligned {
		return false, &stream.Misrouted{Err: notHere}
	}
	cl, err := s.h.deps.Remote(ctx)
	if err != nil {
		return false, err
	}
	resp, err := cl.Txn(ctx, req)
	if err != nil {
		return false, err
	}
	s.h.remoteW.Add(1)
	return resp.GetSucceeded(), nil
}
