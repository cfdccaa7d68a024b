package google2019

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/omega-cell/omega/bench/trace"
)

// No genuine rows of the 2019 trace are at hand (../shared/traces has
// none): these fixtures are written from the format's definition
// (clusterdata_trace_format_v3.proto) in BigQuery's JSON export, which
// writes 64-bit integers as strings. docs/REPLAY.md says so.
var (
	fixtureInstance = `{"time":"600000000","type":"3","collection_id":"12345678901","scheduling_class":"1","missing_type":null,"collection_type":"0","priority":"200","alloc_collection_id":"0","instance_index":"7","machine_id":"98765432101","alloc_instance_index":"-1","resource_request":{"cpus":0.0135,"memory":0.0062},"constraint":[{"name":"aX2b","value":"3","relation":"2"}]}`
	fixtureSubmit   = `{"time":0,"type":0,"collection_id":12345678901,"scheduling_class":1,"collection_type":0,"priority":200,"instance_index":7,"machine_id":0,"resource_request":{"cpus":"0.0135","memory":"0.0062"},"constraint":[]}`
	fixtureMachine  = `{"time":"0","machine_id":"98765432101","type":"1","switch_id":"Sw1","capacity":{"cpus":0.5,"memory":0.25},"platform_id":"Pl1","missing_data_reason":null}`
	fixtureColl     = `{"time":"0","type":"0","collection_id":"12345678901","scheduling_class":"1","missing_type":null,"collection_type":"0","priority":"200","alloc_collection_id":"0","user":"U1","collection_name":"N1","collection_logical_name":"L1","parent_collection_id":null,"start_after_collection_ids":[],"max_per_machine":null,"max_per_switch":null,"vertical_scaling":"1","scheduler":"0"}`
)

func TestParseInstanceEvent(t *testing.T) {
	e, ok, err := ParseInstanceEvent([]byte(fixtureInstance))
	if err != nil || !ok {
		t.Fatalf("%v, %v", ok, err)
	}
	want := trace.Event{Time: 600000000, Kind: trace.TaskSchedule, Job: 12345678901, Task: 7, Machine: 98765432101, HasMachine: true,
		Priority: 200, Class: 1, Resources: trace.Resources{CPU: trace.Known(0.0135), Memory: trace.Known(0.0062)}}
	if e != want {
		t.Fatalf("got %+v\nwant %+v", e, want)
	}
	e, ok, err = ParseInstanceEvent([]byte(fixtureSubmit))
	if err != nil || !ok || e.Kind != trace.TaskSubmit || e.HasMachine || !e.Resources.CPU.Known {
		t.Fatalf("numbers as numbers, machine 0: %+v, %v, %v", e, ok, err)
	}
	// Every 2019 code maps to its own kind (never the 2011 numbering).
	kinds := map[int]trace.Kind{0: trace.TaskSubmit, 1: 0, 2: 0, 3: trace.TaskSchedule, 4: trace.TaskEnd, 5: trace.TaskEnd,
		6: trace.TaskEnd, 7: trace.TaskEnd, 8: trace.TaskEnd, 9: trace.TaskUpdate, 10: trace.TaskUpdate}
	endsBy := map[int]trace.End{4: trace.EndEvict, 5: trace.EndFail, 6: trace.EndFinish, 7: trace.EndKill, 8: trace.EndLost}
	for code, k := range kinds {
		row := strings.Replace(fixtureInstance, `"type":"3"`, fmt.Sprintf(`"type":%d`, code), 1)
		e, ok, err := ParseInstanceEvent([]byte(row))
		if err != nil || ok != (k != 0) || ok && (e.Kind != k || e.End != endsBy[code]) {
			t.Errorf("type %d: %v %v %v, want kind %v end %v", code, e.Kind, ok, err, k, endsBy[code])
		}
	}
	// A dedicated machine (-1) is a placement with no machine of the cell.
	e, _, err = ParseInstanceEvent([]byte(strings.Replace(fixtureInstance, `"machine_id":"98765432101"`, `"machine_id":"-1"`, 1)))
	if err != nil || e.HasMachine {
		t.Errorf("dedicated machine: %+v, %v", e, err)
	}
}

func TestParseErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct {
		row, field string
		want       error
	}{
		{strings.Replace(fixtureInstance, `"type":"3"`, `"type":"11"`, 1), "type", trace.ErrOutOfRange},
		{strings.Replace(fixtureInstance, `"time":"600000000",`, ``, 1), "time", trace.ErrMissing},
		{strings.Replace(fixtureInstance, `"instance_index":"7",`, ``, 1), "instance_index", trace.ErrMissing},
		{strings.Replace(fixtureInstance, `"cpus":0.0135`, `"cpus":-1`, 1), "resource_request.cpus", trace.ErrOutOfRange},
		{strings.Replace(fixtureInstance, `"cpus":0.0135`, `"cpus":true`, 1), "resource_request.cpus", trace.ErrSyntax},
		{strings.Replace(fixtureInstance, `"priority":"200"`, `"priority":"high"`, 1), "priority", nil},
		{strings.Replace(fixtureInstance, `"relation":"2"`, `"relation":"8"`, 1), "constraint.relation", trace.ErrOutOfRange},
		{fixtureInstance[:50], "", trace.ErrSyntax},
		{fixtureInstance + "}", "", trace.ErrSyntax},
		{`[1,2]`, "", trace.ErrSyntax},
	} {
		_, _, err := ParseInstanceEvent([]byte(tc.row))
		var pe *trace.ParseError
		if !errors.As(err, &pe) || pe.Field != tc.field || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%.60q: %v; want field %q, %v", tc.row, err, tc.field, tc.want)
		}
	}
	if _, _, err := ParseMachineEvent([]byte(strings.Replace(fixtureMachine, `"type":"1"`, `"type":"0"`, 1)), trace.Pos{}); !errors.Is(err, trace.ErrOutOfRange) {
		t.Errorf("machine event type 0 (unknown): %v", err)
	}
}

