package live

// The cell's members as this member's driver sees them: the records the
// node applied, published for the transport's goroutines, and the cell's id.

import (
	"maps"

	"go.etcd.io/raft/v3/raftpb"
)

// membersView is the member records as the driver last published them.
type membersView struct {
	addrs   map[uint64]string
	removed map[uint64]bool
	incs    map[uint64]uint64 // raft id → incarnation
}

// inMsg is a peer's raft message and the sender's incarnation.
type inMsg struct {
	m   *raftpb.Message
	inc uint64
}

// refreshView publishes the member records when they changed (on the
// driver's goroutine).
func (d *Driver) refreshView() {
	if d.node.RecordsVersion() == d.viewVersion && d.view.Load() != nil {
		return // (no copy of the records on every turn of the loop)
	}
	addrs, v := d.node.Addrs()
	d.viewVersion = v
	view := &membersView{addrs: addrs, removed: map[uint64]bool{}, incs: d.node.Incarnations()}
	for _, m := range d.node.Records().GetRemoved() {
		view.removed[m] = true
	}
	d.view.Store(view)
}

// addr is member's address: the records', else --peers'.
func (d *Driver) addr(member uint64) (string, bool) {
	if v := d.view.Load(); v != nil {
		if a, ok := v.addrs[member]; ok {
			return a, true
		}
		if v.removed[member] {
			return "", false
		}
	}
	if l := d.learned.Load(); l != nil {
		if a, ok := (*l)[member]; ok {
			return a, true
		}
	}
	a, ok := d.cfg.Addrs[member]
	return a, ok
}

// Members are the cell's members and their addresses as this member's
// records say (the founders' --peers until it applied any).
func (d *Driver) Members() map[uint64]string {
	out := map[uint64]string{}
	if v := d.view.Load(); v != nil {
		maps.Copy(out, v.addrs)
	}
	if len(out) == 0 {
		maps.Copy(out, d.cfg.Addrs)
	}
	return out
}

// Cluster is the cell's id this member goes by.
func (d *Driver) Cluster() string { return *d.cluster.Load() }

// setCluster takes the cell's id a leader's Join answer gave a joining
// member, and records it in its directory (on the driver's goroutine).
func (d *Driver) setCluster(cell string) error {
	if cell == "" || cell == d.Cluster() && d.disk.Cell() == cell {
		return nil
	}
	if err := d.disk.RecordCell(cell); err != nil {
		return err
	}
	d.cluster.Store(&cell)
	d.log.Info("raft member: the cell's id, as the leader gave it", "cluster", cell)
	return nil
}
