package ycsb

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/magiconair/properties"
	"github.com/pingcap/go-ycsb/pkg/prop"
	goycsb "github.com/pingcap/go-ycsb/pkg/ycsb"

	"github.com/shoaldb/shoal/client"
)

// Properties read by the Shoal binding.
const (
	// PropShoalHosts is a comma-separated list of node gRPC addresses (default client.DefaultAddr).
	PropShoalHosts = "shoal.hosts"
	// PropShoalAuthToken is the cluster's auth token, if it requires one.
	PropShoalAuthToken = "shoal.auth_token"
	// PropShoalCASAttempts bounds the read-merge-compare-and-swap rounds of one partial update.
	PropShoalCASAttempts = "shoal.cas_attempts"
	// PropShoalTTL (a duration, e.g. 30s) makes the workload TTL-heavy: every insert and blind update
	// expires after a random time in [ttl/2, 3ttl/2), so records keep expiring and being swept.
	PropShoalTTL = "shoal.ttl"
)

// shoalDBName is the name the Shoal binding is registered under in go-ycsb's registry.
const shoalDBName = "shoal"

// ErrNotFound is returned by Read for a record that does not exist.
var ErrNotFound = errors.New("record not found")

func init() {
	goycsb.RegisterDBCreator(shoalDBName, shoalCreator{})
}

type shoalCreator struct{}

// Create implements ycsb.DBCreator: it builds a client for the hosts in PropShoalHosts. It does not
// contact the cluster.
func (shoalCreator) Create(p *properties.Properties) (goycsb.DB, error) {
	c, err := newClient(p)
	if err != nil {
		return nil, err
	}
	return NewShoalDB(c, p), nil
}

// newClient is a client for the hosts in PropShoalHosts with PropShoalAuthToken (the Shoal
// bindings'). It does not contact the cluster.
func newClient(p *properties.Properties) (*client.Client, error) {
	var addrs []string
	for _, a := range strings.Split(p.GetString(PropShoalHosts, client.DefaultAddr), ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	return client.New(context.Background(), client.Config{Addrs: addrs, AuthToken: p.GetString(PropShoalAuthToken, "")})
}

// ShoalDB is a go-ycsb DB over Shoal's Go client.
//
// A record is one key, table + "/" + key, whose value is the record's whole field map encoded by
// EncodeRecord. Read is a linearizable Get; Insert is a Put; Delete a Delete; Scan a range scan from
// the record's key to the end of its table, limited to count records. Update honours YCSB's contract
// (the given fields overwrite theirs, the others stay): an update that carries every field of the
// record (fieldcount of them, as with writeallfields=true) is a blind Put; one that carries fewer
// reads the record, merges, and writes it back with CompareAndSwap, retrying on a conflict up to
// PropShoalCASAttempts times. An update of a missing record creates it with the given fields.
type ShoalDB struct {
	c           *client.Client
	fieldCount  int
	casAttempts int
	ttl         time.Duration
}

// NewShoalDB returns a ShoalDB over c, which it closes on Close. It reads fieldcount and
// PropShoalCASAttempts from p.
func NewShoalDB(c *client.Client, p *properties.Properties) *ShoalDB {
	return &ShoalDB{
		c:           c,
		fieldCount:  p.GetInt(prop.FieldCount, int(prop.FieldCountDefault)),
		casAttempts: max(1, p.GetInt(PropShoalCASAttempts, 16)),
		ttl:         p.GetParsedDuration(PropShoalTTL, 0),
	}
}

// put writes a whole record, with a random expiry in the TTL-heavy variant.
func (db *ShoalDB) put(ctx context.Context, k, v []byte) error {
	if db.ttl <= 0 {
		return db.c.Put(ctx, k, v)
	}
	return db.c.PutTTL(ctx, k, v, db.ttl/2+rand.N(db.ttl))
}

// Close implements ycsb.DB.
func (db *ShoalDB) Close() error { return db.c.Close() }

// InitThread implements ycsb.DB.
func (db *ShoalDB) InitThread(ctx context.Context, _, _ int) context.Context { return ctx }

// CleanupThread implements ycsb.DB.
func (db *ShoalDB) CleanupThread(context.Context) {}

// rowKey is the Shoal key of a record.
func rowKey(table, key string) []byte { return []byte(table + "/" + key) }

// tableEnd is the first key after every row key of table ('0' follows '/').
func tableEnd(table string) []byte { return []byte(table + "0") }

// Read implements ycsb.DB. A missing record is ErrNotFound.
func (db *ShoalDB) Read(ctx context.Context, table, key string, fields []string) (map[string][]byte, error) {
	v, found, err := db.c.Get(ctx, rowKey(table, key))
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("read %s/%s: %w", table, key, ErrNotFound)
	}
	return DecodeRecord(v, fields)
}

// Scan implements ycsb.DB.
func (db *ShoalDB) Scan(ctx context.Context, table, startKey string, count int, fields []string) ([]map[string][]byte, error) {
	kvs, err := db.c.Scan(ctx, rowKey(table, startKey), tableEnd(table), count, false)
	if err != nil {
		return nil, err
	}
	out := make([]map[string][]byte, 0, len(kvs))
	for _, kv := range kvs {
		r, err := DecodeRecord(kv.GetValue(), fields)
		if err != nil {
			return nil, fmt.Errorf("scan %s: key %q: %w", table, kv.GetKey(), err)
		}
		out = append(out, r)
	}
	return out, nil
}

// Update implements ycsb.DB.
func (db *ShoalDB) Update(ctx context.Context, table, key string, values map[string][]byte) error {
	k := rowKey(table, key)
	if len(values) >= db.fieldCount {
		return db.put(ctx, k, EncodeRecord(values))
	}
	for attempt := 0; attempt < db.casAttempts; attempt++ {
		cur, found, err := db.c.Get(ctx, k)
		if err != nil {
			return err
		}
		var swapped bool
		if !found {
			swapped, _, _, err = db.c.CompareAndSwap(ctx, k, nil, true, EncodeRecord(values))
		} else {
			old, derr := DecodeRecord(cur, nil)
			if derr != nil {
				return fmt.Errorf("update %s/%s: %w", table, key, derr)
			}
			swapped, _, _, err = db.c.CompareAndSwap(ctx, k, cur, false, EncodeRecord(mergeRecord(old, values)))
		}
		if err != nil {
			return err
		}
		if swapped {
			return nil
		}
	}
	return fmt.Errorf("update %s/%s: record changed under %d read-merge-swap attempts", table, key, db.casAttempts)
}

// Insert implements ycsb.DB.
func (db *ShoalDB) Insert(ctx context.Context, table, key string, values map[string][]byte) error {
	return db.put(ctx, rowKey(table, key), EncodeRecord(values))
}

// Delete implements ycsb.DB.
func (db *ShoalDB) Delete(ctx context.Context, table, key string) error {
	_, err := db.c.Delete(ctx, rowKey(table, key))
	return err
}
