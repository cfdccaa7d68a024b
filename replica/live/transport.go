package live

// The member's transport: its raft messages to each peer over one gRPC
// stream (batched, fragmented when large, dropped with raft told when a
// peer cannot take them) and the peer service's end that receives them.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/omega-cell/omega/api/omega/v1/cellgrpc"
	"github.com/omega-cell/omega/replica"
	"github.com/omega-cell/omega/txn"
)

// send hands each message to its peer's sender.
func (d *Driver) send(msgs []*raftpb.Message) {
	for _, m := range msgs {
		s := d.sender(m.GetTo())
		if s == nil {
			continue
		}
		// Encoded here, at once: raft reuses the arrays its messages point
		// into (a MsgApp's entries alias its unstable log), and the sender
		// sends later on a goroutine of its own. When the sender encoded
		// the message itself, a follower was sent another entry's data
		// under an index (TestReplicatedLeaderStopped found one applying
		// revision 35 at 74, which it refused). Encoding here is the one
		// copy a clone would have made.
		b, err := proto.Marshal(m)
		if err != nil {
			d.log.Error("encode a raft message", "to", m.GetTo(), "type", m.GetType().String(), "err", err)
			continue
		}
		snap := m.GetType() == raftpb.MsgSnap
		if len(b) <= FragmentBytes {
			s.push(wireMsg{b: b, snap: snap})
			continue
		}
		// Too large for one gRPC message: in fragments, all queued or
		// none (a fragment dropped would spoil the rest).
		var frags []wireMsg
		for off := 0; off < len(b); off += FragmentBytes {
			end := min(off+FragmentBytes, len(b))
			frags = append(frags, wireMsg{b: b[off:end], frag: true, offset: uint64(off), total: uint64(len(b)), snap: snap && end == len(b)})
		}
		s.pushAll(frags, snap)
		d.fragments.Add(1)
	}
}

// FragmentBytes is the largest raft message sent whole; a larger one (a
// snapshot of a large cell, an entry near the transaction limit) goes in
// fragments of this size. A variable for tests.
var FragmentBytes = 4 << 20

// MaxMessageBytes bounds a message put together from fragments: a larger
// total is refused (a hostile or broken peer).
const MaxMessageBytes = 4 << 30

func (d *Driver) sender(to uint64) *sender {
	d.sendMu.Lock()
	defer d.sendMu.Unlock()
	if s, ok := d.senders[to]; ok {
		return s
	}
	addr, ok := d.addr(replica.MemberOf(to))
	if !ok {
		return nil
	}
	s := &sender{d: d, to: to, addr: addr, q: make(chan wireMsg, 4096), quit: make(chan struct{})}
	d.senders[to] = s
	go s.run()
	return s
}

// wireMsg is a raft message in its wire form, and whether it is a
// snapshot (whose arrival or loss the member is told); or a fragment of
// one (snap on the last).
type wireMsg struct {
	b             []byte
	snap          bool
	frag          bool
	offset, total uint64
}

// sender streams one peer's messages.
type sender struct {
	d    *Driver
	to   uint64
	addr string
	q    chan wireMsg
	quit chan struct{}
	once sync.Once
	// broken: a stream ended in the middle of a message's fragments; the
	// next stream drops the rest of them (the receiver would refuse them).
	broken bool
}

func (s *sender) push(m wireMsg) {
	select {
	case s.q <- m:
	default: // the peer is slow or away: drop, as a lossy network would
		s.d.report(func(n *replica.Node) { n.ReportUnreachable(s.to) })
		if m.snap {
			s.d.report(func(n *replica.Node) { n.ReportSnapshot(s.to, false) })
		}
	}
}

// pushAll queues a message's fragments, all of them or, when the queue
// has no room for them all, none (only the driver's goroutine pushes, so
// the room it sees stays).
func (s *sender) pushAll(frags []wireMsg, snap bool) {
	if cap(s.q)-len(s.q) < len(frags) {
		s.d.report(func(n *replica.Node) { n.ReportUnreachable(s.to) })
		if snap {
			s.d.report(func(n *replica.Node) { n.ReportSnapshot(s.to, false) })
		}
		return
	}
	for _, f := range frags {
		s.q <- f
	}
}

