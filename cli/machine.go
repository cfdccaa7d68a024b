package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/txn"
)

// The message an operator's drain leaves on the tasks it evicts.
const drainMessage = "evicted: its machine is drained (omega machine drain)"

func newMachineCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "machine cordon|uncordon|drain|delete MACHINE",
		Short: "An operator's hand on a machine: keep work off it, take its work away, remove it",
		Long: `MACHINE is a machine's name, or its uid (where two machines carry one name, a
ghost left by a misconfigured agent, the uid picks one; omega get machines -o wide
shows them).

  cordon    no new task lands on it: the machine is DRAINING, and stays so across
            its agent's restarts and deaths until uncordoned; its tasks run on
  uncordon  it takes tasks again (UP; a DOWN machine stays DOWN until its agent is back)
  drain     cordon, then evict every task on it: each is PENDING again for its
            scheduler to place elsewhere, and its agent stops the process with
            the task's grace period (SIGTERM, then SIGKILL)
  delete    remove the machine from the cell; refused while tasks are placed on
            it (drain it first). A machine's agent that is still running keeps
            its machine: stop it first, or it registers the machine again at
            its next start.`,
		Args: cobra.NoArgs,
	}
	for _, verb := range []string{"cordon", "uncordon", "drain", "delete"} {
		var cf cellFlags
		sub := &cobra.Command{
			Use:   verb + " MACHINE",
			Short: map[string]string{"cordon": "Keep new tasks off a machine", "uncordon": "Let a cordoned machine take tasks again", "drain": "Cordon a machine and evict its tasks", "delete": "Remove a machine with no tasks (a ghost, a retired host)"}[verb],
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
				defer stop()
				c, tr, err := dialCell(ctx, &cf, "operator")
				if err != nil {
					return err
				}
				defer tr.Close()
				return machineVerb(ctx, c, verb, args[0], cmd.OutOrStdout())
			},
		}
		cf.register(sub.Flags())
		cmd.AddCommand(sub)
	}
	return cmd
}

// findMachine finds a machine by name or uid in v; several of one name
// are refused, listed by uid.
func findMachine(v client.View, ref string) (*txn.Machine, error) {
	if u, err := uuid.Parse(ref); err == nil {
		if m, ok := v.Machine(u); ok {
			return m, nil
		}
	}
	var found []*txn.Machine
	v.RangeMachines(func(m *txn.Machine) bool {
		if m.Name() == ref {
			found = append(found, m)
		}
		return true
	})
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("machine %s: no machine of that name or uid", txn.Quote(ref))
	case 1:
		return found[0], nil
	}
	uids := make([]string, len(found))
	for i, m := range found {
		uids[i] = fmt.Sprintf("%s (%s)", m.UID, m.State)
	}
	slices.Sort(uids)
	return nil, fmt.Errorf("machine %s: %d machines carry that name: %s; give the uid", txn.Quote(ref), len(found), strings.Join(uids, ", "))
}

// withCordon is m's proto cordoned or not: the annotation, and the state
// (UP and DRAINING follow it; DOWN stays DOWN).
func withCordon(m *txn.Machine, on bool) *omegav1.Machine {
	p := m.Proto()
	ann := maps.Clone(p.GetMeta().GetAnnotations())
	if on {
		if ann == nil {
			ann = map[string]string{}
		}
		ann[txn.CordonAnnotation] = "true"
	} else {
		delete(ann, txn.CordonAnnotation)
	}
	p.Meta.Annotations = ann
	switch {
	case on && m.State == omegav1.MachineState_MACHINE_STATE_UP:
		p.Status.State = omegav1.MachineState_MACHINE_STATE_DRAINING
	case !on && m.State == omegav1.MachineState_MACHINE_STATE_DRAINING:
		p.Status.State = omegav1.MachineState_MACHINE_STATE_UP
	}
	return p
}

func machineVerb(ctx context.Context, c *client.Client, verb, ref string, out io.Writer) error {
	var name string
	evicted := 0
	_, err := c.Transact(ctx, func(v client.View) (*txn.Txn, error) {
		m, err := findMachine(v, ref)
		if err != nil {
			return nil, err
		}
		name, evicted = m.Name(), 0
		tx := c.NewTxn(v)
		switch verb {
		case "cordon", "drain":
			if !m.Cordoned() || m.State == omegav1.MachineState_MACHINE_STATE_UP {
				tx.Ops = append(tx.Ops, txn.PutMachine(withCordon(m, true), m.Version))
			}
		case "uncordon":
			if m.Cordoned() || m.State == omegav1.MachineState_MACHINE_STATE_DRAINING {
				tx.Ops = append(tx.Ops, txn.PutMachine(withCordon(m, false), m.Version))
			}
		case "delete":
			if m.Tasks > 0 {
				return nil, fmt.Errorf("machine %s has %d tasks placed on it: omega machine drain %s first", txn.Quote(name), m.Tasks, txn.Quote(name))
			}
			tx.Ops = append(tx.Ops, txn.Delete(omegav1.ObjectKind_OBJECT_KIND_MACHINE, m.UID, m.Version))
		}
		if verb == "drain" {
			v.RangeTasks(func(t *txn.Task) bool {
				if t.Placed() && t.Machine == m.UID {
					tx.Ops = append(tx.Ops, txn.ForceEvict(t.UID, t.Version, drainMessage))
					evicted++
				}
				return true
			})
		}
		return tx, nil
	})
	if err != nil {
		return err
	}
	switch verb {
	case "drain":
		fmt.Fprintf(out, "machine %s cordoned, %d tasks evicted\n", name, evicted)
	case "delete":
		fmt.Fprintf(out, "machine %s deleted\n", name)
	default:
		fmt.Fprintf(out, "machine %s %sed\n", name, verb)
	}
	return nil
}
