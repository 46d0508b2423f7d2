package table

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/pb"
)

// KV is what the package needs of the store: the Go client's single-key operations, scans, one-range
// transactions and batches. *client.Client satisfies it; tests may give a fake.
type KV interface {
	Get(ctx context.Context, key []byte, opts ...client.ReadOption) (value []byte, found bool, err error)
	Put(ctx context.Context, key, value []byte) error
	Delete(ctx context.Context, key []byte) (found bool, err error)
	Scan(ctx context.Context, start, end []byte, limit int, reverse bool) ([]*pb.KeyValue, error)
	Txn(ctx context.Context, req *pb.TxnRequest) (*pb.TxnResponse, error)
	BatchWrite(ctx context.Context, muts []*pb.Mutation) error
}

var _ KV = (*client.Client)(nil)

// Catalog is the set of tables of one cluster, reached through kv.
type Catalog struct {
	kv KV
	// Page is how many rows a scan or a drop reads per request (default 500).
	Page int
}

// NewCatalog returns the catalog stored in kv.
func NewCatalog(kv KV) *Catalog { return &Catalog{kv: kv, Page: 500} }

func (c *Catalog) page() int {
	if c.Page <= 0 {
		return 500
	}
	return c.Page
}

// Create validates d, gives it a new id and stores it, unless a table of that name exists
// (ErrTableExists). Two concurrent creates of one name cannot both succeed: the descriptor is
// written by a transaction that requires its key to be absent. The id comes first, from an INCR of
// the id counter (a key that may live in another range than the descriptor, so not in the same
// transaction); a create that loses has used up an id, which is harmless.
func (c *Catalog) Create(ctx context.Context, d Descriptor) (Descriptor, error) {
	if d.Version == 0 {
		d.Version = DescriptorVersion
	}
	if err := d.Validate(); err != nil {
		return d, err
	}
	if _, err := c.Describe(ctx, d.Name); err == nil {
		return d, fmt.Errorf("create table %q: %w", d.Name, ErrTableExists)
	} else if !errors.Is(err, ErrNoTable) {
		return d, err
	}
	id, err := c.AllocateID(ctx)
	if err != nil {
		return d, fmt.Errorf("create table %q: %w", d.Name, err)
	}
	d.ID = id
	if d.CreatedUnixMs == 0 {
		d.CreatedUnixMs = time.Now().UnixMilli()
	}
	b, err := json.Marshal(d)
	if err != nil {
		return d, err
	}
	key := descKey(d.Name)
	resp, err := c.kv.Txn(ctx, &pb.TxnRequest{
		Compares: []*pb.Compare{{Key: key, Target: pb.Compare_EXISTS, Op: pb.Compare_EQUAL, Exists: false}},
		Success:  []*pb.TxnOp{{Type: pb.TxnOp_PUT, Key: key, Value: b}},
	})
	if err != nil {
		// An unknown outcome is settled by reading the descriptor back: it carries our id if our
		// write took effect, and ids are never handed out twice.
		if unknownOutcome(err) {
			if got, derr := c.Describe(ctx, d.Name); derr == nil && got.ID == d.ID {
				return got, nil
			}
		}
		return d, fmt.Errorf("create table %q: writing its descriptor: %w", d.Name, err)
	}
	if !resp.GetSucceeded() {
		return d, fmt.Errorf("create table %q: %w", d.Name, ErrTableExists)
	}
	return d, nil
}

// AllocateID hands out a table id never handed out before (an INCR of the id counter).
func (c *Catalog) AllocateID(ctx context.Context) (uint64, error) {
	resp, err := c.kv.Txn(ctx, &pb.TxnRequest{Success: []*pb.TxnOp{{Type: pb.TxnOp_INCR, Key: sysSeqKey, Delta: 1}}})
	if err != nil {
		return 0, fmt.Errorf("allocating a table id: %w", err)
	}
	if r := resp.GetResults(); len(r) != 1 || r[0].GetError() != "" {
		return 0, fmt.Errorf("allocating a table id: the counter %q answered %v", sysSeqKey, r)
	}
	return uint64(resp.GetResults()[0].GetIntValue()), nil
}

// ErrDescriptorChanged: Update found the descriptor changed by someone else since it read it.
var ErrDescriptorChanged = errors.New("the table's descriptor changed meanwhile")

