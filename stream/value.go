package stream

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// A state value as stored: a tag byte (envelopeV1, plus flagAbsent when the handler deleted the key but
// its position must stay), the position of the last event applied to the key (uvarint), then the
// handler's data. Readers outside the job decode it with DecodeValue.
const (
	envelopeV1 byte = 0x53 // 'S'
	flagAbsent byte = 0x80
)

// EncodeValue returns the stored form of data at position pos.
func EncodeValue(pos uint64, data []byte) []byte {
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(data))
	b = append(b, envelopeV1)
	b = binary.AppendUvarint(b, pos)
	return append(b, data...)
}

// encodeAbsent returns the stored form of a deleted key whose position stays.
func encodeAbsent(pos uint64) []byte {
	b := []byte{envelopeV1 | flagAbsent}
	return binary.AppendUvarint(b, pos)
}

// DecodeValue splits a stored state value into its position and data; present is false for a key the
// handler deleted.
func DecodeValue(raw []byte) (pos uint64, data []byte, present bool, err error) {
	if len(raw) == 0 || raw[0]&^flagAbsent != envelopeV1 {
		return 0, nil, false, errors.New("not a stream state value (no envelope)")
	}
	pos, n := binary.Uvarint(raw[1:])
	if n <= 0 {
		return 0, nil, false, fmt.Errorf("stream state value: bad position (%d bytes)", len(raw))
	}
	if raw[0]&flagAbsent != 0 {
		return pos, nil, false, nil
	}
	return pos, raw[1+n:], true, nil
}
