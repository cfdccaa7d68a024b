package replica

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// Disk keeps a member's raft state in a directory, apart from the store's
// own log: raft's log has terms, a hard state (term, vote, commit) and an
// uncommitted suffix a new leader may overwrite, none of which the store's
// log — an append-only record of published revisions — has, so raft gets
// a log of its own (as etcd keeps its WAL apart from its backend). The
// layout:
//
//	snap-<index>   the newest snapshot (raftpb.Snapshot: the member
//	               records and the cell state at that index,
//	               EncodeSnapshot's, and the configuration),
//	               written to a temporary file, synced and renamed
//	log-<index>    the records since that snapshot: each its length
//	               (uvarint), a CRC-32C of the rest, a kind ('E' entries,
//	               'H' hard state) and its protobuf; appended and synced
//	               before Process's messages are sent
//
//	member         the directory's format version, the member's raft
//	               id and the cell's id ("omega raft member\nformat 2\n
//	               id <id>\ncell <cell>\n"; format 1 had no cell line),
//	               written when the directory is made, again when the
//	               cell's id is recorded
//
// Opening reads the newest snapshot and replays its log into a
// raft.MemoryStorage; a record cut short or failing its checksum at the
// end of the log (a write the crash interrupted, never synced, so never
// acknowledged) ends the replay there and is cut off. A snapshot starts a
// new log holding the entries after it; the older files are removed.
//
// A member joining a cell that already runs (its data lost, or new) starts
// with no snapshot: its directory holds the member file and log-0 until
// the leader sends it one.
type Disk struct {
	id   uint64
	cell string // the cell's id, as the member file records it ("" before format 2)
	// incarnation is the nonce the directory drew when it was made (or
	// when a directory of an earlier format was first opened).
	incarnation uint64
	dir         string
	storage     *Storage
	f           *os.File
	w           *bufio.Writer
	index       uint64 // the newest snapshot's index: the log file's name
	buf         []byte
	synced      *raftpb.HardState // the hard state last synced
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// DiskFormat is the raft directory's format version, in its member file.
// A directory of format 0 (the first, which had no member file) is read as
// format 1 and given the file; format 1's file has no cell id, format 2's
// no incarnation (an older directory opened is given both as it learns
// them: the file is written again); a later format is refused.
const DiskFormat = 3

// OpenDisk opens a member's raft directory, or creates it: for a member of
// a new cell of peers, the empty cell at index 1 (NewStorage's); with
// peers nil, for a member joining a cell that runs (JoinID), an empty log
// the leader's snapshot fills. id is the member's raft id for a new
// directory; an existing one keeps the id it records (Disk.ID).
func OpenDisk(dir string, id uint64, peers []uint64) (*Disk, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	d := &Disk{dir: dir, id: id}
	snaps, logs, err := d.files()
	if err != nil {
		return nil, err
	}
	recorded, cell, inc, err := d.readMember()
	if err != nil {
		return nil, err
	}
	d.cell, d.incarnation = cell, inc
	if recorded != 0 {
		d.id = recorded
		if inc == 0 { // an earlier format: the directory draws its incarnation now
			if err := d.writeMember(); err != nil {
				return nil, err
			}
		}
	}
	if len(snaps) == 0 && recorded == 0 && peers != nil {
		// A new member of a new cell: the snapshot first, then the member
		// file (a crash between them leaves a directory read as format 0).
		st, err := NewStorage(peers)
		if err != nil {
			return nil, err
		}
		snap, _ := st.Snapshot()
		if err := d.writeSnapshot(snap); err != nil {
			return nil, err
		}
		d.storage = st
		d.index = snap.GetMetadata().GetIndex()
		if err := d.writeMember(); err != nil {
			return nil, err
		}
		return d, d.newLog(nil)
	}
	if len(snaps) == 0 {
		// A joining member, before the leader's snapshot: the member file
		// first, then its log (a crash between them opens as it is).
		if recorded == 0 {
			if err := d.writeMember(); err != nil {
				return nil, err
			}
		}
		d.storage = raft.NewMemoryStorage()
		if !slices.Contains(logs, 0) {
			return d, d.newLog(nil)
		}
		return d, d.reopenLog()
	}
	if recorded == 0 {
		if err := d.writeMember(); err != nil { // format 0: give it the file
			return nil, err
		}
	}
	d.index = snaps[len(snaps)-1]
	b, err := os.ReadFile(d.path("snap", d.index))
	if err != nil {
		return nil, err
	}
	snap := &raftpb.Snapshot{}
	if err := proto.Unmarshal(b, snap); err != nil {
		return nil, fmt.Errorf("replica: %s: %w", d.path("snap", d.index), err)
	}
	d.storage = raft.NewMemoryStorage()
	if err := d.storage.ApplySnapshot(snap); err != nil {
		return nil, err
	}
	if !slices.Contains(logs, d.index) {
		return d, d.newLog(nil) // crashed between the snapshot and its log
	}
	return d, d.reopenLog()
}

// reopenLog replays log-<index> into the storage, cuts off its torn tail
// and opens it to append.
func (d *Disk) reopenLog() error {
	good, err := d.replay(d.path("log", d.index))
	if err != nil {
		return err
	}
	f, err := os.OpenFile(d.path("log", d.index), os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	if err := f.Truncate(good); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Seek(good, io.SeekStart); err != nil {
		f.Close()
		return err
	}
	d.f, d.w = f, bufio.NewWriterSize(f, 1<<20)
	hs, _, _ := d.storage.InitialState()
	if last, _ := d.storage.LastIndex(); hs.GetCommit() > last {
		f.Close()
		d.f = nil
		return fmt.Errorf("replica: %s: %w: the hard state commits index %d, the log ends at %d", d.path("log", d.index), ErrCorruptLog, hs.GetCommit(), last)
	}
	d.removeOld()
	return nil
}

// ID is the member's raft id, as its directory records it.
func (d *Disk) ID() uint64 { return d.id }

// Joining: the member has no snapshot yet (it joined a running cell and
// the leader's has not come).
func (d *Disk) Joining() bool { return d.index == 0 }

const memberFile = "member"

// Incarnation is the directory's nonce: a wiped directory made again
// draws another, which the cell refuses under the old raft id.
func (d *Disk) Incarnation() uint64 { return d.incarnation }

// Cell is the cell's id the member file records ("" until RecordCell).
func (d *Disk) Cell() string { return d.cell }

// RecordCell records the cell's id in the member file (a member of a new
// cell at its first start; one that joined, from the leader's answer).
func (d *Disk) RecordCell(cell string) error {
	if strings.ContainsAny(cell, " \n") || cell == "" {
		return fmt.Errorf("replica: a cell id of spaces or lines: %s", txn.Quote(cell))
	}
	d.cell = cell
	return d.writeMember()
}

// readMember reads the member file: the recorded id, cell id and
// incarnation, or 0 when there is no file (a new directory, or one of
// format 0). The file is "omega raft member" and then a "key value" line
// each: format and id always, cell from format 2, incarnation from 3.
func (d *Disk) readMember() (uint64, string, uint64, error) {
	path := filepath.Join(d.dir, memberFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, "", 0, nil
	}
	if err != nil {
		return 0, "", 0, err
	}
	corrupt := func() error {
		return fmt.Errorf("replica: %s: %w: not a member file: %s", path, ErrCorruptLog, txn.Quote(string(b)))
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) < 3 || lines[0] != "omega raft member" {
		return 0, "", 0, corrupt()
	}
	var format int
	var id, inc uint64
	var cell string
	seen := map[string]bool{}
	for _, l := range lines[1:] {
		k, v, ok := strings.Cut(l, " ")
		if !ok || v == "" || seen[k] {
			return 0, "", 0, corrupt()
		}
		seen[k] = true
		switch k {
		case "format":
			format, err = strconv.Atoi(v)
		case "id":
			id, err = strconv.ParseUint(v, 10, 64)
		case "cell":
			cell = v
		case "incarnation":
			inc, err = strconv.ParseUint(v, 10, 64)
		default:
			err = errors.New("unknown key")
		}
		if err != nil {
			return 0, "", 0, corrupt()
		}
	}
	if format > DiskFormat {
		return 0, "", 0, fmt.Errorf("replica: %s: format %d is newer than this omega's (%d): run the omega that wrote it", path, format, DiskFormat)
	}
	if id == 0 || format < 1 || format >= 2 && cell == "" && !seen["incarnation"] || format >= 3 && inc == 0 {
		return 0, "", 0, corrupt()
	}
	return id, cell, inc, nil
}

// writeMember writes the member file (format 1 while the cell's id is not
// recorded: a joining member before the leader's answer).
func (d *Disk) writeMember() error {
	if d.id == 0 {
		return errors.New("replica: a member's raft id is 0")
	}
	if d.incarnation == 0 {
		d.incarnation = rand.Uint64() | 1
	}
	path := filepath.Join(d.dir, memberFile)
	tmp := path + ".tmp"
	body := fmt.Appendf(nil, "omega raft member\nformat %d\nid %d\n", DiskFormat, d.id)
	if d.cell != "" {
		body = fmt.Appendf(body, "cell %s\n", d.cell)
	}
	body = fmt.Appendf(body, "incarnation %d\n", d.incarnation)
	if err := os.WriteFile(tmp, body, 0o600); err != nil {
		return err
	}
	f, err := os.Open(tmp)
	if err != nil {
		return err
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(d.dir)
}

// Storage is raft's storage, rebuilt from the directory; give it to New.
func (d *Disk) Storage() *Storage { return d.storage }

// Close closes the log file.
func (d *Disk) Close() error {
	if d.f == nil {
		return nil
	}
	err := d.w.Flush()
	return errors.Join(err, d.f.Close())
}

func (d *Disk) path(kind string, index uint64) string {
	return filepath.Join(d.dir, fmt.Sprintf("%s-%020d", kind, index))
}

// files lists the snapshots' and logs' indexes, oldest first.
func (d *Disk) files() (snaps, logs []uint64, err error) {
	ents, err := os.ReadDir(d.dir)
	if err != nil {
		return nil, nil, err
	}
	for _, e := range ents {
		kind, num, ok := strings.Cut(e.Name(), "-")
		if !ok {
			continue
		}
		i, err := strconv.ParseUint(num, 10, 64)
		if err != nil {
			continue
		}
		switch kind {
		case "snap":
			snaps = append(snaps, i)
		case "log":
			logs = append(logs, i)
		}
	}
	slices.Sort(snaps)
	slices.Sort(logs)
	return snaps, logs, nil
}

// replay applies a log's records to the storage and returns the length of
// its good prefix.
func (d *Disk) replay(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var good int64
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)) || uint64(len(b)-k) < n+5 {
			break // cut short: the crash's
		}
		rec := b[k : k+5+int(n)]
		if crc32.Checksum(rec[4:], crcTable) != binary.BigEndian.Uint32(rec) {
			break
		}
		kind, body := rec[4], rec[5:]
		switch kind {
		case 'E':
			es, err := decodeEntries(body)
			if err != nil {
				return 0, fmt.Errorf("replica: %s at byte %d: %w", path, good, err)
			}
			if err := d.append(es); err != nil {
				return 0, fmt.Errorf("replica: %s at byte %d: %w", path, good, err)
			}
		case 'H':
			hs := &raftpb.HardState{}
			if err := proto.Unmarshal(body, hs); err != nil {
				return 0, fmt.Errorf("replica: %s at byte %d: %w", path, good, err)
			}
			if err := d.storage.SetHardState(hs); err != nil {
				return 0, err
			}
		default:
			return 0, fmt.Errorf("replica: %s at byte %d: a record of unknown kind 0x%02x", path, good, kind)
		}
		good += int64(k + 5 + int(n))
		b = b[k+5+int(n):]
	}
	return good, nil
}

