package schedulers

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/txn"
)

// Why a job waits: what a person reads on a job whose tasks stay PENDING
// (JobStatus.waiting, shown by `omega get jobs` and `omega describe`). A
// Runner with RunnerConfig.Reasons writes it after an attempt that left
// tasks without a machine; the job controller clears it once nothing of
// the job is pending, and writes the one reason no scheduler can: that no
// scheduler of the job's kind holds a lease in the cell.

// Explainer is what a scheduler implements to say itself why a job's
// tasks found no machine, where the cell's own measure (Explain: each UP
// machine's room and the task's constraints) would not say it: a custom
// policy's own rules. It is called, like Decide, on the decision's view,
// and may return nil (no reason known: nothing is written, and a reason
// written before is cleared).
type Explainer interface {
	Explain(v client.View, req Request) *omegav1.JobWaiting
}

// Explain says why task finds no machine in v by the cell's measure of a
// fit, the one a claim is held to: the UP machines (a machine that is
// down, draining or cordoned is none), the task's equality constraints,
// and what each machine has free against what the task asks for. Its
// answer is the first of these that rules out every machine: no machine
// UP (WAIT_REASON_NO_MACHINES); none of them meeting the constraints
// (WAIT_REASON_CONSTRAINTS); none of those with room
// (WAIT_REASON_RESOURCES, naming the resource short on the most machines).
// The message counts the machines by what ruled them out, as Kubernetes'
// "0/3 nodes are available: 3 Insufficient cpu" does. It returns nil when
// some machine could take the task now: then the scheduler's own bounds,
// or a race with another scheduler, left it waiting, which is no reason a
// person can act on.
//
// It is a pass over every machine of the view: call it after an attempt
// that left tasks waiting, not in a decision.
func Explain(v client.View, task *txn.Task) *omegav1.JobWaiting {
	req := task.Request()
	var (
		total, notUp, unmet, fits int
		short                     = map[string]int{} // dimension → machines short of it now
		never                     = map[string]int{} // of those, machines that have less in all
		largest                   = map[string]int64{}
	)
	constraints := task.Constraints()
	v.RangeMachines(func(m *txn.Machine) bool {
		total++
		if m.State != omegav1.MachineState_MACHINE_STATE_UP {
			notUp++
			return true
		}
		if !meetsAttributes(m, constraints) {
			unmet++
			return true
		}
		ok, dim := txn.Fits(m.Capacity, m.Allocated, req)
		if ok {
			fits++
			return true
		}
		short[dim]++
		largest[dim] = max(largest[dim], capacityOf(m.Capacity, dim))
		if fitsEmpty, _ := txn.Fits(m.Capacity, txn.Resources{}, req); !fitsEmpty {
			never[dim]++
		}
		return true
	})
	if fits > 0 {
		return nil
	}
	up := total - notUp
	switch {
	case up == 0:
		msg := "no machine in the cell"
		if total > 0 {
			msg = fmt.Sprintf("no machine is UP (%d down, draining or cordoned)", notUp)
		}
		return &omegav1.JobWaiting{Reason: omegav1.WaitReason_WAIT_REASON_NO_MACHINES, Message: msg}
	case unmet == up:
		return &omegav1.JobWaiting{Reason: omegav1.WaitReason_WAIT_REASON_CONSTRAINTS,
			Message: fmt.Sprintf("none of %d UP machines meets the constraints %s%s", up, constraintsText(constraints), notUpText(notUp))}
	}
	// Every machine left is short of something: name the dimension most
	// are short of (cpu, memory, then the extended ones by name on a tie).
	dims := slices.Sorted(maps.Keys(short))
	slices.SortStableFunc(dims, func(a, b string) int { return dimOrder(a, b) })
	worst := dims[0]
	for _, d := range dims[1:] {
		if short[d] > short[worst] {
			worst = d
		}
	}
	var parts []string
	for _, d := range dims {
		p := fmt.Sprintf("%d short of %s", short[d], d)
		if never[d] == short[d] {
			p += fmt.Sprintf(" (none has %s in all; the largest has %s)", quantityText(d, capacityOf(req, d)), quantityText(d, largest[d]))
		} else if never[d] > 0 {
			p += fmt.Sprintf(" (%d of them have less than %s in all)", never[d], quantityText(d, capacityOf(req, d)))
		}
		parts = append(parts, p)
	}
	if unmet > 0 {
		parts = append(parts, fmt.Sprintf("%d not meeting the constraints %s", unmet, constraintsText(constraints)))
	}
	msg := fmt.Sprintf("0 of %d UP machines can take a task of %s: %s%s", up, requestText(req), strings.Join(parts, ", "), notUpText(notUp))
	return &omegav1.JobWaiting{Reason: omegav1.WaitReason_WAIT_REASON_RESOURCES, Resource: worst, Message: msg}
}

