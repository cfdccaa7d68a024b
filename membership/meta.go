// Package membership is the cell's gossip membership in one place: who a
// member is (the metadata codec), how a member runs (memberlist's
// profiles, the gossip key) and what the components ask of it (join, the
// live instances of a scheduler kind, whether the server is alive, a
// "something changed" event delegate). Every component imports it — the
// agents, the schedulers and the server — so it links memberlist, uuid
// and the standard library only: never the store, pebble nor gRPC (a lint
// test holds it). The server's follower, which turns the membership's
// events into transactions, needs the store and stays in package server.
//
// Live code: memberlist runs goroutines of its own and reads the clock;
// the codec is pure.
package membership

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/hashicorp/memberlist"
)

// Role is what a member of the cell is.
type Role uint8

// The roles. Their numbers are on the wire: never renumber one.
const (
	// RoleAgent is a machine's agent: the server follows its machine's
	// liveness by the member's.
	RoleAgent Role = 1
	// RoleScheduler is an instance of a scheduler kind: the instances of a
	// kind share its jobs among the live ones.
	RoleScheduler Role = 2
	// RoleServer is the cell's server (the store): agents rejoin when it
	// is no longer a member.
	RoleServer Role = 3
)

func (r Role) String() string {
	switch r {
	case RoleAgent:
		return "agent"
	case RoleScheduler:
		return "scheduler"
	case RoleServer:
		return "server"
	}
	return fmt.Sprintf("role(%d)", uint8(r))
}

// Version is the metadata version Encode writes.
const Version = 1

// MaxSize is the largest metadata: memberlist's (memberlist.MetaMaxSize).
// Encode refuses to write more, and Decode to read more.
const MaxSize = memberlist.MetaMaxSize

// legacyAgentSize is the length of an agent's metadata before the codec:
// its machine's uid, raw. The v1 form is never this long, so any metadata
// of this length is a legacy agent's.
const legacyAgentSize = 16

// legacySchedulerPrefix starts a scheduler's metadata before the codec:
// "omega-scheduler\x00" kind "\x00" name.
const legacySchedulerPrefix = "omega-scheduler\x00"

// magic starts every versioned form ("Ω" in UTF-8): no legacy form starts
// with it (the legacy scheduler form starts with 'o'; a legacy agent's is
// told by its length alone).
var magic = [2]byte{0xCE, 0xA9}

// The wire form, version 1:
//
//	0-1  magic 0xCE 0xA9
//	2    version (1)
//	3    role
//	4-   the role's body:
//	     agent      the machine's uid, 16 bytes (20 in all)
//	     scheduler  uvarint len(kind), kind, uvarint len(instance), instance,
//	                then one zero byte if, and only if, the whole would
//	                otherwise be 16 bytes long
//	     server     nothing (4 in all)
//
// An encoding is never 16 bytes long, so that 16 bytes always mean a
// legacy agent (whose uid may be any 16 bytes) and a server of before the
// codec, which reads any 16 bytes as a machine's uid, never misreads a
// versioned member as a machine. Every accepted encoding is the one
// Encode writes for what it decodes to (no trailing bytes, minimal
// uvarints), so the form is canonical.
const headerSize = 4

// The decoding errors, for errors.Is. Decode wraps one of them with what
// it found.
var (
	// ErrNoMeta: the member has no metadata. Before the codec the server
	// had none (it is told by its name, ServerName); a member of another
	// program might not either.
	ErrNoMeta = errors.New("no member metadata")
	// ErrTruncated: the metadata ends before its form does.
	ErrTruncated = errors.New("member metadata truncated")
	// ErrOversized: the metadata is longer than MaxSize (Decode), or a
	// member's would be (Encode).
	ErrOversized = errors.New("member metadata oversized")
	// ErrUnknownVersion: a versioned form of a version this code does not
	// read (a newer member), or bytes that are no form at all.
	ErrUnknownVersion = errors.New("member metadata of an unknown version")
	// ErrUnknownRole: a known version naming a role this code does not
	// know.
	ErrUnknownRole = errors.New("member metadata of an unknown role")
	// ErrInvalid: the form is known but its content is not a member's (a
	// nil machine uid, an empty kind or instance, trailing bytes); Encode
	// refuses such a Meta with it too.
	ErrInvalid = errors.New("invalid member metadata")
)

