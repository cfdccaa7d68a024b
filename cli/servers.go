package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/omega-cell/omega/api/omega/v1/cellgrpc"
	"github.com/omega-cell/omega/server"
	"github.com/omega-cell/omega/txn"
)

// serverAskTimeout bounds the question to each member in get servers: a
// member that does not answer in time is shown unreachable.
const serverAskTimeout = 3 * time.Second

// getServers prints the cell's servers: the one the flags reach says
// whether it is a single server or a member, and names the members; each
// member is then asked itself, so that one that is down shows as
// unreachable and each says its own term, indexes and revision. only, if
// set, is a member number to show alone.
func getServers(ctx context.Context, w io.Writer, cf *cellFlags, output, only string) error {
	tr, err := cf.connect(ctx, "get")
	if err != nil {
		return err
	}
	first, err := tr.Server(ctx)
	tr.Close()
	if err != nil {
		return err
	}
	var rows []*cellgrpc.ServerStatus
	if first.GetRole() == "single" {
		if first.Address == "" && len(cf.servers) > 0 {
			first.Address = cf.servers[0]
		}
		rows = []*cellgrpc.ServerStatus{first}
	} else {
		rows = make([]*cellgrpc.ServerStatus, len(first.GetPeers()))
		var wg sync.WaitGroup
		for i, p := range first.GetPeers() {
			wg.Go(func() {
				rows[i] = askServer(ctx, cf, p)
			})
		}
		wg.Wait()
	}
	if only != "" {
		n, err := strconv.ParseUint(only, 10, 64)
		var keep []*cellgrpc.ServerStatus
		for _, r := range rows {
			if err == nil && r.GetMember() == n {
				keep = append(keep, r)
			}
		}
		if len(keep) == 0 {
			return fmt.Errorf("%s: no such member (want a member number of %s)", txn.Quote(only), memberNumbers(rows))
		}
		rows = keep
	}
	return printServers(w, rows, output)
}

// askServer asks one member how it stands; unreachable if it does not
// answer.
func askServer(ctx context.Context, cf *cellFlags, p *cellgrpc.PeerStatus) *cellgrpc.ServerStatus {
	down := &cellgrpc.ServerStatus{Member: p.GetMember(), Address: p.GetAddress(), RaftId: p.GetRaftId(), Role: "unreachable"}
	if p.GetLearner() {
		down.Role = "learner, unreachable" // added, its server not (yet) started
	}
	tr, err := cf.dialAddr(p.GetAddress())
	if err != nil {
		return down
	}
	defer tr.Close()
	actx, cancel := context.WithTimeout(ctx, serverAskTimeout)
	defer cancel()
	st, err := tr.Server(actx)
	if err != nil {
		return down
	}
	return st
}

func memberNumbers(rows []*cellgrpc.ServerStatus) string {
	var ns []string
	for _, r := range rows {
		ns = append(ns, strconv.FormatUint(r.GetMember(), 10))
	}
	return strings.Join(ns, ", ")
}

// printServers prints the servers as -o says. The table's MATCH and
// PROGRESS (wide) are the leader's view of each member; PENDING and
// SNAPSHOTS each member's own (commits it has not answered, snapshots it
// made since it started).
func printServers(w io.Writer, rows []*cellgrpc.ServerStatus, output string) error {
	switch output {
	case "name":
		var b strings.Builder
		for _, r := range rows {
			fmt.Fprintf(&b, "server/%d\n", r.GetMember())
		}
		_, err := io.WriteString(w, b.String())
		return err
	case "json", "yaml":
		var parts []string
		for _, r := range rows {
			b, err := protojson.MarshalOptions{EmitUnpopulated: true}.Marshal(r)
			if err != nil {
				return err
			}
			parts = append(parts, string(b))
		}
		return writeDoc(w, fmt.Sprintf(`{"items": [%s]}`, strings.Join(parts, ",")), output)
	}
	// The leader's view of each member, if a leader answered.
	var view map[uint64]*cellgrpc.PeerStatus
	for _, r := range rows {
		if r.GetRole() == "leader" {
			view = map[uint64]*cellgrpc.PeerStatus{}
			for _, p := range r.GetPeers() {
				view[p.GetMember()] = p
			}
		}
	}
	wide := output == "wide"
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tADDRESS\tROLE\tLEADER\tTERM\tCOMMIT\tAPPLIED\tREVISION"+map[bool]string{true: "\tRAFT-ID\tMATCH\tPROGRESS\tACTIVE\tPENDING\tSNAPSHOTS", false: ""}[wide])
	dash := func(v uint64, ok bool) string {
		if !ok {
			return "-"
		}
		return strconv.FormatUint(v, 10)
	}
	for _, r := range rows {
		up := r.GetRole() != "unreachable"
		member := dash(r.GetMember(), r.GetRole() != "single")
		line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", member, r.GetAddress(), r.GetRole(), dash(r.GetLeader(), up && r.GetRole() != "single" && r.GetLeader() != 0),
			dash(r.GetTerm(), up && r.GetRole() != "single"), dash(r.GetCommitIndex(), up && r.GetRole() != "single"), dash(r.GetAppliedIndex(), up && r.GetRole() != "single"), dash(r.GetRevision(), up))
		if wide {
			p, ok := view[r.GetMember()]
			progress, active := "-", "-"
			if ok && p.GetProgress() != "" {
				progress, active = p.GetProgress(), strconv.FormatBool(p.GetRecentActive())
			}
			member := up && r.GetRole() != "single"
			line += fmt.Sprintf("\t%s\t%s\t%s\t%s\t%s\t%s", dash(r.GetRaftId(), r.GetRaftId() != 0), dash(p.GetMatch(), ok && p.GetProgress() != ""), progress, active,
				dash(r.GetProposalsPending(), member), dash(r.GetSnapshots(), member))
		}
		fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}

