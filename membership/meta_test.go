package membership

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"
)

var machine = uuid.MustParse("6ba7b810-9dad-41d1-80b4-00c04fd430c8")

func mustEncode(t testing.TB, m Meta) []byte {
	t.Helper()
	b, err := m.Encode()
	if err != nil {
		t.Fatalf("encode %v: %v", m, err)
	}
	return b
}

// Each role round-trips, and its encoding is never 16 bytes long (what a
// legacy agent's is, and what a server of before the codec reads as a
// machine): scheduler names of every length around it included.
func TestMetaRoundTrip(t *testing.T) {
	metas := []Meta{Agent(machine), Server(), Scheduler("batch", "batch-0"), Scheduler(strings.Repeat("k", 200), strings.Repeat("i", 300))}
	for k := 1; k < 20; k++ {
		for i := 1; i < 20; i++ {
			metas = append(metas, Scheduler(strings.Repeat("k", k), strings.Repeat("i", i)))
		}
	}
	padded := 0
	for _, m := range metas {
		b := mustEncode(t, m)
		if len(b) == legacyAgentSize {
			t.Fatalf("%v encodes in %d bytes: a server of before the codec would read it as a machine", m, len(b))
		}
		if len(b) == legacyAgentSize+1 && b[len(b)-1] == 0 {
			padded++
		}
		got, err := Decode(b)
		if err != nil || got != m {
			t.Fatalf("decode(encode(%v)) = %v, %v", m, got, err)
		}
	}
	if padded == 0 {
		t.Fatal("no scheduler's encoding needed the padding: the lengths tried miss the 16-byte case")
	}
	if b := mustEncode(t, Agent(machine)); len(b) != 20 || !bytes.Equal(b[4:], machine[:]) {
		t.Fatalf("an agent's encoding %x: want the header and its uid", b)
	}
}

// A cell being upgraded holds members of before the codec: an agent whose
// metadata is its machine's 16 raw bytes, a scheduler's
// "omega-scheduler\x00" kind "\x00" name. They decode as what they were,
// marked Legacy; any 16 bytes are an agent's, even bytes that begin as
// the versioned form does.
func TestMetaLegacyForms(t *testing.T) {
	looksVersioned := append(append([]byte{}, magic[0], magic[1], Version, byte(RoleServer)), make([]byte, 12)...)
	looksVersioned[15] = 1
	for _, c := range []struct {
		b    []byte
		want Meta
	}{
		{machine[:], Meta{Role: RoleAgent, Machine: machine, Legacy: true}},
		{looksVersioned, Meta{Role: RoleAgent, Machine: uuid.UUID(looksVersioned), Legacy: true}},
		{[]byte("omega-scheduler\x00batch\x00batch-0"), Meta{Role: RoleScheduler, Kind: "batch", Instance: "batch-0", Legacy: true}},
		{[]byte("omega-scheduler\x00b\x00n\x00x"), Meta{Role: RoleScheduler, Kind: "b", Instance: "n\x00x", Legacy: true}},
	} {
		got, err := Decode(c.b)
		if err != nil || got != c.want {
			t.Errorf("decode %q = %v, %v; want %v", c.b, got, err, c.want)
		}
	}
	// Re-encoded, a legacy member is written in the current version.
	m, _ := Decode([]byte("omega-scheduler\x00batch\x00batch-0"))
	if b := mustEncode(t, m); !bytes.HasPrefix(b, magic[:]) {
		t.Fatalf("a legacy scheduler re-encoded: %q", b)
	}
}

