package google2011

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"github.com/omega-cell/omega/bench/trace"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
)

// Genuine rows of the excerpt (task_events and job_events, shard 0).
var (
	realTaskRows = []string{
		"0,2,3418309,0,4155527081,0,70s3v5qRyCO/1PCdI6fVXnrW8FU/w+5CKRSa72xgcIo=,3,9,,,,",
		"0,,3418314,0,3938719206,0,70s3v5qRyCO/1PCdI6fVXnrW8FU/w+5CKRSa72xgcIo=,3,9,0.125,0.07446,0.0004244,0",
		"0,,2902878525,0,2110999309,0,wCn+ghu8PJtxrZGYHh7myaXzhOnxiWYu5XZf/2M2slc=,2,11,0.0531,0.0127,0.001242,1",
		"0,,6251664990,0,30789456,1,lRvqPbzcyVpWRGsqXd+PVsDiyS2pJxa2BogyAArJVlo=,1,0,0.006248,0.007767,3.815e-05,0",
		"600046926,,6251537638,1832,4304051942,4,fJYeclskJqPWsAT6TX/r9X5OiIZpSEb2PBGliYAOMxM=,0,2,0.02499,0.07959,0.0003862,1",
		"600047716,,5285926325,0,1302287,3,2V0B3LFwQ48zIHlDcpiCQTAG+f4Nk64GVADb8vfarvA=,0,9,0.0625,0.006218,3.815e-05,0",
		"600047726,,5285926325,0,,0,2V0B3LFwQ48zIHlDcpiCQTAG+f4Nk64GVADb8vfarvA=,0,9,0.0625,0.006218,3.815e-05,0",
		"600819256,,515042969,2,,5,/fk1fVcVxZ6iM6gHZzqbIyq56m5zrmHfpdcZ/zzkq4c=,2,0,0.01562,0.01553,0.0002155,0",
		"605587262,,6250245734,3586,3725353497,2,0e4YV8rEkcNKEIOsJT7euNGNMqoLrqS80NYdESw4UFQ=,0,2,0.0625,0.1184,0.001158,0",
		"5611086346,,515042969,26,,0,/fk1fVcVxZ6iM6gHZzqbIyq56m5zrmHfpdcZ/zzkq4c=,2,0,0.01562,0.01553,0.0002155,0",
	}
	realJobRows = []string{
		"0,,3418309,0,70s3v5qRyCO/1PCdI6fVXnrW8FU/w+5CKRSa72xgcIo=,3,IHgtoxEBuUTHNbUeVs4hzptMY4n8rZKLbZg+Jh5fNG4=,wAmgn2H74cdoMuSFwJF3NaUEaudVBTZ0/HaNZBwIpEQ=",
		"604046276,,6251639640,4,0yO12LxPGQxL+XkI4hS6Tlyx5V3KOvjHS0DQSOJeMbs=,1,0VRH1Jd5MGmAfJ9/rKwhsafRxNYi77rYxgsgb1q2OJw=,Y+cfHMX6f6uUQjHk6eRo9YEJfat+HtYJMC6R3J2WPAA=",
		"637871442,,6251630964,5,fJYeclskJqPWsAT6TX/r9X5OiIZpSEb2PBGliYAOMxM=,0,fnhSWMyN84Gs0TqmuxQTy8Hn9d7sWp5iD5xCr8rxiHI=,hZtBgA3khsxuBz9D+tnrQayylJllPe/z5WqBjicYeYQ=",
		"659602520,,6251620795,3,fVUqjeDqXrzcJObPpFT8U1FwH8uBfyRXJQa4zRlwpb4=,1,7cLW+6pt2CHJM01krasXKfXt1ArqbEMuwVseGSpclus=,kzI7CKSyq7J04F06rtsufIYDPvFxRDHISFXAf2Qav7o=",
	}
)