// Meta is who a member is: its role and what names it in that role. Build
// one with Agent, Scheduler or Server.
type Meta struct {
	Role Role
	// Machine is an agent's machine uid (RoleAgent only; never uuid.Nil).
	Machine uuid.UUID
	// Kind and Instance name a scheduler instance (RoleScheduler only;
	// neither empty).
	Kind, Instance string
	// Legacy is set by Decode when the metadata was of a form before the
	// codec (a member not upgraded yet). Encode ignores it: it always
	// writes the current version.
	Legacy bool
}

// Agent is the metadata of the agent of machine u.
func Agent(u uuid.UUID) Meta { return Meta{Role: RoleAgent, Machine: u} }

// Scheduler is the metadata of the instance of a scheduler kind.
func Scheduler(kind, instance string) Meta {
	return Meta{Role: RoleScheduler, Kind: kind, Instance: instance}
}

// Server is the server's metadata.
func Server() Meta { return Meta{Role: RoleServer} }

func (m Meta) String() string {
	var s string
	switch m.Role {
	case RoleAgent:
		s = "agent of machine " + m.Machine.String()
	case RoleScheduler:
		s = fmt.Sprintf("scheduler %s/%s", quote(m.Kind), quote(m.Instance))
	default:
		s = m.Role.String()
	}
	if m.Legacy {
		s += " (legacy form)"
	}
	return s
}

// quote quotes at most 64 bytes of s.
func quote(s string) string {
	if len(s) > 64 {
		return fmt.Sprintf("%q...", s[:64])
	}
	return fmt.Sprintf("%q", s)
}

// Encode writes m in the current version. It fails with ErrInvalid for a
// Meta that is no member's (an unknown role, a nil machine, an empty kind
// or instance) and ErrOversized for one longer than MaxSize. The returned
// slice is the caller's.
func (m Meta) Encode() ([]byte, error) {
	b := append(make([]byte, 0, 32), magic[0], magic[1], Version, byte(m.Role))
	switch m.Role {
	case RoleAgent:
		if m.Machine == uuid.Nil {
			return nil, fmt.Errorf("encode %v: %w: the nil uid", m, ErrInvalid)
		}
		b = append(b, m.Machine[:]...)
	case RoleScheduler:
		if m.Kind == "" || m.Instance == "" {
			return nil, fmt.Errorf("encode %v: %w: a scheduler needs a kind and an instance name", m, ErrInvalid)
		}
		b = binary.AppendUvarint(b, uint64(len(m.Kind)))
		b = append(b, m.Kind...)
		b = binary.AppendUvarint(b, uint64(len(m.Instance)))
		b = append(b, m.Instance...)
		if len(b) == legacyAgentSize {
			b = append(b, 0)
		}
	case RoleServer:
	default:
		return nil, fmt.Errorf("encode %v: %w: unknown role", m, ErrInvalid)
	}
	if len(b) > MaxSize {
		return nil, fmt.Errorf("encode %v: %w: %d bytes, at most %d", m, ErrOversized, len(b), MaxSize)
	}
	return b, nil
}

