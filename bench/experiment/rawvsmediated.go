package experiment

import (
	"fmt"
	"math"
	"strings"
)

// The faults of the raw-vs-mediated experiment: each cell runs the same
// workload (GPU machines and jobs, MapReduce jobs included); the faulty
// scheduler takes a share of the batch work beside a correct batch
// scheduler, so what it claims wrongly is someone else's to suffer.
var faults = []struct {
	name, schedulers, route, tJob, what string
	agent                               bool
}{
	{"none", "batch=1,service=1", "", "", "no faulty component", false},
	{"faulty-units", "batch=1,faulty-units=1,service=1", "batch=faulty-units:0.2", "", "(a) a unit bug: claims declare memory in MiB", false},
	{"faulty-outdated", "batch=1,faulty-outdated=1,service=1", "batch=faulty-outdated:0.2", "", "(b) an outdated scheduler: claims never reserve the newer GPU dimension", false},
	// The thief takes every batch job as its own, racing the batch
	// scheduler; it decides faster, so it wins races.
	{"faulty-thief", "batch=1,faulty-thief=1,service=1", "batch=faulty-thief:0.2", "batch=0.1s,service=0.1s,faulty-thief=0.05s", "(c) a scheduler that claims tasks of jobs it does not own", false},
	{"faulty-agent", "batch=1,service=1", "", "", "(d) an agent that reports what did not happen (a never-placed task SUCCEEDED, another machine's task SUCCEEDED)", true},
}

var _ = register(&Experiment{
	Name:  "raw-vs-mediated",
	Title: `"don't expose raw state": a raw store (Omega's) against a mediated one (Kubernetes' API server), with faulty components`,
	Axes:  []string{"policy", "fault"},
	grid: func(sz Size) ([]Param, []gridCell) {
		common := append(base(sz), p("gpu-machines", "0.1"), p("gpu-jobs", "0.2"), p("mapreduce-share", "0"), p("audit-history", "true"))
		var cells []gridCell
		for _, pol := range []string{"raw", "mediated"} {
			for _, f := range faults {
				flags := []Param{p("policy", pol), p("schedulers", f.schedulers)}
				if f.route != "" {
					flags = append(flags, p("route", f.route))
				}
				if f.tJob != "" {
					flags = append(flags, p("t-job", f.tJob))
				}
				if f.agent {
					flags = append(flags, p("faulty-agent", "true"))
				}
				cells = append(cells, gridCell{axes: []Param{p("policy", pol), p("fault", f.name)}, flags: flags})
			}
		}
		return common, cells
	},
	analyze: analyzeRawVsMediated,
})

