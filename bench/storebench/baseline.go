package storebench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

// recorder keeps the encoded form of the write sets the store published
// during the warmup: every revision (committers' transactions and the
// store's expiries), in order, up to max. With count only (no baseline to
// replay them) it keeps none and only counts their bytes and claims, so
// the measured phase's heap (and RSS) is the store's and its clients'.
type recorder struct {
	max       int
	countOnly bool
	n         int // write sets seen, up to max
	sets      []recorded
	claims    int64
	bytes     int64
}

type recorded struct {
	repr   []byte
	claims int
}

// nexter is a watch: the store's own, or a transport's.
type nexter interface {
	Next(ctx context.Context, max int) ([]*txn.WriteSet, error)
}

func (r *recorder) run(ctx context.Context, w nexter) error {
	b := new(pebble.Batch)
	for r.n < r.max {
		sets, err := w.Next(ctx, 0)
		if err != nil {
			return err
		}
		for _, ws := range sets {
			if r.n == r.max {
				break
			}
			r.n++
			b.Reset()
			if err := store.EncodeWriteSet(b, ws); err != nil {
				return err
			}
			claims := 0
			for i := range ws.Changes {
				c := &ws.Changes[i]
				if c.Task != nil && !c.Deleted && c.Task.State == omegav1.TaskState_TASK_STATE_ASSIGNED {
					claims++
				}
			}
			r.claims += int64(claims)
			r.bytes += int64(len(b.Repr()))
			if !r.countOnly {
				repr, err := sortedRepr(b)
				if err != nil {
					return err
				}
				r.sets = append(r.sets, recorded{repr: repr, claims: claims})
			}
		}
	}
	return nil
}

type baselineResult struct {
	elapsed   time.Duration
	claims    int64
	latencies []time.Duration
}

// runBaseline writes the recorded write sets, cycling through them in
// order, as synced pebble batches from `committers` goroutines, with the
// store's pebble options, for d.
func runBaseline(ctx context.Context, dir string, opts *store.Options, rec *recorder, committers int, d time.Duration) (*baselineResult, error) {
	po := opts.PebbleOptions()
	db, err := pebble.Open(dir, po)
	if err != nil {
		return nil, fmt.Errorf("open baseline pebble: %w", err)
	}
	defer db.Close()
	var next atomic.Int64
	type out struct {
		claims int64
		lat    []time.Duration
		err    error
	}
	outs := make([]out, committers)
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for i := range committers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := &outs[i]
			for time.Now().Before(deadline) && ctx.Err() == nil {
				r := rec.sets[int(next.Add(1)-1)%len(rec.sets)]
				t0 := time.Now()
				b := db.NewBatch()
				if err := b.SetRepr(slices.Clone(r.repr)); err != nil {
					o.err = err
					return
				}
				if err := db.Apply(b, pebble.Sync); err != nil {
					o.err = err
					return
				}
				b.Close()
				o.lat = append(o.lat, time.Since(t0))
				o.claims += int64(r.claims)
			}
		}()
	}
	wg.Wait()
	res := &baselineResult{elapsed: time.Since(start)}
	var errs []error
	for _, o := range outs {
		errs = append(errs, o.err)
		res.claims += o.claims
		res.latencies = append(res.latencies, o.lat...)
	}
	return res, errors.Join(errs...)
}

// sortedRepr is b's records as a batch in key order. The store's log
// records are in the order of the write set's changes (a log needs none);
// raw pebble gets them sorted, which its memtable inserts prefer, so the
// baseline is pebble at its best on the same records.
func sortedRepr(b *pebble.Batch) ([]byte, error) {
	type kv struct {
		kind     pebble.InternalKeyKind
		key, val []byte
	}
	var kvs []kv
	r := b.Reader()
	for {
		kind, k, v, ok, err := r.Next()
		if err != nil {
			return nil, fmt.Errorf("read a recorded batch: %w", err)
		}
		if !ok {
			break
		}
		kvs = append(kvs, kv{kind, k, v})
	}
	slices.SortFunc(kvs, func(a, b kv) int { return bytes.Compare(a.key, b.key) })
	out := new(pebble.Batch)
	for _, e := range kvs {
		var err error
		switch e.kind {
		case pebble.InternalKeyKindSet:
			err = out.Set(e.key, e.val, nil)
		case pebble.InternalKeyKindDelete:
			err = out.Delete(e.key, nil)
		default:
			err = fmt.Errorf("a recorded batch holds a record of kind %v", e.kind)
		}
		if err != nil {
			return nil, err
		}
	}
	return slices.Clone(out.Repr()), nil
}