func TestParseTaskEventFields(t *testing.T) {
	e, err := ParseTaskEvent(realTaskRows[0])
	if err != nil {
		t.Fatal(err)
	}
	want := TaskEvent{
		Time: 0, MissingInfo: ExistsButNoCreation, JobID: 3418309, TaskIndex: 0,
		MachineID: Known[int64](4155527081), Type: Submit,
		User: "70s3v5qRyCO/1PCdI6fVXnrW8FU/w+5CKRSa72xgcIo=", SchedulingClass: 3, Priority: 9,
	}
	if e != want {
		t.Errorf("row 0:\n got %+v\nwant %+v", e, want)
	}
	if c, ok := e.MissingInfo.Code(); !ok || c != 2 {
		t.Errorf("missing info code = %d, %v; want 2, true", c, ok)
	}
	if e.CPURequest.Known || e.MemoryRequest.Known || e.DiskRequest.Known || e.DifferentMachines.Known {
		t.Errorf("empty resource columns must be unknown, got %+v", e)
	}

	e, err = ParseTaskEvent(realTaskRows[3])
	if err != nil {
		t.Fatal(err)
	}
	want = TaskEvent{
		Time: 0, JobID: 6251664990, MachineID: Known[int64](30789456), Type: Schedule,
		User: "lRvqPbzcyVpWRGsqXd+PVsDiyS2pJxa2BogyAArJVlo=", SchedulingClass: 1, Priority: 0,
		CPURequest: Known(0.006248), MemoryRequest: Known(0.007767), DiskRequest: Known(3.815e-05),
		DifferentMachines: Known(false),
	}
	if e != want {
		t.Errorf("row 3:\n got %+v\nwant %+v", e, want)
	}
	if e.MissingInfo != MissingNone {
		t.Errorf("empty missing_info = %v, want NONE", e.MissingInfo)
	}

	e, err = ParseTaskEvent(realTaskRows[6])
	if err != nil {
		t.Fatal(err)
	}
	if e.MachineID.Known {
		t.Errorf("empty machine_id parsed as known %d", e.MachineID.Value)
	}
	if e.JobID != 5285926325 { // above 2^32
		t.Errorf("job id = %d, want 5285926325", e.JobID)
	}
}

func TestParseJobEventFields(t *testing.T) {
	e, err := ParseJobEvent(realJobRows[1])
	if err != nil {
		t.Fatal(err)
	}
	want := JobEvent{
		Time: 604046276, JobID: 6251639640, Type: Finish,
		User: "0yO12LxPGQxL+XkI4hS6Tlyx5V3KOvjHS0DQSOJeMbs=", SchedulingClass: 1,
		JobName:        "0VRH1Jd5MGmAfJ9/rKwhsafRxNYi77rYxgsgb1q2OJw=",
		LogicalJobName: "Y+cfHMX6f6uUQjHk6eRo9YEJfat+HtYJMC6R3J2WPAA=",
	}
	if e != want {
		t.Errorf("got %+v\nwant %+v", e, want)
	}
}

func TestEventTypeNames2011(t *testing.T) {
	// The 2011 codes; the 2019 trace renumbers them (3 is SCHEDULE there).
	for code, name := range []string{"SUBMIT", "SCHEDULE", "EVICT", "FAIL", "FINISH", "KILL", "LOST", "UPDATE_PENDING", "UPDATE_RUNNING"} {
		if got := EventType(code).String(); got != name {
			t.Errorf("code %d = %s, want %s", code, got, name)
		}
	}
	if EventType(9).Valid() {
		t.Error("code 9 is not a 2011 event type")
	}
}

func TestParseErrorsNameTheField(t *testing.T) {
	good := strings.Split(realTaskRows[1], ",")
	with := func(i int, v string) string {
		f := append([]string(nil), good...)
		f[i] = v
		return strings.Join(f, ",")
	}
	for _, tc := range []struct {
		line, field string
		err         error
	}{
		{with(0, "x"), "time", strconv.ErrSyntax},
		{with(0, "-1"), "time", trace.ErrOutOfRange},
		{with(0, ""), "time", trace.ErrMissing},
		{with(1, "3"), "missing_info", trace.ErrOutOfRange},
		{with(2, "99999999999999999999"), "job_id", strconv.ErrRange},
		{with(3, ""), "task_index", trace.ErrMissing},
		{with(4, "1.5"), "machine_id", strconv.ErrSyntax},
		{with(5, "9"), "event_type", trace.ErrOutOfRange},
		{with(7, "4"), "scheduling_class", trace.ErrOutOfRange},
		{with(8, "12"), "priority", trace.ErrOutOfRange},
		{with(9, "NaN"), "cpu_request", trace.ErrOutOfRange},
		{with(10, "-0.1"), "memory_request", trace.ErrOutOfRange},
		{with(11, "Inf"), "disk_request", trace.ErrOutOfRange},
		{with(11, "0.1.2"), "disk_request", strconv.ErrSyntax},
		{with(12, "2"), "different_machines_restriction", trace.ErrOutOfRange},
		{realTaskRows[1] + ",", "", trace.ErrFieldCount},
		{strings.Join(good[:12], ","), "", trace.ErrFieldCount},
		{"", "", trace.ErrFieldCount},
	} {
		_, err := ParseTaskEvent(tc.line)
		var pe *trace.ParseError
		if !errors.As(err, &pe) {
			t.Errorf("%q: error %v is not a *trace.ParseError", tc.line, err)
			continue
		}
		if pe.Field != tc.field || !errors.Is(err, tc.err) {
			t.Errorf("%q: got field %q err %v; want field %q err %v", tc.line, pe.Field, err, tc.field, tc.err)
		}
		if tc.field != "" && !strings.Contains(err.Error(), "field "+tc.field) {
			t.Errorf("message %q does not name field %s", err, tc.field)
		}
	}
	if _, err := ParseJobEvent("1,,2,3"); !errors.Is(err, trace.ErrFieldCount) {
		t.Errorf("short job row: %v", err)
	}
}

