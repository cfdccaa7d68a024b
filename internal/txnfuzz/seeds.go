package txnfuzz

import "encoding/binary"

// Seed writes inputs in the Decoder's layout.
type Seed struct{ b []byte }

// Bytes returns the input.
func (s *Seed) Bytes() []byte { return s.b }

// B appends choice bytes.
func (s *Seed) B(bs ...byte) *Seed { s.b = append(s.b, bs...); return s }

// Str appends a string of raw bytes (at most StrMax-StrRaw-1 of them).
func (s *Seed) Str(v string) *Seed {
	if len(v) >= StrMax-StrRaw {
		panic("txnfuzz: seed string too long")
	}
	s.b = append(s.b, byte(StrRaw+len(v)))
	s.b = append(s.b, v...)
	return s
}

// Raw appends a raw integer.
func (s *Seed) Raw(v int64) *Seed {
	s.b = append(s.b, IntRaw)
	s.b = binary.BigEndian.AppendUint64(s.b, uint64(v))
	return s
}

// SeedProgram is a seed with what its first transaction does on the Setup
// cell: Want is empty if every operation commits, "conflict" if it
// evaluates with a conflict, else a substring of its error.
type SeedProgram struct {
	Name, Want string
	Program    []byte
}

// SeedPrograms returns the inputs both fuzz targets start from: each bad
// input that was once found to stop the store or make it unopenable, the
// edges of every limit, and a few ordinary programs. A test holds each to
// its Want, so a change of the layout cannot quietly turn them into noise.
func SeedPrograms() []SeedProgram {
	head := func(component string) *Seed {
		return new(Seed).B(ActTxn, ViewHead, 0, 0).Str(component).B(IntZero)
	}
	const year = 365 * 24 * 3600e9
	seeds := []struct {
		name, want string
		s          *Seed
	}{
		// Strings the encoder refuses: they used to pass validation and
		// stop the store (objects), or be acknowledged and make it
		// unopenable (messages, reasons, the component).
		{"task name not UTF-8", "meta.name is not valid UTF-8", head("").B(1, OpCreate, ObjTask, 0, 8).Str("\xff")},
		{"task label not UTF-8", `meta.labels["k"] is not valid UTF-8`, head("").B(1, OpCreate, ObjTask, 0, 8).Str("ok").B(1).Str("k").Str("\xff")},
		{"failure domain not UTF-8", "spec.failure_domain is not valid UTF-8",
			head("").B(1, OpCreate, ObjMachine, 0, 3).Str("m3").B(0, 0, 0, 0, 1, IntSmall0+40, IntSmall0+40, 0).Str("\xff")},
		{"status message not UTF-8", "set-status message", head("").B(1, OpSetStatus, 1, SetFailed, 0).Str("\xff")},
		{"status message with a surrogate", "set-status message", head("").B(1, OpSetStatus, 2, SetFailed, 0, StrSurrogate)},
		{"evict reason not UTF-8", "evict reason", head("").B(1, OpEvict, 0, 0, 1).Str("\xc3")},
		{"component not UTF-8", "component is not valid UTF-8", head("\xff").B(1, OpSetStatus, 1, SetSucceeded, 0).Str("ok")},
		{"claim resource name not UTF-8", "resources.extended key",
			head("").B(1, OpClaim, 4, 0, 2, IntSmall0+4, IntSmall0+4, 1).Str("\xff").B(IntZero, 0)},
		{"task spec with unknown bytes that are no wire format", "unknown fields are no wire format",
			head("").B(1, OpCreate, ObjTask, 0, 8).Str("t8").B(0, 0, 0, 0, 0, 0, 0, IntZero, IntZero, Edge).Str("\xff\xff\xff")},
		{"task spec with unknown bytes that set a known field to zero", "encode its known field priority",
			head("").B(1, OpCreate, ObjTask, 0, 8).Str("t8").B(0, 0, 0, 0, 0, 0, 0, IntZero, IntZero, Edge).Str("\x20\x00")},
		// A committer a year ahead finishes a task, then one on time: with
		// expiries between, the second must not wait for the first.
		{"a committer a year ahead", "", new(Seed).B(ActTxn, ViewHead, 0, 0).Str("").Raw(SetupNanos+year).B(1, OpSetStatus, 0, SetSucceeded, 0).Str("").
			B(ActExpire, IntSmall0+1).
			B(ActTxn, ViewHead, 0, 0).Str("").B(IntZero, 1, OpSetStatus, 2, SetSucceeded, 0).Str("").
			B(ActExpire).Raw(1e12).B(ActExpire).Raw(-2e12).B(ActExpire).Raw(year)},
		// Delete a machine that holds tasks, from a stale view (a
		// conflict) and from a current one (in use).
		{"delete of a machine from a stale view", "conflict", new(Seed).B(ActTxn, ViewZero, 0, 0).Str("").B(IntZero, 1, OpDelete, 2, 0, 0)},
		{"delete of a machine in use", "in use", head("").B(1, OpDelete, 2, 0, 0)},
		// An operation naming its task by the nil uid (on the wire, an
		// empty task_uid): refused naming the field, not judged "not found".
		{"an eviction of the nil uid", "evict task_uid is the nil uuid", head("").B(1, OpEvict, 250, 0, 1).Str("x")},
		// Strings at and over the limit; more operations than allowed.
		{"strings at the limit", "", new(Seed).B(ActTxn, ViewHead, 0, 0, StrMax, IntZero, 1, OpSetStatus, 1, SetSucceeded, 0, StrMax)},
		{"component over the limit", "component is 65 bytes", new(Seed).B(ActTxn, ViewHead, 0, 0, StrOver, IntZero, 1, OpSetStatus, 1, SetSucceeded, 0, StrCutRune)},
		{"message cut in a rune", "set-status message", head("").B(1, OpSetStatus, 1, SetSucceeded, 0, StrCutRune)},
		{"too many operations", "25 operations", head("").B(128 + 25)},
		// Machines of math.MaxInt64 cpu (the cell's totals must not wrap).
		{"a machine of MaxInt64", "", head("").B(2, OpCreate, ObjMachine, 0, 3).Str("big").B(0, 0, 0, 0, 1, IntMax64, IntMax64, 0).Str("fd").
			B(0, 0, OpDelete, 2, 3, 0)},
		// Ordinary work: create and claim, claim, finish; evict, put.
		{"create and claim, claim, finish", "", head("batch").B(3,
			OpCreateClaim, 0, 9).Str("t9").B(0, 0, 0, 0, 1, IntSmall0+4, IntSmall0+4, 0, 0, 0, IntZero, IntZero, 0, 0, 0,
			OpClaim, 4, 1, 0, 0,
			OpSetStatus, 1, SetSucceeded, 0).Str("done")},
		{"evict, put a job", "", head("service").B(2, OpEvict, 0, 0, 0, IntSmall0+4).Str("preempted").
			B(OpPut, 0, 0, 0).Str("j0").B(0, 0, 0, 0, IntSmall0+1).Str("batch").B(IntZero, IntSmall0+1, 0, IntZero, 0, 0, 0, 0).
			B(ActTxn, ViewBehind, 1, 1).Str("").B(IntOne, 2, OpClaim, 6, 1, 0, 0, OpDelete, 0, 3, 0)},
	}
	out := make([]SeedProgram, len(seeds))
	for i, s := range seeds {
		out[i] = SeedProgram{Name: s.name, Want: s.want, Program: s.s.Bytes()}
	}
	return out
}

// Seeds returns the seed programs' bytes.
func Seeds() [][]byte {
	var out [][]byte
	for _, s := range SeedPrograms() {
		out = append(out, s.Program)
	}
	return out
}

// RandomProgram returns n bytes of a program for the short random runs that
// stand in for the fuzzer in the test suite. Uniform bytes would make
// nearly every string invalid UTF-8 (and so nearly every transaction bad
// input); here fifteen bytes in sixteen are small, so most choices pick
// the first options, strings are short and valid, integers small and uids
// from the pool, and many transactions do something.
func RandomProgram(next func() uint32, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = ProgramByte(next())
	}
	return b
}

// ProgramByte maps a uniform random r to a byte as RandomProgram draws them.
func ProgramByte(r uint32) byte {
	if r%16 != 0 {
		return byte((r >> 8) % 21)
	}
	return byte(r >> 8)
}