// serverChangeCmds are omega server add, remove and transfer-leader: a
// replicated cell's membership changed as it runs (Cell/ChangeServers, an
// admin's token; any member the flags reach forwards to the leader).
func serverChangeCmds() []*cobra.Command {
	run := func(cf *cellFlags, req *cellgrpc.ServerChange) func(cmd *cobra.Command, args []string) error {
		return func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			if len(args) > 0 {
				m, err := strconv.ParseUint(args[0], 10, 32)
				if err != nil || m == 0 {
					return fmt.Errorf("member %s: want a member number (1, 2, 3…)", txn.Quote(args[0]))
				}
				req.Member = m
			}
			if req.GetOp() == cellgrpc.ServerChange_OP_ADD && req.GetAddress() == "" {
				return fmt.Errorf("server add: --address is required (the new member's peer and API address, host:port)")
			}
			tr, err := cf.connect(ctx, "server "+strings.ToLower(strings.TrimPrefix(req.GetOp().String(), "OP_")))
			if err != nil {
				return err
			}
			defer tr.Close()
			res, err := tr.ChangeServers(ctx, req)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), res.GetMessage())
			return nil
		}
	}
	var addF, removeF, transferF cellFlags
	addReq := &cellgrpc.ServerChange{Op: cellgrpc.ServerChange_OP_ADD}
	add := &cobra.Command{
		Use:   "add MEMBER --address HOST:PORT",
		Short: "Add a member to a replicated cell as it runs",
		Long: `Adds member MEMBER (a number no member has, and none removed had) at --address
to the cell: a learner first, which votes for nothing and counts toward no
quorum. Then start the new server on an empty --data with --member MEMBER --join
and --peers naming the members it can reach (itself too, at --address): it asks
the leader to take it in, is sent a snapshot of the cell, and the leader makes it
a voter once it has caught up (a round of the log in under an election timeout).
Refused: a number or an address taken, another change under way (ask again).`,
		Args: cobra.ExactArgs(1),
		RunE: run(&addF, addReq),
	}
	add.Flags().StringVar(&addReq.Address, "address", "", "the new member's address (its peer service and cell API), host:port")
	remove := &cobra.Command{
		Use:   "remove MEMBER",
		Short: "Remove a member from a replicated cell",
		Long: `Removes member MEMBER from the cell: its server stops serving (its clients move
on to the members they know), and its number is not taken again. Removing the
leader hands its lead to the most up-to-date other member first. Refused: the
last member, another change under way (ask again).`,
		Args: cobra.ExactArgs(1),
		RunE: run(&removeF, &cellgrpc.ServerChange{Op: cellgrpc.ServerChange_OP_REMOVE}),
	}
	transfer := &cobra.Command{
		Use:   "transfer-leader [MEMBER]",
		Short: "Hand a replicated cell's lead to another member",
		Long: `Hands the lead to MEMBER, or without one to the most up-to-date other voter:
the leader stops taking commits, brings it up to date and has it stand at once,
so a planned restart of the leader costs no election timeout (SIGTERM to the
leader does the same before it stops).`,
		Args: cobra.MaximumNArgs(1),
		RunE: run(&transferF, &cellgrpc.ServerChange{Op: cellgrpc.ServerChange_OP_TRANSFER_LEADER}),
	}
	addF.register(add.Flags())
	removeF.register(remove.Flags())
	transferF.register(transfer.Flags())
	return []*cobra.Command{add, remove, transfer}
}

// serverUpgradeCmd is omega server upgrade: a single server's data made the
// first member of a replicated cell.
func serverUpgradeCmd() *cobra.Command {
	var data, to, addr, cluster string
	cmd := &cobra.Command{
		Use:   "upgrade --data DIR --to NEWDIR --address HOST:PORT",
		Short: "Make a single server's data the first member of a replicated cell",
		Long: `Reads the cell a single server kept in --data (stop the server first) and writes,
in --to, the raft directory of a replicated cell's first member: member 1 at
--address, the cell's one voter, holding the cell at its revision. --data is
left as it was (keep it until the new cell runs as it should).

Then start the member and add the others, one at a time:

  omega server --data NEWDIR --listen ADDR --peers 1=ADDR --member 1
  omega server add 2 --address ADDR2 --server ADDR
  omega server --data DIR2 --listen ADDR2 --peers 1=ADDR,2=ADDR2 --member 2 --join

Watches resume from the cell's revision; a client asking for an older one
lists the cell again, as after a compaction.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if data == "" || to == "" || addr == "" {
				return fmt.Errorf("server upgrade: --data, --to and --address are required")
			}
			rev, cell, err := server.Upgrade(data, to, addr, cluster)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s holds member 1 of cell %s at %s, the cell at revision %d; start it with\n  omega server --data %s --listen %s --peers 1=%s --member 1 --cluster %s\n",
				to, cell, addr, rev, to, addr, addr, cluster)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&data, "data", "", "the single server's data directory (its server stopped)")
	f.StringVar(&to, "to", "", "the new member's data directory (empty or absent)")
	f.StringVar(&addr, "address", "", "the member's address, its --listen (host:port)")
	f.StringVar(&cluster, "cluster", "omega", "the cell's name (the members' --cluster)")
	return cmd
}
