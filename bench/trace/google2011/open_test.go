package google2011

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/omega-cell/omega/bench/trace"
)

// Genuine machine_events rows: the table's first row, an ADD with empty
// capacity and the UPDATE that gives it (machine 6264344062), a REMOVE.
var realMachineRows = []string{
	"0,5,0,HofLGzk1Or/8Ildj2+Lqv0UGGvY82NLoni8+J/Yy0RU=,0.5,0.2493",
	"113019603442,6264344062,0,JQ1tVQBMHBAIISU1gUNXk2powhYumYA+4cB3KzU29l8=,,",
	"113019605712,6264344062,2,HofLGzk1Or/8Ildj2+Lqv0UGGvY82NLoni8+J/Yy0RU=,0.5,0.4995",
}

func TestParseMachineEvent(t *testing.T) {
	e, err := ParseMachineEvent(realMachineRows[0])
	if err != nil {
		t.Fatal(err)
	}
	want := MachineEvent{Time: 0, MachineID: 5, Type: MachineAdd, Platform: "HofLGzk1Or/8Ildj2+Lqv0UGGvY82NLoni8+J/Yy0RU=",
		CPUs: Known(0.5), Memory: Known(0.2493)}
	if e != want {
		t.Fatalf("got %+v, want %+v", e, want)
	}
	e, err = ParseMachineEvent(realMachineRows[1])
	if err != nil || e.CPUs.Known || e.Memory.Known || e.MachineID != 6264344062 {
		t.Fatalf("empty capacity: %+v, %v; want unknown cpus and memory, not 0", e, err)
	}
	for _, tc := range []struct{ line, field string }{
		{"0,5,3,p,0.5,0.2", "event_type"},
		{"0,,0,p,0.5,0.2", "machine_id"},
		{"0,5,0,p,-1,0.2", "cpus"},
		{"0,5,0,p,0.5,x", "memory"},
		{"0,5,0,p,0.5", ""},
	} {
		_, err := ParseMachineEvent(tc.line)
		var pe *trace.ParseError
		if !errors.As(err, &pe) || pe.Field != tc.field {
			t.Errorf("%q: error %v, want one naming field %q", tc.line, err, tc.field)
		}
	}
}

func TestParseTaskConstraint(t *testing.T) {
	c, err := ParseTaskConstraint("5611824441,6251812952,1761,1,GU0Q5WjHHs5P6XK5Gc+AU3q8S2u/8/GGRTa5W8xNeeE=,3")
	if err != nil {
		t.Fatal(err)
	}
	if c.JobID != 6251812952 || c.TaskIndex != 1761 || c.Op != OpNotEqual || c.Value != "3" {
		t.Fatalf("got %+v", c)
	}
	if _, err := ParseTaskConstraint("1,2,3,4,a,b"); !errors.Is(err, trace.ErrOutOfRange) {
		t.Errorf("operator 4: %v, want out of range", err)
	}
	if _, err := ParseTaskConstraint("1,2,3,0,,b"); !errors.Is(err, trace.ErrMissing) {
		t.Errorf("no attribute: %v, want missing", err)
	}
}

