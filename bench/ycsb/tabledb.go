package ycsb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/magiconair/properties"
	"github.com/pingcap/go-ycsb/pkg/prop"
	goycsb "github.com/pingcap/go-ycsb/pkg/ycsb"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/table"
)

// tableDBName is the name the table binding is registered under in go-ycsb's registry.
const tableDBName = "shoal-table"

func init() {
	goycsb.RegisterDBCreator(tableDBName, tableCreator{})
}

type tableCreator struct{}

// Create implements ycsb.DBCreator: a client for the hosts in PropShoalHosts; tables are created on
// first use.
func (tableCreator) Create(p *properties.Properties) (goycsb.DB, error) {
	c, err := newClient(p)
	if err != nil {
		return nil, err
	}
	return &TableDB{c: c, cat: table.NewCatalog(c), fieldCount: p.GetInt(prop.FieldCount, int(prop.FieldCountDefault)), open: map[string]*table.Table{}}, nil
}

// TableDB is a go-ycsb DB over Shoal's table layer (package table): a YCSB table is a Shoal table
// with a string primary key ycsb_key and bytes columns field0… (fieldcount of them), created on
// first use. Read is a row get, Insert a row put, Delete a row delete, Scan a range of rows from
// the key on in primary-key order; an Update of some fields reads the row and writes it back (not
// atomic: as PyTPCC's HBase driver and YCSB's own HBase binding do), one of every field is a put.
type TableDB struct {
	c          *client.Client
	cat        *table.Catalog
	fieldCount int
	mu         sync.Mutex
	open       map[string]*table.Table
}

// tableOf opens (creating it if needed) the Shoal table of YCSB table name.
func (db *TableDB) tableOf(ctx context.Context, name string) (*table.Table, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if t := db.open[name]; t != nil {
		return t, nil
	}
	t, err := db.cat.Open(ctx, name)
	if errors.Is(err, table.ErrNoTable) {
		cols := []table.Column{{Name: "ycsb_key", Type: table.String, ID: 1}}
		for i := range db.fieldCount {
			cols = append(cols, table.Column{Name: fmt.Sprintf("field%d", i), Type: table.Bytes, ID: uint32(i + 2)})
		}
		if _, cerr := db.cat.Create(ctx, table.NewDescriptor(name, cols, []string{"ycsb_key"})); cerr != nil && !errors.Is(cerr, table.ErrTableExists) {
			return nil, cerr
		}
		t, err = db.cat.Open(ctx, name)
	}
	if err != nil {
		return nil, err
	}
	db.open[name] = t
	return t, nil
}

func rowOf(key string, values map[string][]byte) table.Row {
	row := table.Row{"ycsb_key": key}
	for f, v := range values {
		row[f] = v
	}
	return row
}

func fieldsOf(row table.Row, want []string) map[string][]byte {
	out := map[string][]byte{}
	for k, v := range row {
		if b, ok := v.([]byte); ok && (len(want) == 0 || contains(want, k)) {
			out[k] = b
		}
	}
	return out
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// Close implements ycsb.DB.
func (db *TableDB) Close() error { return db.c.Close() }

// InitThread implements ycsb.DB.
func (db *TableDB) InitThread(ctx context.Context, _, _ int) context.Context { return ctx }

// CleanupThread implements ycsb.DB.
func (db *TableDB) CleanupThread(context.Context) {}

// Read implements ycsb.DB. A missing record is ErrNotFound.
func (db *TableDB) Read(ctx context.Context, name, key string, fields []string) (map[string][]byte, error) {
	t, err := db.tableOf(ctx, name)
	if err != nil {
		return nil, err
	}
	row, found, err := t.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("read %s/%s: %w", name, key, ErrNotFound)
	}
	return fieldsOf(row, fields), nil
}

// Scan implements ycsb.DB: count rows from key on, in primary-key order.
func (db *TableDB) Scan(ctx context.Context, name, startKey string, count int, fields []string) ([]map[string][]byte, error) {
	t, err := db.tableOf(ctx, name)
	if err != nil {
		return nil, err
	}
	d := t.Desc
	_, end := table.TableSpan(d.ID)
	kvs, err := db.c.Scan(ctx, table.EncodeKey(&d, []any{startKey}), end, count, false)
	if err != nil {
		return nil, err
	}
	out := make([]map[string][]byte, 0, len(kvs))
	for _, kv := range kvs {
		row, err := d.DecodeRow(kv.GetKey(), kv.GetValue())
		if err != nil {
			return nil, fmt.Errorf("scan %s: key %q: %w", name, kv.GetKey(), err)
		}
		out = append(out, fieldsOf(row, fields))
	}
	return out, nil
}

// Update implements ycsb.DB.
func (db *TableDB) Update(ctx context.Context, name, key string, values map[string][]byte) error {
	t, err := db.tableOf(ctx, name)
	if err != nil {
		return err
	}
	if len(values) < db.fieldCount {
		cur, found, err := t.Get(ctx, key)
		if err != nil {
			return err
		}
		if found {
			merged := fieldsOf(cur, nil)
			for f, v := range values {
				merged[f] = bytes.Clone(v)
			}
			values = merged
		}
	}
	return t.Put(ctx, rowOf(key, values))
}

// Insert implements ycsb.DB.
func (db *TableDB) Insert(ctx context.Context, name, key string, values map[string][]byte) error {
	t, err := db.tableOf(ctx, name)
	if err != nil {
		return err
	}
	return t.Put(ctx, rowOf(key, values))
}

// Delete implements ycsb.DB.
func (db *TableDB) Delete(ctx context.Context, name, key string) error {
	t, err := db.tableOf(ctx, name)
	if err != nil {
		return err
	}
	_, err = t.Delete(ctx, key)
	return err
}
