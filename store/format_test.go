package store

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/omega-cell/omega/txn"
)

// The on-disk format carries a version: a new store records it; a store of
// another version is refused at open, naming both and changing nothing; a
// store written before versions were recorded opens as this format, with
// its objects, and gets the version recorded.
func TestFormatVersion(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, nil)
	m := testUID(uidMachine, 0, 1)
	mustCommit(t, s, &txn.Txn{Ops: []txn.Op{txn.CreateMachine(machineProto(m, 1000, 1000))}})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	o := DefaultOptions(dir)
	rewrite := func(f func(db *pebble.DB)) {
		t.Helper()
		db, err := pebble.Open(dir, o.PebbleOptions())
		if err != nil {
			t.Fatal(err)
		}
		f(db)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	read := func() (uint32, bool) {
		var v uint32
		var ok bool
		rewrite(func(db *pebble.DB) {
			b, c, err := db.Get(versionKey)
			if err == nil {
				v, ok = binary.BigEndian.Uint32(b), true
				c.Close()
			}
		})
		return v, ok
	}
	if v, ok := read(); !ok || v != FormatVersion {
		t.Fatalf("a new store records format %d (%v), want %d", v, ok, FormatVersion)
	}
	rewrite(func(db *pebble.DB) { db.Set(versionKey, []byte{0, 0, 0, 9}, pebble.Sync) })
	o.Logger = quietLogger()
	_, err := Open(o)
	if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "format 9") || !strings.Contains(err.Error(), "reads format 2") {
		t.Fatalf("open a store of format 9: %v", err)
	}
	if v, _ := read(); v != 9 {
		t.Fatalf("the refused store's version became %d", v)
	}
	rewrite(func(db *pebble.DB) { db.Delete(versionKey, pebble.Sync) }) // as written before versions
	s = openTest(t, dir, nil)
	if _, ok := s.Snapshot().Machine(m); !ok {
		t.Fatal("the machine is gone")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if v, ok := read(); !ok || v != FormatVersion {
		t.Fatalf("an old store was not stamped: %d %v", v, ok)
	}
}