func (s *sender) close() { s.once.Do(func() { close(s.quit) }) }

func (s *sender) run() {
	opts := s.d.dialOptions()
	backoff := 50 * time.Millisecond
	for {
		select {
		case <-s.quit:
			return
		default:
		}
		err := s.stream(opts)
		select {
		case <-s.quit:
			return
		case <-time.After(backoff):
		}
		if err != nil {
			backoff = min(2*backoff, time.Second)
		}
	}
}

// stream opens a stream to the peer and sends its messages until an error.
func (s *sender) stream(opts []grpc.DialOption) error {
	conn, err := grpc.NewClient(s.addr, opts...)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.quit:
			cancel()
		case <-ctx.Done():
		}
	}()
	st, err := cellgrpc.NewPeerClient(conn).Send(ctx)
	if err != nil {
		return err
	}
	var held *wireMsg // taken from the queue, for the next batch
	for {
		var m wireMsg
		if held != nil {
			m, held = *held, nil
		} else {
			select {
			case m = <-s.q:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if s.broken && m.frag && m.offset != 0 {
			if m.snap { // the snapshot's last fragment: it did not arrive
				s.d.report(func(n *replica.Node) { n.ReportSnapshot(s.to, false) })
			}
			continue
		}
		s.broken = false
		batch := &cellgrpc.PeerMessages{Cluster: s.d.Cluster(), From: s.d.cfg.Member.ID, To: s.to, Incarnation: s.d.incarnation}
		snaps := 0
		if m.frag { // a fragment is a batch of its own
			batch.Fragment, batch.FragmentOffset, batch.FragmentTotal = m.b, m.offset, m.total
			if m.snap {
				snaps++
			}
		}
		for size := len(m.b); !m.frag; {
			batch.Messages = append(batch.Messages, m.b)
			if m.snap {
				snaps++
			}
			if len(batch.Messages) == 64 || size >= FragmentBytes {
				break
			}
			select {
			case m = <-s.q:
				if m.frag || size+len(m.b) > FragmentBytes {
					held = &m // it goes next, on its own or in the next batch
					break
				}
				size += len(m.b)
				continue
			default:
			}
			break
		}
		err := st.Send(batch)
		s.broken = err != nil && batch.FragmentTotal > 0 && batch.FragmentOffset+uint64(len(batch.Fragment)) < batch.FragmentTotal
		for range snaps {
			ok := err == nil
			s.d.report(func(n *replica.Node) { n.ReportSnapshot(s.to, ok) })
		}
		if err != nil {
			s.d.report(func(n *replica.Node) { n.ReportUnreachable(s.to) })
			// The peer's reason is the stream's status: a removed
			// member's messages are refused, which tells it so.
			if _, rerr := st.CloseAndRecv(); rerr != nil && (strings.HasPrefix(status.Convert(rerr).Message(), removedPrefix) || strings.HasPrefix(status.Convert(rerr).Message(), lostPrefix)) {
				msg := status.Convert(rerr).Message()
				s.d.refused.Store(&msg)
			}
			return err
		}
	}
}

// PeerServer is the member's end of the peer protocol, to register on the
// server's gRPC server.
func (d *Driver) PeerServer() cellgrpc.PeerServer { return peerServer{d: d} }

type peerServer struct {
	cellgrpc.UnimplementedPeerServer
	d *Driver
}

func (p peerServer) Send(st grpc.ClientStreamingServer[cellgrpc.PeerMessages, cellgrpc.PeerAck]) error {
	// Received on a goroutine of its own, so that the stream ends when the
	// member stops (a server's graceful stop waits for every stream).
	type recv struct {
		batch *cellgrpc.PeerMessages
		err   error
	}
	in := make(chan recv)
	quit := make(chan struct{})
	defer close(quit)
	go func() {
		for {
			b, err := st.Recv()
			select {
			case in <- recv{b, err}:
			case <-p.d.done:
				return
			case <-quit:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	var frag []byte // a message being put together from its fragments
	for {
		var r recv
		select {
		case r = <-in:
		case <-p.d.done:
			return ErrStopped
		}
		batch, err := r.batch, r.err
		if err != nil {
			return st.SendAndClose(&cellgrpc.PeerAck{})
		}
		if batch.GetCluster() != p.d.Cluster() {
			return fmt.Errorf("peer: a message of cell %s; this is cell %s", txn.Quote(batch.GetCluster()), txn.Quote(p.d.Cluster()))
		}
		if v := p.d.view.Load(); v != nil && v.removed[replica.MemberOf(batch.GetFrom())] {
			return status.Errorf(codes.FailedPrecondition, "%s: member %d (raft id %d) was removed from the cell; its messages are refused", removedPrefix, replica.MemberOf(batch.GetFrom()), batch.GetFrom())
		}
		if v := p.d.view.Load(); v != nil && batch.GetIncarnation() != 0 {
			if rec, ok := v.incs[batch.GetFrom()]; ok && rec != batch.GetIncarnation() {
				err := &replica.IncarnationError{ID: batch.GetFrom(), Recorded: rec, Got: batch.GetIncarnation()}
				return status.Errorf(codes.FailedPrecondition, "%s: %v", lostPrefix, err)
			}
		}
		if batch.GetTo() != p.d.cfg.Member.ID {
			return fmt.Errorf("peer: a message for member %d; this is member %d", batch.GetTo(), p.d.cfg.Member.ID)
		}
		msgs := batch.GetMessages()
		if total := batch.GetFragmentTotal(); total > 0 {
			switch off := batch.GetFragmentOffset(); {
			case total > MaxMessageBytes:
				return status.Errorf(codes.InvalidArgument, "peer: member %d sends a message of %d bytes in fragments; at most %d", batch.GetFrom(), total, int64(MaxMessageBytes))
			case len(msgs) > 0:
				return status.Errorf(codes.InvalidArgument, "peer: member %d sent a fragment beside whole messages", batch.GetFrom())
			case off == 0:
				frag = make([]byte, 0, total)
			case frag == nil || off != uint64(len(frag)) || total != uint64(cap(frag)):
				return status.Errorf(codes.InvalidArgument, "peer: member %d sent a fragment at %d of %d out of order (%d bytes put together)", batch.GetFrom(), off, total, len(frag))
			}
			if uint64(len(frag)+len(batch.GetFragment())) > total {
				return status.Errorf(codes.InvalidArgument, "peer: member %d's fragments overrun their total of %d bytes", batch.GetFrom(), total)
			}
			frag = append(frag, batch.GetFragment()...)
			if uint64(len(frag)) < total {
				continue
			}
			msgs, frag = [][]byte{frag}, nil
		}
		for _, b := range msgs {
			m := &raftpb.Message{}
			if err := proto.Unmarshal(b, m); err != nil {
				return fmt.Errorf("peer: a message from member %d: %v", batch.GetFrom(), err)
			}
			if m.GetFrom() != batch.GetFrom() || m.GetTo() != p.d.cfg.Member.ID {
				return fmt.Errorf("peer: member %d sent a message from %d to %d", batch.GetFrom(), m.GetFrom(), m.GetTo())
			}
			select {
			case p.d.inbox <- inMsg{m: m, inc: batch.GetIncarnation()}:
			case <-p.d.done:
				return ErrStopped
			case <-st.Context().Done():
				return st.Context().Err()
			}
		}
	}
}

// removedPrefix starts a peer's refusal of a removed member's messages,
// lostPrefix of messages from another incarnation than the cell recorded.
const (
	removedPrefix = "peer: removed"
	lostPrefix    = "peer: lost"
)
