package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/api/omega/v1/cellgrpc"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/client/remote"
	"github.com/omega-cell/omega/internal/objfile"
	"github.com/omega-cell/omega/jobs"
	"github.com/omega-cell/omega/labels"
	"github.com/omega-cell/omega/txn"
)

// The user's commands against a running cell: submit and get.

func newSubmitCmd() *cobra.Command {
	var file string
	var cf cellFlags
	var replace bool
	cmd := &cobra.Command{
		Use:   "submit -f FILE [--server ADDR] [--replace]",
		Short: "Submit a job from a YAML or JSON file",
		Long: `Reads a job — its meta and spec, in YAML or JSON, resources also in Kubernetes
quantities (cpu: 500m, memory: 256Mi) — from FILE (- for stdin) and creates it in
the cell with its tasks (spec.replicas copies of spec.template; a mapreduce job's
scheduler creates its workers itself), in one transaction.

Job names are unique among live jobs: a name in use is refused unless --replace,
which kills the live job (its tasks KILLED) in the same transaction. Every error
in the file names its line, column and field.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return errors.New("-f: required: the job file (- for stdin)")
			}
			var data []byte
			var err error
			if file == "-" {
				data, err = io.ReadAll(io.LimitReader(cmd.InOrStdin(), objfile.MaxBytes+1))
			} else {
				data, err = os.ReadFile(file)
			}
			if err != nil {
				return err
			}
			job, err := objfile.Job(file, data)
			if err != nil {
				return err
			}
			if err := jobs.Complete(job); err != nil {
				var fe *jobs.FieldError
				if errors.As(err, &fe) {
					return &objfile.Error{File: file, Path: fe.Path, Why: fe.Why}
				}
				return err
			}
			ctx := cmd.Context()
			c, tr, err := dialCell(ctx, &cf, "submitter")
			if err != nil {
				return err
			}
			defer tr.Close()
			uid, n, err := jobs.Submit(ctx, c, job, replace, time.Now().UnixNano())
			if errors.Is(err, jobs.ErrNameInUse) {
				return fmt.Errorf("%w: use --replace to kill it and submit this one", err)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "job/%s created (uid %s, %d tasks)\n", job.GetMeta().GetName(), uid, n)
			if kind := job.GetSpec().GetScheduler(); !schedulerLive(c.View(), kind, time.Now()) {
				sayNote(cmd.ErrOrStderr(), fmt.Sprintf("no scheduler of kind %s runs in the cell (omega get schedulers): the job waits until one starts (omega scheduler --kind %s)", txn.Quote(kind), kind))
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the job file, YAML or JSON (- for stdin)")
	cf.register(cmd.Flags())
	cmd.Flags().BoolVar(&replace, "replace", false, "kill a live job of the same name and submit this one in its place")
	return cmd
}

func newGetCmd() *cobra.Command {
	var selector, output string
	var cf cellFlags
	cmd := &cobra.Command{
		Use:   "get machines|jobs|tasks|schedulers|leases|servers [NAME] [-l SELECTOR] [-o table|wide|json|yaml|name]",
		Short: "List a cell's machines, jobs, tasks, schedulers or servers",
		Long: `Lists the objects of a kind from the cell's server, filtered there by a label
selector (-l, Kubernetes syntax: k=v,k!=v,k in (a,b)). NAME picks one object by
name or by a prefix of its uid; an ambiguous NAME lists its matches and exits
non-zero.

schedulers lists the scheduler instances that announced themselves in the
cell (each holds a lease named after it, renewed every third of its
duration): LIVE while it was renewed within its duration by this machine's
clock, EXPIRED after (an instance that stopped without giving it back).
leases lists every lease.

servers lists the cell's servers: a single server, or every member of a
replicated cell, each asked itself (one that does not answer within 3 s is
unreachable): its role (leader, follower, candidate, joining), the leader it
knows, its raft term, commit and applied indexes and the store's revision;
-o wide adds the leader's view of each (raft id, match index, progress, heard
from recently). NAME is a member number.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] == "servers" || args[0] == "server" {
				switch output {
				case "table", "wide", "json", "yaml", "name":
				default:
					return fmt.Errorf("-o %s: want table, wide, json, yaml or name", txn.Quote(output))
				}
				if selector != "" {
					return errors.New("-l: servers have no labels")
				}
				only := ""
				if len(args) == 2 {
					only = args[1]
				}
				return getServers(cmd.Context(), cmd.OutOrStdout(), &cf, output, only)
			}
			kinds := map[string]omegav1.ObjectKind{
				"machines": omegav1.ObjectKind_OBJECT_KIND_MACHINE, "machine": omegav1.ObjectKind_OBJECT_KIND_MACHINE,
				"jobs": omegav1.ObjectKind_OBJECT_KIND_JOB, "job": omegav1.ObjectKind_OBJECT_KIND_JOB,
				"tasks": omegav1.ObjectKind_OBJECT_KIND_TASK, "task": omegav1.ObjectKind_OBJECT_KIND_TASK,
				"schedulers": omegav1.ObjectKind_OBJECT_KIND_LEASE, "scheduler": omegav1.ObjectKind_OBJECT_KIND_LEASE,
				"leases": omegav1.ObjectKind_OBJECT_KIND_LEASE, "lease": omegav1.ObjectKind_OBJECT_KIND_LEASE,
			}
			kind, ok := kinds[args[0]]
			if !ok {
				return fmt.Errorf("%s: want machines, jobs, tasks, schedulers, leases or servers", txn.Quote(args[0]))
			}
			switch output {
			case "table", "wide", "json", "yaml", "name":
			default:
				return fmt.Errorf("-o %s: want table, wide, json, yaml or name", txn.Quote(output))
			}
			if _, err := labels.Parse(selector); err != nil {
				return fmt.Errorf("-l: %w", err)
			}
			ctx := cmd.Context()
			tr, err := cf.connect(ctx, "get")
			if err != nil {
				return err
			}
			defer tr.Close()
			l, err := tr.List(ctx, &cellgrpc.ListRequest{Kind: kind, LabelSelector: selector})
			if err != nil {
				return err
			}
			if strings.HasPrefix(args[0], "scheduler") {
				l.Leases = filterMeta(l.Leases, func(x *omegav1.Lease) bool { return x.GetSpec().GetRole() == "scheduler" })
			}
			if len(args) == 2 {
				note, err := pick(l, args[1])
				sayNote(cmd.ErrOrStderr(), note)
				if err != nil {
					return err
				}
			}
			var names map[string]string
			if kind == omegav1.ObjectKind_OBJECT_KIND_TASK && (output == "table" || output == "wide") {
				// A person reads machines by name: one List of them.
				if names, err = machineNames(ctx, tr); err != nil {
					return err
				}
			}
			return printListing(cmd.OutOrStdout(), l, kind, output, names)
		},
	}
	cf.register(cmd.Flags())
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "label selector")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table, wide, json, yaml or name")
	return cmd
}

