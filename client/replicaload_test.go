package client

import (
	"testing"
	"time"
)

func TestChooseReplica(t *testing.T) {
	ms := func(f float64) float64 { return f * float64(time.Millisecond) }
	tests := []struct {
		name  string
		cands []replicaLoad
		gamma float64
		start int
		want  int
	}{
		{"no figures: the rotation's start", []replicaLoad{{}, {}, {}}, 0.2, 1, 1},
		{"no figures, start past the end wraps", []replicaLoad{{}, {}, {}}, 0.2, 4, 1},
		{"idle: the lowest latency", []replicaLoad{{latency: ms(3)}, {latency: ms(1)}, {latency: ms(2)}}, 0.2, 0, 1},
		{"nearest busy beyond γ: the least loaded", []replicaLoad{{latency: ms(1), outstanding: 3}, {latency: ms(1.5)}}, 0.2, 0, 1},
		{"nearest busy within γ stays", []replicaLoad{{latency: ms(1), outstanding: 1}, {latency: ms(1.7)}}, 0.2, 0, 0},
		{"exactly at γ stays", []replicaLoad{{latency: ms(1), outstanding: 1}, {latency: ms(1.6)}}, 0.2, 0, 0},
		{"γ 0: always the least loaded", []replicaLoad{{latency: ms(1), outstanding: 1}, {latency: ms(1.7)}}, 0, 0, 1},
		{"γ 1: always the nearest", []replicaLoad{{latency: ms(1), outstanding: 50}, {latency: ms(2)}}, 1, 0, 0},
		{"a slowed node loses to the others", []replicaLoad{{latency: ms(40)}, {latency: ms(1), outstanding: 2}, {latency: ms(1), outstanding: 1}}, 0.2, 0, 2},
		{"an unknown replica counts as the best: tried", []replicaLoad{{latency: ms(1), outstanding: 2}, {}}, 0.2, 0, 1},
		{"unknown ties with the best: rotation decides", []replicaLoad{{latency: ms(1)}, {}}, 0.2, 1, 1},
		{"single replica", []replicaLoad{{latency: ms(9), outstanding: 9}}, 0.2, 3, 0},
		{"a learner spreads the queue", []replicaLoad{{latency: ms(2), outstanding: 4}, {latency: ms(2), outstanding: 4}, {latency: ms(2), outstanding: 4}, {latency: ms(2.5), outstanding: 0}}, 0.2, 0, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := chooseReplica(tt.cands, tt.gamma, tt.start); got != tt.want {
				t.Fatalf("chooseReplica = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestLoadTracker(t *testing.T) {
	lt := newLoadTracker()
	end := lt.begin("a")
	if l := lt.loads([]string{"a", "b"}, time.Now()); l[0].outstanding != 1 || l[0].latency != 0 || l[1].outstanding != 0 {
		t.Fatalf("one outstanding at a, nothing at b: got %+v", l)
	}
	time.Sleep(time.Millisecond)
	end()
	l := lt.loads([]string{"a"}, time.Now())
	if l[0].outstanding != 0 || l[0].latency < float64(time.Millisecond) {
		t.Fatalf("after the request ended: got %+v, want no outstanding and a latency of at least 1ms", l[0])
	}
	if l := lt.loads([]string{"a"}, time.Now().Add(loadStaleAfter+time.Second)); l[0].latency != 0 {
		t.Fatalf("a latency older than %v still stands: %+v", loadStaleAfter, l[0])
	}
}

func TestReadImbalanceConfig(t *testing.T) {
	for _, tt := range []struct {
		in      float64
		want    float64
		invalid bool
	}{{0, DefaultReadImbalance, false}, {0.5, 0.5, false}, {-1, -1, false}, {1.5, 0, true}} {
		cfg, err := Config{ReadImbalance: tt.in}.withDefaults()
		if tt.invalid {
			if err == nil {
				t.Fatalf("ReadImbalance %v accepted", tt.in)
			}
			continue
		}
		if err != nil || cfg.ReadImbalance != tt.want {
			t.Fatalf("ReadImbalance %v: got %v, %v; want %v", tt.in, cfg.ReadImbalance, err, tt.want)
		}
	}
}
