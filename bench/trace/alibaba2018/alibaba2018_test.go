package alibaba2018

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/omega-cell/omega/bench/trace"
)

var machineMetaPath = filepath.Join("..", "..", "..", "..", "shared", "traces", "alibaba-cluster-trace-v2018", "machine_meta.csv")

// Genuine machine_meta rows (the table's first three).
var realMachineRows = []string{"m_1,0,219,17,96,100,USING", "m_1,148984,219,17,96,100,USING", "m_1,535156,219,17,96,100,USING"}

// No genuine rows of batch_task, batch_instance or container_meta are at
// hand: these fixtures are written from the schema document, with
// batch_instance's job_name third as the files have it.
var (
	fixtureTasks = []string{
		"M1,2,j_7,1,Terminated,100,400,100,0.39",
		"task_Nzg3ODAwNDgzMTAwNTc4NjExMw==,1,j_8,12,Terminated,150,900,200,0.8",
		"R2_1,1,j_7,1,Terminated,300,600,50,0.2",
	}
	fixtureInstances = []string{
		"ins_1,M1,j_7,1,Terminated,100,250,m_1,1,1,96,100,0.5,0.6",
		"ins_2,M1,j_7,1,Failed,120,200,m_2,1,1,-1,101,,",
		"ins_9,task_Nzg3ODAwNDgzMTAwNTc4NjExMw==,j_8,12,Running,150,0,m_1,1,1,,,,",
		"ins_3,R2_1,j_7,1,Terminated,300,350,m_2,1,1,40,50,0.1,0.2",
		"ins_4,M9,j_9,1,Waiting,310,0,,,,,,,",
	}
	fixtureContainers = []string{
		"c_1,m_1,0,app_5,started,400,400,1.56",
		"c_1,m_1,5000,app_5,started,400,400,1.56",
		"c_1,m_1,9000,app_5,stopped,400,400,1.56",
	}
)

func TestParseRows(t *testing.T) {
	m, err := ParseMachineRow(realMachineRows[0])
	if err != nil || m != (MachineRow{Machine: "m_1", FailureDomain1: 219, FailureDomain2: "17", CPUs: 96, Memory: 100, Status: "USING"}) {
		t.Fatalf("machine: %+v, %v", m, err)
	}
	tr, err := ParseTaskRow(fixtureTasks[0])
	if err != nil || tr.Job != "j_7" || tr.Instances != 2 || tr.PlanCPU != trace.Known(100) || tr.PlanMem != trace.Known(0.39) {
		t.Fatalf("task: %+v, %v", tr, err)
	}
	in, err := ParseInstanceRow(fixtureInstances[1])
	if err != nil || in.Job != "j_7" || in.Task != "M1" || in.Machine != "m_2" || in.Status != "Failed" {
		t.Fatalf("instance: %+v, %v", in, err)
	}
	for _, tc := range []struct {
		line, field string
		parse       func(string) error
	}{
		{"m_1,0,219,17,96,101,USING", "mem_size", func(s string) error { _, err := ParseMachineRow(s); return err }},
		{"x_1,0,219,17,96,100,USING", "machine_id", func(s string) error { _, err := ParseMachineRow(s); return err }},
		{"m_1,0,219,17,96,100,", "status", func(s string) error { _, err := ParseMachineRow(s); return err }},
		{"M1,2,7,1,Terminated,100,400,100,0.39", "job_name", func(s string) error { _, err := ParseTaskRow(s); return err }},
		{"M1,2,j_7,1,Terminated,100,400,-5,0.39", "plan_cpu", func(s string) error { _, err := ParseTaskRow(s); return err }},
		// batch_instance as the schema document orders it (task_type
		// third) is refused: the files put job_name there.
		{"ins_1,M1,1,j_7,Terminated,100,250,m_1,1,1,96,100,0.5,0.6", "job_name", func(s string) error { _, err := ParseInstanceRow(s); return err }},
		{"ins_1,M1,j_7,1,Terminated,100,250,m_1,1,1,-2,100,0.5,0.6", "cpu_avg", func(s string) error { _, err := ParseInstanceRow(s); return err }},
		{"c_1,m_1,0,app_5,started,400,400,101", "mem_size", func(s string) error { _, err := ParseContainerRow(s); return err }},
		{"c_1,m_1,0,app_5,started", "", func(s string) error { _, err := ParseContainerRow(s); return err }},
	} {
		err := tc.parse(tc.line)
		var pe *trace.ParseError
		if !errors.As(err, &pe) || pe.Field != tc.field {
			t.Errorf("%q: %v, want an error naming %q", tc.line, err, tc.field)
		}
	}
}

