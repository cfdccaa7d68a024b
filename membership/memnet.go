package membership

import (
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// MemNetwork is an in-memory network for tests of the membership:
// memberlist's MockNetwork, whose messages go through channels, with a
// queue in front of each member. MockNetwork's channels have no buffer,
// and memberlist answers a ping from the goroutine that reads its
// packets: two members pinging each other would each wait for the other
// to read (for as long as some timeout elsewhere takes to break it), and
// a member shut down would hold its senders forever. Here a member's
// packets wait in a queue of its own (a full queue drops them, as UDP
// may), and connections to a member gone are closed.
//
// Every member's transport is made by NewMemNetwork, before the first
// member starts: MockNetwork's routing tables have no lock.
type MemNetwork struct {
	mock       memberlist.MockNetwork
	transports map[string]*memTransport
	stop       chan struct{}
	once       sync.Once
	pumps      sync.WaitGroup
}

// memQueue is how many packets, and how many connections, wait for a
// member.
const memQueue = 1024

// NewMemNetwork makes the transports of the members named, each at an
// address of its own (127.0.0.1:1, :2, ...). The network runs a goroutine
// per member until Close.
func NewMemNetwork(names ...string) *MemNetwork {
	n := &MemNetwork{transports: map[string]*memTransport{}, stop: make(chan struct{})}
	for _, name := range names {
		if _, dup := n.transports[name]; dup {
			panic(fmt.Sprintf("membership.NewMemNetwork: %q twice", name))
		}
		t := &memTransport{MockTransport: n.mock.NewTransport(name), packets: make(chan *memberlist.Packet, memQueue), streams: make(chan net.Conn, memQueue), down: make(chan struct{})}
		n.transports[name] = t
		n.pumps.Add(1)
		go n.pump(t)
	}
	return n
}

// Transport is the transport of the member name, for Config.Transport (or
// memberlist.Config.Transport); the member's node name must be name. It
// panics for a name NewMemNetwork was not given.
func (n *MemNetwork) Transport(name string) memberlist.Transport {
	t, ok := n.transports[name]
	if !ok {
		panic(fmt.Sprintf("membership.MemNetwork: no transport %q (name every member in NewMemNetwork)", name))
	}
	return t
}

// Close stops the network's goroutines, once its members are shut down
// (a member still running would find its packets no longer delivered).
func (n *MemNetwork) Close() {
	n.once.Do(func() { close(n.stop) })
	n.pumps.Wait()
}

func (n *MemNetwork) pump(t *memTransport) {
	defer n.pumps.Done()
	for {
		down := t.down
		if t.downSeen {
			down = nil
		}
		select {
		case p := <-t.MockTransport.PacketCh():
			select {
			case t.packets <- p:
			default: // lost, as a datagram may be
			}
		case c := <-t.MockTransport.StreamCh():
			select {
			case <-t.down:
				c.Close() // refused: the member is gone
				continue
			default:
			}
			select {
			case t.streams <- c:
			default:
				c.Close()
			}
		case <-down:
			// Refuse the connections that were waiting, and from now on
			// each as it comes (above); packets wait until the queue is
			// full, then are lost.
			for drained := false; !drained; {
				select {
				case c := <-t.streams:
					c.Close()
				default:
					drained = true
				}
			}
			t.downSeen = true
		case <-n.stop:
			return
		}
	}
}

// memTransport is a MockTransport read through its queues.
type memTransport struct {
	*memberlist.MockTransport
	packets chan *memberlist.Packet
	streams chan net.Conn
	// down is closed when memberlist shuts the member down; downSeen is
	// the pump's (only).
	down     chan struct{}
	once     sync.Once
	downSeen bool
}

func (t *memTransport) PacketCh() <-chan *memberlist.Packet { return t.packets }
func (t *memTransport) StreamCh() <-chan net.Conn           { return t.streams }

// Shutdown is memberlist's, when its member shuts down: connections to
// the member are refused from then on (closed), as a closed port's would.
func (t *memTransport) Shutdown() error {
	t.once.Do(func() { close(t.down) })
	return nil
}

// Fast shortens memberlist's intervals for a test on a MemNetwork (as
// Config.Tune): members exchange their whole state every 100 ms, so news
// gossip did not carry to a member (memberlist retransmits it a bounded
// number of times) reaches it at once rather than at the next push-pull,
// 15 s or more on; failures are detected within a second.
func Fast(cfg *memberlist.Config) {
	cfg.PushPullInterval = 100 * time.Millisecond
	cfg.GossipInterval = 20 * time.Millisecond
	cfg.ProbeInterval = 100 * time.Millisecond
	cfg.ProbeTimeout = 50 * time.Millisecond
	cfg.SuspicionMult = 2
}
