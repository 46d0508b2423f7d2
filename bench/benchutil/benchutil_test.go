package benchutil

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/pb"
)

func TestBarAndClamp(t *testing.T) {
	for _, tc := range []struct {
		frac float64
		want string
	}{
		{-1, "[..............................] x"},
		{0.5, "[###############...............] x"},
		{2, "[##############################] x"},
	} {
		if got := Bar(tc.frac, "x"); got != tc.want {
			t.Errorf("Bar(%v) = %q, want %q", tc.frac, got, tc.want)
		}
	}
}

func TestErrorKind(t *testing.T) {
	kinds := map[string]int64{}
	long := strings.Repeat("x", 200)
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("get: %w", client.ErrTimeout), "TIMEOUT"},
		{&client.Error{Code: pb.ErrorCode_UNAVAILABLE, Message: "range 7 on n4"}, "UNAVAILABLE"},
		{errors.New("dial tcp: refused"), "dial tcp: refused"},
		{errors.New(long), long[:120]},
	} {
		got := errorKind(tc.err, kinds)
		if got != tc.want {
			t.Errorf("errorKind(%v) = %q, want %q", tc.err, got, tc.want)
		}
		kinds[got]++
	}
	for i := len(kinds); i < maxErrorKinds; i++ {
		kinds[fmt.Sprint("kind ", i)]++
	}
	if got := errorKind(errors.New("one too many"), kinds); got != "other" {
		t.Errorf("a kind past maxErrorKinds = %q, want other", got)
	}
	if got := errorKind(client.ErrTimeout, kinds); got != "TIMEOUT" {
		t.Errorf("a known kind past maxErrorKinds = %q, want TIMEOUT", got)
	}
}

// The clients count every operation in its second and its phase, and the failures by kind. The test
// waits for the operations it counts on (worker 1 fails every second one), not for a fixed time that
// a stalled host may not run them in.
func TestClients(t *testing.T) {
	c := StartClients(t.Context(), 2, func(w int) func(context.Context) error {
		i := 0
		return func(context.Context) error {
			i++
			time.Sleep(time.Millisecond)
			if w == 1 && i%2 == 0 {
				return client.ErrTimeout
			}
			return nil
		}
	})
	errorsReach := func(n int64) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			if e, _, _ := c.Errors(); e >= n {
				return
			}
			if time.Now().After(deadline) {
				c.Stop()
				t.Fatalf("fewer than %d failed operations in 10 s", n)
			}
		}
	}
	errorsReach(1) // worker 1's first failure follows its first success
	sec := c.Second()
	e0, _, _ := c.Errors()
	c.Add(1)
	errorsReach(e0 + 2) // two failures of worker 1 after the second ended: a success between them
	c.Stop()
	h, errs := c.Phase()
	total, kinds, first := c.Errors()
	if sec.Ops == 0 || sec.Errors == 0 || h.TotalCount() <= sec.Ops || errs != total || kinds["TIMEOUT"] != total || first == "" {
		t.Fatalf("second %+v, phase %d ops %d errors, errors %d %v %q", sec, h.TotalCount(), errs, total, kinds, first)
	}
}