// writeDoc writes a JSON document as -o json (indented) or yaml says.
func writeDoc(w io.Writer, doc, output string) error {
	if output == "yaml" {
		y, err := yaml.JSONToYAML([]byte(doc))
		if err != nil {
			return err
		}
		_, err = w.Write(y)
		return err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, []byte(doc), "", "  "); err != nil {
		return err
	}
	out.WriteByte('\n')
	_, err := w.Write(out.Bytes())
	return err
}

// pick narrows a listing to the one object NAME names (its name, or a
// prefix of its uid). Several objects of that very name (a job's name used
// again while the first is kept for the retention window) are narrowed to
// the live one, else the newest, and note says so; several live ones, or
// matches by uid prefix, are ambiguous.
func pick(l *remote.Listing, name string) (note string, err error) {
	type hit struct {
		name, uid string
		live      bool
		rev       uint64
	}
	var hits []hit
	match := func(m *omegav1.ObjectMeta, live bool) bool {
		ok := m.GetName() == name || strings.HasPrefix(m.GetUid(), name)
		if ok {
			hits = append(hits, hit{m.GetName(), m.GetUid(), live, m.GetCreateRevision()})
		}
		return ok
	}
	l.Machines = filterMeta(l.Machines, func(x *omegav1.Machine) bool { return match(x.GetMeta(), true) })
	l.Jobs = filterMeta(l.Jobs, func(x *omegav1.Job) bool { return match(x.GetMeta(), !jobPhaseDone(x.GetStatus().GetPhase())) })
	l.Tasks = filterMeta(l.Tasks, func(x *omegav1.Task) bool { return match(x.GetMeta(), !txn.IsTerminal(x.GetStatus().GetState())) })
	l.Leases = filterMeta(l.Leases, func(x *omegav1.Lease) bool { return match(x.GetMeta(), true) })
	switch len(hits) {
	case 0:
		return "", fmt.Errorf("%s: no such object (by name or uid prefix)", txn.Quote(name))
	case 1:
		return "", nil
	}
	sameName := len(l.Machines) == 0 && (len(l.Jobs) == 0) != (len(l.Tasks) == 0) // one kind, and not machines (a ghost's name is for the operator to settle)
	live := 0
	for _, h := range hits {
		sameName = sameName && h.name == name
		if h.live {
			live++
		}
	}
	if sameName && live <= 1 {
		best := 0
		for i, h := range hits {
			if h.live || (live == 0 && h.rev > hits[best].rev) {
				best = i
				if h.live {
					break
				}
			}
		}
		keep := hits[best].uid
		l.Jobs = filterMeta(l.Jobs, func(x *omegav1.Job) bool { return x.GetMeta().GetUid() == keep })
		l.Tasks = filterMeta(l.Tasks, func(x *omegav1.Task) bool { return x.GetMeta().GetUid() == keep })
		what := "the live one"
		if live == 0 {
			what = "the newest; none is live"
		}
		kind := "jobs"
		if len(l.Tasks) > 0 {
			kind = "tasks"
		}
		return fmt.Sprintf("%d %s named %s; this is %s (uid %s), the others ended", len(hits), kind, txn.Quote(name), what, keep), nil
	}
	var b strings.Builder
	for _, h := range hits {
		fmt.Fprintf(&b, "\n  %s  %s", h.uid, h.name)
	}
	return "", fmt.Errorf("%s is ambiguous: %d objects match%s", txn.Quote(name), len(hits), b.String())
}