func TestDAG(t *testing.T) {
	for name, want := range map[string]string{"M1": "1 []", "M2_1": "2 [1]", "M5_3_4": "5 [3 4]", "R4_2": "4 [2]", "J10_9_8_7": "10 [9 8 7]"} {
		id, deps, ok := DAG(name)
		if got := fmt.Sprint(id, " ", deps); !ok || got != want {
			t.Errorf("%s: %s %v, want %s", name, got, ok, want)
		}
	}
	for _, name := range []string{"task_Nzg3ODAwNDgzMTAwNTc4NjExMw==", "MergeTask", "M", "M1_", "m1", ""} {
		if _, _, ok := DAG(name); ok {
			t.Errorf("%q: a DAG name", name)
		}
	}
}

func TestID(t *testing.T) {
	if ID("m_1932") != 1932 || ID("j_12") != 12 || ID("app_5") != 5 {
		t.Fatal("numbered ids")
	}
	if h := ID("M5_3_4"); h < 1<<61 || h == HashID("M5_3_5") {
		t.Fatalf("hashed id %d", h)
	}
}

// TestMachineMetaFacts reads the genuine machine_meta table.
func TestMachineMetaFacts(t *testing.T) {
	if _, err := os.Stat(machineMetaPath); errors.Is(err, fs.ErrNotExist) {
		t.Skipf("Alibaba machine_meta not found at %s (kept outside the repository in ../shared/traces); skipping", machineMetaPath)
	}
	st := trace.NewStats()
	ms, err := readMachines([]string{machineMetaPath}, Options{Strict: true}, st)
	if err != nil {
		t.Fatal(err)
	}
	if st.Rows[TableMachineMeta] != 17592 {
		t.Fatalf("%d rows, want 17,592", st.Rows[TableMachineMeta])
	}
	ids := map[int64]bool{}
	var last int64
	kinds := map[trace.Kind]int{}
	for _, e := range ms.evs {
		if e.Time < last {
			t.Fatalf("%s: time goes back (the file groups by machine; the reader sorts)", e.Pos)
		}
		last = e.Time
		ids[e.Machine] = true
		kinds[e.Kind]++
		if e.Kind != trace.MachineRemove && (e.Resources.CPU.Value != 9600 || e.Resources.Memory.Value != 100) {
			t.Fatalf("%s: capacity %+v, want 96 cores and 100%%", e.Pos, e.Resources)
		}
	}
	// 4,034 machines in the table; one of them (m_2739, its only rows
	// IMPORT_INSTALLING) never enters service.
	if len(ids) != 4033 || ids[2739] {
		t.Errorf("%d machines in service, want 4,033 (all but m_2739)", len(ids))
	}
	// 17,587 USING rows, 5 IMPORT_INSTALLING: each machine is added once
	// when first in service; a non-USING row removes a machine that was up.
	if kinds[trace.MachineAdd]+kinds[trace.MachineUpdate]+int(st.Ignored["machine_meta: a machine not in service (IMPORT_INSTALLING) that was not up"])+kinds[trace.MachineRemove] != 17592 {
		t.Errorf("kinds %v, ignored %v", kinds, st.Ignored)
	}
}

