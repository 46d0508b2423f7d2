package eval

import (
	"testing"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/storage"
	"github.com/shoaldb/shoal/storage/stored"
)

func TestApply(t *testing.T) {
	key := func(k []byte) []byte { return storage.UserDataKey(k) }
	put := func(k, v string) *pb.Mutation { return &pb.Mutation{Key: []byte(k), Value: []byte(v)} }
	del := func(k string) *pb.Mutation { return &pb.Mutation{Key: []byte(k), Delete: true} }
	for _, tc := range []struct {
		name string
		cmd  *pb.Command
		want Outcome
		// after: the value of "a" afterwards ("" = absent)
		after string
	}{
		{"put", &pb.Command{Mutations: []*pb.Mutation{put("a", "2")}}, Outcome{}, "2"},
		{"lone delete reports found", &pb.Command{Mutations: []*pb.Mutation{del("a")}}, Outcome{Found: true}, ""},
		{"lone delete of a missing key", &pb.Command{Mutations: []*pb.Mutation{del("z")}}, Outcome{}, "1"},
		{"condition holds", &pb.Command{Condition: &pb.Condition{Key: []byte("a"), Expected: []byte("1")}, Mutations: []*pb.Mutation{put("a", "3")}},
			Outcome{Swapped: true, Found: true, Current: []byte("1")}, "3"},
		{"condition fails: nothing written", &pb.Command{Condition: &pb.Condition{Key: []byte("a"), Expected: []byte("9")}, Mutations: []*pb.Mutation{put("a", "3")}},
			Outcome{Found: true, Current: []byte("1")}, "1"},
		{"expect absent fails", &pb.Command{Condition: &pb.Condition{Key: []byte("a"), ExpectAbsent: true}, Mutations: []*pb.Mutation{put("a", "3")}},
			Outcome{Found: true, Current: []byte("1")}, "1"},
		{"counter", &pb.Command{IncrementKey: []byte("n")}, Outcome{Counter: 1}, "1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eng, err := storage.Open(t.TempDir(), storage.Options{CreateIfMissing: true})
			if err != nil {
				t.Fatal(err)
			}
			defer eng.Close()
			b := eng.NewIndexedBatch()
			defer b.Close()
			if err := b.Set(key([]byte("a")), []byte("1")); err != nil {
				t.Fatal(err)
			}
			got, err := Apply(b, tc.cmd, Env{DataKey: key, Index: 7})
			if err != nil {
				t.Fatal(err)
			}
			if got.Swapped != tc.want.Swapped || got.Found != tc.want.Found || string(got.Current) != string(tc.want.Current) || got.Counter != tc.want.Counter {
				t.Errorf("outcome %+v, want %+v", got, tc.want)
			}
			raw, found, err := b.Get(key([]byte("a")))
			v, _ := stored.Decode(raw)
			if err != nil || string(v.Data) != tc.after || found != (tc.after != "") {
				t.Errorf("a = %q (found %v, %v) afterwards, want %q", v.Data, found, err, tc.after)
			}
		})
	}
}

// TestRecordedChanges checks what a change stream is told: a put over an expired key is an EXPIRE
// then a PUT, a delete of a live key a DELETE, the sweeper's delete of an expired key an EXPIRE, and
// a delete of an absent key nothing.
func TestRecordedChanges(t *testing.T) {
	key := func(k []byte) []byte { return storage.UserDataKey(k) }
	eng, err := storage.Open(t.TempDir(), storage.Options{CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	b := eng.NewIndexedBatch()
	defer b.Close()
	var got []string
	env := Env{DataKey: key, Index: 7, Record: func(kind pb.RangeFeedEvent_Kind, k []byte, v stored.Value) {
		got = append(got, kind.String()+" "+string(k)+" "+string(v.Data))
	}}
	const now = 1000
	for _, cmd := range []*pb.Command{
		{ClockUnixMs: now, Mutations: []*pb.Mutation{{Key: []byte("a"), Value: []byte("1"), ExpireAtUnixMs: now + 10}, {Key: []byte("b"), Value: []byte("2"), ExpireAtUnixMs: now + 10}}},
		{ClockUnixMs: now + 20, Mutations: []*pb.Mutation{{Key: []byte("a"), Value: []byte("3")}}},
		{ClockUnixMs: now + 20, Mutations: []*pb.Mutation{{Key: []byte("a"), Delete: true}, {Key: []byte("z"), Delete: true}}},
		{ClockUnixMs: now + 20, Txn: &pb.TxnRequest{Success: []*pb.TxnOp{{Type: pb.TxnOp_DELETE, Key: []byte("b"), OnlyExpired: true}}}},
	} {
		if _, err := Apply(b, cmd, env); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"PUT a 1", "PUT b 2", "EXPIRE a ", "PUT a 3", "DELETE a ", "EXPIRE b "}
	if len(got) != len(want) {
		t.Fatalf("recorded %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("recorded %q, want %q", got, want)
		}
	}
}
