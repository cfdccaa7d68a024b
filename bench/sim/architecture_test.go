package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

// archConfig is a small cell under the trace cell's whole load.
func archConfig(tJobService time.Duration) Config {
	cfg := DefaultConfig()
	cfg.Workload.Machines = 100
	cfg.Workload.Load = 10
	cfg.Workload.Days = 0.02
	cfg.Workload.Seed = 4
	cfg.Workload.MapReduceShare = 0 // no mapreduce scheduler runs
	cfg.Schedulers[1].TJob = tJobService
	return cfg
}

// The monolithic architectures run one scheduler taking every job: the
// single-path one at the service scheduler's decision time for every job,
// the multi-path one at each kind's. Their busyness follows: the
// single-path scheduler's grows with t_job(service) (never falls), and once
// that is the slower time it is at least the multi-path one's, which pays it
// for service jobs only. Every job of the workload is accounted for.
func TestMonolithicArchitectures(t *testing.T) {
	var last float64
	for _, tj := range []time.Duration{10 * time.Millisecond, 100 * time.Millisecond, time.Second, 5 * time.Second} {
		busy := map[string]float64{}
		for _, a := range []string{"single-path", "multi-path"} {
			cfg, err := archConfig(tj).WithArchitecture(a)
			if err != nil {
				t.Fatal(err)
			}
			if len(cfg.Schedulers) != 1 || cfg.Schedulers[0].Kind != "monolithic" || cfg.Route["batch"] != "monolithic" || cfg.Route["service"] != "monolithic" {
				t.Fatalf("%s: schedulers %+v, route %v", a, cfg.Schedulers, cfg.Route)
			}
			sum, _ := runConfig(t, cfg)
			if len(sum.Schedulers) != 1 || sum.JobsScheduled+sum.JobsAbandoned+sum.JobsPending != sum.JobsSubmitted || sum.JobsSubmitted == 0 {
				t.Fatalf("%s at t_job %v: %+v", a, tj, sum)
			}
			busy[a] = sum.Schedulers[0].BusynessMedian
			checkJobKinds(t, sum, "batch", "service")
		}
		// At least the multi-path one's once the service time is the slower
		// (below the batch scheduler's 100 ms, multi-path's batch jobs pay
		// more than single-path's).
		if busy["single-path"] < last || tj >= 100*time.Millisecond && busy["single-path"] < busy["multi-path"] {
			t.Fatalf("t_job(service) %v: single-path busyness %v (%v at the t_job before), multi-path %v", tj, busy["single-path"], last, busy["multi-path"])
		}
		last = busy["single-path"]
	}
}

// WithArchitecture refuses what it cannot turn into one scheduler, naming
// the architecture, and leaves the shared one as it was.
func TestWithArchitectureRefuses(t *testing.T) {
	cfg := DefaultConfig()
	if got, err := cfg.WithArchitecture("shared"); err != nil || len(got.Schedulers) != 2 {
		t.Fatalf("shared: %+v, %v", got.Schedulers, err)
	}
	two := DefaultConfig()
	two.Schedulers[0].Count = 2
	routed := DefaultConfig()
	routed.Route = map[string]string{"batch": "service"}
	mr := DefaultConfig()
	mr.Schedulers = append(mr.Schedulers, SchedulerSpec{Kind: "mapreduce", Count: 1})
	noService := DefaultConfig()
	noService.Schedulers = noService.Schedulers[:1]
	for name, c := range map[string]Config{"two batch": two, "routed": routed, "mapreduce": mr, "no service": noService} {
		if _, err := c.WithArchitecture("multi-path"); err == nil || !strings.Contains(err.Error(), "multi-path") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := DefaultConfig().WithArchitecture("two-level-someday"); err == nil || !strings.Contains(err.Error(), `"two-level-someday"`) || !strings.Contains(err.Error(), "single-path, multi-path, shared or two-level") {
		t.Errorf("an unknown architecture: %v", err)
	}
	bad := archConfig(time.Second)
	bad.Architecture = "two-level-someday"
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "sim.Config.Architecture") {
		t.Errorf("Validate of an unknown architecture: %v", err)
	}
	multi, _ := DefaultConfig().WithArchitecture("multi-path")
	if bt := multi.Schedulers[0].ByKind[omegav1.JobKind_JOB_KIND_BATCH]; bt.TJob != 100*time.Millisecond {
		t.Errorf("multi-path batch time %+v", bt)
	}
}

