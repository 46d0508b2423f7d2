package ycsb

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	goycsb "github.com/pingcap/go-ycsb/pkg/ycsb"
)

// A multi-tenant run: several core workloads at once against one store, each on its own key prefix
// (YCSB's table) with its own mix and request distribution, reported per tenant. Workload-aware
// placement (engine profiles, usage-based packing) is measured on such mixes: one tenant's scans or
// writes next to another's cached point reads.

// Tenant is one workload of a multi-tenant run; Name is its table (key prefix).
type Tenant struct {
	Name   string
	Config Config
}

// ParseTenants turns "a:zipfian,e:uniform,c" (WORKLOAD[:DISTRIBUTION], comma-separated) into tenants
// t1-a, t2-e, t3-c on the settings of base.
func ParseTenants(spec string, base Config) ([]Tenant, error) {
	var out []Tenant
	for i, part := range strings.Split(spec, ",") {
		w, dist, _ := strings.Cut(strings.TrimSpace(part), ":")
		if w == "" {
			return nil, fmt.Errorf("tenant %d of %q: no workload (use WORKLOAD[:DISTRIBUTION], e.g. a:zipfian)", i+1, spec)
		}
		if !slices.Contains(Workloads(), w) {
			return nil, fmt.Errorf("tenant %d: unknown workload %q (one of %s)", i+1, w, strings.Join(Workloads(), ", "))
		}
		cfg := base
		cfg.Workload = w
		cfg.Props = maps.Clone(base.Props)
		if cfg.Props == nil {
			cfg.Props = map[string]string{}
		}
		if dist != "" {
			cfg.Props["requestdistribution"] = dist
		}
		name := fmt.Sprintf("t%d-%s", i+1, w)
		cfg.Props["table"] = name
		if _, err := cfg.Properties(); err != nil {
			return nil, fmt.Errorf("tenant %s: %w", name, err)
		}
		out = append(out, Tenant{Name: name, Config: cfg})
	}
	return out, nil
}

// RunTenants runs the tenants' workloads at the same time against db and returns their reports in
// the tenants' order (a tenant that failed has a nil report; the errors are joined).
func RunTenants(ctx context.Context, tenants []Tenant, db goycsb.DB) ([]*Report, error) {
	reports := make([]*Report, len(tenants))
	errs := make([]error, len(tenants))
	var wg sync.WaitGroup
	for i, t := range tenants {
		wg.Go(func() {
			reports[i], errs[i] = Run(ctx, t.Config, db)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("tenant %s: %w", t.Name, errs[i])
			}
		})
	}
	wg.Wait()
	return reports, errors.Join(errs...)
}