func TestAllocsIgnored(t *testing.T) {
	alloc := strings.Replace(fixtureInstance, `"collection_type":"0"`, `"collection_type":"1"`, 1)
	st := trace.NewStats()
	if _, ok, err := parseInstance([]byte(alloc), Options{}, st); ok || err != nil || st.Ignored["instance_events: alloc instances"] != 1 {
		t.Fatalf("alloc instance: %v %v %v", ok, err, st.Ignored)
	}
	if _, ok, err := parseInstance([]byte(alloc), Options{Allocs: true}, st); !ok || err != nil {
		t.Fatalf("with Allocs: %v %v", ok, err)
	}
}

func gz(t testing.TB, s string) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	io.WriteString(w, s)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	// machine_events as one file; instance_events as BigQuery's numbered
	// export files, read in name order; collection_events absent.
	os.WriteFile(filepath.Join(dir, "machine_events.json"), []byte(fixtureMachine+"\n"), 0o644)
	os.MkdirAll(filepath.Join(dir, TableInstanceEvents), 0o755)
	later := strings.Replace(fixtureInstance, `"600000000"`, `"700000000"`, 1)
	os.WriteFile(filepath.Join(dir, TableInstanceEvents, "instance_events-000000000000.json.gz"), gz(t, fixtureSubmit+"\n"+fixtureInstance+"\n"), 0o644)
	os.WriteFile(filepath.Join(dir, TableInstanceEvents, "instance_events-000000000001.json"), []byte(later+"\n{bad\n"+fixtureSubmit+"\n"), 0o644)
	src, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		e, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d %v %s", e.Time, e.Kind, filepath.Base(e.Pos.String())))
	}
	src.Close()
	want := []string{"0 MACHINE_ADD machine_events.json:1", "0 TASK_SUBMIT instance_events-000000000000.json.gz:1",
		"600000000 TASK_SCHEDULE instance_events-000000000000.json.gz:2", "700000000 TASK_SCHEDULE instance_events-000000000001.json:1"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	st := src.Stats()
	if st.Skipped["instance_events: malformed row"] != 1 || st.Skipped["instance_events: time: time goes backwards"] != 1 {
		t.Errorf("skipped %v", st.Skipped)
	}
	if !strings.Contains(strings.Join(st.Warnings, ";"), "collection_events: absent") {
		t.Errorf("warnings %v", st.Warnings)
	}
	// Strict: the malformed row is an error naming file and line.
	src, _ = Open(dir, Options{Strict: true})
	for err == nil {
		_, err = src.Next()
	}
	src.Close()
	if !strings.Contains(err.Error(), "instance_events-000000000001.json:2:") {
		t.Errorf("strict: %v", err)
	}
}

func FuzzParseInstanceEvent(f *testing.F) {
	for _, s := range []string{fixtureInstance, fixtureSubmit, fixtureColl} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, row string) {
		e, ok, err := ParseInstanceEvent([]byte(row))
		if err != nil {
			var pe *trace.ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("%q: %v is not a *trace.ParseError", row, err)
			}
			return
		}
		if ok && (e.Time < 0 || e.Job < 0 || e.Task < 0 || e.HasMachine && e.Machine <= 0 || e.Kind < trace.TaskSubmit) {
			t.Fatalf("%q parsed to an impossible event %+v", row, e)
		}
	})
}

func FuzzParseMachineEvent(f *testing.F) {
	f.Add(fixtureMachine)
	f.Fuzz(func(t *testing.T, row string) {
		e, _, err := ParseMachineEvent([]byte(row), trace.Pos{})
		if err != nil {
			var pe *trace.ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("%q: %v is not a *trace.ParseError", row, err)
			}
			return
		}
		if e.Kind < trace.MachineAdd || e.Kind > trace.MachineRemove || e.Machine <= 0 {
			t.Fatalf("%q parsed to an impossible event %+v", row, e)
		}
	})
}

// BenchmarkReadInstanceEvents measures the JSON reader in MB/s of rows.
func BenchmarkReadInstanceEvents(b *testing.B) {
	var buf bytes.Buffer
	for i := range 20000 {
		buf.WriteString(strings.Replace(fixtureInstance, `"instance_index":"7"`, fmt.Sprintf(`"instance_index":"%d"`, i), 1))
		buf.WriteByte('\n')
	}
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	st := trace.NewStats()
	for b.Loop() {
		l, _ := trace.NewLines(bytes.NewReader(data), "bench")
		for {
			row, err := l.Next()
			if err != nil {
				break
			}
			if _, _, err := parseInstance(row, Options{}, st); err != nil {
				b.Fatal(err)
			}
		}
	}
}
