package transport

import (
	"context"
	"sync"
	"time"
)

// tokenBucket is a minimal context-aware token bucket. A waiter takes its tokens at once, possibly
// driving the balance negative (so requests larger than the burst work and waiters are served in
// arrival order), then sleeps until the refill covers the debt.
type tokenBucket struct {
	mu     sync.Mutex
	rate   float64 // tokens per second
	burst  float64
	tokens float64
	last   time.Time
}

func newTokenBucket(rate, burst float64) *tokenBucket {
	return &tokenBucket{rate: rate, burst: burst, tokens: burst, last: time.Now()}
}

// wait takes n tokens, blocking until they are available or ctx is done (then the tokens are returned).
func (b *tokenBucket) wait(ctx context.Context, n int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	now := time.Now()
	b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
	b.tokens -= float64(n)
	deficit := -b.tokens
	b.mu.Unlock()
	if deficit <= 0 {
		return nil
	}
	if !sleepCtx(ctx, time.Duration(deficit/b.rate*float64(time.Second))) {
		b.mu.Lock()
		b.tokens += float64(n)
		b.mu.Unlock()
		return ctx.Err()
	}
	return nil
}