func gzipped(t *testing.T, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if _, err := io.WriteString(w, s); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestReaderNamesFileLineAndField(t *testing.T) {
	bad := strings.Replace(realTaskRows[2], ",11,", ",eleven,", 1)
	text := realTaskRows[0] + "\n" + realTaskRows[1] + "\n" + bad + "\n" + realTaskRows[3] + "\n"
	for name, data := range map[string][]byte{"plain.csv": []byte(text), "part.csv.gz": gzipped(t, text)} {
		r, err := NewTaskEventReader(bytes.NewReader(data), name)
		if err != nil {
			t.Fatal(err)
		}
		var got []TaskEvent
		var errs []error
		for {
			e, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				errs = append(errs, err)
				continue // the reader goes on after a malformed row
			}
			got = append(got, e)
		}
		r.Close()
		if len(got) != 3 || len(errs) != 1 {
			t.Fatalf("%s: %d rows, errors %v; want 3 rows and 1 error", name, len(got), errs)
		}
		var pe *trace.ParseError
		if !errors.As(errs[0], &pe) || pe.File != name || pe.Line != 3 || pe.Field != "priority" {
			t.Errorf("%s: error %v; want file %s line 3 field priority", name, errs[0], name)
		}
		if want := name + ":3: field priority"; !strings.HasPrefix(errs[0].Error(), want) {
			t.Errorf("message %q does not start with %q", errs[0], want)
		}
	}
}

func TestReaderCRLFAndEmpty(t *testing.T) {
	r, err := NewJobEventReader(strings.NewReader(realJobRows[0]+"\r\n"+realJobRows[1]+"\r\n"), "x")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := r.Next(); err != nil {
			t.Fatalf("row %d: %v", i+1, err)
		}
	}
	if _, err := r.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last row: %v, want EOF", err)
	}
	r, err = NewJobEventReader(strings.NewReader(""), "empty")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("empty input: %v, want EOF", err)
	}
}

// checkRoundTrip fails unless parse(format(e)) == e.
func checkRoundTrip(t testing.TB, line string, e TaskEvent) {
	t.Helper()
	text := FormatTaskEvent(e)
	back, err := ParseTaskEvent(text)
	if err != nil {
		t.Fatalf("%q parsed, but its formatted form %q does not: %v", line, text, err)
	}
	if back != e {
		t.Fatalf("%q: round trip through %q changed\n%+v\ninto\n%+v", line, text, e, back)
	}
}

func TestRoundTripRealRows(t *testing.T) {
	for _, line := range realTaskRows {
		e, err := ParseTaskEvent(line)
		if err != nil {
			t.Fatal(err)
		}
		checkRoundTrip(t, line, e)
		if got := FormatTaskEvent(e); got != line {
			t.Errorf("format(parse(%q)) = %q", line, got)
		}
	}
	for _, line := range realJobRows {
		e, err := ParseJobEvent(line)
		if err != nil {
			t.Fatal(err)
		}
		if got := FormatJobEvent(e); got != line {
			t.Errorf("format(parse(%q)) = %q", line, got)
		}
	}
}

