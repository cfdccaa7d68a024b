package server

import (
	"bufio"
	"context"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// Access: every component presents a token (gRPC metadata "authorization:
// Bearer TOKEN") naming its role. The roles restrict the kinds of operation
// a component may commit — under every policy, raw or mediated: which
// objects it may touch is the policy's business, so raw stays raw — and the
// server sets each transaction's component from the token, so no client
// can claim to be another.

// Role is what a token lets its holder do.
type Role uint8

const (
	// RoleAdmin may do anything.
	RoleAdmin Role = iota + 1
	// RoleSubmitter creates, changes and kills jobs and their tasks.
	RoleSubmitter
	// RoleScheduler places tasks: claims and evictions, the tasks its
	// policy adds (MapReduce workers), a job it gives up on (the job's
	// status and its tasks ABANDONED).
	RoleScheduler
	// RoleAgent registers its machine and reports its tasks' status.
	RoleAgent
	// RolePeer is a replicated cell's server speaking to another: the
	// peer service (raft's messages, a joining member's request) is its
	// alone, and on the cell API it only forwards commits a member took
	// from its clients (and authorized as theirs).
	RolePeer
)

func (r Role) String() string {
	switch r {
	case RoleAdmin:
		return "admin"
	case RoleSubmitter:
		return "submitter"
	case RoleScheduler:
		return "scheduler"
	case RoleAgent:
		return "agent"
	case RolePeer:
		return "peer"
	}
	return fmt.Sprintf("role(%d)", uint8(r))
}

func parseRole(s string) (Role, bool) {
	for r := RoleAdmin; r <= RolePeer; r++ {
		if r.String() == s {
			return r, true
		}
	}
	return 0, false
}

// Identity is who a token names.
type Identity struct {
	Role Role
	Name string
}

// Component is the component name the identity's transactions carry: a
// scheduler's is its instance name (what its claims record), an agent's
// "agent/NAME", the others' "ROLE/NAME" (or the role alone, unnamed).
func (id Identity) Component() string {
	switch {
	case id.Role == RoleScheduler:
		return id.Name
	case id.Name == "":
		return id.Role.String()
	}
	return id.Role.String() + "/" + id.Name
}

func (id Identity) String() string {
	if id.Name == "" {
		return id.Role.String()
	}
	return id.Role.String() + " " + id.Name
}

// Tokens maps each token to its identity. A nil *Tokens is an open cell:
// every request is let in, as the component it says it is.
type Tokens struct {
	byToken map[string]Identity
}

// MinTokenBytes is the shortest token accepted.
const MinTokenBytes = 16

// LoadTokens reads a token file: one token per line as "TOKEN,ROLE[,NAME]"
// (Kubernetes' static token file, with the role in the second column);
// blank lines and lines starting with # are skipped. Roles are admin,
// submitter, scheduler, agent and peer (a replicated cell's servers);
// schedulers and agents must be named (their components are).
func LoadTokens(path string) (*Tokens, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tokens: %w", err)
	}
	defer f.Close()
	t := &Tokens{byToken: map[string]Identity{}}
	names := map[Identity]bool{}
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		bad := func(why string, args ...any) error {
			return fmt.Errorf("%s:%d: %s", path, line, fmt.Sprintf(why, args...))
		}
		cols := strings.Split(s, ",")
		if len(cols) < 2 || len(cols) > 3 {
			return nil, bad("want TOKEN,ROLE[,NAME], got %d columns", len(cols))
		}
		for i := range cols {
			cols[i] = strings.TrimSpace(cols[i])
		}
		tok := cols[0]
		if len(tok) < MinTokenBytes {
			return nil, bad("the token is %d bytes: want at least %d", len(tok), MinTokenBytes)
		}
		role, ok := parseRole(cols[1])
		if !ok {
			return nil, bad("role %q: want admin, submitter, scheduler, agent or peer", cols[1])
		}
		id := Identity{Role: role}
		if len(cols) == 3 {
			id.Name = cols[2]
		}
		if id.Name == "" && (role == RoleScheduler || role == RoleAgent) {
			return nil, bad("a %s token must name its %s (TOKEN,%s,NAME)", role, role, role)
		}
		if _, dup := t.byToken[tok]; dup {
			return nil, bad("the token is listed twice")
		}
		if names[id] {
			return nil, bad("%s has a token already: one token per component", id)
		}
		names[id] = true
		t.byToken[tok] = id
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("tokens: %s: %w", path, err)
	}
	if len(t.byToken) == 0 {
		return nil, fmt.Errorf("tokens: %s holds no token", path)
	}
	return t, nil
}