// append adds entries to the storage, skipping those the snapshot covers.
// The entries must follow one another and may overwrite the storage's
// suffix (a new leader's), never leave a gap: a log that says otherwise is
// corrupt, whatever its checksums say.
func (d *Disk) append(es []*raftpb.Entry) error {
	first, _ := d.storage.FirstIndex()
	for len(es) > 0 && es[0].GetIndex() < first {
		es = es[1:]
	}
	if len(es) == 0 {
		return nil
	}
	last, _ := d.storage.LastIndex()
	if es[0].GetIndex() > last+1 {
		return fmt.Errorf("%w: entries from index %d follow a log that ends at %d", ErrCorruptLog, es[0].GetIndex(), last)
	}
	for i := 1; i < len(es); i++ {
		if es[i].GetIndex() != es[i-1].GetIndex()+1 || es[i].GetTerm() < es[i-1].GetTerm() {
			return fmt.Errorf("%w: entry %d (term %d) after entry %d (term %d)", ErrCorruptLog, es[i].GetIndex(), es[i].GetTerm(), es[i-1].GetIndex(), es[i-1].GetTerm())
		}
	}
	return d.storage.Append(es)
}

// ErrCorruptLog: a member's raft log holds what no Disk wrote.
var ErrCorruptLog = errors.New("corrupt raft log")

