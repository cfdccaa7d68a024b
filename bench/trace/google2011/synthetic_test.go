package google2011

import (
	"errors"
	"flag"
	"io"
	"testing"
)

// The synthetic trace writer, for scale tests of the readers and of omega
// replay (its output is not committed):
//
//	go test ./bench/trace/google2011 -run TestWriteSynthetic -synthetic-out DIR -synthetic-events 20000000
//
// writes DIR/machine_events and DIR/task_events in the 2011 format,
// gzipped and sharded as Google published them.
var (
	synthOut    = flag.String("synthetic-out", "", "TestWriteSynthetic: write a synthetic 2011-format trace into this directory")
	synthEvents = flag.Int("synthetic-events", 1_000_000, "TestWriteSynthetic: task events to write")
	synthSeed   = flag.Uint64("synthetic-seed", 1, "TestWriteSynthetic: seed")
)

func TestWriteSynthetic(t *testing.T) {
	if *synthOut == "" {
		t.Skip("writes a synthetic trace only when -synthetic-out DIR is given")
	}
	// About the 2011 trace's own rates: ~37 tasks per job, ~20 tasks/s
	// (its 144 million task events over 29 days), half the cell requested.
	sy := Synthetic{Machines: 12500, Events: *synthEvents, Seed: *synthSeed, MeanTasks: 36, MeanRun: 6000, ShardLines: 1_000_000}
	if err := sy.Write(*synthOut); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %d task events about into %s", sy.Events, *synthOut)
}

// TestSyntheticReadsBack: a small synthetic trace is what Open reads: every
// row parsed, in time order, three events per task.
func TestSyntheticReadsBack(t *testing.T) {
	dir := t.TempDir()
	sy := Synthetic{Machines: 50, Events: 3000, Seed: 7, MeanTasks: 3, MeanRun: 300, ShardLines: 700}
	if err := sy.Write(dir); err != nil {
		t.Fatal(err)
	}
	src, err := Open(dir, Options{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var last int64
	n := 0
	for {
		e, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if e.Time < last {
			t.Fatalf("time goes back at %v", e.Pos)
		}
		last = e.Time
		n++
	}
	st := src.Stats()
	if st.Rows[TableTaskEvents] < 3000 || st.Rows[TableTaskEvents]%3 != 0 || st.Rows[TableMachineEvents] != 50 || int64(n) != st.Rows[TableTaskEvents]+50 {
		t.Errorf("read %d events, rows %v; want the machines and three task events per task", n, st.Rows)
	}
}
