package hints

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/shoaldb/shoal/hints/hint"
	"github.com/shoaldb/shoal/hints/hotkeys"
)

// A leader's capture-to-wire path at the saturated setup's shape: YCSB keys (33 bytes), zipfian (s = 1.01) over
// 250 000 records, 7 ranges, 720 reads per 90 ms drain (8 000 reads/s), each drain fed to the hot-key
// summary and encoded for two peers (each range encoded once, as the shipper does). Per read: ns/op / 720.
func benchCaptureShip(b *testing.B, cfg BufferConfig) {
	r := rand.New(rand.NewSource(1))
	z := rand.NewZipf(r, 1.01, 1, 250000-1)
	keys := make([][]byte, 1<<20)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("usertable/user%019d", z.Uint64()*2654435761%10000000000000000000))
	}
	buf, err := NewBuffer(cfg)
	if err != nil {
		b.Fatal(err)
	}
	hot := hotkeys.New(hotkeys.Config{})
	var bytes, reads int
	b.ReportAllocs()
	b.ResetTimer()
	k := 0
	for i := 0; i < b.N; i++ {
		if i%22 == 0 {
			// The recurrence window (2 s) is 22 drains of 90 ms: rotate it every 22 drains.
			buf.recent.since = monoNow() - int64(2*time.Second)
		}
		for j := 0; j < 720; j++ {
			key := keys[k&(len(keys)-1)]
			k++
			buf.Record(uint64(key[len(key)-1]%7), key)
		}
		reads += 720
		out := buf.Drain()
		now := time.Now()
		for _, r := range out {
			hot.ObserveRange(r, now)
		}
		// As the shipper does for a wireSender: each range encoded once, laid out per peer.
		var peers [2]peerBatch
		for _, r := range out {
			enc := hint.EncodeRange(r, now)
			for p := range peers {
				peers[p].encoded = append(peers[p].encoded, enc)
			}
		}
		for p := range peers {
			bytes += len(hint.AppendBatchTrailer(peers[p].wire(hint.BatchTrailerMax+1), 1, "c", 1000))
		}
	}
	b.ReportMetric(float64(bytes)/float64(reads), "B/read")
}

func BenchmarkCaptureShipAll(b *testing.B) { benchCaptureShip(b, BufferConfig{}) }

func BenchmarkCaptureShipRecurring(b *testing.B) {
	benchCaptureShip(b, BufferConfig{RecurringOnly: true})
}

func BenchmarkCaptureShipRecurringSampled(b *testing.B) {
	benchCaptureShip(b, BufferConfig{RecurringOnly: true, Load: func() float64 { return 1 }})
}
