package kv

import (
	"encoding/binary"
	"errors"

	"google.golang.org/protobuf/proto"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
)

func marshal(m proto.Message) ([]byte, error) { return proto.Marshal(m) }

func u64(v uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, v)
	return b
}

// toPBError converts any error into the typed error clients see.
func toPBError(err error) *pb.Error {
	if err == nil {
		return nil
	}
	var re *replica.Error
	if errors.As(err, &re) {
		return &pb.Error{Code: re.Code, Message: re.Msg, LeaderNodeId: re.LeaderNode, Range: re.Desc}
	}
	var pe *pbError
	if errors.As(err, &pe) {
		return pe.e
	}
	return &pb.Error{Code: pb.ErrorCode_INTERNAL, Message: err.Error()}
}

// pbError wraps a pb.Error received from a peer so it can travel as a Go error.
type pbError struct{ e *pb.Error }

func (p *pbError) Error() string { return p.e.Code.String() + ": " + p.e.Message }

func errCode(code pb.ErrorCode, msg string) error {
	return &pbError{&pb.Error{Code: code, Message: msg}}
}

func codeOf(err error) pb.ErrorCode { return toPBError(err).Code }