// jobPhaseDone reports whether a job's phase is final.
func jobPhaseDone(p omegav1.JobPhase) bool {
	switch p {
	case omegav1.JobPhase_JOB_PHASE_SUCCEEDED, omegav1.JobPhase_JOB_PHASE_FAILED, omegav1.JobPhase_JOB_PHASE_ABANDONED, omegav1.JobPhase_JOB_PHASE_KILLED:
		return true
	}
	return false
}

// sayNote writes a command's note on stderr, one line.
func sayNote(w io.Writer, note string) {
	if note != "" {
		fmt.Fprintln(w, "omega: "+note)
	}
}

func filterMeta[T any](xs []T, keep func(T) bool) []T {
	var out []T
	for _, x := range xs {
		if keep(x) {
			out = append(out, x)
		}
	}
	return out
}

func age(unixNanos int64, now time.Time) string {
	if unixNanos == 0 {
		return "-"
	}
	d := now.Sub(time.Unix(0, unixNanos)).Round(time.Second)
	if d > 48*time.Hour {
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
	return d.String()
}

// machineNames maps the cell's machines' uids to their names.
func machineNames(ctx context.Context, tr *remote.Transport) (map[string]string, error) {
	ml, err := tr.List(ctx, &cellgrpc.ListRequest{Kind: omegav1.ObjectKind_OBJECT_KIND_MACHINE})
	if err != nil {
		return nil, err
	}
	names := make(map[string]string, len(ml.Machines))
	for _, m := range ml.Machines {
		names[m.GetMeta().GetUid()] = m.GetMeta().GetName()
	}
	return names, nil
}

// machineName is how a person reads a machine: its name, or, for one no
// longer in the cell (names does not hold it), its uid's first 8
// characters marked deleted.
func machineName(names map[string]string, uid string) string {
	if uid == "" || uid == uuid.Nil.String() {
		return ""
	}
	if n, ok := names[uid]; ok {
		return n
	}
	if len(uid) > 8 {
		uid = uid[:8]
	}
	return "<deleted " + uid + "…>"
}

// printListing prints l; names (machine uid to name) is for tasks' tables.
func printListing(w io.Writer, l *remote.Listing, kind omegav1.ObjectKind, output string, names map[string]string) error {
	var items []proto.Message
	switch kind {
	case omegav1.ObjectKind_OBJECT_KIND_MACHINE:
		sort.Slice(l.Machines, func(i, j int) bool { return l.Machines[i].GetMeta().GetName() < l.Machines[j].GetMeta().GetName() })
		for _, x := range l.Machines {
			items = append(items, x)
		}
	case omegav1.ObjectKind_OBJECT_KIND_JOB:
		sort.Slice(l.Jobs, func(i, j int) bool { return l.Jobs[i].GetMeta().GetName() < l.Jobs[j].GetMeta().GetName() })
		for _, x := range l.Jobs {
			items = append(items, x)
		}
	case omegav1.ObjectKind_OBJECT_KIND_LEASE:
		sort.Slice(l.Leases, func(i, j int) bool { return l.Leases[i].GetMeta().GetName() < l.Leases[j].GetMeta().GetName() })
		for _, x := range l.Leases {
			items = append(items, x)
		}
	default:
		sort.Slice(l.Tasks, func(i, j int) bool { return l.Tasks[i].GetMeta().GetName() < l.Tasks[j].GetMeta().GetName() })
		for _, x := range l.Tasks {
			items = append(items, x)
		}
	}
	if output == "name" { // kubectl's: kind/name a line, for scripts
		kinds := map[omegav1.ObjectKind]string{omegav1.ObjectKind_OBJECT_KIND_MACHINE: "machine", omegav1.ObjectKind_OBJECT_KIND_JOB: "job",
			omegav1.ObjectKind_OBJECT_KIND_TASK: "task", omegav1.ObjectKind_OBJECT_KIND_LEASE: "lease"}
		var b strings.Builder
		for _, it := range items {
			meta := it.ProtoReflect().Get(it.ProtoReflect().Descriptor().Fields().ByName("meta")).Message().Interface().(*omegav1.ObjectMeta)
			fmt.Fprintf(&b, "%s/%s\n", kinds[kind], meta.GetName())
		}
		_, err := io.WriteString(w, b.String())
		return err
	}
	if output == "json" || output == "yaml" {
		var parts []string
		for _, it := range items {
			b, err := protojson.MarshalOptions{UseProtoNames: false}.Marshal(it)
			if err != nil {
				return err
			}
			parts = append(parts, string(b))
		}
		return writeDoc(w, fmt.Sprintf(`{"revision": %d, "items": [%s]}`, l.Revision, strings.Join(parts, ",")), output)
	}
	now := time.Now()
	wide := output == "wide"
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	switch kind {
	case omegav1.ObjectKind_OBJECT_KIND_MACHINE:
		fmt.Fprintln(tw, "NAME\tSTATE\tCPU\tMEMORY\tTASKS\tAGE"+map[bool]string{true: "\tUID\tDOMAIN", false: ""}[wide])
		for _, m := range l.Machines {
			st, cp := m.GetStatus(), m.GetSpec().GetCapacity()
			line := fmt.Sprintf("%s\t%s\t%dm/%dm\t%s/%s\t%d\t%s", m.GetMeta().GetName(), strings.TrimPrefix(st.GetState().String(), "MACHINE_STATE_"),
				st.GetAllocated().GetCpuMillis(), cp.GetCpuMillis(), bytesH(st.GetAllocated().GetMemoryBytes()), bytesH(cp.GetMemoryBytes()), st.GetTasks(), age(m.GetMeta().GetCreationUnixNanos(), now))
			if wide {
				line += "\t" + m.GetMeta().GetUid() + "\t" + m.GetSpec().GetFailureDomain()
			}
			fmt.Fprintln(tw, line)
		}
	case omegav1.ObjectKind_OBJECT_KIND_LEASE:
		fmt.Fprintln(tw, "NAME\tROLE\tKIND\tSTATUS\tRENEWED\tAGE"+map[bool]string{true: "\tDURATION\tHOLDER\tUID", false: ""}[wide])
		for _, x := range l.Leases {
			sp := x.GetSpec()
			line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s ago\t%s", x.GetMeta().GetName(), orDash(sp.GetRole()), orDash(sp.GetSchedulerKind()), leaseStatus(sp, now),
				age(sp.GetRenewUnixNanos(), now), age(sp.GetAcquireUnixNanos(), now))
			if wide {
				line += fmt.Sprintf("\t%v\t%s\t%s", time.Duration(sp.GetDurationMillis())*time.Millisecond, sp.GetHolder(), x.GetMeta().GetUid())
			}
			fmt.Fprintln(tw, line)
		}
	case omegav1.ObjectKind_OBJECT_KIND_JOB:
		fmt.Fprintln(tw, "NAME\tKIND\tSCHEDULER\tPHASE\tPENDING\tRUNNING\tSUCCEEDED\tFAILED\tWAITING\tAGE"+map[bool]string{true: "\tUID\tMESSAGE", false: ""}[wide])
		for _, j := range l.Jobs {
			st := j.GetStatus()
			line := fmt.Sprintf("%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s", j.GetMeta().GetName(), strings.ToLower(strings.TrimPrefix(j.GetSpec().GetKind().String(), "JOB_KIND_")),
				j.GetSpec().GetScheduler(), strings.TrimPrefix(st.GetPhase().String(), "JOB_PHASE_"), st.GetPending(), st.GetRunning(), st.GetSucceeded(), st.GetFailed(),
				orDash(waitingShort(st.GetWaiting())), age(j.GetSpec().GetSubmitUnixNanos(), now))
			if wide {
				msg := st.GetMessage()
				if w := st.GetWaiting(); w != nil && msg == "" {
					msg = w.GetMessage()
				}
				line += "\t" + j.GetMeta().GetUid() + "\t" + msg
			}
			fmt.Fprintln(tw, line)
		}
	default:
		fmt.Fprintln(tw, "NAME\tSTATE\tMACHINE\tSCHEDULER\tAGE"+map[bool]string{true: "\tUID\tJOB\tMESSAGE", false: ""}[wide])
		for _, t := range l.Tasks {
			st := t.GetStatus()
			m := machineName(names, st.GetMachineUid())
			line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s", t.GetMeta().GetName(), strings.TrimPrefix(st.GetState().String(), "TASK_STATE_"), orDash(m), orDash(st.GetScheduler()), age(t.GetMeta().GetCreationUnixNanos(), now))
			if wide {
				job := ""
				for _, o := range t.GetMeta().GetOwnerReferences() {
					job = o.GetName()
				}
				line += "\t" + t.GetMeta().GetUid() + "\t" + job + "\t" + st.GetMessage()
			}
			fmt.Fprintln(tw, line)
		}
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func bytesH(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1fGi", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.0fMi", float64(b)/(1<<20))
	}
	return fmt.Sprintf("%d", b)
}

