package pmap

import (
	"bytes"
	"encoding/binary"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/uuid"
	"pgregory.net/rapid"
)

// ---- rapid state machine ----

type snapshot struct {
	m     *Map[int]
	model map[uuid.UUID]int
}

const (
	baseHashA = 0x0123456789abcdef
	baseHashB = 0xfedcba9876543210
)

// keyGen draws keys of four kinds: from a small fixed pool (to hit updates
// and deletes), fully colliding (one hash, small tails), sharing
// a hash prefix of a random number of levels with a base hash, and fresh.
func keyGen(pool []uuid.UUID) *rapid.Generator[uuid.UUID] {
	return rapid.Custom(func(t *rapid.T) uuid.UUID {
		switch rapid.IntRange(0, 3).Draw(t, "kind") {
		case 0:
			return rapid.SampledFrom(pool).Draw(t, "pooled")
		case 1:
			base := rapid.SampledFrom([]uint64{baseHashA, baseHashB}).Draw(t, "base")
			return keyWithHash(base, rapid.Uint64Range(0, 5).Draw(t, "tail"))
		case 2:
			base := rapid.SampledFrom([]uint64{baseHashA, baseHashB}).Draw(t, "base")
			levels := rapid.UintRange(1, 12).Draw(t, "levels")
			high := rapid.Uint64Range(0, 7).Draw(t, "high")
			h := base ^ high<<(levels*bitsPerLevel)
			return keyWithHash(h, rapid.Uint64Range(0, 2).Draw(t, "tail"))
		default:
			var k uuid.UUID
			binary.LittleEndian.PutUint64(k[:8], rapid.Uint64().Draw(t, "lo"))
			binary.LittleEndian.PutUint64(k[8:], rapid.Uint64().Draw(t, "hi"))
			return k
		}
	})
}

