package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/omega-cell/omega/api/omega/v1/cellgrpc"
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