func newKillCmd() *cobra.Command {
	var cf cellFlags
	cmd := &cobra.Command{
		Use:   "kill JOB [--server ADDR]",
		Short: "Kill a live job: the job KILLED, its tasks KILLED and stopped by their agents",
		Long: `Kills the live job JOB names (its name, or a prefix of its uid; an ambiguous one
lists its matches and exits non-zero): in one transaction the job is KILLED and
each of its tasks not yet ended is KILLED, which frees its machine; the agents stop
the processes (SIGTERM, then SIGKILL after the grace period).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, tr, err := dialCell(ctx, &cf, "submitter")
			if err != nil {
				return err
			}
			defer tr.Close()
			killed, err := jobs.Kill(ctx, c, args[0], "killed by omega kill", time.Now().UnixNano())
			if err != nil {
				return fmt.Errorf("kill: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "job/%s killed (uid %s)\n", killed.Name(), killed.UID)
			return nil
		},
	}
	cf.register(cmd.Flags())
	return cmd
}

func newWatchCmd() *cobra.Command {
	var selector string
	var cf cellFlags
	cmd := &cobra.Command{
		Use:   "watch [-l SELECTOR] [--server ADDR]",
		Short: "Print the cell's changes as they commit",
		Long: `Prints a line per changed object as each revision commits — the revision, the
kind, the name, and what it is now — for the objects the label selector keeps
(all without -l), until interrupted. The watch resumes by itself across a server
restart.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := labels.Parse(selector); err != nil {
				return fmt.Errorf("-l: %w", err)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			tr, err := cf.connect(ctx, "watch")
			if err != nil {
				return err
			}
			defer tr.Close()
			st, err := tr.Snapshot(ctx)
			if err != nil {
				return err
			}
			w, err := tr.WatchFiltered(ctx, st.Revision(), remote.Filter{Selector: selector})
			if err != nil {
				return err
			}
			defer w.Close()
			out := cmd.OutOrStdout()
			// Machines by name: the snapshot's, and those the watch shows.
			names := map[uuid.UUID]string{}
			st.RangeMachines(func(m *txn.Machine) bool { names[m.UID] = m.Name(); return true })
			fmt.Fprintf(out, "watching from revision %d\n", st.Revision())
			for {
				sets, err := w.Next(ctx, 0)
				if err != nil {
					if ctx.Err() != nil {
						return nil
					}
					return err
				}
				for _, ws := range sets {
					for _, ch := range ws.Changes {
						if ch.Machine != nil && !ch.Deleted {
							names[ch.Machine.UID] = ch.Machine.Name()
						}
						fmt.Fprintln(out, describeChange(ws.Revision, &ch, names))
					}
				}
			}
		},
	}
	cf.register(cmd.Flags())
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "label selector")
	return cmd
}

