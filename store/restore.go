package store

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// ErrNotEmpty: a restore's directory already holds something (a store, or
// anything else).
var ErrNotEmpty = errors.New("directory not empty")

// restoreBatchChanges bounds the objects written per pebble batch while a
// store is built, so a cell of millions of tasks is not one batch.
const restoreBatchChanges = 4096

// Restore builds a new store in opts.Dir (with opts.FS) holding st at
// revision rev, in the on-disk format this store writes (FormatVersion, as
// a new store records it). rev is at least st's revision: a caller that
// restores a cell whose store may have gone on committing after st was
// taken passes a higher one, so that no revision a client saw there is
// served again with other changes.
//
// The store opened on it serves st's objects at rev and retains no history
// before: a watch from any earlier revision fails with ErrCompacted and
// its client lists again. Every machine's coarse sequence number starts at
// rev, as after any reopen.
//
// opts.Dir must not exist or be an empty directory (ErrNotEmpty otherwise,
// naming what it holds). The store is built in a temporary directory beside
// it (".DIR.restore-*", removed on an error), synced, read back, and only
// then renamed to opts.Dir: an error or a crash leaves opts.Dir as it was.
// st's objects are checked first: their versions and creation revisions
// are revisions, at most rev.
func Restore(opts Options, st *txn.State, rev uint64) (err error) {
	if opts.Dir == "" {
		return errors.New("restore: a directory is required")
	}
	if opts.FS == nil {
		opts.FS = vfs.Default
	}
	dir := filepath.Clean(opts.Dir)
	if rev < st.Revision() {
		return fmt.Errorf("restore into %s: revision %d is below the state's own, %d", dir, rev, st.Revision())
	}
	if err := checkRevisions(st, rev); err != nil {
		return fmt.Errorf("restore into %s: %w", dir, err)
	}
	if err := CheckRestoreDir(opts); err != nil {
		return err
	}
	parent, base := filepath.Split(dir)
	if parent == "" {
		parent = "."
	}
	if err := opts.FS.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("restore into %s: %w", dir, err)
	}
	var rnd [6]byte
	rand.Read(rnd[:])
	tmp := filepath.Join(parent, "."+base+".restore-"+hex.EncodeToString(rnd[:]))
	defer func() {
		if err != nil {
			opts.FS.RemoveAll(tmp)
			err = fmt.Errorf("restore into %s: %w", dir, err)
		}
	}()
	if err := build(opts, tmp, st, rev); err != nil {
		return err
	}
	if _, err := opts.FS.Stat(dir); err == nil {
		// Empty (checked above): a rename onto an empty directory is not
		// portable, so remove it first.
		if err := opts.FS.Remove(dir); err != nil {
			return err
		}
	}
	if err := opts.FS.Rename(tmp, dir); err != nil {
		return err
	}
	d, err := opts.FS.OpenDir(parent)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// CheckRestoreDir reports whether opts.Dir may receive a restore: it does
// not exist, or is an empty directory. Otherwise the error (ErrNotEmpty, or
// why it cannot be read) names the directory and, when it holds a store,
// says so.
func CheckRestoreDir(opts Options) error {
	fs := opts.FS
	if fs == nil {
		fs = vfs.Default
	}
	dir := filepath.Clean(opts.Dir)
	fi, err := fs.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("restore into %s: %w", dir, err)
	case !fi.IsDir():
		return fmt.Errorf("restore into %s: %w: it is a file, not a directory", dir, ErrNotEmpty)
	}
	names, err := fs.List(dir)
	if err != nil {
		return fmt.Errorf("restore into %s: %w", dir, err)
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	for _, n := range names {
		if n == "CURRENT" || strings.HasPrefix(n, "MANIFEST-") || strings.HasPrefix(n, "OPTIONS-") || strings.HasPrefix(n, "marker.") {
			return fmt.Errorf("restore into %s: %w: it already holds a store (%s): restore into a new or empty directory, or remove it first", dir, ErrNotEmpty, n)
		}
	}
	shown := names
	if len(shown) > 3 {
		shown = append(shown[:3:3], "…")
	}
	return fmt.Errorf("restore into %s: %w: it holds %d entries (%s): restore into a new or empty directory", dir, ErrNotEmpty, len(names), strings.Join(shown, ", "))
}