// Decode reads a member's metadata: the current version, and the forms
// before the codec (16 bytes: an agent's machine uid; "omega-scheduler\x00"
// kind "\x00" name: a scheduler), which it reads as what they were, with
// Legacy set. Its errors wrap ErrNoMeta, ErrTruncated, ErrOversized,
// ErrUnknownVersion, ErrUnknownRole or ErrInvalid. It keeps no reference
// to b.
func Decode(b []byte) (Meta, error) {
	switch {
	case len(b) == 0:
		return Meta{}, ErrNoMeta
	case len(b) > MaxSize:
		return Meta{}, fmt.Errorf("%w: %d bytes, at most %d", ErrOversized, len(b), MaxSize)
	case len(b) == legacyAgentSize:
		u := uuid.UUID(b)
		if u == uuid.Nil {
			return Meta{}, fmt.Errorf("%w: a legacy agent's nil machine uid", ErrInvalid)
		}
		return Meta{Role: RoleAgent, Machine: u, Legacy: true}, nil
	case bytes.HasPrefix(b, []byte(legacySchedulerPrefix)):
		kind, name, ok := bytes.Cut(b[len(legacySchedulerPrefix):], []byte{0})
		if !ok || len(kind) == 0 || len(name) == 0 {
			return Meta{}, fmt.Errorf("%w: a legacy scheduler's %q: want kind NUL name", ErrInvalid, clip(b))
		}
		return Meta{Role: RoleScheduler, Kind: string(kind), Instance: string(name), Legacy: true}, nil
	case !bytes.HasPrefix(b, magic[:min(len(b), len(magic))]):
		return Meta{}, fmt.Errorf("%w: %q is neither the versioned form nor a legacy one", ErrUnknownVersion, clip(b))
	case len(b) < headerSize:
		return Meta{}, fmt.Errorf("%w: %d bytes, the header is %d", ErrTruncated, len(b), headerSize)
	case b[2] != Version:
		return Meta{}, fmt.Errorf("%w: version %d, this code reads %d", ErrUnknownVersion, b[2], Version)
	}
	m := Meta{Role: Role(b[3])}
	body := b[headerSize:]
	switch m.Role {
	case RoleAgent:
		if len(body) < len(m.Machine) {
			return Meta{}, fmt.Errorf("%w: an agent's uid of %d bytes, want 16", ErrTruncated, len(body))
		}
		copy(m.Machine[:], body)
		if m.Machine == uuid.Nil {
			return Meta{}, fmt.Errorf("%w: an agent's nil machine uid", ErrInvalid)
		}
		body = body[len(m.Machine):]
	case RoleScheduler:
		var err error
		if m.Kind, body, err = str(body, "kind"); err != nil {
			return Meta{}, err
		}
		if m.Instance, body, err = str(body, "instance"); err != nil {
			return Meta{}, err
		}
		if len(b) == legacyAgentSize+1 && len(body) == 1 && body[0] == 0 {
			body = nil // the padding
		}
	case RoleServer:
	default:
		return Meta{}, fmt.Errorf("%w: %d", ErrUnknownRole, b[3])
	}
	if len(body) > 0 {
		return Meta{}, fmt.Errorf("%w: %d trailing bytes after a %v's", ErrInvalid, len(body), m.Role)
	}
	return m, nil
}

// str reads a scheduler's uvarint-prefixed, non-empty string.
func str(b []byte, what string) (string, []byte, error) {
	n, k := binary.Uvarint(b)
	switch {
	case k == 0:
		return "", nil, fmt.Errorf("%w: a scheduler's %s length", ErrTruncated, what)
	case k < 0 || k != uvarintLen(n):
		return "", nil, fmt.Errorf("%w: a scheduler's %s length is not a minimal uvarint", ErrInvalid, what)
	case n == 0:
		return "", nil, fmt.Errorf("%w: a scheduler's empty %s", ErrInvalid, what)
	case n > uint64(len(b)-k):
		return "", nil, fmt.Errorf("%w: a scheduler's %s of %d bytes, %d left", ErrTruncated, what, n, len(b)-k)
	}
	return string(b[k : k+int(n)]), b[k+int(n):], nil
}

func uvarintLen(n uint64) int { return len(binary.AppendUvarint(nil, n)) }

// clip is at most 64 bytes of b, for an error.
func clip(b []byte) []byte { return b[:min(len(b), 64)] }
