package live

import (
	"context"
	"errors"
	"fmt"
	"maps"

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
	// Attributes are what task constraints match against (zone, arch, ...)
	// and FailureDomain what the service scheduler spreads over (none: the
	// machine is a domain of its own): the agent's say, so a registration
	// puts them when the cell's differ.
	Attributes    map[string]string
	FailureDomain string
}

// Register makes the agent's machine UP in the cell (DRAINING, if an
// operator cordoned it), in one transaction through c's optimistic loop
// (it blocks while the loop retries): it creates the machine the first
// time, puts its state, agent address and logs annotation when one of
// them differs, and commits nothing when the cell already says all three.
// The machine's identity is checked in the same view (CheckIdentity). An
// error leaves the cell as it was, and names the machine.
func Register(ctx context.Context, c *client.Client, m Machine) error {
	if m.UID == uuid.Nil || m.Name == "" {
		return errors.New("register machine: uid and name are required")
	}
	if _, err := c.Transact(ctx, func(v client.View) (*txn.Txn, error) {
		tx := c.NewTxn(v)
		if err := CheckIdentity(v.State, m.UID, m.Name, ""); err != nil {
			return nil, err
		}
		if cur, ok := v.Machine(m.UID); ok {
			p := cur.Proto()
			state := cur.State
			if state == omegav1.MachineState_MACHINE_STATE_DOWN {
				state = cur.UpState() // a cordoned machine comes back DRAINING
			}
			sameSpec := cur.FailureDomain() == m.FailureDomain && maps.Equal(cur.Attributes(), m.Attributes)
			if state == cur.State && cur.Agent == m.Agent && p.GetMeta().GetAnnotations()[process.LogsAnnotation] == m.LogsURL && sameSpec {
				return nil, nil
			}
			p.Status.State, p.Status.AgentAddress = state, m.Agent
			if !sameSpec {
				spec := proto.Clone(p.GetSpec()).(*omegav1.MachineSpec) // the state's: never written
				spec.Attributes, spec.FailureDomain = m.Attributes, m.FailureDomain
				p.Spec = spec
			}
			p.Meta = WithLogsAnnotation(p.Meta, m.LogsURL)
			tx.Ops = []txn.Op{txn.PutMachine(p, cur.Version)}
			return tx, nil
		}
		tx.Ops = []txn.Op{txn.CreateMachine(&omegav1.Machine{
			Meta: WithLogsAnnotation(&omegav1.ObjectMeta{Uid: m.UID.String(), Name: m.Name}, m.LogsURL),
			Spec: &omegav1.MachineSpec{Capacity: &omegav1.Resources{CpuMillis: m.CPUMillis, MemoryBytes: m.MemoryBytes},
				Attributes: m.Attributes, FailureDomain: m.FailureDomain},
			Status: &omegav1.MachineStatus{State: omegav1.MachineState_MACHINE_STATE_UP, AgentAddress: m.Agent},
		})}
		return tx, nil
	}); err != nil {
		return fmt.Errorf("register machine %s: %w", quote(m.Name), err)
	}
	return nil
}

// ErrIdentity is what CheckIdentity's refusals wrap: the agent's name,
// its data directory's machine uid and the cell disagree.
var ErrIdentity = errors.New("machine identity")

// CheckIdentity holds an agent's name (--name) and its data directory's
// machine uid to the cell in s: the machine of that uid must carry that
// name, and no other machine s holds that name (an agent's own client sees
// only its machine: Config.MachinesNamed asks the whole cell) (one machine, one name: an agent
// started with a running agent's --name but a directory of its own, or a
// machine's directory under another name, would otherwise make a second
// machine, a ghost). With agent (the address this agent will gossip at;
// "" skips it), the machine must not be held by another live agent: UP or
// DRAINING with another agent address (a copy of the directory on another
// host). A machine DOWN — its agent dead, as the cell's membership saw —
// may be taken over. The errors name the conflict and what to do.
func CheckIdentity(s *txn.State, uid uuid.UUID, name, agent string) error {
	if cur, ok := s.Machine(uid); ok {
		if cur.Name() != name {
			return fmt.Errorf("%w: the data directory is machine %s's, which the cell knows as %s, not --name %s: give --name %s, or another --data for a new machine",
				ErrIdentity, uid, quote(cur.Name()), quote(name), quote(cur.Name()))
		}
		if agent != "" && cur.State != omegav1.MachineState_MACHINE_STATE_DOWN && cur.Agent != "" && cur.Agent != agent {
			return fmt.Errorf("%w: machine %s (%s) is %s with its agent at %s: another agent runs it (a copy of its data directory?); if that agent is gone, the cell marks the machine DOWN within seconds and this one may start then",
				ErrIdentity, quote(name), uid, cur.State, cur.Agent)
		}
		return nil
	}
	var named []uuid.UUID
	s.RangeMachines(func(m *txn.Machine) bool {
		if m.Name() == name {
			named = append(named, m.UID)
		}
		return true
	})
	return checkName(name, uid, named)
}

// checkName refuses an agent whose name machines other than its own
// (uid) carry.
func checkName(name string, uid uuid.UUID, named []uuid.UUID) error {
	for _, other := range named {
		if other != uid {
			return fmt.Errorf("%w: the cell has machine %s as %s, and this data directory is %s's: another agent's --name? A machine's --name and --data go together; to replace the machine, omega machine delete %s first",
				ErrIdentity, quote(name), other, uid, quote(name))
		}
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
