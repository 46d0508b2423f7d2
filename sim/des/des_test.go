package des

import (
	"reflect"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestOrder(t *testing.T) {
	tests := []struct {
		name     string
		schedule func(l *Loop, got *[]string)
		until    time.Duration
		want     []string
		wantNow  time.Duration
	}{
		{"by time", func(l *Loop, got *[]string) {
			l.After(3*time.Second, func() { *got = append(*got, "c") })
			l.After(1*time.Second, func() { *got = append(*got, "a") })
			l.After(2*time.Second, func() { *got = append(*got, "b") })
		}, 10 * time.Second, []string{"a", "b", "c"}, 10 * time.Second},
		{"ties in scheduling order", func(l *Loop, got *[]string) {
			for _, s := range []string{"x", "y", "z"} {
				l.After(time.Second, func() { *got = append(*got, s) })
			}
		}, time.Second, []string{"x", "y", "z"}, time.Second},
		{"events schedule events, past times run now", func(l *Loop, got *[]string) {
			l.After(time.Second, func() {
				*got = append(*got, "first@"+l.Now().Sub(t0).String())
				l.At(t0, func() { *got = append(*got, "past@"+l.Now().Sub(t0).String()) })
				l.After(time.Second, func() { *got = append(*got, "later@"+l.Now().Sub(t0).String()) })
			})
		}, 5 * time.Second, []string{"first@1s", "past@1s", "later@2s"}, 5 * time.Second},
		{"nothing after until", func(l *Loop, got *[]string) {
			l.After(time.Second, func() { *got = append(*got, "in") })
			l.After(2*time.Second+time.Nanosecond, func() { *got = append(*got, "out") })
		}, 2 * time.Second, []string{"in"}, 2 * time.Second},
		{"every stops when told", func(l *Loop, got *[]string) {
			n := 0
			l.Every(time.Second, func() bool {
				n++
				*got = append(*got, l.Now().Sub(t0).String())
				return n < 3
			})
		}, time.Minute, []string{"1s", "2s", "3s"}, time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := New(t0)
			var got []string
			tt.schedule(l, &got)
			l.RunUntil(t0.Add(tt.until))
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ran %v, want %v", got, tt.want)
			}
			if now := l.Now().Sub(t0); now != tt.wantNow {
				t.Fatalf("clock at %v, want %v", now, tt.wantNow)
			}
		})
	}
}

func TestEventsCounted(t *testing.T) {
	l := New(t0)
	for i := 0; i < 5; i++ {
		l.After(time.Duration(i)*time.Millisecond, func() {})
	}
	l.After(time.Hour, func() {})
	l.RunUntil(t0.Add(time.Second))
	if l.Events() != 5 || l.Pending() != 1 {
		t.Fatalf("ran %d, pending %d; want 5 and 1", l.Events(), l.Pending())
	}
}
