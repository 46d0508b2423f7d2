package policy

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// steady runs rounds of the whole registry on a workload that does not change: each round's
// operators are kept, finished and the clock advanced. It lists the operators, the leaderships each
// range went through, and any that came back to a node it had left (a ping-pong).
func (h *harness) steady(t *testing.T, td *datadriven.TestData) string {
	rounds, every := 100, "10s"
	td.ScanArgs(t, "rounds", &rounds)
	td.MaybeScanArgs(t, "every", &every)
	step, err := time.ParseDuration(every)
	if err != nil {
		return "error: " + err.Error() + "\n"
	}
	leaders := map[uint64][]uint64{}
	for _, r := range h.c.Ranges {
		leaders[r.ID] = []uint64{r.Leader}
	}
	var b strings.Builder
	total := 0
	for i := 1; i <= rounds; i++ {
		ops := h.propose("")
		for _, op := range ops {
			fmt.Fprintf(&b, "round %d: %s %s\n", i, op.Policy, op)
		}
		total += len(ops)
		h.keep(ops)
		h.finish()
		for _, r := range h.c.Ranges {
			if l := leaders[r.ID]; len(l) == 0 || l[len(l)-1] != r.Leader {
				leaders[r.ID] = append(l, r.Leader)
			}
		}
		h.advance(step, nil)
	}
	fmt.Fprintf(&b, "%d rounds: %d operators\n", rounds, total)
	var back []string
	for _, r := range h.c.Ranges {
		l := leaders[r.ID]
		if len(l) < 2 {
			continue
		}
		path := make([]string, len(l))
		for i, n := range l {
			path[i] = fmt.Sprintf("n%d", n)
			if slices.Contains(l[:i], n) {
				back = append(back, fmt.Sprintf("r%d", r.ID))
			}
		}
		fmt.Fprintf(&b, "r%d led by %s\n", r.ID, strings.Join(path, "→"))
	}
	if len(back) == 0 {
		b.WriteString("no leadership came back to a node it had left\n")
	} else {
		fmt.Fprintf(&b, "ping-pong: %s\n", strings.Join(back, ", "))
	}
	return b.String()
}

// usage prints usage_balance's predicted usage per node at its last round.
func (h *harness) usage() string {
	p, ok := h.reg.Policy(NameUsageBalance).(*UsageBalance)
	if !ok {
		return "no usage_balance\n"
	}
	pred, asking := p.Predicted()
	var b strings.Builder
	for _, n := range h.c.Nodes {
		if u, ok := pred[n.ID]; ok {
			fmt.Fprintf(&b, "n%d: predicted %s, measured %s\n", n.ID, pct(u), pct(n.MeasuredUsage()))
		}
	}
	fmt.Fprintf(&b, "asks for a node: %v\n", asking)
	return b.String()
}