func encodeEntries(b []byte, es []*raftpb.Entry) ([]byte, error) {
	var err error
	for _, e := range es {
		n := proto.Size(e)
		b = binary.AppendUvarint(b, uint64(n))
		b, err = proto.MarshalOptions{}.MarshalAppend(b, e)
		if err != nil {
			return nil, err
		}
	}
	return b, nil
}

func decodeEntries(b []byte) ([]*raftpb.Entry, error) {
	var out []*raftpb.Entry
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return nil, errors.New("an entry's length is cut")
		}
		e := &raftpb.Entry{}
		if err := proto.Unmarshal(b[k:k+int(n)], e); err != nil {
			return nil, err
		}
		out = append(out, e)
		b = b[k+int(n):]
	}
	return out, nil
}

// record appends one record to the log's buffer.
func (d *Disk) record(kind byte, body []byte) {
	d.buf = binary.AppendUvarint(d.buf[:0], uint64(len(body)))
	at := len(d.buf)
	d.buf = append(d.buf, 0, 0, 0, 0, kind)
	d.buf = append(d.buf, body...)
	binary.BigEndian.PutUint32(d.buf[at:], crc32.Checksum(d.buf[at+4:], crcTable))
	d.w.Write(d.buf)
}

// Save makes what a Ready holds durable: a snapshot received (a new log
// starts after it), the new entries, the hard state, in that order, with
// one sync — or none when only the commit index moved (raft.MustSync: a
// commit index lost in a crash is learned again from the leader, as etcd
// does). Node calls it before it hands out the Ready's messages.
func (d *Disk) Save(hs *raftpb.HardState, ents []*raftpb.Entry, snap *raftpb.Snapshot) error {
	sync := !raft.IsEmptySnap(snap) || (!raft.IsEmptyHardState(hs) && raft.MustSync(hs, d.synced, len(ents))) || len(ents) > 0
	if !raft.IsEmptySnap(snap) {
		if err := d.SaveSnapshot(snap); err != nil {
			return err
		}
	}
	if len(ents) > 0 {
		body, err := encodeEntries(nil, ents)
		if err != nil {
			return err
		}
		d.record('E', body)
	}
	if !raft.IsEmptyHardState(hs) {
		body, err := proto.Marshal(hs)
		if err != nil {
			return err
		}
		d.record('H', body)
	}
	if err := d.w.Flush(); err != nil {
		return err
	}
	if !sync {
		return nil
	}
	if !raft.IsEmptyHardState(hs) {
		d.synced = hs
	}
	return d.f.Sync()
}

