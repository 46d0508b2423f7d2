package table

import (
	"bytes"
	"context"
	"fmt"

	"github.com/shoaldb/shoal/pb"
)

// CompareAndPut writes row only if the stored row with its primary key is exactly old (old nil: no
// such row), in one single-key transaction, and reports whether it wrote. It is the one atomic
// read-modify-write of a row the package offers: a counter kept in a row (an id handed out from
// it) stays unique under concurrent writers that retry on false.
func (t *Table) CompareAndPut(ctx context.Context, old, row Row) (bool, error) {
	var swapped bool
	err := t.followRekey(ctx, func(d *Descriptor) error {
		k, v, err := d.EncodeRow(row)
		if err != nil {
			return err
		}
		cmp := &pb.Compare{Key: k, Target: pb.Compare_EXISTS, Op: pb.Compare_EQUAL, Exists: false}
		if old != nil {
			ok, ov, err := d.EncodeRow(old)
			if err != nil {
				return err
			}
			if !bytes.Equal(ok, k) {
				return invalidf("table %q: compare-and-put: the old and the new row have different primary keys", d.Name)
			}
			cmp = &pb.Compare{Key: k, Target: pb.Compare_VALUE, Op: pb.Compare_EQUAL, Value: ov}
		}
		resp, err := t.kv.Txn(ctx, &pb.TxnRequest{Compares: []*pb.Compare{cmp}, Success: []*pb.TxnOp{{Type: pb.TxnOp_PUT, Key: k, Value: v}}})
		if err != nil {
			return fmt.Errorf("table %q: compare-and-put: %w", d.Name, err)
		}
		swapped = resp.GetSucceeded()
		return nil
	})
	return swapped, err
}
