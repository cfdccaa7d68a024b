package replay

import (
	"bytes"
	"compress/gzip"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The other formats end to end, on rows written from their format
// documents (no genuine rows of these tables are at hand; the readers'
// own tests hold the same fixtures): the trace's machines join the cell,
// its instances are submitted and placed by the schedulers, and run their
// trace runtime.

func replayDir(t *testing.T, format string, files map[string]string) Stats {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := DefaultConfig()
	cfg.Format, cfg.Trace, cfg.Strict = format, dir, true
	r := replayed(t, cfg)
	sum := r.Summarize()
	t.Logf("%s: %.0f s, %d machines, jobs %d scheduled %d, tasks placed %d, stats %+v", format, sum.SimSeconds, sum.Machines, sum.JobsSubmitted, sum.JobsScheduled, sum.TasksPlaced, r.Stats())
	if sum.TasksPlaced == 0 || sum.JobsScheduled == 0 {
		t.Errorf("%s: nothing placed: %+v", format, sum.Summary)
	}
	return r.Stats()
}

func TestReplayAlibaba2018Fixture(t *testing.T) {
	st := replayDir(t, "alibaba2018", map[string]string{
		"machine_meta.csv": "m_1,0,219,17,96,100,USING\nm_2,50,1,1,96,100,USING\n",
		"batch_task.csv":   "M1,2,j_7,1,Terminated,100,400,100,0.39\nR2_1,1,j_7,1,Terminated,300,600,50,0.2\n",
		"batch_instance.csv": strings.Join([]string{
			"ins_1,M1,j_7,1,Terminated,100,250,m_1,1,1,96,100,0.5,0.6",
			"ins_2,M1,j_7,1,Failed,120,200,m_2,1,1,-1,101,,",
			"ins_3,R2_1,j_7,1,Terminated,300,350,m_2,1,1,40,50,0.1,0.2",
		}, "\n") + "\n",
		"container_meta.csv": "c_1,m_1,0,app_5,started,400,400,1.56\nc_1,m_1,5000,app_5,started,400,400,1.56\nc_1,m_1,9000,app_5,stopped,400,400,1.56\n",
	})
	if st.MachinesAdded != 2 || st.TasksSubmitted != 4 {
		t.Errorf("machines %d, tasks %d; want the 2 machines and the 3 instances and the container", st.MachinesAdded, st.TasksSubmitted)
	}
}

func TestReplayGoogle2019Fixture(t *testing.T) {
	const (
		machine  = `{"time":"0","machine_id":"98765432101","type":"1","switch_id":"Sw1","capacity":{"cpus":0.5,"memory":0.25},"platform_id":"Pl1","missing_data_reason":null}`
		submit   = `{"time":"1000000","type":"0","collection_id":"12345678901","scheduling_class":"1","collection_type":"0","priority":"200","instance_index":"7","machine_id":"0","resource_request":{"cpus":"0.0135","memory":"0.0062"},"constraint":[]}`
		schedule = `{"time":"600000000","type":"3","collection_id":"12345678901","scheduling_class":"1","collection_type":"0","priority":"200","instance_index":"7","machine_id":"98765432101","resource_request":{"cpus":0.0135,"memory":0.0062},"constraint":[]}`
		finish   = `{"time":"900000000","type":"6","collection_id":"12345678901","scheduling_class":"1","collection_type":"0","priority":"200","instance_index":"7","machine_id":"98765432101","resource_request":{"cpus":0.0135,"memory":0.0062},"constraint":[]}`
	)
	st := replayDir(t, "google2019", map[string]string{
		"machine_events.json":  machine + "\n",
		"instance_events.json": submit + "\n" + schedule + "\n" + finish + "\n",
	})
	if st.MachinesAdded != 1 || st.TasksSubmitted != 1 || st.JobsSubmitted != 1 {
		t.Errorf("stats %+v; want the machine and the one instance", st)
	}
}

// The trace fails a job's tasks and submits them again one by one,
// microseconds apart: the resubmissions are one job of the cell, the ends
// of the runs before them applied with it (up to the coalescing window
// early), not a job per task.
func TestReplayCoalescesResubmissions(t *testing.T) {
	gz := func(lines ...string) string {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		zw.Write([]byte(strings.Join(lines, "\n") + "\n"))
		zw.Close()
		return b.String()
	}
	dir := t.TempDir()
	for table, body := range map[string]string{
		"machine_events": gz("0,1,0,P,0.5,0.25", "0,2,0,P,0.5,0.25"),
		"task_events": gz(
			"10000000,,7,0,,0,u,0,2,0.1,0.05,0,0",
			"10000000,,7,1,,0,u,0,2,0.1,0.05,0,0",
			"11000000,,7,0,1,1,u,0,2,0.1,0.05,0,0",
			"11000000,,7,1,2,1,u,0,2,0.1,0.05,0,0",
			"20000001,,7,0,1,3,u,0,2,0.1,0.05,0,0",
			"20000002,,7,0,,0,u,0,2,0.1,0.05,0,0",
			"20000003,,7,1,2,3,u,0,2,0.1,0.05,0,0",
			"20000004,,7,1,,0,u,0,2,0.1,0.05,0,0",
			"21000000,,7,0,2,1,u,0,2,0.1,0.05,0,0",
			"21000000,,7,1,1,1,u,0,2,0.1,0.05,0,0",
			"60000000,,7,0,2,4,u,0,2,0.1,0.05,0,0",
			"60000000,,7,1,1,4,u,0,2,0.1,0.05,0,0"),
	} {
		os.MkdirAll(filepath.Join(dir, table), 0o755)
		if err := os.WriteFile(filepath.Join(dir, table, "part-00000-of-00001.csv.gz"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := DefaultConfig()
	cfg.Format, cfg.Trace, cfg.Strict = "google2011", dir, true
	r := replayed(t, cfg)
	st, sum := r.Stats(), r.Summarize()
	// A replay closed before it ran stops its reader (which read ahead
	// and waits to hand over) and releases the trace.
	cfg.Sim.Dir = t.TempDir()
	r2, err := Build(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := r2.Close(); err != nil {
		t.Fatal(err)
	}
	if st.JobsSubmitted != 2 || st.TasksSubmitted != 4 || st.EndsCoalesced != 1 || st.SubmissionsCoalesced != 1 {
		t.Errorf("stats %+v; want 2 jobs of 2 tasks each, task 1's end and resubmission joined to task 0's", st)
	}
	if sum.JobsScheduled != 2 || sum.TasksPlaced != 4 {
		t.Errorf("%d jobs scheduled, %d tasks placed; want both jobs whole", sum.JobsScheduled, sum.TasksPlaced)
	}
}