// describeChange is a watched change as a line; names gives machines'
// names (a machine it does not hold shows as its uid's first 8 characters).
func describeChange(rev uint64, ch *txn.Change, names map[uuid.UUID]string) string {
	verb := "changed"
	switch {
	case ch.Deleted:
		verb = "deleted"
	case ch.Created:
		verb = "created"
	}
	switch {
	case ch.Task != nil:
		t := ch.Task
		where := ""
		if t.Machine != uuid.Nil {
			n, ok := names[t.Machine]
			if !ok {
				n = t.Machine.String()[:8]
			}
			where = " on " + n
		}
		return fmt.Sprintf("%d\ttask/%s\t%s\t%s%s\t%s", rev, t.Name(), verb, strings.TrimPrefix(t.State.String(), "TASK_STATE_"), where, t.Message())
	case ch.Job != nil:
		return fmt.Sprintf("%d\tjob/%s\t%s\t%s", rev, ch.Job.Name(), verb, strings.TrimPrefix(ch.Job.Phase().String(), "JOB_PHASE_"))
	case ch.Machine != nil:
		m := ch.Machine
		return fmt.Sprintf("%d\tmachine/%s\t%s\t%s\tcpu %dm/%dm", rev, m.Name(), verb, strings.TrimPrefix(m.State.String(), "MACHINE_STATE_"), m.Allocated.CPU, m.Capacity.CPU)
	}
	return fmt.Sprintf("%d\t?", rev)
}

