package sim

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/bench/workload"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/schedulers"
	"github.com/omega-cell/omega/txn"
)

// The cell's starting state: its machines, and the pre-fill's long-running
// jobs, placed through the commit path before the run starts.

func registerMachines(ctx context.Context, c *client.Client, ms []workload.Machine) error {
	for start := 0; start < len(ms); start += 5000 {
		tx := c.NewTxn(c.View())
		for _, m := range ms[start:min(start+5000, len(ms))] {
			tx.Ops = append(tx.Ops, txn.CreateMachine(&omegav1.Machine{
				Meta: &omegav1.ObjectMeta{Uid: c.NewUID().String(), Name: m.Name},
				Spec: &omegav1.MachineSpec{
					Capacity:      machineCapacity(m),
					FailureDomain: m.FailureDomain,
				},
			}))
		}
		if _, err := c.Commit(ctx, tx); err != nil {
			return fmt.Errorf("register machines: %w", err)
		}
		if err := c.Sync(ctx); err != nil {
			return err
		}
	}
	return nil
}

func machineCapacity(m workload.Machine) *omegav1.Resources {
	r := &omegav1.Resources{CpuMillis: m.CPUMillis, MemoryBytes: m.MemoryBytes}
	if m.GPUs > 0 {
		r.Extended = map[string]int64{workload.GPU: m.GPUs}
	}
	return r
}

// prefill creates the pre-fill's long-running service jobs and places them
// with a batch policy at time zero, through the commit path like any other
// placement (its scheduler is not one of the measured ones).
func prefill(ctx context.Context, c *client.Client, gen *workload.Generator, seed uint64) error {
	ids := client.RandReader(rand.New(rand.NewPCG(seed, 5000)))
	rng := rand.New(rand.NewPCG(seed, 5001))
	placer := schedulers.NewBatch()
	for _, a := range gen.Prefill() {
		job, tasks, err := a.Objects(ids, Epoch.UnixNano())
		if err != nil {
			return err
		}
		if err := c.Sync(ctx); err != nil {
			return err
		}
		tx := c.NewTxn(c.View())
		tx.Ops = append(tx.Ops, txn.CreateJob(job))
		for _, t := range tasks {
			tx.Ops = append(tx.Ops, txn.CreateTask(t))
		}
		res, err := c.Commit(ctx, tx)
		if err != nil {
			return fmt.Errorf("prefill %s: %w", a.Name, err)
		}
		if err := c.SyncTo(ctx, res.Revision); err != nil {
			return err
		}
		v := c.View()
		jt, _ := v.Job(mustUID(job.GetMeta().GetUid()))
		req := schedulers.Request{Job: jt}
		v.RangePendingTasks(jt.UID, func(t *txn.Task) bool { req.Pending = append(req.Pending, t); return true })
		d := placer.Decide(v, req, schedulers.Env{Now: Epoch, Rand: rng, NewUID: c.NewUID, Component: "prefill"})
		tx = c.NewTxn(v)
		tx.Ops = d.Ops
		if len(tx.Ops) == 0 {
			continue
		}
		if _, err := c.Commit(ctx, tx); err != nil {
			return fmt.Errorf("prefill %s: place: %w", a.Name, err)
		}
	}
	return nil
}

func mustUID(s string) uuid.UUID {
	id, err := txn.ParseUID(s, "uid")
	if err != nil {
		panic(err)
	}
	return id
}
