package agents

import (
	"fmt"
	"net/netip"

	"github.com/google/uuid"
)

// AddressPool hands out the IP addresses of an agent's task range, one per
// running task (the Borg lesson: an IP per task, not a port per task, so
// several copies of a server can listen on the same well-known port on one
// host). It hands them out cyclically — after the last one given, not the
// lowest free — so an address let go is reused as late as possible (a
// stopped task may still be in its grace period). Decision code: no clock,
// no goroutine.
type AddressPool struct {
	prefix      netip.Prefix
	first, last netip.Addr
	next        netip.Addr
	used        map[netip.Addr]bool
	size        int
}

// NewAddressPool makes a pool over prefix. In an IPv4 range of more than
// two addresses the network and broadcast addresses are left out.
func NewAddressPool(prefix netip.Prefix) (*AddressPool, error) {
	if !prefix.IsValid() {
		return nil, fmt.Errorf("task range %v: not a CIDR range", prefix)
	}
	prefix = prefix.Masked()
	bits := prefix.Addr().BitLen() - prefix.Bits()
	if bits > 24 {
		return nil, fmt.Errorf("task range %v: at most 2^24 addresses (a /8 of IPv4, a /104 of IPv6)", prefix)
	}
	first, size := prefix.Addr(), 1<<bits
	last := first
	for range size - 1 {
		last = last.Next()
	}
	if prefix.Addr().Is4() && size > 2 {
		first, last, size = first.Next(), last.Prev(), size-2
	}
	return &AddressPool{prefix: prefix, first: first, last: last, next: first, used: map[netip.Addr]bool{}, size: size}, nil
}

// DefaultTaskPrefix is an agent's task range when none is configured: a /24
// of the loopback 127.0.0.0/8 picked by the machine's uid (127.A.B.0/24,
// A from 1 to 254), which on Linux every process can bind without any
// configuration, so the agents on one host get distinct blocks (two of
// them share one with a chance of about 1 in 65,000).
func DefaultTaskPrefix(machine uuid.UUID) netip.Prefix {
	a := 1 + machine[0]%254
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{127, a, machine[1], 0}), 24)
}

// Prefix is the pool's range.
func (p *AddressPool) Prefix() netip.Prefix { return p.prefix }

// Take hands out the next free address; ok is false when all are held.
func (p *AddressPool) Take() (a netip.Addr, ok bool) {
	if len(p.used) >= p.size {
		return netip.Addr{}, false
	}
	for {
		a = p.next
		if p.next == p.last {
			p.next = p.first
		} else {
			p.next = p.next.Next()
		}
		if !p.used[a] {
			p.used[a] = true
			return a, true
		}
	}
}

// Reserve holds a given address (a task adopted after a restart keeps its
// own); false if it is outside the range or already held.
func (p *AddressPool) Reserve(a netip.Addr) bool {
	if !p.contains(a) || p.used[a] {
		return false
	}
	p.used[a] = true
	return true
}

func (p *AddressPool) contains(a netip.Addr) bool {
	return p.prefix.Contains(a) && a.Compare(p.first) >= 0 && a.Compare(p.last) <= 0
}

// Release lets an address go.
func (p *AddressPool) Release(a netip.Addr) { delete(p.used, a) }

// Held is how many addresses are held.
func (p *AddressPool) Held() int { return len(p.used) }