// waitingShort is a job's reason to wait in one word, for a table:
// Resources:cpu, Constraints, Quota, NoScheduler, NoMachines ("" when it
// does not wait).
func waitingShort(w *omegav1.JobWaiting) string {
	switch w.GetReason() {
	case omegav1.WaitReason_WAIT_REASON_UNSPECIFIED:
		return ""
	case omegav1.WaitReason_WAIT_REASON_RESOURCES:
		return "Resources:" + w.GetResource()
	case omegav1.WaitReason_WAIT_REASON_CONSTRAINTS:
		return "Constraints"
	case omegav1.WaitReason_WAIT_REASON_QUOTA:
		return "Quota"
	case omegav1.WaitReason_WAIT_REASON_NO_SCHEDULER:
		return "NoScheduler"
	case omegav1.WaitReason_WAIT_REASON_NO_MACHINES:
		return "NoMachines"
	}
	return strings.TrimPrefix(w.GetReason().String(), "WAIT_REASON_")
}

// leaseStatus is LIVE while the lease was renewed within its duration by
// this machine's clock (the holder's renewal time is by its own), EXPIRED
// after.
func leaseStatus(sp *omegav1.LeaseSpec, now time.Time) string {
	if now.Sub(time.Unix(0, sp.GetRenewUnixNanos())) > time.Duration(sp.GetDurationMillis())*time.Millisecond {
		return "EXPIRED"
	}
	return "LIVE"
}

// schedulerLive reports whether a scheduler of kind holds a lease in v
// renewed within its duration by now (this machine's clock).
func schedulerLive(v client.View, kind string, now time.Time) bool {
	live := false
	v.RangeLeases(func(l *txn.Lease) bool {
		if l.Role() == "scheduler" && l.SchedulerKind() == kind && now.Sub(time.Unix(0, l.RenewUnixNanos())) <= l.Duration() {
			live = true
		}
		return !live
	})
	return live
}