// Update rewrites table name's descriptor with fn's changes, atomically: the write applies only if
// the stored descriptor is still the one fn saw (else ErrDescriptorChanged, nothing written). The
// name and version may not change.
func (c *Catalog) Update(ctx context.Context, name string, fn func(d *Descriptor) error) (Descriptor, error) {
	key := descKey(name)
	old, found, err := c.kv.Get(ctx, key)
	if err != nil {
		return Descriptor{}, fmt.Errorf("table %q: reading its descriptor: %w", name, err)
	}
	if !found {
		return Descriptor{}, fmt.Errorf("table %q: %w", name, ErrNoTable)
	}
	d, err := decodeDescriptor(name, old)
	if err != nil {
		return d, err
	}
	if err := fn(&d); err != nil {
		return d, err
	}
	if d.Name != name || d.Version != DescriptorVersion {
		return d, invalidf("table %q: an update may not change the name or the version", name)
	}
	if err := d.Validate(); err != nil {
		return d, err
	}
	b, err := json.Marshal(d)
	if err != nil {
		return d, err
	}
	resp, err := c.kv.Txn(ctx, &pb.TxnRequest{
		Compares: []*pb.Compare{{Key: key, Target: pb.Compare_VALUE, Op: pb.Compare_EQUAL, Value: old}},
		Success:  []*pb.TxnOp{{Type: pb.TxnOp_PUT, Key: key, Value: b}},
	})
	if err != nil {
		if unknownOutcome(err) {
			if cur, _, gerr := c.kv.Get(ctx, key); gerr == nil && bytes.Equal(cur, b) {
				return d, nil
			}
		}
		return d, fmt.Errorf("table %q: writing its descriptor: %w", name, err)
	}
	if !resp.GetSucceeded() {
		return d, fmt.Errorf("table %q: %w", name, ErrDescriptorChanged)
	}
	return d, nil
}

func decodeDescriptor(name string, b []byte) (Descriptor, error) {
	var d Descriptor
	if err := json.Unmarshal(b, &d); err != nil {
		return d, fmt.Errorf("descriptor of table %q: %w", name, err)
	}
	if d.Version != DescriptorVersion {
		return d, fmt.Errorf("descriptor of table %q has version %d; this build reads %d", name, d.Version, DescriptorVersion)
	}
	return d, nil
}

// Describe returns the descriptor of the table named name, or ErrNoTable.
func (c *Catalog) Describe(ctx context.Context, name string) (Descriptor, error) {
	if err := validName("table", name); err != nil {
		return Descriptor{}, err
	}
	b, found, err := c.kv.Get(ctx, descKey(name))
	if err != nil {
		return Descriptor{}, fmt.Errorf("table %q: reading its descriptor: %w", name, err)
	}
	if !found {
		return Descriptor{}, fmt.Errorf("table %q: %w", name, ErrNoTable)
	}
	return decodeDescriptor(name, b)
}

// List returns every table's descriptor, by name.
func (c *Catalog) List(ctx context.Context) ([]Descriptor, error) {
	var out []Descriptor
	start, end := sysDescPrefix, prefixEnd(sysDescPrefix)
	for {
		kvs, err := c.kv.Scan(ctx, start, end, c.page(), false)
		if err != nil {
			return nil, fmt.Errorf("listing tables: %w", err)
		}
		for _, e := range kvs {
			d, err := decodeDescriptor(string(e.Key[len(sysDescPrefix):]), e.Value)
			if err != nil {
				return nil, err
			}
			out = append(out, d)
		}
		if len(kvs) < c.page() {
			return out, nil
		}
		start = append(bytes.Clone(kvs[len(kvs)-1].Key), 0)
	}
}

// unknownOutcome reports whether err leaves a write's outcome unknown (client.ErrAmbiguous,
// client.ErrTimeout).
func unknownOutcome(err error) bool {
	return errors.Is(err, client.ErrAmbiguous) || errors.Is(err, client.ErrTimeout)
}

// prefixEnd is the first key after every key starting with p (p never ends in 0xFF here).
func prefixEnd(p []byte) []byte {
	e := bytes.Clone(p)
	e[len(e)-1]++
	return e
}

// DropProgress reports a drop's progress: rows deleted so far.
type DropProgress func(deleted int)

// Drop removes the table named name: first its descriptor (so that no new client finds it), then
// its rows, page by page. It records the drop under /t/_sys/drop/<id> before removing the
// descriptor and clears the record after the last row, so that an interrupted drop is found and
// finished by FinishDrops. It returns the number of rows deleted.
//
// Row writes are not fenced: a put by a client that read the descriptor before the drop may land
// after the drop's scan passed its key. Such a row is invisible (its table id is never reused) but
// stays in the store; see docs/design/tables.md.
func (c *Catalog) Drop(ctx context.Context, name string, progress DropProgress) (int, error) {
	key := descKey(name)
	if err := validName("table", name); err != nil {
		return 0, err
	}
	b, found, err := c.kv.Get(ctx, key)
	if err != nil {
		return 0, fmt.Errorf("drop table %q: reading its descriptor: %w", name, err)
	}
	if !found {
		return 0, fmt.Errorf("drop table %q: %w", name, ErrNoTable)
	}
	d, err := decodeDescriptor(name, b)
	if err != nil {
		return 0, err
	}
	if err := c.kv.Put(ctx, dropKey(d.ID), b); err != nil {
		return 0, fmt.Errorf("drop table %q: recording the drop: %w", name, err)
	}
	// Only the descriptor read above is removed: a concurrent drop and re-create of the name leaves
	// the new table alone.
	resp, err := c.kv.Txn(ctx, &pb.TxnRequest{
		Compares: []*pb.Compare{{Key: key, Target: pb.Compare_VALUE, Op: pb.Compare_EQUAL, Value: b}},
		Success:  []*pb.TxnOp{{Type: pb.TxnOp_DELETE, Key: key}},
	})
	if err != nil {
		if !unknownOutcome(err) {
			return 0, fmt.Errorf("drop table %q: removing its descriptor: %w", name, err)
		}
		// Settle an unknown outcome by reading the descriptor back: gone or replaced, the rows of
		// d.ID are no table's any more.
		cur, found, gerr := c.kv.Get(ctx, key)
		if gerr != nil || found && bytes.Equal(cur, b) {
			return 0, fmt.Errorf("drop table %q: removing its descriptor: %w", name, err)
		}
		resp = &pb.TxnResponse{Succeeded: true}
	}
	n, err := c.deleteRows(ctx, d, progress)
	if err != nil {
		return n, fmt.Errorf("drop table %q (id %d): %d rows deleted, then: %w (run the drop again or FinishDrops to finish)", name, d.ID, n, err)
	}
	if _, err := c.kv.Delete(ctx, dropKey(d.ID)); err != nil {
		return n, fmt.Errorf("drop table %q: clearing the drop record: %w", name, err)
	}
	if !resp.GetSucceeded() {
		return n, fmt.Errorf("drop table %q: %w (dropped concurrently)", name, ErrNoTable)
	}
	return n, nil
}

