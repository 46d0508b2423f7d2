package table

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/shoaldb/shoal/client"
)

// Table is an open table: its descriptor, and the store. Row operations are single-key kv
// operations; an operation on several rows (a scan) is not a snapshot. When a re-key of the table
// cuts over (package table/rekey), an operation that meets the old rows' retired span reloads the
// descriptor, waiting for the cutover if it has not happened yet, and runs again on the new one.
type Table struct {
	// Desc is the descriptor as read at Open, or after the last cutover an operation followed; read
	// it while no operation runs.
	Desc Descriptor
	kv   KV
	page int
	mu   sync.Mutex
}

// Open reads the descriptor of the table named name.
func (c *Catalog) Open(ctx context.Context, name string) (*Table, error) {
	d, err := c.Describe(ctx, name)
	if err != nil {
		return nil, err
	}
	return &Table{Desc: d, kv: c.kv, page: c.page()}, nil
}

// desc is the descriptor to run an operation with.
func (t *Table) desc() Descriptor {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.Desc
}

// followRekey runs op with the current descriptor; when the store answers that op's span moved for
// good, it waits for a descriptor with another id (or with no re-key under way) and runs op again
// with it, backing off, until ctx ends.
func (t *Table) followRekey(ctx context.Context, op func(d *Descriptor) error) error {
	backoff := 5 * time.Millisecond
	for {
		d := t.desc()
		err := op(&d)
		if !errors.Is(err, client.ErrSpanRetired) {
			return err
		}
		// A cutover gives the table a new id; a re-key that stopped lifts its fence: either way
		// the operation is tried again, after a pause that grows while neither has happened.
		nd, derr := NewCatalog(t.kv).Describe(ctx, d.Name)
		if derr != nil {
			return derr
		}
		if nd.ID != d.ID {
			t.mu.Lock()
			t.Desc = nd
			t.mu.Unlock()
			backoff = 5 * time.Millisecond
			continue
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("table %q: waiting for a re-key's cutover: %w (%v)", d.Name, ctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 100*time.Millisecond)
	}
}

// Put writes row, replacing any row with the same primary key. A row that does not fit the
// descriptor is refused with INVALID_ARGUMENT before anything is sent.
func (t *Table) Put(ctx context.Context, row Row) error {
	return t.followRekey(ctx, func(d *Descriptor) error {
		k, v, err := d.EncodeRow(row)
		if err != nil {
			return err
		}
		if err := t.kv.Put(ctx, k, v); err != nil {
			return fmt.Errorf("table %q: put: %w", d.Name, err)
		}
		return nil
	})
}

// Get returns the row whose primary key is key (values in key order) and whether it exists.
func (t *Table) Get(ctx context.Context, key ...any) (Row, bool, error) {
	d := t.desc()
	kv, err := d.checkKey(key)
	if err != nil {
		return nil, false, err
	}
	return t.get(ctx, EncodeKey(&d, kv), &d)
}

// GetRow returns the stored row with the primary key of row (its key columns, whichever the
// primary key is now: a re-key may change them) and whether it exists.
func (t *Table) GetRow(ctx context.Context, row Row) (Row, bool, error) {
	var out Row
	var found bool
	err := t.followRekey(ctx, func(d *Descriptor) error {
		key := make([]any, 0, len(d.PrimaryKey))
		for _, n := range d.PrimaryKey {
			key = append(key, row[n])
		}
		kv, err := d.checkKey(key)
		if err != nil {
			return err
		}
		out, found, err = t.get(ctx, EncodeKey(d, kv), d)
		return err
	})
	return out, found, err
}

func (t *Table) get(ctx context.Context, k []byte, d *Descriptor) (Row, bool, error) {
	v, found, err := t.kv.Get(ctx, k)
	if err != nil {
		return nil, false, fmt.Errorf("table %q: get: %w", d.Name, err)
	}
	if !found {
		return nil, false, nil
	}
	row, err := d.DecodeRow(k, v)
	return row, err == nil, err
}

// Delete removes the row whose primary key is key and reports whether it existed.
func (t *Table) Delete(ctx context.Context, key ...any) (bool, error) {
	d := t.desc()
	kv, err := d.checkKey(key)
	if err != nil {
		return false, err
	}
	found, err := t.kv.Delete(ctx, EncodeKey(&d, kv))
	if err != nil {
		return false, fmt.Errorf("table %q: delete: %w", d.Name, err)
	}
	return found, nil
}

// Scan calls fn with the table's rows in primary-key order, at most limit of them (0: all), reading
// a page at a time; it stops early, without error, when fn returns false.
func (t *Table) Scan(ctx context.Context, limit int, fn func(Row) bool) error {
	d := t.desc()
	if limit < 0 {
		return invalidf("scan of table %q: limit %d is negative", d.Name, limit)
	}
	start, end := TableSpan(d.ID)
	seen := 0
	return t.scanSpan(ctx, &d, start, end, limit, false, &seen, fn)
}
