package replay

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/omega-cell/omega/bench/sim"
	"github.com/omega-cell/omega/bench/trace/alibaba2018"
	"github.com/omega-cell/omega/bench/trace/google2019"
)

// The 2019 and Alibaba formats end to end at a scale beyond their
// fixtures: synthetic traces (the readers' Synthetic, 200 machines, about
// 5,000 events) replayed in strict mode; every row read, jobs submitted,
// scheduled and placed, and the same trace replayed twice gives the same
// summary.
func TestReplaySynthetic(t *testing.T) {
	for _, tc := range []struct {
		format string
		write  func(dir string) error
	}{
		{"google2019", google2019.Synthetic{Machines: 200, Events: 5000, Seed: 3, MeanTasks: 5, MeanRun: 300}.Write},
		{"alibaba2018", alibaba2018.Synthetic{Machines: 200, Events: 5000, Seed: 3, MeanTasks: 2, MeanInstances: 3, MeanRun: 300}.Write},
	} {
		t.Run(tc.format, func(t *testing.T) {
			dir := t.TempDir()
			if err := tc.write(dir); err != nil {
				t.Fatal(err)
			}
			first := replaySynthetic(t, tc.format, dir)
			if second := replaySynthetic(t, tc.format, dir); !bytes.Equal(first, second) {
				t.Errorf("two replays of one trace differ:\n%s\n%s", first, second)
			}
		})
	}
}

// replaySynthetic replays the trace in dir and gives its summary as JSON,
// the host's figures left out.
func replaySynthetic(t *testing.T, format, dir string) []byte {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Format, cfg.Trace, cfg.Strict = format, dir, true
	r := replayed(t, cfg)
	sum, st := r.Summarize(), r.Stats()
	t.Logf("%s: %.0f s, %d machines, jobs %d submitted %d scheduled, tasks %d submitted %d placed, reader %d events",
		format, sum.SimSeconds, sum.Machines, sum.JobsSubmitted, sum.JobsScheduled, st.TasksSubmitted, sum.TasksPlaced, sum.Replay.Reader.Events)
	if st.MachinesAdded != 200 || st.JobsSubmitted == 0 || st.TasksSubmitted == 0 || sum.JobsScheduled == 0 || sum.TasksPlaced == 0 {
		t.Errorf("%s: machines %d, jobs %d submitted %d scheduled, tasks %d submitted %d placed", format,
			st.MachinesAdded, st.JobsSubmitted, sum.JobsScheduled, st.TasksSubmitted, sum.TasksPlaced)
	}
	if n := r.TraceStats().SkippedTotal(); n != 0 || len(sum.Replay.Reader.Ignored) != 0 {
		t.Errorf("%s: %d rows skipped %v, ignored %v", format, n, sum.Replay.Reader.Skipped, sum.Replay.Reader.Ignored)
	}
	if ev := sum.Replay.Reader.Events; ev < 5000 {
		t.Errorf("%s: the reader gave %d events, want the trace's 5,000 and more", format, ev)
	}
	sum.Host = sim.Host{}
	b, err := json.Marshal(sum)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
