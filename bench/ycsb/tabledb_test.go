package ycsb

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/magiconair/properties"

	"github.com/shoaldb/shoal/test/testcluster"
)

// TestTableDB runs the table binding's operations against a real node: insert, read, a partial
// update that keeps the other fields, a scan in key order, delete.
func TestTableDB(t *testing.T) {
	c := testcluster.StartSafe(t, testcluster.Options{Nodes: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := properties.NewProperties()
	p.Set(PropShoalHosts, c.Addrs()[0])
	p.Set("fieldcount", "2")
	dbi, err := tableCreator{}.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	db := dbi.(*TableDB)
	defer db.Close()
	for _, k := range []string{"user3", "user1", "user2"} {
		if err := db.Insert(ctx, "usertable", k, map[string][]byte{"field0": []byte(k + "-0"), "field1": []byte(k + "-1")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Update(ctx, "usertable", "user2", map[string][]byte{"field1": []byte("new")}); err != nil {
		t.Fatal(err)
	}
	r, err := db.Read(ctx, "usertable", "user2", nil)
	if err != nil || string(r["field0"]) != "user2-0" || string(r["field1"]) != "new" {
		t.Fatalf("read after a partial update: %q %v", r, err)
	}
	rows, err := db.Scan(ctx, "usertable", "user2", 10, []string{"field0"})
	if err != nil || len(rows) != 2 || string(rows[0]["field0"]) != "user2-0" || string(rows[1]["field0"]) != "user3-0" || rows[0]["field1"] != nil {
		t.Fatalf("scan from user2: %q %v", rows, err)
	}
	if err := db.Delete(ctx, "usertable", "user1"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Read(ctx, "usertable", "user1", nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("read of a deleted record: %v", err)
	}
}