// TestFormatReproducesTheShard formats every parsed row of the excerpt and
// compares it with the file's bytes: the format is the trace's own.
func TestFormatReproducesTheShard(t *testing.T) {
	tasks, jobs := loadTrace(t)
	check := func(path string, n int, format func(b []byte, i int) []byte) {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		gz, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(gz)
		var b []byte
		i := 0
		for sc.Scan() {
			if i >= n {
				t.Fatalf("%s: more lines than parsed rows", path)
			}
			b = format(b[:0], i)
			if !bytes.Equal(b, sc.Bytes()) {
				t.Fatalf("%s:%d: formatted %q, file has %q", path, i+1, b, sc.Bytes())
			}
			i++
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		if i != n {
			t.Fatalf("%s: %d lines, %d rows parsed", path, i, n)
		}
	}
	check(taskEventsPath, len(tasks), func(b []byte, i int) []byte { return AppendTaskEvent(b, tasks[i]) })
	check(jobEventsPath, len(jobs), func(b []byte, i int) []byte { return AppendJobEvent(b, jobs[i]) })
}

// TestTaskEventFacts checks the excerpt's documented facts
// (../shared/traces/README.md).
func TestTaskEventFacts(t *testing.T) {
	tasks, _ := loadTrace(t)
	if len(tasks) != 450146 {
		t.Errorf("rows = %d, want 450,146", len(tasks))
	}
	var atZero, emptyMachine, missing2, emptyRes, bigIDs int
	var firstNonZero int64
	counts := map[EventType]int{}
	prev := int64(0)
	for i, e := range tasks {
		if e.Time < prev {
			t.Fatalf("row %d: time %d < previous %d", i+1, e.Time, prev)
		}
		prev = e.Time
		if e.Time == 0 {
			atZero++
		} else if firstNonZero == 0 {
			firstNonZero = e.Time
		}
		counts[e.Type]++
		if !e.MachineID.Known {
			emptyMachine++
		}
		noRes := !e.CPURequest.Known && !e.MemoryRequest.Known && !e.DiskRequest.Known
		anyEmpty := !e.CPURequest.Known || !e.MemoryRequest.Known || !e.DiskRequest.Known
		if e.MissingInfo == ExistsButNoCreation {
			missing2++
			if !noRes {
				t.Errorf("row %d: missing_info=2 but resources %+v %+v %+v", i+1, e.CPURequest, e.MemoryRequest, e.DiskRequest)
			}
		} else if anyEmpty {
			t.Errorf("row %d: empty resource request without missing_info=2", i+1)
		}
		if noRes {
			emptyRes++
		}
		if e.JobID > math.MaxUint32 || e.MachineID.Value > math.MaxUint32 {
			bigIDs++
		}
	}
	if atZero != 277321 {
		t.Errorf("rows at time 0 = %d, want 277,321", atZero)
	}
	if firstNonZero != 600026913 {
		t.Errorf("first non-zero time = %d, want 600,026,913", firstNonZero)
	}
	want := map[EventType]int{
		Submit: 201491, Schedule: 189994, Evict: 4338,
		Fail: 581, Finish: 43237, Kill: 10505,
	}
	for k, n := range want {
		if counts[k] != n {
			t.Errorf("%s events = %d, want %d", k, counts[k], n)
		}
	}
	if len(counts) != len(want) {
		t.Errorf("event types seen: %v", counts)
	}
	if missing2 != 291 || emptyRes != 291 {
		t.Errorf("missing_info=2 rows = %d, rows with empty requests = %d; want 291 and 291", missing2, emptyRes)
	}
	if emptyMachine != 119565 {
		t.Errorf("empty machine ids = %d, want 119,565", emptyMachine)
	}
	if bigIDs == 0 {
		t.Error("no id above 2^32: ids must be int64")
	}
}

func TestJobEventFacts(t *testing.T) {
	_, jobs := loadTrace(t)
	if len(jobs) != 10704 {
		t.Errorf("rows = %d, want 10,704", len(jobs))
	}
	for i := 1; i < len(jobs); i++ {
		if jobs[i].Time < jobs[i-1].Time {
			t.Fatalf("row %d: time decreases", i+1)
		}
	}
}

func FuzzParseTaskEvent(f *testing.F) {
	for _, line := range realTaskRows {
		f.Add(line)
	}
	f.Fuzz(func(t *testing.T, line string) {
		e, err := ParseTaskEvent(line) // must not panic
		if err != nil {
			var pe *trace.ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("%q: error %v is not a *trace.ParseError", line, err)
			}
			return
		}
		checkRoundTrip(t, line, e)
	})
}

func FuzzParseJobEvent(f *testing.F) {
	for _, line := range realJobRows {
		f.Add(line)
	}
	f.Fuzz(func(t *testing.T, line string) {
		e, err := ParseJobEvent(line)
		if err != nil {
			return
		}
		back, err := ParseJobEvent(FormatJobEvent(e))
		if err != nil || back != e {
			t.Fatalf("%q: round trip gave %+v, %v", line, back, err)
		}
	})
}

// BenchmarkReadTaskEvents measures reading the gzipped shard.
func BenchmarkReadTaskEvents(b *testing.B) {
	loadTrace(b) // skips when absent
	rows := 0
	for b.Loop() {
		r, err := OpenTaskEvents(taskEventsPath)
		if err != nil {
			b.Fatal(err)
		}
		for {
			_, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			rows++
		}
		r.Close()
	}
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
}