// SameWaiting reports whether two reasons say the same thing to act on:
// the type and the resource. The message's counts follow the cell and are
// not rewritten for each change (a write moves the job's version, which
// the job controller's writes are checked against).
func SameWaiting(a, b *omegav1.JobWaiting) bool {
	return a.GetReason() == b.GetReason() && a.GetResource() == b.GetResource()
}

// meetsAttributes reports whether m meets the equality constraints (a
// job's DIFFERENT_MACHINES is about its own tasks, not the machine).
func meetsAttributes(m *txn.Machine, cs []*omegav1.Constraint) bool {
	for _, c := range cs {
		switch c.GetOperator() {
		case omegav1.Constraint_OPERATOR_EQUAL:
			if v, ok := m.Attributes()[c.GetAttribute()]; !ok || v != c.GetValue() {
				return false
			}
		case omegav1.Constraint_OPERATOR_NOT_EQUAL:
			if v, ok := m.Attributes()[c.GetAttribute()]; ok && v == c.GetValue() {
				return false
			}
		}
	}
	return true
}

func dimOrder(a, b string) int {
	rank := func(d string) int {
		switch d {
		case "cpu":
			return 0
		case "memory":
			return 1
		}
		return 2
	}
	return rank(a) - rank(b)
}

func capacityOf(r txn.Resources, dim string) int64 {
	switch dim {
	case "cpu":
		return r.CPU
	case "memory":
		return r.Memory
	}
	return r.Ext[dim]
}

func notUpText(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("; %d more down, draining or cordoned", n)
}

func constraintsText(cs []*omegav1.Constraint) string {
	var parts []string
	for _, c := range cs {
		switch c.GetOperator() {
		case omegav1.Constraint_OPERATOR_EQUAL:
			parts = append(parts, txn.Quote(c.GetAttribute()+"="+c.GetValue()))
		case omegav1.Constraint_OPERATOR_NOT_EQUAL:
			parts = append(parts, txn.Quote(c.GetAttribute()+"!="+c.GetValue()))
		}
	}
	return strings.Join(parts, ", ")
}

func requestText(r txn.Resources) string {
	s := "cpu " + quantityText("cpu", r.CPU) + ", memory " + quantityText("memory", r.Memory)
	for _, k := range slices.Sorted(maps.Keys(r.Ext)) {
		s += ", " + k + " " + quantityText(k, r.Ext[k])
	}
	return s
}

// quantityText writes an amount as a job file would: cores (or
// millicores), bytes in binary units, a count for the rest.
func quantityText(dim string, v int64) string {
	switch dim {
	case "cpu":
		if v%1000 == 0 {
			return strconv.FormatInt(v/1000, 10)
		}
		return strconv.FormatInt(v, 10) + "m"
	case "memory":
		for _, u := range []struct {
			s string
			n int64
		}{{"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}} {
			if v >= u.n && v%u.n == 0 {
				return strconv.FormatInt(v/u.n, 10) + u.s
			}
		}
		return strconv.FormatInt(v, 10)
	}
	return strconv.FormatInt(v, 10)
}