// FinishDrops finishes the drops an interrupted Drop left recorded, and returns the rows deleted.
func (c *Catalog) FinishDrops(ctx context.Context, progress DropProgress) (int, error) {
	kvs, err := c.kv.Scan(ctx, sysDropPrefix, prefixEnd(sysDropPrefix), 0, false)
	if err != nil {
		return 0, fmt.Errorf("listing unfinished drops: %w", err)
	}
	total := 0
	for _, e := range kvs {
		id, err := strconv.ParseUint(string(e.Key[len(sysDropPrefix):]), 10, 64)
		if err != nil {
			return total, fmt.Errorf("drop record %q: %w", e.Key, err)
		}
		d := Descriptor{ID: id, Name: fmt.Sprintf("#%d", id)}
		n, err := c.deleteRows(ctx, d, progress)
		total += n
		if err != nil {
			return total, fmt.Errorf("finishing the drop of table id %d: %w", id, err)
		}
		if _, err := c.kv.Delete(ctx, e.Key); err != nil {
			return total, fmt.Errorf("clearing drop record %q: %w", e.Key, err)
		}
	}
	return total, nil
}

// deleteRows deletes every row of table d.ID, a page at a time.
// DeleteRowsOf deletes every row stored under table id (a re-key's abandoned copy), in pages.
func (c *Catalog) DeleteRowsOf(ctx context.Context, id uint64) (int, error) {
	return c.deleteRows(ctx, Descriptor{ID: id}, nil)
}

func (c *Catalog) deleteRows(ctx context.Context, d Descriptor, progress DropProgress) (int, error) {
	start, end := TableSpan(d.ID)
	deleted := 0
	for {
		kvs, err := c.kv.Scan(ctx, start, end, c.page(), false)
		if err != nil {
			return deleted, err
		}
		if len(kvs) == 0 {
			return deleted, nil
		}
		keys := make([][]byte, len(kvs))
		for i, e := range kvs {
			keys[i] = e.Key
		}
		if err := c.deleteKeys(ctx, keys); err != nil {
			return deleted, err
		}
		deleted += len(keys)
		if progress != nil {
			progress(deleted)
		}
		start = append(bytes.Clone(keys[len(keys)-1]), 0)
	}
}

// deleteKeys deletes keys (sorted) with batch writes. A batch must lie in one range and the
// package does not see range boundaries, so a batch the store refuses as spanning ranges (the
// client says INVALID_ARGUMENT, or CROSS_RANGE as for a transaction) is halved until each half
// fits; a page crossing one boundary costs about 2·log2(page) extra requests.
func (c *Catalog) deleteKeys(ctx context.Context, keys [][]byte) error {
	if len(keys) == 1 {
		_, err := c.kv.Delete(ctx, keys[0])
		return err
	}
	muts := make([]*pb.Mutation, len(keys))
	for i, k := range keys {
		muts[i] = &pb.Mutation{Key: k, Delete: true}
	}
	return WriteSplitting(ctx, c.kv, muts)
}

// WriteSplitting writes muts in one batch or, while the store refuses a batch as crossing a range
// boundary, in halves (in order, so a key's writes keep theirs). It is not atomic across ranges:
// for bulk loads and deletes through any KV (a *client.Client's WriteMany also groups by range
// first).
func WriteSplitting(ctx context.Context, kv KV, muts []*pb.Mutation) error {
	err := kv.BatchWrite(ctx, muts)
	if err == nil || len(muts) == 1 || !errors.Is(err, client.ErrInvalidArgument) && !errors.Is(err, client.ErrCrossRange) {
		return err
	}
	h := len(muts) / 2
	if err := WriteSplitting(ctx, kv, muts[:h]); err != nil {
		return err
	}
	return WriteSplitting(ctx, kv, muts[h:])
}