// Each malformed input fails with its typed error, and says what it found.
func TestMetaDecodeErrors(t *testing.T) {
	header := func(version, role byte, body ...byte) []byte {
		return append([]byte{magic[0], magic[1], version, role}, body...)
	}
	sched := mustEncode(t, Scheduler("batch", "batch-0"))
	padded := mustEncode(t, Scheduler("k", "instance1")) // 4+1+1+1+9 = 16: padded to 17
	if len(padded) != 17 || padded[16] != 0 {
		t.Fatalf("the padded case is %d bytes", len(padded))
	}
	for _, c := range []struct {
		name string
		b    []byte
		want error
		says string
	}{
		{"empty", nil, ErrNoMeta, ""},
		{"oversized", make([]byte, MaxSize+1), ErrOversized, "513 bytes"},
		{"legacy nil agent", make([]byte, 16), ErrInvalid, "nil"},
		{"legacy scheduler without instance", []byte("omega-scheduler\x00batch"), ErrInvalid, "legacy scheduler"},
		{"legacy scheduler, empty kind", []byte("omega-scheduler\x00\x00x"), ErrInvalid, "legacy scheduler"},
		{"no form", []byte("hello, world"), ErrUnknownVersion, "neither"},
		{"magic's first byte", []byte{magic[0]}, ErrTruncated, "header"},
		{"header cut", header(1, 1)[:3], ErrTruncated, "header"},
		{"version 2", header(2, 1, machine[:]...), ErrUnknownVersion, "version 2"},
		{"version 0", header(0, 1, machine[:]...), ErrUnknownVersion, "version 0"},
		{"role 0", header(1, 0), ErrUnknownRole, "0"},
		{"role 9", header(1, 9, 1, 2, 3), ErrUnknownRole, "9"},
		{"agent's uid cut", header(1, 1, machine[:15]...), ErrTruncated, "15 bytes"},
		{"agent's nil uid", header(1, 1, make([]byte, 16)...), ErrInvalid, "nil"},
		{"agent trailing", header(1, 1, append(machine[:], 0)...), ErrInvalid, "trailing"},
		{"server trailing", header(1, 3, 0, 0), ErrInvalid, "trailing"},
		{"scheduler no kind length", header(1, 2), ErrTruncated, "kind length"},
		{"scheduler kind cut", header(1, 2, 5, 'b', 'a'), ErrTruncated, "kind of 5 bytes"},
		{"scheduler empty kind", header(1, 2, 0, 1, 'x'), ErrInvalid, "empty kind"},
		{"scheduler no instance", header(1, 2, 1, 'b'), ErrTruncated, "instance length"},
		{"scheduler empty instance", header(1, 2, 1, 'b', 0), ErrInvalid, "empty instance"},
		{"scheduler non-minimal length", header(1, 2, 0x81, 0x00, 'b', 1, 'x'), ErrInvalid, "minimal"},
		{"scheduler overlong length", header(1, 2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01), ErrInvalid, "minimal"},
		{"scheduler trailing", append(sched, 0), ErrInvalid, "trailing"},
		{"padding where none is due", append(mustEncode(t, Scheduler("k", "instance1234")), 0), ErrInvalid, "trailing"},
		{"padding not zero", append(padded[:16:16], 1), ErrInvalid, "trailing"},
	} {
		_, err := Decode(c.b)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: decode %q: %v, want %v saying %q", c.name, c.b, err, c.want, c.says)
		}
	}
}

func TestMetaEncodeRefuses(t *testing.T) {
	for _, c := range []struct {
		m    Meta
		want error
	}{
		{Meta{}, ErrInvalid},
		{Meta{Role: 7}, ErrInvalid},
		{Agent(uuid.Nil), ErrInvalid},
		{Scheduler("", "x"), ErrInvalid},
		{Scheduler("batch", ""), ErrInvalid},
		{Scheduler("batch", strings.Repeat("x", MaxSize)), ErrOversized},
	} {
		if b, err := c.m.Encode(); !errors.Is(err, c.want) {
			t.Errorf("encode %v: %x, %v; want %v", c.m, b, err, c.want)
		}
	}
	// An error quotes at most 64 bytes of a name.
	_, err := Scheduler("batch", strings.Repeat("x", MaxSize)).Encode()
	if strings.Count(err.Error(), "x") > 70 {
		t.Fatalf("the error quotes the whole name: %v", err)
	}
}

// FuzzDecode: whatever a member gossips, Decode does not panic; what it
// accepts in the versioned form is exactly what Encode writes for it
// (one encoding per member), a legacy form re-encodes in the current one
// and decodes to the same member, and no encoding is 16 bytes.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(nil))
	f.Add(machine[:])
	f.Add([]byte("omega-scheduler\x00batch\x00batch-0"))
	for _, m := range []Meta{Agent(machine), Server(), Scheduler("batch", "batch-0"), Scheduler("k", "instance1")} {
		f.Add(mustEncode(f, m))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			return
		}
		enc, err := m.Encode()
		if err != nil {
			t.Fatalf("decoded %q as %v, which does not encode: %v", b, m, err)
		}
		if len(enc) == legacyAgentSize || len(enc) > MaxSize {
			t.Fatalf("%v encodes in %d bytes", m, len(enc))
		}
		if !m.Legacy && !bytes.Equal(enc, b) {
			t.Fatalf("decoded %q as %v, which encodes as %q", b, m, enc)
		}
		again, err := Decode(enc)
		want := m
		want.Legacy = false
		if err != nil || again != want {
			t.Fatalf("%q -> %v -> %q -> %v, %v", b, m, enc, again, err)
		}
	})
}
