// Package live runs a replica.Node as a server does: one goroutine owns the
// member (ticks on the wall clock, messages in, commits and reads from the
// API's handlers), its raft state in a replica.Disk, and its messages go to
// the other members over gRPC (service omega.v1.Peer), one stream per
// peer. The decision code is replica's; this is the I/O around it.
package live

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/omega-cell/omega/replica"
	"github.com/omega-cell/omega/txn"
)

// Config configures a Driver.
type Config struct {
	// Member configures the raft member (ID, Peers, ticks, limits).
	Member replica.Config
	// Dir is the member's raft directory (replica.Disk).
	Dir string
	// Addrs are the founders' gRPC addresses by member number (--peers;
	// replica.MemberOf: every incarnation of a member is at its address):
	// the peer service and the cell API, served together, where a
	// follower forwards commits (Forwarder). Once the member has applied
	// the cell's member records (a snapshot's, or a change's: a member
	// added as the cell ran), those say where each member is; Addrs only
	// fills in a member they do not name.
	Addrs map[uint64]string
	// Join: a new directory is a member joining a cell that runs (its data
	// lost, or a new server): it takes a raft id of its own
	// (replica.JoinID of Member.ID, the member number, and a random nonce),
	// starts empty, and asks the peers until the leader has made that id
	// the member's (Peer.Join) and sent it a snapshot. A directory that
	// exists starts as it is, Join or not.
	Join bool
	// Cluster names the cell: a peer's message naming another is refused.
	// The directory records it at the member's first start (a member that
	// joins records the leader's instead), and the recorded one is used
	// from then on.
	Cluster string
	// Tick is one raft tick of the wall clock. Default 50 ms; with the
	// member's default ElectionTick of 10, an election starts 0.5 to 1 s
	// after the leader was last heard.
	Tick time.Duration
	// DialOptions dial the peers, for the peer service and the forwarded
	// commits: transport credentials (TLS) and the member's own token
	// (default: plaintext, no token).
	DialOptions []grpc.DialOption
	Logger      *slog.Logger
}

// ErrStopped: the driver stopped before the request was answered.
var ErrStopped = errors.New("replica stopped")

type commitReq struct {
	tx    *txn.Txn
	reply chan commitReply
}

type commitReply struct {
	res txn.Result
	err error
}

type readReq struct {
	reply chan *txn.State
	at    time.Time
}

type waiting struct {
	p     *replica.Proposal
	reply chan commitReply
}

type joinReq struct {
	member, id uint64
	reply      chan joinReply
}

type joinReply struct {
	done bool
	err  error
}

type waitingRead struct {
	r     *replica.Read
	reply chan *txn.State
	at    time.Time
}

// Driver runs one member.
type Driver struct {
	cfg     Config
	log     *slog.Logger
	disk    *replica.Disk
	node    *replica.Node
	commits chan commitReq
	reads   chan readReq
	inbox   chan inMsg
	reports chan func(*replica.Node)
	joins   chan joinReq
	stop    chan struct{}
	done    chan struct{}
	err     error

	applied atomic.Pointer[txn.State]
	lead    atomic.Uint64
	voter   atomic.Bool
	pending atomic.Int64 // commits proposed, not yet answered
	// snapshots made, compactions, and the seconds the Applies that made a
	// snapshot took (the snapshot's encoding and write, mostly)
	snapshots, compactions atomic.Uint64
	snapNanos              atomic.Int64

	sendMu  sync.Mutex
	senders map[uint64]*sender
	hooks   Hooks

	// The cell's id and its member records as last applied (read by the
	// transport's goroutines), the records' version, and a peer's word
	// that this member was removed (its messages refused).
	incarnation uint64        // the directory's (Disk.Incarnation)
	fragments   atomic.Uint64 // messages sent in fragments
	cluster     atomic.Pointer[string]
	view        atomic.Pointer[membersView]
	viewVersion uint64
	inConfig    atomic.Bool
	refused     atomic.Pointer[string]
	learned     atomic.Pointer[map[uint64]string] // addresses a Join answer gave a joining member

	stopOnce sync.Once
	stopErr  error
}

