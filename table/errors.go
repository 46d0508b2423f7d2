package table

import (
	"errors"
	"fmt"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/pb"
)

// invalidf is an INVALID_ARGUMENT error of the client's type, so that errors.Is(err,
// client.ErrInvalidArgument) holds for bad input to this package as for bad input to the store.
func invalidf(format string, args ...any) error {
	return &client.Error{Code: pb.ErrorCode_INVALID_ARGUMENT, Message: fmt.Sprintf(format, args...)}
}

var (
	// ErrNoTable: no table has the name given.
	ErrNoTable = errors.New("no such table")
	// ErrTableExists: create found a table of that name already.
	ErrTableExists = errors.New("table already exists")
)