// SaveSnapshot writes a snapshot (one the member made, or one it was
// sent) and starts a new log after it holding the entries the storage
// keeps beyond it and the hard state; then the older files go.
func (d *Disk) SaveSnapshot(snap *raftpb.Snapshot) error {
	if snap.GetMetadata().GetIndex() <= d.index {
		return nil
	}
	if err := d.writeSnapshot(snap); err != nil {
		return err
	}
	d.index = snap.GetMetadata().GetIndex()
	var keep []*raftpb.Entry
	if last, _ := d.storage.LastIndex(); last > d.index {
		if first, _ := d.storage.FirstIndex(); first <= d.index+1 {
			es, err := d.storage.Entries(d.index+1, last+1, 1<<62)
			if err == nil {
				keep = es
			}
		}
	}
	if err := d.newLog(keep); err != nil {
		return err
	}
	d.removeOld()
	return nil
}

func (d *Disk) writeSnapshot(snap *raftpb.Snapshot) error {
	b, err := proto.Marshal(snap)
	if err != nil {
		return err
	}
	final := d.path("snap", snap.GetMetadata().GetIndex())
	tmp := final + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	f, err := os.Open(tmp)
	if err != nil {
		return err
	}
	err = errors.Join(f.Sync(), f.Close())
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, final); err != nil {
		return err
	}
	return syncDir(d.dir)
}