// TestMachineEventFacts checks the reader against what ../shared/traces
// records of the whole machine_events table.
func TestMachineEventFacts(t *testing.T) {
	needTrace(t, machineEventPath)
	rows, err := ReadAllMachineEvents(machineEventPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 37780 {
		t.Fatalf("%d rows, want 37,780", len(rows))
	}
	var byType [3]int
	ids := map[int64]bool{}
	first := map[int64]MachineEventType{}
	atZero, emptyCap := 0, 0
	var minID, maxID int64 = 1 << 62, 0
	for i, r := range rows {
		byType[r.Type]++
		ids[r.MachineID] = true
		minID, maxID = min(minID, r.MachineID), max(maxID, r.MachineID)
		if _, ok := first[r.MachineID]; !ok {
			first[r.MachineID] = r.Type
		}
		if r.Time == 0 {
			atZero++
			if r.Type != MachineAdd {
				t.Errorf("row %d at time 0 is %v, want ADD", i+1, r.Type)
			}
		}
		if !r.CPUs.Known {
			emptyCap++
			if r.Type != MachineAdd || r.Platform != "JQ1tVQBMHBAIISU1gUNXk2powhYumYA+4cB3KzU29l8=" {
				t.Errorf("row %d: empty capacity on %v of platform %s", i+1, r.Type, r.Platform)
			}
		}
		if i > 0 && r.Time < rows[i-1].Time {
			t.Fatalf("row %d: time decreases", i+1)
		}
	}
	if byType != [3]int{21443, 8957, 7380} {
		t.Errorf("events by type %v, want [21443 8957 7380]", byType)
	}
	if len(ids) != 12583 || minID != 5 || maxID != 6457070948 {
		t.Errorf("%d machines, ids %d..%d; want 12,583, 5..6,457,070,948", len(ids), minID, maxID)
	}
	for id, ty := range first {
		if ty != MachineAdd {
			t.Errorf("machine %d's first event is %v", id, ty)
		}
	}
	if atZero != 12477 || emptyCap != 32 {
		t.Errorf("%d rows at time 0, %d with empty capacity; want 12,477 and 32", atZero, emptyCap)
	}
	if last := rows[len(rows)-1].Time; last != 2506135493517 {
		t.Errorf("last time %d", last)
	}
}

// TestOpenExcerpt reads the genuine excerpt's directory as one stream: every
// row of the three tables, in time order, the rows at time 0 in their
// files' order (machines, then jobs, then tasks).
func TestOpenExcerpt(t *testing.T) {
	needTrace(t, taskEventsPath, jobEventsPath, machineEventPath)
	tasks, jobs := loadTrace(t)
	src, err := Open(traceDir, Options{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var n, taskN, jobN, machineN int
	var last int64
	var lastKind trace.Kind
	for {
		e, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if e.Time < last {
			t.Fatalf("event %d (%s) at %d after %d", n, e.Pos, e.Time, last)
		}
		switch e.Kind {
		case trace.MachineAdd, trace.MachineRemove, trace.MachineUpdate:
			if e.Time == 0 && lastKind != 0 && lastKind > trace.MachineRemove {
				t.Fatalf("%s: a machine at time 0 after a job or task", e.Pos)
			}
			machineN++
		case trace.JobSubmit, trace.JobEnd:
			jobN++
		default:
			// Tasks at time 0 keep the file's order: the n-th task event
			// is the file's n-th row.
			if taskN < len(tasks) && e.Pos.Line != taskN+1 {
				t.Fatalf("task event %d came from line %d", taskN+1, e.Pos.Line)
			}
			if e.Job != tasks[taskN].JobID || e.Task != tasks[taskN].TaskIndex {
				t.Fatalf("task event %d is %d/%d, the file's row is %d/%d", taskN+1, e.Job, e.Task, tasks[taskN].JobID, tasks[taskN].TaskIndex)
			}
			taskN++
		}
		last, lastKind = e.Time, e.Kind
		n++
	}
	if taskN != 450146 || machineN != 37780 {
		t.Errorf("%d task and %d machine events, want 450,146 and 37,780", taskN, machineN)
	}
	wantJobs := 0
	for _, j := range jobs {
		if _, ok := jobToEvent(j, trace.Pos{}); ok {
			wantJobs++
		}
	}
	if jobN != wantJobs {
		t.Errorf("%d job events, want %d", jobN, wantJobs)
	}
	st := src.Stats()
	if st.Rows[TableTaskEvents] != 450146 || st.Rows[TableJobEvents] != 10704 || st.SkippedTotal() != 0 {
		t.Errorf("stats: rows %v, skipped %v", st.Rows, st.Skipped)
	}
	if !strings.Contains(strings.Join(st.Warnings, "\n"), "task_events: shards 0 to 0 of 500") {
		t.Errorf("warnings %q do not say the task_events shards are a window", st.Warnings)
	}
}

// writeTable writes rows as shard k of n of table under dir.
func writeTable(t *testing.T, dir, table string, k, n int, rows ...string) {
	t.Helper()
	d := filepath.Join(dir, table)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(d, "part-"+pad5(k)+"-of-"+pad5(n)+".csv.gz")
	if err := os.WriteFile(name, gzipped(t, strings.Join(rows, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func pad5(v int) string { return fmt.Sprintf("%05d", v) }

func TestOpenShardsInOrderAndGaps(t *testing.T) {
	dir := t.TempDir()
	// Shards 0 and 1 of task_events: shard 1's rows follow shard 0's.
	writeTable(t, dir, TableTaskEvents, 0, 3, realTaskRows[0], realTaskRows[1])
	writeTable(t, dir, TableTaskEvents, 1, 3, "600026913,,3418309,0,,0,u,3,9,0.125,0.07446,0.0004244,0")
	src, err := Open(dir, Options{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for {
		e, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, e.Pos.String())
	}
	src.Close()
	if len(lines) != 3 || !strings.HasSuffix(lines[2], "part-00001-of-00003.csv.gz:1") {
		t.Fatalf("events from %v", lines)
	}
	warn := strings.Join(src.Stats().Warnings, "\n")
	for _, w := range []string{"machine_events: absent", "job_events: absent", "task_events: shards 0 to 1 of 3"} {
		if !strings.Contains(warn, w) {
			t.Errorf("warnings %q lack %q", warn, w)
		}
	}
	// A shard missing from the middle is an error naming it.
	writeTable(t, dir, TableTaskEvents, 3, 5, realTaskRows[0])
	if _, err := Open(dir, Options{}); err == nil || !strings.Contains(err.Error(), "of 3 and of 5") {
		t.Errorf("shards of two counts: %v", err)
	}
	os.Remove(filepath.Join(dir, TableTaskEvents, "part-00003-of-00005.csv.gz"))
	os.Remove(filepath.Join(dir, TableTaskEvents, "part-00001-of-00003.csv.gz"))
	writeTable(t, dir, TableTaskEvents, 2, 3, realTaskRows[0])
	_, err = Open(dir, Options{})
	if !errors.Is(err, trace.ErrShardGap) || !strings.Contains(err.Error(), "have 0 and 2, not 1") {
		t.Errorf("a gap: %v, want ErrShardGap naming shard 1", err)
	}
	if _, err := Open(filepath.Join(dir, "nowhere"), Options{}); err == nil {
		t.Error("a missing directory opened")
	}
}

func TestOpenStrictAndLenient(t *testing.T) {
	dir := t.TempDir()
	bad := strings.Replace(realTaskRows[2], ",11,", ",eleven,", 1)
	writeTable(t, dir, TableTaskEvents, 0, 1, realTaskRows[0], realTaskRows[1], bad, "1,2,3", realTaskRows[3])
	writeTable(t, dir, TableMachineEvents, 0, 1, realMachineRows...)
	src, err := Open(dir, Options{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	var err2 error
	for err2 == nil {
		_, err2 = src.Next()
	}
	src.Close()
	var pe *trace.ParseError
	if !errors.As(err2, &pe) || pe.Line != 3 || pe.Field != "priority" || !strings.HasSuffix(pe.File, "part-00000-of-00001.csv.gz") {
		t.Fatalf("strict: %v, want the file, line 3 and field priority", err2)
	}

	src, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		_, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	src.Close()
	st := src.Stats()
	if n != 3+len(realMachineRows) || st.Skipped["task_events: priority: not a number"] != 1 || st.Skipped["task_events: wrong number of fields"] != 1 {
		t.Fatalf("lenient: %d events, skipped %v", n, st.Skipped)
	}
	if ex := st.Examples["task_events: wrong number of fields"]; len(ex) != 1 || ex[0].Line != 4 {
		t.Errorf("examples %v, want line 4", ex)
	}
	if st.Rows[TableTaskEvents] != 5 {
		t.Errorf("rows %v, want 5 task_events rows counted", st.Rows)
	}
}

func FuzzParseMachineEvent(f *testing.F) {
	for _, line := range realMachineRows {
		f.Add(line)
	}
	f.Fuzz(func(t *testing.T, line string) {
		e, err := ParseMachineEvent(line)
		if err != nil {
			var pe *trace.ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("%q: error %v is not a *trace.ParseError", line, err)
			}
			return
		}
		if e.Time < 0 || e.MachineID < 0 || e.Type > MachineUpdate || e.CPUs.Known && e.CPUs.Value < 0 {
			t.Fatalf("%q parsed to an impossible row %+v", line, e)
		}
	})
}

func FuzzParseTaskConstraint(f *testing.F) {
	f.Add("5611824441,6251812952,1761,1,GU0Q5WjHHs5P6XK5Gc+AU3q8S2u/8/GGRTa5W8xNeeE=,3")
	f.Fuzz(func(t *testing.T, line string) {
		c, err := ParseTaskConstraint(line)
		if err != nil {
			var pe *trace.ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("%q: error %v is not a *trace.ParseError", line, err)
			}
			return
		}
		if c.Op > OpGreaterThan || c.Attribute == "" || c.JobID < 0 {
			t.Fatalf("%q parsed to an impossible row %+v", line, c)
		}
	})
}