// checkPeerToken checks that the token in path is a peer's here.
func (t *Tokens) checkPeerToken(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	id, ok := t.lookup(strings.TrimSpace(string(b)))
	switch {
	case !ok:
		return fmt.Errorf("%s: the token is not in the token file", path)
	case id.Role != RolePeer:
		return fmt.Errorf("%s: the token is %s's; a member needs a peer's (TOKEN,peer[,NAME] in the token file)", path, id)
	}
	return nil
}

// Len is how many tokens there are.
func (t *Tokens) Len() int { return len(t.byToken) }

// lookup finds a token's identity in constant time per entry (no early
// exit that would time how much of a token matched).
func (t *Tokens) lookup(tok string) (Identity, bool) {
	var found Identity
	ok := false
	for k, id := range t.byToken {
		if subtle.ConstantTimeCompare([]byte(k), []byte(tok)) == 1 {
			found, ok = id, true
		}
	}
	return found, ok
}

type identityKey struct{}

// authenticate reads the caller's token from ctx's metadata.
func (t *Tokens) authenticate(ctx context.Context) (context.Context, error) {
	if t == nil {
		return ctx, nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get("authorization")
	if len(vals) == 0 {
		return nil, grpcstatus.Error(codes.Unauthenticated, "no token: this cell needs one (authorization: Bearer TOKEN; omega's commands take --token-file)")
	}
	scheme, tok, ok := strings.Cut(strings.TrimSpace(vals[0]), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") { // the scheme is case-insensitive (RFC 7235)
		return nil, grpcstatus.Error(codes.Unauthenticated, "the authorization header is not \"Bearer TOKEN\"")
	}
	id, ok := t.lookup(strings.TrimSpace(tok))
	if !ok {
		return nil, grpcstatus.Error(codes.Unauthenticated, "unknown token")
	}
	return context.WithValue(ctx, identityKey{}, id), nil
}

// IdentityFrom returns the identity a request was authenticated as; ok is
// false in an open cell.
func IdentityFrom(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}

// ServerOptions are the interceptors that authenticate every call with t
// (nil: an open cell, no interceptor).
func (t *Tokens) ServerOptions() []grpc.ServerOption {
	if t == nil {
		return nil
	}
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			ctx, err := t.authenticate(ctx)
			if err != nil {
				return nil, err
			}
			if err := permitted(ctx, info.FullMethod); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			ctx, err := t.authenticate(ss.Context())
			if err != nil {
				return err
			}
			if err := permitted(ctx, info.FullMethod); err != nil {
				return err
			}
			return h(srv, &authedStream{ServerStream: ss, ctx: ctx})
		}),
	}
}

// peerService is the prefix of the peer service's methods.
const peerService = "/omega.v1.Peer/"

// changeServers is the method that changes a replicated cell's members.
const changeServers = "/omega.v1.Cell/ChangeServers"

// permitted refuses a method the caller's role may not call: the peer
// service to any but a peer, and to a peer any cell method but Commit
// (whose handler lets a peer commit only what a member forwarded).
func permitted(ctx context.Context, method string) error {
	id, _ := IdentityFrom(ctx)
	switch peer := strings.HasPrefix(method, peerService); {
	case peer && id.Role != RolePeer:
		return grpcstatus.Errorf(codes.PermissionDenied, "%s: the token is %s's; only a peer's (a replicated cell's server, role peer in the token file) may call it", method, id)
	case method == changeServers && (id.Role == RoleAdmin || id.Role == RolePeer && forwarded(ctx)):
		// An admin's, or a member forwarding an admin's request to the
		// leader.
	case method == changeServers:
		return grpcstatus.Errorf(codes.PermissionDenied, "%s: the token is %s's; only an admin's may change the cell's servers", method, id)
	case !peer && id.Role == RolePeer && method != "/omega.v1.Cell/Commit":
		return grpcstatus.Errorf(codes.PermissionDenied, "%s: a peer's token only forwards commits and changes of the servers", method)
	}
	return nil
}

type authedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *authedStream) Context() context.Context { return s.ctx }

// ErrPermission is what Authorize's errors wrap.
var ErrPermission = errors.New("permission denied")