// newLog starts log-<index> with keep's entries and the hard state.
func (d *Disk) newLog(keep []*raftpb.Entry) error {
	if d.f != nil {
		d.w.Flush()
		d.f.Close()
	}
	f, err := os.OpenFile(d.path("log", d.index), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	d.f, d.w = f, bufio.NewWriterSize(f, 1<<20)
	if len(keep) > 0 {
		body, err := encodeEntries(nil, keep)
		if err != nil {
			return err
		}
		d.record('E', body)
	}
	if hs, _, err := d.storage.InitialState(); err == nil && !raft.IsEmptyHardState(hs) {
		body, err := proto.Marshal(hs)
		if err != nil {
			return err
		}
		d.record('H', body)
	}
	if err := d.w.Flush(); err != nil {
		return err
	}
	if err := d.f.Sync(); err != nil {
		return err
	}
	return syncDir(d.dir)
}

// removeOld removes the snapshots and logs before the newest snapshot.
func (d *Disk) removeOld() {
	snaps, logs, err := d.files()
	if err != nil {
		return
	}
	for _, i := range snaps {
		if i < d.index {
			os.Remove(d.path("snap", i))
		}
	}
	for _, i := range logs {
		if i < d.index {
			os.Remove(d.path("log", i))
		}
	}
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// BootstrapDisk makes dir the raft directory of the first member of a new
// cell holding st (a single server's state, at its revision): a snapshot
// at index 1 of st, member the one voter at addr in the records, and the
// cell's id recorded. The member then starts as any other from its
// directory, and members are added to it as the cell runs. dir must not
// exist or be empty.
func BootstrapDisk(dir string, st *txn.State, member uint64, addr, cell string) error {
	if member == 0 || member > MaxMember || addr == "" {
		return fmt.Errorf("replica: bootstrap: a member needs a number in 1..%d and an address", uint64(MaxMember))
	}
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return fmt.Errorf("replica: bootstrap: %s is not empty", dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	data, err := EncodeSnapshot(st, &omegav1.CellMembers{Members: []*omegav1.CellMember{{Member: member, Address: addr}}})
	if err != nil {
		return err
	}
	snap := &raftpb.Snapshot{Data: data, Metadata: &raftpb.SnapshotMetadata{
		Index: new(uint64(1)), Term: new(uint64(1)), ConfState: &raftpb.ConfState{Voters: []uint64{member}}}}
	d := &Disk{dir: dir, id: member, cell: cell, storage: raft.NewMemoryStorage()}
	if err := d.storage.ApplySnapshot(snap); err != nil {
		return err
	}
	if err := d.writeSnapshot(snap); err != nil {
		return err
	}
	d.index = 1
	if err := d.writeMember(); err != nil {
		return err
	}
	if err := d.newLog(nil); err != nil {
		return err
	}
	return d.Close()
}