func writeFile(t *testing.T, path string, rows []string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(strings.Join(rows, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestOpenJoinsAndOrders(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "machine_meta.csv"), append(slices.Clone(realMachineRows), "m_2,50,1,1,96,100,USING"))
	writeFile(t, filepath.Join(dir, "batch_task.csv"), fixtureTasks)
	writeFile(t, filepath.Join(dir, "batch_instance.csv"), fixtureInstances)
	writeFile(t, filepath.Join(dir, "container_meta.csv"), fixtureContainers)
	src, err := Open(dir, Options{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var got []string
	var submits []trace.Event
	for {
		e, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		s := fmt.Sprintf("%d %v", e.Time/second, e.Kind)
		if e.Kind == trace.TaskEnd {
			s += " " + e.End.String()
		}
		got = append(got, s+" "+filepath.Base(e.Pos.String()))
		if e.Kind == trace.TaskSubmit {
			submits = append(submits, e)
		}
	}
	want := []string{
		"0 MACHINE_ADD machine_meta.csv:1",
		"0 TASK_SUBMIT container_meta.csv:1",
		"0 TASK_SCHEDULE container_meta.csv:1",
		"50 MACHINE_ADD machine_meta.csv:4",
		"100 TASK_SUBMIT batch_instance.csv:1",
		"100 TASK_SCHEDULE batch_instance.csv:1",
		"120 TASK_SUBMIT batch_instance.csv:2",
		"120 TASK_SCHEDULE batch_instance.csv:2",
		"148984 MACHINE_UPDATE machine_meta.csv:2",
	}
	// Ends come at their own times, between later rows.
	want = []string{want[0], want[1], want[2], want[3], want[4], want[5], want[6], want[7],
		"150 TASK_SUBMIT batch_instance.csv:3", "150 TASK_SCHEDULE batch_instance.csv:3",
		"200 TASK_END FAIL batch_instance.csv:2", "250 TASK_END FINISH batch_instance.csv:1",
		"300 TASK_SUBMIT batch_instance.csv:4", "300 TASK_SCHEDULE batch_instance.csv:4",
		"310 TASK_SUBMIT batch_instance.csv:5",
		"350 TASK_END FINISH batch_instance.csv:4",
		"9000 TASK_END KILL container_meta.csv:3",
		want[8], "535156 MACHINE_UPDATE machine_meta.csv:3"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Requests come from the task's plan (M1: 100 = 1 core, 0.39%).
	if r := submits[1].Resources; r.CPU != trace.Known(100) || r.Memory != trace.Known(0.39) {
		t.Errorf("instance of M1 requests %+v", r)
	}
	if submits[1].Task == submits[2].Task || submits[1].Job != 7 {
		t.Errorf("instances of one task share an id, or the job is wrong: %+v %+v", submits[1], submits[2])
	}
	if r := submits[0].Resources; r.CPU != trace.Known(400) {
		t.Errorf("container requests %+v", r)
	}
	st := src.Stats()
	if st.Ignored["batch_instance: no batch_task row for its task (request unknown)"] != 1 {
		t.Errorf("ignored %v", st.Ignored)
	}
}

func TestOpenUnsortedInstances(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "batch_instance.csv"), []string{fixtureInstances[3], fixtureInstances[0], "bad,row"})
	src, _ := Open(dir, Options{})
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
	st := src.Stats()
	if st.Skipped["batch_instance: start_time: time goes backwards"] != 1 || st.Skipped["batch_instance: wrong number of fields"] != 1 || n != 3 {
		t.Fatalf("%d events, skipped %v", n, st.Skipped)
	}
	src, _ = Open(dir, Options{Strict: true})
	var err error
	for err == nil {
		_, err = src.Next()
	}
	if !errors.Is(err, trace.ErrOutOfOrder) || !strings.Contains(err.Error(), "batch_instance.csv:2:") || !strings.Contains(err.Error(), "sort batch_instance") {
		t.Fatalf("strict: %v", err)
	}
}

func fuzzRows(f *testing.F, seeds []string, parse func(string) error) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		if err := parse(line); err != nil {
			var pe *trace.ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("%q: %v is not a *trace.ParseError", line, err)
			}
		}
	})
}

func FuzzParseMachineRow(f *testing.F) {
	fuzzRows(f, realMachineRows, func(s string) error {
		m, err := ParseMachineRow(s)
		if err == nil && (m.Memory > 100 || m.CPUs < 1 || m.Time < 0) {
			panic(fmt.Sprintf("%q: impossible row %+v", s, m))
		}
		return err
	})
}

func FuzzParseTaskRow(f *testing.F) {
	fuzzRows(f, fixtureTasks, func(s string) error { _, err := ParseTaskRow(s); return err })
}

func FuzzParseInstanceRow(f *testing.F) {
	fuzzRows(f, fixtureInstances, func(s string) error { _, err := ParseInstanceRow(s); return err })
}

func FuzzParseContainerRow(f *testing.F) {
	fuzzRows(f, fixtureContainers, func(s string) error { _, err := ParseContainerRow(s); return err })
}

// BenchmarkReadInstances measures the batch_instance reader (lines and
// parsing, no gzip: the published tables are tar.gz, sorted into plain
// CSV first) in rows/s, over instance rows written from the fixtures.
func BenchmarkReadInstances(b *testing.B) {
	var buf bytes.Buffer
	n := 0
	for i := range 50000 {
		row := fixtureInstances[i%4]
		buf.WriteString(strings.Replace(row, "ins_", fmt.Sprintf("ins_%d", i), 1))
		buf.WriteByte('\n')
		n++
	}
	data := buf.Bytes()
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
}
