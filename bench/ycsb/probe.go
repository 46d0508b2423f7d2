package ycsb

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/magiconair/properties"
	"github.com/pingcap/go-ycsb/pkg/prop"
	goycsb "github.com/pingcap/go-ycsb/pkg/ycsb"
)

// probeKey is a record key no workload generates (they all start with the key prefix, "user").
const probeKey = "~shoal-bench-probe"

// Probe checks that db answers: it reads a record that does not exist, and succeeds if the read
// succeeds or reports the record missing. It is how a benchmark fails fast on an unreachable target
// instead of timing out every operation.
func Probe(ctx context.Context, db goycsb.DB, p *properties.Properties) error {
	table := p.GetString(prop.TableName, prop.TableNameDefault)
	_, err := db.Read(ctx, table, probeKey, nil)
	if err == nil || isNotFound(err) {
		return nil
	}
	return fmt.Errorf("probe read: %w", err)
}

// isNotFound recognizes a read of a missing record: ErrNotFound from ShoalDB, the message of
// go-ycsb's etcd binding, which returns an untyped error, or go-redis's nil reply (redis.Nil, whose
// message is "redis: nil") from go-ycsb's redis binding.
func isNotFound(err error) bool {
	return errors.Is(err, ErrNotFound) || strings.Contains(err.Error(), "could not find value for key") ||
		err.Error() == "redis: nil"
}
