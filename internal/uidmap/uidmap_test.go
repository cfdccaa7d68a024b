package uidmap

import (
	"encoding/binary"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/uuid"
	"pgregory.net/rapid"
)

// keyGen draws from a small pool (updates and deletes of present keys, long
// runs in a small table), the nil uuid, and keys that differ only in their
// last byte (neighbours a client may make).
func keyGen(pool []uuid.UUID) *rapid.Generator[uuid.UUID] {
	return rapid.Custom(func(t *rapid.T) uuid.UUID {
		switch rapid.IntRange(0, 5).Draw(t, "kind") {
		case 0:
			return uuid.Nil
		case 1:
			var k uuid.UUID
			k[15] = byte(rapid.IntRange(1, 40).Draw(t, "tail"))
			return k
		default:
			return rapid.SampledFrom(pool).Draw(t, "pooled")
		}
	})
}

func check(t *rapid.T, m *Map[int], model map[uuid.UUID]int) {
	if m.Len() != len(model) {
		t.Fatalf("Len %d, model has %d", m.Len(), len(model))
	}
	seen := map[uuid.UUID]int{}
	m.Range(func(k uuid.UUID, v int) bool {
		if _, dup := seen[k]; dup {
			t.Fatalf("Range gave %s twice", k)
		}
		seen[k] = v
		return true
	})
	if !maps.Equal(seen, model) {
		t.Fatalf("Range gave %v, model %v", seen, model)
	}
	for k, v := range model {
		if got, ok := m.Get(k); !ok || got != v {
			t.Fatalf("Get(%s) = %d, %v; model has %d", k, got, ok, v)
		}
	}
}

// TestMatchesGoMap runs random histories against a Go map and checks every
// key after each step (probe runs, the backward shift of deletes across the
// table's end, growth, the nil key).
func TestMatchesGoMap(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	pool := make([]uuid.UUID, 60)
	for i := range pool {
		binary.LittleEndian.PutUint64(pool[i][:8], r.Uint64())
		binary.LittleEndian.PutUint64(pool[i][8:], r.Uint64())
	}
	rapid.Check(t, func(t *rapid.T) {
		keys := keyGen(pool)
		var m *Map[int]
		if rapid.Bool().Draw(t, "zero") {
			m = &Map[int]{}
		} else {
			m = New[int](rapid.IntRange(0, 100).Draw(t, "hint"))
		}
		model := map[uuid.UUID]int{}
		t.Repeat(map[string]func(*rapid.T){
			"Set": func(t *rapid.T) {
				k, v := keys.Draw(t, "k"), rapid.Int().Draw(t, "v")
				m.Set(k, v)
				model[k] = v
				check(t, m, model)
			},
			"Delete": func(t *rapid.T) {
				k := keys.Draw(t, "k")
				_, want := model[k]
				if got := m.Delete(k); got != want {
					t.Fatalf("Delete(%s) = %v, want %v", k, got, want)
				}
				delete(model, k)
				check(t, m, model)
			},
			"GetAbsent": func(t *rapid.T) {
				k := keys.Draw(t, "k")
				v, ok := m.Get(k)
				mv, mok := model[k]
				if ok != mok || v != mv {
					t.Fatalf("Get(%s) = %d, %v; model %d, %v", k, v, ok, mv, mok)
				}
			},
			"Clear": func(t *rapid.T) {
				if rapid.IntRange(0, 9).Draw(t, "rarely") == 0 {
					m.Clear()
					clear(model)
					check(t, m, model)
				}
			},
		})
	})
}

// TestUpdateDoesNotGrow: a Set of a key already present, at the load
// where a new key would grow the table, leaves the table as it is.
func TestUpdateDoesNotGrow(t *testing.T) {
	m := New[int](0)
	var k uuid.UUID
	for i := 1; 4*(m.n+1) <= 3*minSlots; i++ {
		k[0] = byte(i)
		m.Set(k, i)
	}
	size := len(m.slots)
	m.Set(k, -1)
	if len(m.slots) != size {
		t.Fatalf("an update grew the table from %d to %d slots", size, len(m.slots))
	}
	if v, _ := m.Get(k); v != -1 {
		t.Fatalf("the update was lost: %d", v)
	}
	k[0]++
	m.Set(k, 7)
	if len(m.slots) == size || m.Len() != 13 {
		t.Fatalf("a new key past the load: %d slots (was %d), %d keys", len(m.slots), size, m.Len())
	}
}

// TestRangeOrderIsTheHistorys: the same Sets and Deletes give the same
// order, every time (the simulation's determinism may rest on it).
func TestRangeOrderIsTheHistorys(t *testing.T) {
	build := func() []uuid.UUID {
		r := rand.New(rand.NewPCG(1, 2))
		m := New[int](0)
		var live []uuid.UUID
		for i := range 5000 {
			var k uuid.UUID
			binary.LittleEndian.PutUint64(k[:8], r.Uint64())
			binary.LittleEndian.PutUint64(k[8:], r.Uint64())
			m.Set(k, i)
			live = append(live, k)
			if r.IntN(3) == 0 {
				j := r.IntN(len(live))
				m.Delete(live[j])
				live = slices.Delete(live, j, j+1)
			}
		}
		var order []uuid.UUID
		m.Range(func(k uuid.UUID, _ int) bool { order = append(order, k); return true })
		return order
	}
	a, b := build(), build()
	if !slices.Equal(a, b) {
		t.Fatal("the same history ranged in two orders")
	}
}

var sink int

func BenchmarkGetHit(b *testing.B) {
	const n = 1_000_000
	r := rand.New(rand.NewPCG(11, 13))
	keys := make([]uuid.UUID, n)
	for i := range keys {
		binary.LittleEndian.PutUint64(keys[i][:8], r.Uint64())
		binary.LittleEndian.PutUint64(keys[i][8:], r.Uint64())
	}
	order := r.Perm(n)
	b.Run("uidmap", func(b *testing.B) {
		m := New[int](n)
		for i, k := range keys {
			m.Set(k, i)
		}
		i := 0
		for b.Loop() {
			v, _ := m.Get(keys[order[i%n]])
			sink += v
			i++
		}
	})
	b.Run("gomap-reference", func(b *testing.B) {
		m := make(map[uuid.UUID]int, n)
		for i, k := range keys {
			m[k] = i
		}
		i := 0
		for b.Loop() {
			sink += m[keys[order[i%n]]]
			i++
		}
	})
}
