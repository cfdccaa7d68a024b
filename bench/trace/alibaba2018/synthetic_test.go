package alibaba2018

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/omega-cell/omega/bench/trace"
)

// The synthetic trace writer, for scale tests of the reader and of omega
// replay (its output is not committed):
//
//	go test ./bench/trace/alibaba2018 -run TestWriteSynthetic -synthetic-out DIR -synthetic-events 1000000
//
// writes DIR/machine_meta.csv, batch_task.csv, batch_instance.csv and
// container_meta.csv, each in the order the reader needs. Without
// -synthetic-out it writes a small trace into a temporary directory and
// checks it.
var (
	synthOut    = flag.String("synthetic-out", "", "TestWriteSynthetic: write a synthetic cluster-trace-v2018 trace into this directory")
	synthEvents = flag.Int("synthetic-events", 1_000_000, "TestWriteSynthetic: batch instance and container events to write (three each)")
	synthSeed   = flag.Uint64("synthetic-seed", 1, "TestWriteSynthetic: seed")
	benchEvents = flag.Int("synthetic-bench-events", 3_000_000, "BenchmarkReadSynthetic: events in the trace read (a million batch_instance rows)")
)

// realistic are the parameters of a trace about the 2018 one's shape:
// its 4,034 machines, a few tasks per job, many short instances per task.
func realistic(events int, seed uint64) Synthetic {
	return Synthetic{Machines: 4000, Events: events, Seed: seed, MeanTasks: 3, MeanInstances: 30, MeanRun: 300}
}

func TestWriteSynthetic(t *testing.T) {
	if *synthOut != "" {
		sy := realistic(*synthEvents, *synthSeed)
		if err := sy.Write(*synthOut); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote about %d events into %s", sy.Events, *synthOut)
		return
	}
	sy := Synthetic{Machines: 50, Events: 4000, Seed: 7, MeanTasks: 2, MeanInstances: 3, MeanRun: 300}
	dir := t.TempDir()
	if err := sy.Write(dir); err != nil {
		t.Fatal(err)
	}
	st, kinds := readSynthetic(t, dir)
	tasks := kinds[trace.TaskSubmit] + kinds[trace.TaskSchedule] + kinds[trace.TaskEnd]
	if tasks < int64(sy.Events) || float64(tasks) > 1.03*float64(sy.Events) {
		t.Errorf("%d task events, want about %d", tasks, sy.Events)
	}
	// Three events for each instance and each container, every one placed
	// and ended; both kinds of work present.
	if kinds[trace.TaskSubmit] != kinds[trace.TaskSchedule] || kinds[trace.TaskSubmit] != kinds[trace.TaskEnd] ||
		kinds[trace.MachineAdd] != 50 || st.Rows[TableBatchInstance]+st.Rows[TableContainerMeta]/2 != kinds[trace.TaskSubmit] ||
		st.Rows[TableContainerMeta] == 0 || st.Rows[TableBatchTask] == 0 {
		t.Errorf("events %v, rows %v", kinds, st.Rows)
	}
	if len(st.Skipped) != 0 || len(st.Ignored) != 0 || len(st.Warnings) != 0 {
		t.Errorf("skipped %v, ignored %v, warnings %v", st.Skipped, st.Ignored, st.Warnings)
	}
	// The same seed writes the same bytes; another seed, others.
	again := t.TempDir()
	if err := sy.Write(again); err != nil {
		t.Fatal(err)
	}
	if !sameFiles(t, dir, again) {
		t.Error("the same seed wrote different files")
	}
	other := sy
	other.Seed++
	odir := t.TempDir()
	if err := other.Write(odir); err != nil {
		t.Fatal(err)
	}
	if sameFiles(t, dir, odir) {
		t.Error("another seed wrote the same files")
	}
}

// readSynthetic reads the trace in dir in strict mode, checking the time
// order, and gives its stats and the events by kind.
func readSynthetic(t *testing.T, dir string) (*trace.Stats, map[trace.Kind]int64) {
	t.Helper()
	src, err := Open(dir, Options{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var last int64
	kinds := map[trace.Kind]int64{}
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
		kinds[e.Kind]++
	}
	return src.Stats(), kinds
}

// sameFiles: the two directories hold the same tables with the same bytes.
func sameFiles(t *testing.T, a, b string) bool {
	t.Helper()
	for _, table := range []string{TableMachineMeta, TableBatchTask, TableBatchInstance, TableContainerMeta} {
		fa, err := os.ReadFile(filepath.Join(a, table+".csv"))
		if err != nil {
			t.Fatal(err)
		}
		fb, err := os.ReadFile(filepath.Join(b, table+".csv"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(fa, fb) {
			return false
		}
	}
	return true
}

// BenchmarkReadSynthetic measures the reader on a synthetic trace of
// -synthetic-bench-events events (3,000,000 by default: about a million
// batch_instance rows), written once: batch_instance alone (lines and
// parsing, in rows/s), and the whole trace through Open (batch_instance
// joined with batch_task, the containers and machines merged; in
// batch_instance and container_meta rows/s and events/s).
func BenchmarkReadSynthetic(b *testing.B) {
	dir := b.TempDir()
	if err := realistic(*benchEvents, 1).Write(dir); err != nil {
		b.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, TableBatchInstance+".csv"))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("batch_instance", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		rows := 0
		for b.Loop() {
			l, _ := trace.NewLines(bytes.NewReader(data), "bench")
			for {
				row, err := l.Next()
				if err != nil {
					break
				}
				if _, err := ParseInstanceRow(string(row)); err != nil {
					b.Fatal(err)
				}
				rows++
			}
		}
		b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
	})
	b.Run("open", func(b *testing.B) {
		var rows, events int64
		for b.Loop() {
			src, err := Open(dir, Options{Strict: true})
			if err != nil {
				b.Fatal(err)
			}
			for {
				if _, err := src.Next(); err != nil {
					if !errors.Is(err, io.EOF) {
						b.Fatal(err)
					}
					break
				}
				events++
			}
			st := src.Stats()
			rows += st.Rows[TableBatchInstance] + st.Rows[TableContainerMeta]
			src.Close()
		}
		b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
		b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
	})
}