// Hooks are told what the member applies, on the driver's goroutine (a
// store publishing to its watchers): OnApply each committed write set with
// the state it makes, in revision order, before the commit is answered;
// OnRestore a whole state — the member's at Start, and one a snapshot sent
// to it replaces everything with.
type Hooks struct {
	OnApply   func(ws *txn.WriteSet, st *txn.State)
	OnRestore func(st *txn.State)
}

// Start opens the member's directory and starts it.
func Start(cfg Config, hooks Hooks) (*Driver, error) {
	if cfg.Tick == 0 {
		cfg.Tick = 50 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	id, peers := cfg.Member.ID, cfg.Member.Peers
	if cfg.Join {
		id, peers = replica.JoinID(id, rand.Uint32()), nil
	}
	disk, err := replica.OpenDisk(cfg.Dir, id, peers)
	if err != nil {
		return nil, err
	}
	if cfg.Join && !disk.Joining() {
		cfg.Logger.Info("raft member: the directory holds a member already; --join has nothing to do", "id", disk.ID(), "dir", cfg.Dir)
	}
	cfg.Member.ID = disk.ID() // the directory's: a member that joined has an id of its own
	cluster := cfg.Cluster
	switch {
	case disk.Cell() != "":
		if disk.Cell() != cluster {
			cfg.Logger.Info("raft member: the directory records the cell's id; its --peers would make another (members added or removed since it was made): the recorded one is the cell's", "cluster", disk.Cell(), "from peers", cluster)
		}
		cluster = disk.Cell()
	case !disk.Joining():
		if err := disk.RecordCell(cluster); err != nil {
			disk.Close()
			return nil, err
		}
	}
	cfg.Member.Addrs = cfg.Addrs
	d := &Driver{
		cfg: cfg, log: cfg.Logger, disk: disk,
		commits: make(chan commitReq), reads: make(chan readReq), inbox: make(chan inMsg, 4096),
		reports: make(chan func(*replica.Node), 1024), joins: make(chan joinReq), stop: make(chan struct{}), done: make(chan struct{}),
		senders: map[uint64]*sender{}, hooks: hooks,
	}
	d.incarnation = disk.Incarnation()
	mc := cfg.Member
	mc.Disk = disk
	mc.Incarnation = disk.Incarnation()
	mc.OnApply = func(ws *txn.WriteSet) {
		if d.hooks.OnApply != nil {
			d.hooks.OnApply(ws, d.node.Applied())
		}
	}
	mc.OnRestore = hooks.OnRestore
	d.node, err = replica.New(mc, disk.Storage())
	if err != nil {
		disk.Close()
		return nil, err
	}
	d.cluster.Store(&cluster)
	d.applied.Store(d.node.Applied())
	d.voter.Store(d.node.Voter())
	d.inConfig.Store(d.node.InConfig())
	d.refreshView()
	if hooks.OnRestore != nil {
		hooks.OnRestore(d.node.Applied())
	}
	go d.run()
	if !d.node.InConfig() && disk.Joining() {
		go d.join()
	}
	return d, nil
}

// Stop stops the member (its disk closed, every request waiting answered
// ErrStopped or ErrOutcomeUnknown) and returns why it stopped if it had
// failed.
func (d *Driver) Stop() error {
	d.stopOnce.Do(func() {
		close(d.stop)
		<-d.done
		d.sendMu.Lock()
		for _, s := range d.senders {
			s.close()
		}
		d.sendMu.Unlock()
		d.stopErr = errors.Join(d.err, d.disk.Close())
	})
	return d.stopErr
}

// Applied is the member's applied state.
func (d *Driver) Applied() *txn.State { return d.applied.Load() }

// Leader is the member number of the member this one believes leads (0:
// none known).
func (d *Driver) Leader() uint64 { return replica.MemberOf(d.lead.Load()) }

// Leads: this member leads (as far as it knows).
func (d *Driver) Leads() bool { return d.lead.Load() == d.cfg.Member.ID }

// ID is this member's raft id (its member number, or the id it joined
// under).
func (d *Driver) ID() uint64 { return d.cfg.Member.ID }

// Voter: this member is a voter of the configuration it has applied (a
// joining member becomes one with the leader's snapshot).
func (d *Driver) Voter() bool { return d.voter.Load() }

// Done is closed when the member has stopped (Stop, or a failure: Err).
func (d *Driver) Done() <-chan struct{} { return d.done }

// Err is why the member stopped by itself (nil before it stopped, or when
// Stop stopped it).
func (d *Driver) Err() error {
	select {
	case <-d.done:
		return d.err
	default:
		return nil
	}
}

// Join asks this member, if it leads, to make id member's (replica's
// Node.Replace): done once it is.
func (d *Driver) Join(ctx context.Context, member, id uint64) (bool, error) {
	req := joinReq{member: member, id: id, reply: make(chan joinReply, 1)}
	select {
	case d.joins <- req:
	case <-d.done:
		return false, ErrStopped
	case <-ctx.Done():
		return false, ctx.Err()
	}
	select {
	case r := <-req.reply:
		return r.done, r.err
	case <-d.done:
		return false, ErrStopped
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// Commit commits tx through this member if it leads (replica's errors
// otherwise: ErrNotLeader naming the leader, ErrNotReady), returning once
// its write set is committed and applied.
func (d *Driver) Commit(ctx context.Context, tx *txn.Txn) (txn.Result, error) {
	req := commitReq{tx: tx, reply: make(chan commitReply, 1)}
	select {
	case d.commits <- req:
	case <-d.done:
		return txn.Result{}, ErrStopped
	case <-ctx.Done():
		return txn.Result{}, ctx.Err()
	}
	select {
	case r := <-req.reply:
		return r.res, r.err
	case <-d.done:
		return txn.Result{}, replica.ErrOutcomeUnknown
	case <-ctx.Done():
		return txn.Result{}, fmt.Errorf("%w: %v", replica.ErrOutcomeUnknown, ctx.Err())
	}
}

// Read returns the state at a linearizable point: after everything
// committed before the call.
func (d *Driver) Read(ctx context.Context) (*txn.State, error) {
	req := readReq{reply: make(chan *txn.State, 1), at: time.Now()}
	select {
	case d.reads <- req:
	case <-d.done:
		return nil, ErrStopped
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case st := <-req.reply:
		return st, nil
	case <-d.done:
		return nil, ErrStopped
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (d *Driver) run() {
	defer close(d.done)
	t := time.NewTicker(d.cfg.Tick)
	defer t.Stop()
	var props []waiting
	var reads []waitingRead
	defer func() {
		for _, w := range props {
			w.reply <- commitReply{err: replica.ErrOutcomeUnknown}
		}
	}()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
			d.node.Tick()
		case m := <-d.inbox:
			if d.step(m) {
				return
			}
		case f := <-d.reports:
			f(d.node)
		case req := <-d.commits:
			props = d.commit(req, props)
		case req := <-d.joins:
			done, err := d.node.Replace(req.member, req.id)
			req.reply <- joinReply{done, err}
		case req := <-d.reads:
			reads = append(reads, waitingRead{r: d.node.ReadIndex(), reply: req.reply, at: req.at})
		}
		// Take in everything else already waiting, so one Process (one
		// sync) serves them all: a group commit.
	drain:
		for range 1024 {
			select {
			case m := <-d.inbox:
				if d.step(m) {
					return
				}
			case req := <-d.commits:
				props = d.commit(req, props)
			case f := <-d.reports:
				f(d.node)
			default:
				break drain
			}
		}
		// A leader's messages go out before its disk write (as etcd's);
		// anyone else's once persisted. Then the committed entries are
		// applied: a follower's acknowledgement waits for its disk, not
		// for what it applies.
		out, err := d.node.PersistSending(d.send)
		if err == nil {
			d.send(out)
			before, start := d.node.Snapshots(), time.Now()
			err = d.node.Apply()
			if n := d.node.Snapshots(); n != before {
				d.snapNanos.Add(int64(time.Since(start)))
				d.snapshots.Store(n)
				d.compactions.Store(d.node.Compactions())
			}
		}
		if r := d.refused.Load(); err == nil && r != nil && strings.HasPrefix(*r, lostPrefix) {
			err = fmt.Errorf("%w: a member refused its messages: %s", replica.ErrLostLog, *r)
		}
		if err == nil && (d.node.Removed() || d.refused.Load() != nil) {
			why := "it applied its removal"
			if r := d.refused.Load(); r != nil {
				why = "a member refused its messages: " + *r
			}
			err = fmt.Errorf("member %d (raft id %d) was %w (%s): it stops serving", replica.MemberOf(d.cfg.Member.ID), d.cfg.Member.ID, replica.ErrRemoved, why)
		}
		if err != nil {
			d.err = err
			if errors.Is(err, replica.ErrRemoved) {
				d.log.Info("replica stopped", "member", d.cfg.Member.ID, "why", err)
			} else {
				d.log.Error("replica stopped", "member", d.cfg.Member.ID, "err", err)
			}
			return
		}
		d.applied.Store(d.node.Applied())
		d.voter.Store(d.node.Voter())
		d.inConfig.Store(d.node.InConfig())
		d.refreshView()
		lead, _ := d.node.Leader()
		d.lead.Store(lead)
		keep := props[:0]
		for _, w := range props {
			if !w.p.Done {
				keep = append(keep, w)
				continue
			}
			if w.p.Err != nil {
				w.reply <- commitReply{err: w.p.Err}
			} else {
				w.reply <- commitReply{res: w.p.Result}
			}
		}
		props = keep
		d.pending.Store(int64(len(props)))
		keepR := reads[:0]
		for _, w := range reads {
			switch {
			case w.r.Done:
				w.reply <- w.r.State
			case time.Since(w.at) > time.Minute: // never confirmed: the caller gave up long ago
			default:
				keepR = append(keepR, w)
			}
		}
		reads = keepR
	}
}

// step hands the member a peer's message; true when the member must stop
// (it lost entries it had acknowledged: replica.ErrLostLog). Any other
// error is a stale message, raft's to ignore. A message from another
// incarnation than the cell recorded for its sender is dropped (the
// transport refused its stream already, or will).
func (d *Driver) step(in inMsg) bool {
	m := in.m
	if d.node.Heard(m.GetFrom(), in.inc) != nil {
		return false
	}
	err := d.node.Step(m)
	if errors.Is(err, replica.ErrLostLog) {
		d.err = err
		d.log.Error("replica stopped", "member", replica.MemberOf(d.cfg.Member.ID), "err", err)
		return true
	}
	return false
}

// commit proposes a commit request, answering it at once when nothing is
// proposed (an error, or nothing to commit), else adding it to props.
func (d *Driver) commit(req commitReq, props []waiting) []waiting {
	p, res, err := d.node.Commit(req.tx)
	if err != nil || p == nil {
		req.reply <- commitReply{res: res, err: err}
		return props
	}
	return append(props, waiting{p: p, reply: req.reply})
}

// report hands the member a transport's word (snapshot sent, peer
// unreachable) on its own goroutine.
func (d *Driver) report(f func(*replica.Node)) {
	select {
	case d.reports <- f:
	default: // the member is flooded with reports: raft will probe again
	}
}