func analyzeRawVsMediated(res *Results) Analysis {
	var an Analysis
	an.Columns = []string{"history_violations", "history_first_s", "violations", "rejected", "rejected_resources_mismatch", "rejected_not_owner",
		"rejected_illegal_transition", "jobs_abandoned", "tasks_placed", "sched_batch_conflict_fraction"}
	get := func(pol, fault, metric string) float64 {
		c := res.Cell("policy", pol, "fault", fault)
		if c == nil {
			return math.NaN()
		}
		return res.Median(c.ID, metric)
	}
	// kinds names the kinds of violation a cell's history holds.
	kinds := func(pol, fault string) string {
		var out []string
		for _, k := range []string{"claim-short", "over-committed", "allocation-drift", "never-ran", "foreign-claim"} {
			if n := get(pol, fault, "history_violations_"+k); n > 0 {
				out = append(out, fmt.Sprintf("%s %s", fmtNum(n), k))
			}
		}
		if len(out) == 0 {
			return "none"
		}
		return strings.Join(out, ", ")
	}
	var rawBars, medBars series
	rawBars.label, medBars.label = "raw", "mediated"
	var cats []string
	for _, f := range faults {
		raw, med := get("raw", f.name, "history_violations"), get("mediated", f.name, "history_violations")
		cats = append(cats, f.name)
		rawBars.y, medBars.y = append(rawBars.y, raw), append(medBars.y, med)
		first := "never"
		if c := res.Cell("policy", "raw", "fault", f.name); c != nil {
			if st, ok := res.Stat(c.ID, "history_first_s"); ok {
				first = fmtNum(st.Median) + " simulated s"
			}
		}
		fd := Finding{ID: "raw-vs-mediated/" + f.name, Measured: fmt.Sprintf("raw: %s committed (first detectable after %s; the final state still holds %s); mediated: %s committed, %s operations rejected (%s not owner, %s resources mismatch, %s illegal transition), %s jobs abandoned",
			kinds("raw", f.name), first, fmtNum(get("raw", f.name, "violations")), kinds("mediated", f.name),
			fmtNum(get("mediated", f.name, "rejected")), fmtNum(get("mediated", f.name, "rejected_not_owner")),
			fmtNum(get("mediated", f.name, "rejected_resources_mismatch")), fmtNum(get("mediated", f.name, "rejected_illegal_transition")),
			fmtNum(get("mediated", f.name, "jobs_abandoned")))}
		if f.agent {
			fd.Measured = fmt.Sprintf("raw: %s of the agent's %s false reports committed, leaving %s (first detectable after %s; the rest, other machines' tasks ended early, look like true reports in the state and its history, which do not record who reported); mediated: %s committed, %s rejected",
				fmtNum(get("raw", f.name, "faulty_agent_committed")), fmtNum(get("raw", f.name, "faulty_agent_reports")), kinds("raw", f.name), first,
				kinds("mediated", f.name), fmtNum(get("mediated", f.name, "faulty_agent_rejected")))
		}
		if f.name == "none" {
			fd.Published = "With no faulty component, neither store persists a violation"
			fd.Verdict = verdict(raw == 0 && med == 0)
		} else {
			fd.Published = fmt.Sprintf("With %s, the raw store persists violations and the mediated one none", f.what)
			fd.Verdict = verdict(raw > 0 && med == 0)
			switch {
			case raw > 0 && med > 0:
				fd.Why = "the mediated policy has no rule for this fault yet: " + mediatedGap(f.name)
			case raw == 0:
				fd.Why = "the fault committed nothing wrong in this run: the faulty component had too few chances in this cell and horizon"
			}
		}
		an.Findings = append(an.Findings, fd)
	}
	cost := Finding{ID: "raw-vs-mediated/store-cost", Published: "Mediation costs under 25% of the store's claims/s (omega bench store's defaults, both policies in one run)"}
	if c := res.StoreCost; c == nil {
		cost.Measured, cost.Verdict = "not in this directory (store-cost.json: a direct run measures it; --collect does not)", NotMeasured
	} else {
		cost.Measured = fmt.Sprintf("claims/s raw %s, mediated %s: a cost of %s (commit p50 %s → %s ms, p99 %s → %s ms; medians of %d interleaved rounds of %s s)",
			fmtNum(c.RawClaimsPerSec), fmtNum(c.MedClaimsPerSec), pct(c.Cost), fmtNum(c.RawP50Ms), fmtNum(c.MedP50Ms), fmtNum(c.RawP99Ms), fmtNum(c.MedP99Ms), c.Rounds, fmtNum(c.DurationSec))
		cost.Verdict = verdict(c.Cost < 0.25)
	}
	an.Findings = append(an.Findings, cost)
	an.Notes = append(an.Notes,
		"Violations are counted over the whole history (`--audit-history`: bench/audit.Stream audits every revision as it commits, each violation once when it begins), not only in the final state, which hides a short claim whose task has ended. `omega sim --history FILE` writes the same history for `omega audit --history FILE`.",
		"The commit-path cost is wall-clock (store-cost.json), measured apart from the simulations' byte-identical results.")
	an.Figures = []Figure{{File: "raw-vs-mediated-violations.png", Caption: "Invariant violations committed over the run (omega audit of the history), by faulty component and store policy.",
		make: barChart{title: "Violations persisted", ylabel: "violations", categories: cats, series: []series{rawBars, medBars}}.plot}}
	return an
}

// mediatedGap says what the mediated policy lacks for a fault.
func mediatedGap(fault string) string {
	if fault == "faulty-thief" {
		return "ownership (a scheduler may claim only its jobs' tasks)"
	}
	return "a rule for " + fault
}
