package pmap

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/google/uuid"
)

// ---- crafted keys ----

const (
	fmixC1 = 0xff51afd7ed558ccd
	fmixC2 = 0xc4ceb9fe1a85ec53
)

// mulInverse returns the inverse of the odd c modulo 2^64 (Newton iteration).
func mulInverse(c uint64) uint64 {
	inv := c // correct to 3 bits for odd c
	for range 6 {
		inv *= 2 - c*inv
	}
	return inv
}

// unmix inverts the mix in hashKey.
func unmix(h uint64) uint64 {
	h ^= h >> 33
	h *= mulInverse(fmixC2)
	h ^= h >> 33
	h *= mulInverse(fmixC1)
	h ^= h >> 33
	return h
}

// keyWithHash returns a key whose hash is h; tail fills its last 8 bytes.
func keyWithHash(h, tail uint64) uuid.UUID {
	var k uuid.UUID
	binary.LittleEndian.PutUint64(k[:8], unmix(h)^tail*tailMul)
	binary.LittleEndian.PutUint64(k[8:], tail)
	return k
}

func randomKey(r *rand.Rand) uuid.UUID {
	var k uuid.UUID
	binary.LittleEndian.PutUint64(k[:8], r.Uint64())
	binary.LittleEndian.PutUint64(k[8:], r.Uint64())
	k[6] = k[6]&0x0f | 0x40 // version 4
	k[8] = k[8]&0x3f | 0x80 // variant 10
	return k
}

func TestUnmix(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for range 1000 {
		h := r.Uint64()
		if got := hashKey(keyWithHash(h, r.Uint64())); got != h {
			t.Fatalf("hashKey(keyWithHash(%#x)) = %#x", h, got)
		}
	}
}

// ---- structural invariants ----

// tb is what the checkers need from *testing.T and *rapid.T.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
}

// checkStructure verifies the trie's invariants (bitmaps match slices, every
// key sits on its hash path, canonical shape, sorted collision nodes) and
// returns the number of entries.
func checkStructure[V any](t tb, root *node[V]) int {
	t.Helper()
	var walk func(n *node[V], shift uint, prefix uint64, isRoot bool) int
	walk = func(n *node[V], shift uint, prefix uint64, isRoot bool) int {
		if shift >= hashBits {
			if n.datamap != 0 || n.nodemap != 0 || len(n.children) != 0 {
				t.Fatalf("collision node with bitmaps %#x/%#x, %d children", n.datamap, n.nodemap, len(n.children))
			}
			if len(n.entries) < 2 {
				t.Fatalf("collision node with %d entries", len(n.entries))
			}
			for i, e := range n.entries {
				if hashKey(e.key) != prefix {
					t.Fatalf("collision node for %#x holds key with hash %#x", prefix, hashKey(e.key))
				}
				if i > 0 && !keyLess(n.entries[i-1].key, e.key) {
					t.Fatalf("collision node not strictly sorted at %d", i)
				}
			}
			return len(n.entries)
		}
		if n.datamap&n.nodemap != 0 {
			t.Fatalf("slot both entry and child: %#x/%#x", n.datamap, n.nodemap)
		}
		if bits.OnesCount32(n.datamap) != len(n.entries) || bits.OnesCount32(n.nodemap) != len(n.children) {
			t.Fatalf("bitmaps %#x/%#x vs %d entries, %d children", n.datamap, n.nodemap, len(n.entries), len(n.children))
		}
		mask := uint64(1)<<shift - 1
		count := 0
		ei, ci := 0, 0
		for bm := n.datamap | n.nodemap; bm != 0; bm &= bm - 1 {
			slot := uint64(bits.TrailingZeros32(bm))
			if n.datamap&(bm&-bm) != 0 {
				h := hashKey(n.entries[ei].key)
				if h&mask != prefix || (h>>shift)&levelMask != slot {
					t.Fatalf("entry with hash %#x in slot %d at shift %d, prefix %#x", h, slot, shift, prefix)
				}
				ei++
				count++
			} else {
				count += walk(n.children[ci], shift+bitsPerLevel, prefix|slot<<shift, false)
				ci++
			}
		}
		if !isRoot && (count < 2 || len(n.entries) == 1 && len(n.children) == 0) {
			t.Fatalf("non-canonical node at shift %d: %d entries below, %d inline, %d children", shift, count, len(n.entries), len(n.children))
		}
		return count
	}
	return walk(root, 0, 0, true)
}

// checkMap verifies m against model completely.
func checkMap(t tb, m *Map[int], model map[uuid.UUID]int, absent []uuid.UUID) {
	t.Helper()
	if m.Len() != len(model) {
		t.Fatalf("Len = %d, model has %d", m.Len(), len(model))
	}
	if n := checkStructure(t, &m.root); n != len(model) {
		t.Fatalf("trie holds %d entries, model has %d", n, len(model))
	}
	for k, want := range model {
		if got, ok := m.Get(k); !ok || got != want {
			t.Fatalf("Get(%v) = %d, %v; want %d", k, got, ok, want)
		}
	}
	for _, k := range absent {
		if _, inModel := model[k]; inModel {
			continue
		}
		if got, ok := m.Get(k); ok {
			t.Fatalf("Get(%v) = %d, true for an absent key", k, got)
		}
	}
	seen := make(map[uuid.UUID]bool, len(model))
	m.Range(func(k uuid.UUID, v int) bool {
		if seen[k] {
			t.Fatalf("Range visited %v twice", k)
		}
		seen[k] = true
		if want, ok := model[k]; !ok || v != want {
			t.Fatalf("Range gave %v=%d, model has %d, %v", k, v, want, ok)
		}
		return true
	})
	if len(seen) != len(model) {
		t.Fatalf("Range visited %d entries, model has %d", len(seen), len(model))
	}
}

func rangeKeys[V any](m *Map[V]) []uuid.UUID {
	var ks []uuid.UUID
	m.Range(func(k uuid.UUID, _ V) bool {
		ks = append(ks, k)
		return true
	})
	return ks
}

// keyPool makes n random keys from seed, for the generators to draw from.
func keyPool(seed uint64, n int) []uuid.UUID {
	r := rand.New(rand.NewPCG(seed, seed))
	pool := make([]uuid.UUID, n)
	for i := range pool {
		pool[i] = randomKey(r)
	}
	return pool
}