// Authorize checks that id may commit tx and sets tx's component to id's.
// A transaction that names another component is refused: a scheduler or an
// agent that says it is someone else is misconfigured or lying, and either
// way its claims and reports must not be recorded under that name.
func Authorize(id Identity, tx *txn.Txn) error {
	want := id.Component()
	if tx.Component != "" && tx.Component != want && (id.Role == RoleScheduler || id.Role == RoleAgent) {
		return fmt.Errorf("%w: the token is %s's (component %s), the transaction says it is %s", ErrPermission, id, txn.Quote(want), txn.Quote(tx.Component))
	}
	tx.Component = want
	for i := range tx.Ops {
		if err := allowed(id, &tx.Ops[i]); err != nil {
			return fmt.Errorf("%w: op %d (%s): %s may not %s", ErrPermission, i, tx.Ops[i].Kind, id, err)
		}
	}
	return nil
}

// allowed says whether id may commit op; the error says what it may not.
// An agent's token binds it to its machine: it writes only the machine of
// its own name.
func allowed(id Identity, op *txn.Op) error {
	role := id.Role
	if role == RoleAdmin {
		return nil
	}
	objectKind := func() string {
		switch {
		case op.NewTask != nil:
			return "task"
		case op.NewJob != nil:
			return "job"
		case op.NewMachine != nil:
			return "machine"
		case op.NewOffer != nil:
			return "offer"
		case op.NewQuota != nil:
			return "quota" // an operator's (admin)
		case op.NewLease != nil:
			return "lease"
		}
		return "nothing"
	}
	deny := func(what string) error { return errors.New(what) }
	switch op.Kind {
	case txn.OpCreate, txn.OpPut:
		k := objectKind()
		switch {
		case role == RoleSubmitter && (k == "job" || k == "task"),
			role == RoleScheduler && (k == "task" && op.Kind == txn.OpCreate || k == "job" && op.Kind == txn.OpPut),
			role == RoleAgent && k == "machine" && op.NewMachine.GetMeta().GetName() == id.Name,
			role == RoleScheduler && k == "lease" && op.NewLease.GetMeta().GetName() == id.Name:
			return nil
		case role == RoleAgent && k == "machine":
			return deny(op.Kind.String() + " machine " + txn.Quote(op.NewMachine.GetMeta().GetName()) + " (an agent's token is for its machine, " + txn.Quote(id.Name) + ")")
		case role == RoleScheduler && k == "lease":
			return deny(op.Kind.String() + " lease " + txn.Quote(op.NewLease.GetMeta().GetName()) + " (a scheduler's token is for its own lease, " + txn.Quote(id.Name) + ")")
		}
		return deny(op.Kind.String() + " a " + k)
	case txn.OpClaim, txn.OpEvict:
		if role == RoleScheduler {
			return nil
		}
		return deny(op.Kind.String() + " tasks (schedulers place tasks)")
	case txn.OpAnswer:
		if role == RoleScheduler {
			return nil // a framework answers its offers (the store checks it is the offer's)
		}
		return deny("answer an offer (frameworks, which are schedulers, answer offers)")
	case txn.OpSetStatus:
		switch op.State {
		case omegav1.TaskState_TASK_STATE_RUNNING, omegav1.TaskState_TASK_STATE_SUCCEEDED, omegav1.TaskState_TASK_STATE_FAILED:
			if role == RoleAgent {
				return nil
			}
		case omegav1.TaskState_TASK_STATE_ABANDONED:
			if role == RoleScheduler {
				return nil
			}
		case omegav1.TaskState_TASK_STATE_KILLED:
			if role == RoleSubmitter {
				return nil
			}
		}
		return deny("set a task " + op.State.String())
	case txn.OpDelete:
		if role == RoleSubmitter && (op.DeleteKind == omegav1.ObjectKind_OBJECT_KIND_JOB || op.DeleteKind == omegav1.ObjectKind_OBJECT_KIND_TASK) {
			return nil
		}
		if role == RoleScheduler && op.DeleteKind == omegav1.ObjectKind_OBJECT_KIND_LEASE {
			if op.DeleteUID == txn.LeaseUID(id.Name) {
				return nil
			}
			return deny("delete lease " + op.DeleteUID.String() + " (a scheduler's token is for its own lease, " + txn.Quote(id.Name) + "'s)")
		}
		return deny("delete a " + strings.ToLower(strings.TrimPrefix(op.DeleteKind.String(), "OBJECT_KIND_")))
	}
	return deny(op.Kind.String())
}

// TLS returns the server option for TLS with certFile and keyFile; with
// caFile, clients must present a certificate it signed (mutual TLS).
func TLS(certFile, keyFile, caFile string) (grpc.ServerOption, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if caFile != "" {
		b, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("--tls-ca %s: no PEM certificate in it", caFile)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return grpc.Creds(credentials.NewTLS(cfg)), nil
}