// A cell with GPU machines and jobs that ask for GPUs: the GPU tasks are
// placed, and only on machines that have GPUs (the schedulers and the
// store count the "gpu" dimension like cpu and memory).
func TestGPUTasksOnGPUMachines(t *testing.T) {
	cfg := archConfig(100 * time.Millisecond)
	cfg.Workload.GPUMachineShare, cfg.Workload.GPUJobShare = 0.2, 0.3
	cfg.CheckInvariants = true
	s := buildRun(t, cfg)
	st := s.Store.Snapshot()
	placed := 0
	st.RangeTasks(func(tk *txn.Task) bool {
		if tk.Request().Ext["gpu"] == 0 || tk.Machine == (uuid.UUID{}) {
			return true
		}
		m, ok := st.Machine(tk.Machine)
		if !ok || m.Capacity.Ext["gpu"] == 0 {
			t.Fatalf("GPU task %s on machine %s, which has no GPU", tk.UID, tk.Machine)
		}
		placed++
		return true
	})
	if placed == 0 {
		t.Fatal("no GPU task was placed")
	}
}

// The raw store takes a faulty scheduler at its word: with the batch jobs
// routed to the unit bug (claims declaring memory in MiB), the cell ends
// with tasks whose claim is less than their request; the correct
// schedulers leave none, nor a machine whose tasks ask for more memory than
// it has. (In this cell the CPU, which the bug declares right, fills first,
// so the short memory claims over-commit no machine yet: the violation is
// in the claims, for an auditor to find.)
func TestRawStorePersistsAUnitBug(t *testing.T) {
	violations := func(kind string, policy store.Policy) (short, over int) {
		cfg := archConfig(100 * time.Millisecond)
		cfg.Policy = policy
		if kind != "batch" {
			cfg.Schedulers[0].Kind = kind
			cfg.Route = map[string]string{"batch": kind}
		}
		st := buildRun(t, cfg).Store.Snapshot()
		used := map[uuid.UUID]int64{}
		st.RangeTasks(func(tk *txn.Task) bool {
			if tk.Placed() {
				if tk.Claimed.Memory < tk.Request().Memory {
					short++
				}
				used[tk.Machine] += tk.Request().Memory
			}
			return true
		})
		st.RangeMachines(func(m *txn.Machine) bool {
			if used[m.UID] > m.Capacity.Memory {
				over++
			}
			return true
		})
		return short, over
	}
	if short, over := violations("batch", nil); short != 0 || over != 0 {
		t.Fatalf("the batch scheduler left %d short claims and %d over-committed machines", short, over)
	}
	if short, _ := violations("faulty-units", nil); short == 0 {
		t.Fatal("the unit bug left no short claim")
	}
	// The mediated store rejects every one of the bug's claims.
	if short, over := violations("faulty-units", store.Mediated()); short != 0 || over != 0 {
		t.Fatalf("under the mediated policy the unit bug left %d short claims and %d over-committed machines", short, over)
	}
}

// Under the mediated policy every claim of the unit bug is rejected: its
// runner counts the rejected tasks as left without a machine, so its jobs
// are abandoned at the paper's bound instead of counted placed, and the
// service jobs of the correct scheduler are placed as ever.
func TestRejectedClaimsAreWorkLeft(t *testing.T) {
	cfg := archConfig(100 * time.Millisecond)
	cfg.Workload.Days = 0.05
	cfg.Schedulers[0].Kind = "faulty-units"
	cfg.Route = map[string]string{"batch": "faulty-units"}
	cfg.Policy = store.Mediated()
	sum, _ := runConfig(t, cfg)
	bug, svc := sum.Schedulers[0], sum.Schedulers[1]
	if bug.TasksPlaced != 0 || bug.JobsScheduled != 0 || bug.JobsAbandoned == 0 {
		t.Fatalf("the unit bug under mediation: %+v", bug)
	}
	if svc.TasksPlaced == 0 || svc.JobsAbandoned != 0 {
		t.Fatalf("the service scheduler: %+v", svc)
	}
}

// checkJobKinds checks that a summary's figures by kind of job name the
// kinds given, in order, and add up to its totals.
func checkJobKinds(t *testing.T, sum Summary, kinds ...string) {
	t.Helper()
	var names []string
	var submitted, scheduled, abandoned, pending int
	for _, k := range sum.JobKinds {
		names = append(names, k.Kind)
		submitted, scheduled, abandoned, pending = submitted+k.JobsSubmitted, scheduled+k.JobsScheduled, abandoned+k.JobsAbandoned, pending+k.JobsPending
		if k.JobsSubmitted == 0 || k.JobsScheduled+k.JobsAbandoned+k.JobsPending != k.JobsSubmitted {
			t.Errorf("kind %s: %+v", k.Kind, k)
		}
	}
	if strings.Join(names, ",") != strings.Join(kinds, ",") {
		t.Errorf("job kinds %v, want %v", names, kinds)
	}
	if submitted != sum.JobsSubmitted || scheduled != sum.JobsScheduled || abandoned != sum.JobsAbandoned || pending != sum.JobsPending {
		t.Errorf("job kinds add up to %d submitted, %d scheduled, %d abandoned, %d pending; the summary says %d, %d, %d, %d",
			submitted, scheduled, abandoned, pending, sum.JobsSubmitted, sum.JobsScheduled, sum.JobsAbandoned, sum.JobsPending)
	}
}
