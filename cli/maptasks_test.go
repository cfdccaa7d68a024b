package cli

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/omega-cell/omega/bench/workload"
)

// TestSimMapTasksPerWorker: --map-tasks-per-worker and the config file's
// map_tasks_per_worker set the workload's MapTasksPerWorker (16 when
// neither does, the flag winning over the file), and a value outside 1 to
// workload.MaxMapTasksPerWorker, or not a whole number, is refused by an
// error naming the flag or the field and the value, before anything is
// written.
func TestSimMapTasksPerWorker(t *testing.T) {
	dir := t.TempDir()
	conf := func(name, yaml string) string {
		path := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(path, []byte(yaml+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	four := conf("four", "map_tasks_per_worker: 4")
	maxMT := strconv.Itoa(workload.MaxMapTasksPerWorker)
	for _, tc := range []struct {
		args []string
		want int
	}{
		{nil, 16},
		{[]string{"--map-tasks-per-worker", "1"}, 1},
		{[]string{"--map-tasks-per-worker", "3"}, 3},
		{[]string{"--map-tasks-per-worker", maxMT}, workload.MaxMapTasksPerWorker},
		{[]string{"--config", four}, 4},
		{[]string{"--config", four, "--map-tasks-per-worker", "8"}, 8},
	} {
		cfg, _, err := simSettings(t, append(tc.args, "--json")...)
		if err != nil || cfg.Workload.MapTasksPerWorker != tc.want {
			t.Errorf("%q: MapTasksPerWorker %d, err %v; want %d", tc.args, cfg.Workload.MapTasksPerWorker, err, tc.want)
		}
	}

	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--map-tasks-per-worker", "0"}, []string{"--map-tasks-per-worker 0", "1 to " + maxMT}},
		{[]string{"--map-tasks-per-worker", "-2"}, []string{"--map-tasks-per-worker -2"}},
		{[]string{"--map-tasks-per-worker", strconv.Itoa(workload.MaxMapTasksPerWorker + 1)}, []string{"--map-tasks-per-worker " + strconv.Itoa(workload.MaxMapTasksPerWorker+1)}},
		{[]string{"--map-tasks-per-worker", "2.5"}, []string{"map-tasks-per-worker", "2.5"}},
		{[]string{"--map-tasks-per-worker", "many"}, []string{"map-tasks-per-worker", "many"}},
		{[]string{"--config", conf("zero", "map_tasks_per_worker: 0")}, []string{"map_tasks_per_worker 0"}},
		{[]string{"--config", conf("half", "map_tasks_per_worker: 2.5")}, []string{"map_tasks_per_worker 2.5"}},
		{[]string{"--config", conf("big", "map_tasks_per_worker: 5000")}, []string{"map_tasks_per_worker 5000"}},
	} {
		refused(t, append([]string{"sim"}, tc.args...), tc.want...)
	}
}