// checkRevisions holds st's objects to the revision contract: an object's
// version is the revision that last changed it and its creation revision
// the one that created it, so neither is above rev (a store restored with
// one would hand out versions already taken).
func checkRevisions(st *txn.State, rev uint64) error {
	var err error
	check := func(kind string, uid fmt.Stringer, version, created uint64) bool {
		if version > rev || created > rev {
			err = fmt.Errorf("%w: %s %s has version %d and creation revision %d, above the revision %d", txn.ErrInvalid, kind, uid, version, created, rev)
		}
		return err == nil
	}
	st.RangeMachines(func(m *txn.Machine) bool { return check("machine", m.UID, m.Version, m.CreateRev) })
	if err == nil {
		st.RangeJobs(func(j *txn.Job) bool { return check("job", j.UID, j.Version, j.CreateRev) })
	}
	if err == nil {
		st.RangeTasks(func(t *txn.Task) bool { return check("task", t.UID, t.Version, t.CreateRev) })
	}
	if err == nil {
		st.RangeQuotas(func(q *txn.Quota) bool { return check("quota", q.UID, q.Version, q.CreateRev) })
	}
	if err == nil {
		st.RangeLeases(func(l *txn.Lease) bool { return check("lease", l.UID, l.Version, l.CreateRev) })
	}
	return err
}

// build writes st at rev into a new pebble database in dir, syncs it, and
// reads it back.
func build(opts Options, dir string, st *txn.State, rev uint64) error {
	if _, err := opts.FS.Stat(dir); err == nil {
		return fmt.Errorf("%s exists", dir)
	}
	db, err := pebble.Open(dir, opts.storePebbleOptions())
	if err != nil {
		return fmt.Errorf("create pebble in %s: %w", dir, err)
	}
	defer func() {
		if db != nil {
			db.Close()
		}
	}()
	lg := opts.Logger
	if lg == nil {
		lg = slog.Default()
	}
	if err := checkFormat(db, dir, lg); err != nil { // records FormatVersion
		return err
	}
	// Each object as the commit that created it would have written it
	// (EncodeWriteSet, so the records are the store's own); a task changed
	// since has its creation record and the status record of its last
	// change, at its version, as the store keeps it.
	ws := &txn.WriteSet{Revision: rev}
	flush := func() error {
		b := db.NewBatch()
		defer b.Close()
		if err := EncodeWriteSet(b, ws); err != nil {
			return err
		}
		if err := db.Apply(b, pebble.NoSync); err != nil {
			return err
		}
		ws.Changes = ws.Changes[:0]
		return nil
	}
	add := func(c txn.Change) bool {
		ws.Changes = append(ws.Changes, c)
		if len(ws.Changes) >= restoreBatchChanges {
			err = flush()
		}
		return err == nil
	}
	st.RangeMachines(func(m *txn.Machine) bool {
		return add(txn.Change{Kind: omegav1.ObjectKind_OBJECT_KIND_MACHINE, Machine: m, Created: true})
	})
	if err == nil {
		st.RangeJobs(func(j *txn.Job) bool {
			return add(txn.Change{Kind: omegav1.ObjectKind_OBJECT_KIND_JOB, Job: j, Created: true})
		})
	}
	if err == nil {
		st.RangeTasks(func(t *txn.Task) bool {
			if t.Version == t.CreateRev {
				return add(txn.Change{Kind: omegav1.ObjectKind_OBJECT_KIND_TASK, Task: t, Created: true})
			}
			created := *t
			created.Version = t.CreateRev
			return add(txn.Change{Kind: omegav1.ObjectKind_OBJECT_KIND_TASK, Task: &created, Created: true}) &&
				add(txn.Change{Kind: omegav1.ObjectKind_OBJECT_KIND_TASK, Task: t})
		})
	}
	if err == nil {
		st.RangeQuotas(func(q *txn.Quota) bool {
			return add(txn.Change{Kind: omegav1.ObjectKind_OBJECT_KIND_QUOTA, Quota: q, Created: true})
		})
	}
	if err == nil {
		st.RangeLeases(func(l *txn.Lease) bool {
			return add(txn.Change{Kind: omegav1.ObjectKind_OBJECT_KIND_LEASE, Lease: l, Created: true})
		})
	}
	if err != nil {
		return fmt.Errorf("write the objects: %w", err)
	}
	if err := flush(); err != nil { // the last objects and the revision
		return fmt.Errorf("write the objects: %w", err)
	}
	// Without pebble's WAL (the store's own log starts at the first open),
	// the flush makes it all durable.
	if err := db.Flush(); err != nil {
		return fmt.Errorf("flush the objects: %w", err)
	}
	got, err := load(db)
	if err != nil {
		return fmt.Errorf("read the new store back: %w", err)
	}
	if got.Revision() != rev || got.NumMachines() != st.NumMachines() || got.NumJobs() != st.NumJobs() || got.NumTasks() != st.NumTasks() || got.NumQuotas() != st.NumQuotas() || got.NumLeases() != st.NumLeases() {
		return fmt.Errorf("read the new store back: revision %d with %d machines, %d jobs, %d tasks, %d quotas; wrote %d with %d, %d, %d, %d",
			got.Revision(), got.NumMachines(), got.NumJobs(), got.NumTasks(), got.NumQuotas(), rev, st.NumMachines(), st.NumJobs(), st.NumTasks(), st.NumQuotas())
	}
	err = db.Close()
	db = nil
	if err != nil {
		return fmt.Errorf("close the new store: %w", err)
	}
	return nil
}
