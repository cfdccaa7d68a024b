package live

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/omega-cell/omega/api/omega/v1/cellgrpc"
	"github.com/omega-cell/omega/replica"
	"github.com/omega-cell/omega/txn"
)

// ChangeServers serves omega.v1.Cell/ChangeServers on this member: the
// leader adds or removes a member (AddMember, RemoveMember) or hands the
// lead over; a member that does not lead forwards the request to the one
// that does (once: a forwarded request is not forwarded again, but for a
// leader that handed its lead over to be removed). Removing
// the leader hands its lead to the most up-to-date other voter first, and
// the new leader removes it. While no leader is known it waits up to
// ForwardWait. The errors are gRPC statuses that say what to do.
func (d *Driver) ChangeServers(ctx context.Context, req *cellgrpc.ServerChange) (*cellgrpc.ServerChangeResult, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	forwarded := len(md.Get(forwardedKey)) > 0
	deadline := time.Now().Add(ForwardWait)
	wait := 20 * time.Millisecond
	var moved string // the lead handed over before a leader's removal
	for {
		res, err := d.changeHere(ctx, req)
		var nl *replica.NotLeaderError
		switch {
		case err == nil:
			res.Message = moved + res.GetMessage()
			return res, nil
		case errors.Is(err, replica.ErrLeaderRemoval) && moved == "":
			to, terr := d.TransferLeadership(ctx, 0)
			if terr != nil {
				return nil, status.Errorf(codes.Unavailable, "member %d leads and is to be removed; handing its lead over first failed: %v", req.GetMember(), terr)
			}
			moved = fmt.Sprintf("the lead went from member %d to member %d first; ", req.GetMember(), to)
			continue
		case errors.As(err, &nl) && nl.Leader != 0 && nl.Leader != d.cfg.Member.ID && (!forwarded || moved != ""):
			// (A forwarded request goes on once more when this member
			// handed its lead over to be removed.)
			res, err := d.forwardChange(ctx, replica.MemberOf(nl.Leader), req)
			if res != nil {
				res.Message = moved + res.GetMessage()
			}
			return res, err
		case errors.Is(err, replica.ErrNotLeader), errors.Is(err, replica.ErrNotReady):
			if time.Now().After(deadline) || forwarded {
				return nil, status.Errorf(codes.Unavailable, "change servers: no leader is ready (%v): ask again", err)
			}
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			wait = min(2*wait, 200*time.Millisecond)
		default:
			return nil, changeStatus(err)
		}
	}
}

// changeHere makes the change if this member leads.
func (d *Driver) changeHere(ctx context.Context, req *cellgrpc.ServerChange) (*cellgrpc.ServerChangeResult, error) {
	m := req.GetMember()
	switch req.GetOp() {
	case cellgrpc.ServerChange_OP_ADD:
		added, err := d.AddMember(ctx, m, req.GetAddress())
		if err != nil {
			return nil, err
		}
		msg := fmt.Sprintf("member %d is in the cell at %s already", m, req.GetAddress())
		if added {
			msg = fmt.Sprintf("member %d added at %s, a learner: start its server on an empty --data with --member %d --join (its --peers naming the members it can reach); the leader sends it a snapshot and makes it a voter once it has caught up", m, req.GetAddress(), m)
		}
		return &cellgrpc.ServerChangeResult{Message: msg, Leader: d.Leader()}, nil
	case cellgrpc.ServerChange_OP_REMOVE:
		removed, err := d.RemoveMember(ctx, m)
		if err != nil {
			return nil, err
		}
		msg := fmt.Sprintf("member %d is out of the cell already", m)
		if removed {
			msg = fmt.Sprintf("member %d removed: its server stops serving, and its number is not taken again", m)
		}
		return &cellgrpc.ServerChangeResult{Message: msg, Leader: d.Leader()}, nil
	case cellgrpc.ServerChange_OP_TRANSFER_LEADER:
		if !d.Leads() {
			return nil, &replica.NotLeaderError{Leader: d.lead.Load()}
		}
		if m == replica.MemberOf(d.cfg.Member.ID) {
			return &cellgrpc.ServerChangeResult{Message: fmt.Sprintf("member %d leads already", m), Leader: m}, nil
		}
		tctx, cancel := context.WithTimeout(ctx, 20*d.cfg.Tick)
		defer cancel()
		to, err := d.TransferLeadership(tctx, m)
		if err != nil {
			return nil, err
		}
		return &cellgrpc.ServerChangeResult{Message: fmt.Sprintf("member %d leads now", to), Leader: to}, nil
	}
	return nil, fmt.Errorf("%w: change servers: op %s (add, remove or transfer-leader)", txn.ErrInvalid, req.GetOp())
}

// forwardChange asks the leader to make the change.
func (d *Driver) forwardChange(ctx context.Context, leader uint64, req *cellgrpc.ServerChange) (*cellgrpc.ServerChangeResult, error) {
	addr, ok := d.addr(leader)
	if !ok {
		return nil, status.Errorf(codes.Unavailable, "change servers: member %d leads and this member has no address for it", leader)
	}
	conn, err := grpc.NewClient(addr, d.dialOptions()...)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "change servers: forward to member %d: %v", leader, err)
	}
	defer conn.Close()
	fctx := metadata.AppendToOutgoingContext(ctx, forwardedKey, "1")
	return cellgrpc.NewCellClient(conn).ChangeServers(fctx, req)
}

// changeStatus is a change's error as a gRPC status.
func changeStatus(err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	code := codes.Unknown
	switch {
	case errors.Is(err, txn.ErrInvalid):
		code = codes.InvalidArgument
	case errors.Is(err, replica.ErrMemberTaken), errors.Is(err, replica.ErrNoSuchMember), errors.Is(err, replica.ErrLastMember),
		errors.Is(err, replica.ErrLeaderRemoval), errors.Is(err, replica.ErrMemberAlive):
		code = codes.FailedPrecondition
	case errors.Is(err, replica.ErrConfBusy):
		return status.Errorf(codes.Unavailable, "change servers: %v (a member joining, a learner being promoted, or another add or remove): ask again in a moment", err)
	case errors.Is(err, replica.ErrNotReady), errors.Is(err, replica.ErrNotLeader), errors.Is(err, ErrStopped):
		code = codes.Unavailable
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, ErrChangeUnknown):
		code = codes.DeadlineExceeded
	}
	return status.Errorf(code, "change servers: %v", err)
}
