package live

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"

	"github.com/omega-cell/omega/agents/process"
	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/txn"
)

// Machine is what an agent registers of its machine.
type Machine struct {
	UID  uuid.UUID
	Name string
	// Capacity, set when the machine is created (a machine registered
	// before keeps the capacity it has in the cell).
	CPUMillis, MemoryBytes int64
	// Agent is the agent's gossip address, recorded as the machine's agent
	// address (the server joins it there after a restart).
	Agent string
	// LogsURL is where the agent serves its tasks' output, published as the
	// machine's omega.io/logs annotation ("": none, and an earlier one is
	// removed).
	LogsURL string
}

// Register makes the agent's machine UP in the cell, in one transaction
// through c's optimistic loop (it blocks while the loop retries): it
// creates the machine the first time, puts its state, agent address and
// logs annotation when one of them differs, and commits nothing when the
// cell already says all three. An error leaves the cell as it was, and
// names the machine.
func Register(ctx context.Context, c *client.Client, m Machine) error {
	if m.UID == uuid.Nil || m.Name == "" {
		return errors.New("register machine: uid and name are required")
	}
	if _, err := c.Transact(ctx, func(v client.View) (*txn.Txn, error) {
		tx := c.NewTxn(v)
		if cur, ok := v.Machine(m.UID); ok {
			p := cur.Proto()
			if cur.State == omegav1.MachineState_MACHINE_STATE_UP && cur.Agent == m.Agent && p.GetMeta().GetAnnotations()[process.LogsAnnotation] == m.LogsURL {
				return nil, nil
			}
			p.Status.State, p.Status.AgentAddress = omegav1.MachineState_MACHINE_STATE_UP, m.Agent
			p.Meta = WithLogsAnnotation(p.Meta, m.LogsURL)
			tx.Ops = []txn.Op{txn.PutMachine(p, cur.Version)}
			return tx, nil
		}
		tx.Ops = []txn.Op{txn.CreateMachine(&omegav1.Machine{
			Meta:   WithLogsAnnotation(&omegav1.ObjectMeta{Uid: m.UID.String(), Name: m.Name}, m.LogsURL),
			Spec:   &omegav1.MachineSpec{Capacity: &omegav1.Resources{CpuMillis: m.CPUMillis, MemoryBytes: m.MemoryBytes}},
			Status: &omegav1.MachineStatus{State: omegav1.MachineState_MACHINE_STATE_UP, AgentAddress: m.Agent},
		})}
		return tx, nil
	}); err != nil {
		return fmt.Errorf("register machine %s: %w", quote(m.Name), err)
	}
	return nil
}

// WithLogsAnnotation is meta (copied: a view's is shared) with the
// omega.io/logs annotation set to u, or removed if u is empty.
func WithLogsAnnotation(meta *omegav1.ObjectMeta, u string) *omegav1.ObjectMeta {
	m := proto.CloneOf(meta)
	if u == "" {
		delete(m.Annotations, process.LogsAnnotation)
		return m
	}
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[process.LogsAnnotation] = u
	return m
}

// quote quotes at most 64 bytes of user input.
func quote(s string) string {
	if len(s) > 64 {
		return fmt.Sprintf("%q...", s[:64])
	}
	return fmt.Sprintf("%q", s)
}
