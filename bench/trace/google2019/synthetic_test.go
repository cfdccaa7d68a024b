package google2019

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/omega-cell/omega/bench/trace"
)

// The synthetic trace writer, for scale tests of the reader and of omega
// replay (its output is not committed):
//
//	go test ./bench/trace/google2019 -run TestWriteSynthetic -synthetic-out DIR -synthetic-events 1000000
//
// writes DIR/machine_events.json, DIR/collection_events.json and
// DIR/instance_events/instance_events-NNNNNNNNNNNN.json (a million rows a
// file) as BigQuery exports them; -synthetic-gzip gzips them. Without
// -synthetic-out it writes a small trace into a temporary directory and
// checks it.
var (
	synthOut    = flag.String("synthetic-out", "", "TestWriteSynthetic: write a synthetic 2019-format trace into this directory")
	synthEvents = flag.Int("synthetic-events", 1_000_000, "TestWriteSynthetic: instance events to write")
	synthSeed   = flag.Uint64("synthetic-seed", 1, "TestWriteSynthetic: seed")
	synthGzip   = flag.Bool("synthetic-gzip", false, "TestWriteSynthetic: gzip the tables")
)

func TestWriteSynthetic(t *testing.T) {
	if *synthOut != "" {
		// A 2019 cell has about 12,000 machines.
		sy := Synthetic{Machines: 12000, Events: *synthEvents, Seed: *synthSeed, MeanTasks: 20, MeanRun: 3000, ShardLines: 1_000_000, Gzip: *synthGzip}
		if err := sy.Write(*synthOut); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote about %d instance events into %s", sy.Events, *synthOut)
		return
	}
	sy := Synthetic{Machines: 50, Events: 4000, Seed: 7, MeanTasks: 4, MeanRun: 300, ShardLines: 900}
	dir := t.TempDir()
	if err := sy.Write(dir); err != nil {
		t.Fatal(err)
	}
	st, n := readSynthetic(t, dir)
	got := st.Rows[TableInstanceEvents]
	if got < int64(sy.Events) || float64(got) > 1.03*float64(sy.Events) || got%3 != 0 {
		t.Errorf("%d instance events, want about %d (three per instance)", got, sy.Events)
	}
	if st.Rows[TableMachineEvents] != 50 || st.Rows[TableCollectionEvents] == 0 {
		t.Errorf("rows %v", st.Rows)
	}
	// Every row becomes an event: machines, collection submissions and
	// finishes, and the instances' three.
	if total := st.Rows[TableMachineEvents] + st.Rows[TableCollectionEvents] + got; n != total || st.Events != total {
		t.Errorf("%d events (stats %d) from %d rows", n, st.Events, total)
	}
	if len(st.Skipped) != 0 || len(st.Ignored) != 0 || len(st.Warnings) != 0 {
		t.Errorf("skipped %v, ignored %v, warnings %v", st.Skipped, st.Ignored, st.Warnings)
	}
	// Gzipped, one file a table: the same rows.
	gz := sy
	gz.Gzip, gz.ShardLines = true, 0
	gdir := t.TempDir()
	if err := gz.Write(gdir); err != nil {
		t.Fatal(err)
	}
	if gst, _ := readSynthetic(t, gdir); gst.Rows[TableInstanceEvents] != got {
		t.Errorf("gzipped: %v, plain: %v", gst.Rows, st.Rows)
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
// order, and gives its stats and the number of events.
func readSynthetic(t *testing.T, dir string) (*trace.Stats, int64) {
	t.Helper()
	src, err := Open(dir, Options{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var last, n int64
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
	return src.Stats(), n
}

// sameFiles: the two directories hold the same files with the same bytes.
func sameFiles(t *testing.T, a, b string) bool {
	t.Helper()
	read := func(root string) map[string][]byte {
		files := map[string][]byte{}
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			files[rel], err = os.ReadFile(p)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return files
	}
	fa, fb := read(a), read(b)
	if len(fa) != len(fb) {
		return false
	}
	for name, data := range fa {
		if !bytes.Equal(data, fb[name]) {
			return false
		}
	}
	return true
}

// BenchmarkReadSynthetic measures the reader on a synthetic trace of
// -synthetic-bench-events instance events (300,000 by default, about 100
// MB of JSON lines), written once: instance_events alone (lines and
// parsing, in MB/s of rows), and the whole trace through Open (the three
// tables merged, in MB/s of all the tables' bytes, and events/s).
func BenchmarkReadSynthetic(b *testing.B) {
	dir := b.TempDir()
	sy := Synthetic{Machines: 12000, Events: *benchEvents, Seed: 1, MeanTasks: 20, MeanRun: 3000}
	if err := sy.Write(dir); err != nil {
		b.Fatal(err)
	}
	instFile := filepath.Join(dir, TableInstanceEvents+".json")
	data, err := os.ReadFile(instFile)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("instance_events", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		st := trace.NewStats()
		rows := 0
		for b.Loop() {
			l, _ := trace.NewLines(bytes.NewReader(data), "bench")
			for {
				row, err := l.Next()
				if err != nil {
					break
				}
				if _, _, err := parseInstance(row, Options{Strict: true}, st); err != nil {
					b.Fatal(err)
				}
				rows++
			}
		}
		b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
	})
	b.Run("open", func(b *testing.B) {
		var size int64
		for _, table := range []string{TableMachineEvents, TableCollectionEvents, TableInstanceEvents} {
			fi, err := os.Stat(filepath.Join(dir, table+".json"))
			if err != nil {
				b.Fatal(err)
			}
			size += fi.Size()
		}
		b.SetBytes(size)
		var events int64
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
			src.Close()
		}
		b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
	})
}

var benchEvents = flag.Int("synthetic-bench-events", 300_000, "BenchmarkReadSynthetic: instance events in the trace read")