func TestMapStateMachine(t *testing.T) {
	pool := keyPool(7, 24)
	rapid.Check(t, func(t *rapid.T) {
		keys := keyGen(pool)
		vals := rapid.IntRange(-1000, 1000)

		cur := New[int]()
		model := map[uuid.UUID]int{}
		var b *Builder[int]
		var bModel map[uuid.UUID]int
		var snaps []snapshot
		var touched []uuid.UUID // every key ever used, to probe absences

		keep := func(m *Map[int], mod map[uuid.UUID]int) {
			snaps = append(snaps, snapshot{m, maps.Clone(mod)})
			if len(snaps) > 8 {
				i := rapid.IntRange(0, len(snaps)-1).Draw(t, "evict")
				snaps = slices.Delete(snaps, i, i+1)
			}
		}
		key := func() uuid.UUID {
			k := keys.Draw(t, "key")
			touched = append(touched, k)
			return k
		}

		t.Repeat(map[string]func(*rapid.T){
			"MapSet": func(t *rapid.T) {
				k, v := key(), vals.Draw(t, "v")
				if rapid.Bool().Draw(t, "snapshot") {
					keep(cur, model)
				}
				cur = cur.Set(k, v)
				model = maps.Clone(model)
				model[k] = v
			},
			"MapDelete": func(t *rapid.T) {
				k := key()
				if rapid.Bool().Draw(t, "snapshot") {
					keep(cur, model)
				}
				_, had := model[k]
				next := cur.Delete(k)
				if !had && next != cur {
					t.Fatalf("Delete of absent key made a new map")
				}
				cur = next
				model = maps.Clone(model)
				delete(model, k)
			},
			"MapGet": func(t *rapid.T) {
				k := key()
				want, wantOK := model[k]
				if got, ok := cur.Get(k); got != want || ok != wantOK {
					t.Fatalf("Get = %d, %v; want %d, %v", got, ok, want, wantOK)
				}
			},
			"Transient": func(t *rapid.T) {
				if b != nil {
					t.Skip("builder active")
				}
				base, baseModel := cur, model
				if len(snaps) > 0 && rapid.Bool().Draw(t, "fromSnapshot") {
					s := snaps[rapid.IntRange(0, len(snaps)-1).Draw(t, "snap")]
					base, baseModel = s.m, s.model
				}
				b = base.Transient()
				bModel = maps.Clone(baseModel)
			},
			"BuilderSet": func(t *rapid.T) {
				if b == nil {
					t.Skip("no builder")
				}
				k, v := key(), vals.Draw(t, "v")
				b.Set(k, v)
				bModel[k] = v
			},
			"BuilderDelete": func(t *rapid.T) {
				if b == nil {
					t.Skip("no builder")
				}
				k := key()
				_, had := bModel[k]
				if got := b.Delete(k); got != had {
					t.Fatalf("Builder.Delete = %v, want %v", got, had)
				}
				delete(bModel, k)
			},
			"BuilderGet": func(t *rapid.T) {
				if b == nil {
					t.Skip("no builder")
				}
				k := key()
				want, wantOK := bModel[k]
				if got, ok := b.Get(k); got != want || ok != wantOK {
					t.Fatalf("Builder.Get = %d, %v; want %d, %v", got, ok, want, wantOK)
				}
			},
			"BuilderBulk": func(t *rapid.T) {
				// Many edits in one builder, so tries get a few levels deep
				// and nodes are edited repeatedly once owned.
				if b == nil {
					t.Skip("no builder")
				}
				n := rapid.IntRange(1, 150).Draw(t, "n")
				seed := rapid.Uint64().Draw(t, "seed")
				r := rand.New(rand.NewPCG(seed, 3))
				var ks []uuid.UUID
				for i := range n {
					k := randomKey(r)
					if i%5 == 0 {
						k = keyWithHash(baseHashA, uint64(i))
					}
					ks = append(ks, k)
					b.Set(k, i)
					bModel[k] = i
				}
				// Delete some of them again, plus some of the existing keys.
				for i, k := range ks {
					if i%3 == 0 {
						b.Delete(k)
						delete(bModel, k)
					}
				}
				touched = append(touched, ks...)
			},
			"Persistent": func(t *rapid.T) {
				if b == nil {
					t.Skip("no builder")
				}
				m := b.Persistent()
				if rapid.Bool().Draw(t, "checkPanic") {
					func() {
						defer func() {
							if recover() == nil {
								t.Fatalf("Builder.Set after Persistent did not panic")
							}
						}()
						b.Set(uuid.UUID{}, 1)
					}()
				}
				keep(cur, model)
				cur, model = m, bModel
				b, bModel = nil, nil
			},
			"Abandon": func(t *rapid.T) {
				if b == nil {
					t.Skip("no builder")
				}
				b, bModel = nil, nil
			},
			"OrderIndependence": func(t *rapid.T) {
				// Rebuild cur's key set in another order, with a different
				// history (extra keys added and removed, a mix of builder and
				// persistent edits), and compare Range orders.
				// Sorted first so that the draw replays deterministically.
				sorted := slices.SortedFunc(maps.Keys(model), func(a, b uuid.UUID) int {
					return bytes.Compare(a[:], b[:])
				})
				ks := rapid.Permutation(sorted).Draw(t, "order")
				extra := pool[:rapid.IntRange(0, len(pool)).Draw(t, "extra")]
				bb := New[int]().Transient()
				for _, k := range extra {
					bb.Set(k, 0)
				}
				half := len(ks) / 2
				for _, k := range ks[:half] {
					bb.Set(k, model[k])
				}
				for _, k := range extra {
					if _, ok := model[k]; !ok {
						bb.Delete(k)
					}
				}
				m := bb.Persistent()
				for _, k := range ks[half:] {
					m = m.Set(k, model[k])
				}
				checkMap(t, m, model, touched)
				if got, want := rangeKeys(m), rangeKeys(cur); !slices.Equal(got, want) {
					t.Fatalf("Range order depends on history:\n%v\n%v", got, want)
				}
			},
			"": func(t *rapid.T) {
				checkMap(t, cur, model, touched)
				for _, s := range snaps {
					checkMap(t, s.m, s.model, touched)
				}
				if b != nil {
					if b.Len() != len(bModel) {
						t.Fatalf("Builder.Len = %d, want %d", b.Len(), len(bModel))
					}
					if n := checkStructure(t, &b.root); n != len(bModel) {
						t.Fatalf("builder trie holds %d entries, model %d", n, len(bModel))
					}
					for k, want := range bModel {
						if got, ok := b.Get(k); !ok || got != want {
							t.Fatalf("Builder.Get(%v) = %d, %v; want %d", k, got, ok, want)
						}
					}
				}
			},
		})
	})
}
