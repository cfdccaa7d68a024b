#!/usr/bin/env python3
"""A batch scheduler for an omega cell, in Python, from nothing but the .proto files.

    scheduler.py --server 127.0.0.1:7070 --name py-0 [--kind python] [--token-file F]

Omega's idea (Schwarzkopf et al., EuroSys 2013) is shared state: there is no
central scheduler handing out resources. The cell's state lives in one
transactional store, and every scheduler works on a copy of it of its own,
decides where tasks go, and commits its decisions as an optimistic
transaction. If another scheduler got there first, the store says so per
operation (a conflict) and this one tries again on a fresher copy. So this
program does three things:

  1. follow the cell: list it once (Snapshot) and then apply every revision
     the store commits (Watch), to keep a local copy of machines, jobs and
     tasks; when the watch falls behind the store's history, list again;
  2. decide: for every PENDING task of a job whose spec.scheduler is --kind,
     pick a machine that is UP and has room (randomized first fit, like the
     paper's batch scheduler);
  3. claim: commit one Claim per placement, all in one transaction
     (fine-grained conflicts, incremental commit), and retry the claims
     that conflicted once the watch has shown what they conflicted with.

It talks to the store's gRPC API (service omega.v1.Cell in
api/omega/v1/service.proto; semantics in docs/DESIGN.md) through the code
that generate.sh makes from the protos. Logs go to stderr; SIGTERM or SIGINT
stops it (exit 0).
"""

import argparse
import logging
import os
import random
import signal
import socket
import sys
import threading
import time
import uuid

import grpc

from omega.v1 import cell_pb2, service_pb2, service_pb2_grpc, txn_pb2

log = logging.getLogger("scheduler")

# Every call has a deadline. A watch is a stream that never ends by itself,
# so its deadline only bounds one stream: when it passes, the scheduler
# watches again from the revision it reached (no revision is missed).
COMMIT_SECONDS = 10
LIST_SECONDS = 60
WATCH_SECONDS = 300
# The header the server sends once a watch is established.
WATCH_HEADER = "omega-watch"
# The instance's lease holds this long after each renewal; it is renewed
# every third of it (the Go schedulers' default, schedulers/live).
LEASE_SECONDS = 15
# A lease's uid is a version-5 (SHA-1) uuid of its name in this namespace
# (txn.LeaseNamespace, txn.LeaseUID): one name, one lease.
LEASE_NAMESPACE = uuid.UUID("6f6d6567-612e-4c65-8173-652e6f6d6567")

PENDING = cell_pb2.TASK_STATE_PENDING
PLACED = (cell_pb2.TASK_STATE_ASSIGNED, cell_pb2.TASK_STATE_RUNNING)
UP = cell_pb2.MACHINE_STATE_UP
FINISHED_JOB = (cell_pb2.JOB_PHASE_SUCCEEDED, cell_pb2.JOB_PHASE_FAILED,
                cell_pb2.JOB_PHASE_ABANDONED, cell_pb2.JOB_PHASE_KILLED)
Constraint = cell_pb2.Constraint


class Shutdown(Exception):
    """Raised by the signal handler: the scheduler stops wherever it is."""


class Fatal(Exception):
    """An error that retrying will not mend (a refused token, say)."""


class Retry(Exception):
    """A transient failure: back off and carry on from the local copy."""


# ---------------------------------------------------------------------------
# Resources: a dict {dimension: amount}, so that extended resources (GPUs,
# ports, ...) are checked like cpu and memory.

def amounts(r):
    d = {"cpu_millis": r.cpu_millis, "memory_bytes": r.memory_bytes}
    d.update(("extended/" + k, v) for k, v in r.extended.items())
    return d


def fits(need, machine, taken):
    """Whether a machine holds need on top of what it has allocated (the
    store derives status.allocated from the tasks placed there) and of what
    this scheduler claimed on it in the transaction it is building."""
    cap = amounts(machine.spec.capacity)
    used = amounts(machine.status.allocated)
    return all(n <= cap.get(d, 0) - used.get(d, 0) - taken.get(d, 0) for d, n in need.items() if n > 0)


def job_of(task):
    """The uid of the job that owns a task: tasks belong to jobs by owner
    reference (and labels), never by an index."""
    for ref in task.meta.owner_references:
        if ref.kind == "Job" and ref.controller:
            return ref.uid
    return None


def allowed(task, machine, job_machines):
    """The task's constraints, as the Go schedulers read them."""
    for c in task.spec.constraints:
        attrs = machine.spec.attributes
        if c.operator == Constraint.OPERATOR_EQUAL and attrs.get(c.attribute) != c.value:
            return False
        if c.operator == Constraint.OPERATOR_NOT_EQUAL and c.attribute in attrs and attrs[c.attribute] == c.value:
            return False
        if c.operator == Constraint.OPERATOR_DIFFERENT_MACHINES and machine.meta.uid in job_machines:
            return False
    return True


# ---------------------------------------------------------------------------

class Lease(threading.Thread):
    """The instance's announcement in the cell: an omega.v1.Lease named after
    it (as Kubernetes components hold coordination.k8s.io Leases), renewed
    every third of its duration while the scheduler runs and deleted when it
    stops. The server's job controller reads the leases to tell a job that no
    scheduler of its kind runs; `omega get schedulers` lists them. This
    example takes the lease over if another process holds it; the Go
    schedulers wait for it to expire and refuse a second live instance of a
    name (schedulers/live/lease.go)."""

    def __init__(self, stub, name, kind, metadata):
        super().__init__(name="lease", daemon=True)
        self.stub, self.name, self.kind, self.metadata = stub, name, kind, metadata
        self.uid = str(uuid.uuid5(LEASE_NAMESPACE, name))
        self.holder = f"{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:8]}"
        self.acquired = time.time_ns()
        self.version = 0  # the version this process last wrote; 0: none yet
        self.stopping = threading.Event()

    def lease(self):
        return cell_pb2.Lease(
            meta=cell_pb2.ObjectMeta(uid=self.uid, name=self.name),
            spec=cell_pb2.LeaseSpec(holder=self.holder, role="scheduler", scheduler_kind=self.kind,
                                    duration_millis=LEASE_SECONDS * 1000,
                                    acquire_unix_nanos=self.acquired, renew_unix_nanos=time.time_ns()))

    def commit(self, op):
        tx = txn_pb2.Transaction(component=self.name, unix_nanos=time.time_ns(), ops=[op])
        return self.stub.Commit(tx, timeout=COMMIT_SECONDS, metadata=self.metadata)

    def write(self):
        """Renew the lease at the version written last; make it (or take it
        over) when there is none yet, it is gone, or another wrote it."""
        if self.version:
            res = self.commit(txn_pb2.Operation(put=txn_pb2.PutOp(lease=self.lease(), expect_version=self.version)))
            if res.outcomes[0].code == txn_pb2.OUTCOME_CODE_COMMITTED:
                self.version = res.revision
                return
            log.warning("lease %s: %s: taking it again", self.name, res.outcomes[0].detail)
        try:
            res = self.commit(txn_pb2.Operation(create=txn_pb2.CreateOp(lease=self.lease())))
        except grpc.RpcError as err:
            if err.code() != grpc.StatusCode.ALREADY_EXISTS:
                raise
            res = self.commit(txn_pb2.Operation(put=txn_pb2.PutOp(lease=self.lease(), expect_version=0)))
        if res.outcomes[0].code == txn_pb2.OUTCOME_CODE_COMMITTED:
            self.version = res.revision

    def run(self):
        while not self.stopping.is_set():
            try:
                self.write()
            except grpc.RpcError as err:
                log.warning("lease %s: %s: again in %d s", self.name, err.code().name, LEASE_SECONDS // 3)
            self.stopping.wait(LEASE_SECONDS / 3)

    def release(self):
        """Stop renewing and give the lease back, so the cell knows at once."""
        self.stopping.set()
        if not self.version:
            return
        try:
            self.commit(txn_pb2.Operation(delete=txn_pb2.DeleteOp(
                kind=txn_pb2.OBJECT_KIND_LEASE, uid=self.uid, expect_version=self.version)))
        except grpc.RpcError as err:
            log.warning("lease %s: not given back (%s): it expires by itself", self.name, err.code().name)


class Scheduler:
    def __init__(self, stub, name, kind, metadata):
        self.stub = stub
        self.kind = kind
        # The component name goes on every transaction: the store records it
        # on the tasks it places (status.scheduler) and counts conflicts by it.
        # The component is the instance's name, as the Go schedulers' is:
        # what its claims record, and what a scheduler token names.
        self.component = name
        self.metadata = metadata  # authorization: Bearer <token>, if any
        # The local copy of the cell, at self.revision (None: not listed).
        self.revision = None
        self.machines, self.jobs, self.tasks = {}, {}, {}
        # Outstanding offers (a two-level allocator's, if the cell runs one):
        # what they lock is not free for this scheduler's claims.
        self.offers = {}
        # Quotas: what a mediated store lets each scheduler hold in all.
        self.quotas = {}
        # Leases: the live components that announced themselves (schedulers).
        self.leases = {}
        # Decide again only once the copy has reached this revision: after a
        # commit, the store's result says which revision holds its outcome
        # and everything it conflicted with.
        self.wait_for = 0
        self.rejected = set()  # tasks the store's policy refused: not retried
        self.unplaced = 0      # how many pending tasks fit nowhere, last time

    # -- following the cell ------------------------------------------------

    def list(self):
        """Snapshot: the whole cell at one revision, in chunks (machines,
        then jobs, then tasks, then offers, quotas and leases); the last chunk says
        so."""
        machines, jobs, tasks, offers, quotas, leases, revision = {}, {}, {}, {}, {}, {}, 0
        for chunk in self.stub.Snapshot(service_pb2.SnapshotRequest(), timeout=LIST_SECONDS, metadata=self.metadata):
            revision = chunk.revision
            machines.update((m.meta.uid, m) for m in chunk.machines)
            jobs.update((j.meta.uid, j) for j in chunk.jobs)
            tasks.update((t.meta.uid, t) for t in chunk.tasks)
            offers.update((o.meta.uid, o) for o in chunk.offers)
            quotas.update((q.meta.uid, q) for q in chunk.quotas)
            leases.update((l.meta.uid, l) for l in chunk.leases)
            if chunk.last:
                break
        else:
            raise Retry("the snapshot ended before its last chunk")
        self.machines, self.jobs, self.tasks, self.offers, self.quotas = machines, jobs, tasks, offers, quotas
        self.leases = leases
        self.revision = revision
        self.wait_for = 0
        log.info("listed the cell at revision %d: %d machines, %d jobs, %d tasks",
                 revision, len(machines), len(jobs), len(tasks))

    def apply(self, revision, changes):
        """One committed revision: each change is an object's new value, or
        its deletion."""
        for ch in changes:
            kind = ch.WhichOneof("object")
            table = {"machine": self.machines, "job": self.jobs, "task": self.tasks,
                     "offer": self.offers, "quota": self.quotas, "lease": self.leases}[kind]
            obj = getattr(ch, kind)
            if ch.deleted:
                table.pop(obj.meta.uid, None)
            else:
                table[obj.meta.uid] = obj
        self.revision = revision

    def revisions(self, call):
        """The watch's revisions, each whole: a large revision crosses the
        wire in pieces (RevisionChanges.more). Returns when the stream's
        deadline passes."""
        changes = []
        try:
            for piece in call:
                changes.extend(piece.changes)
                if not piece.more:
                    yield piece.revision, changes
                    changes = []
        except grpc.RpcError as err:
            if err.code() != grpc.StatusCode.DEADLINE_EXCEEDED:
                raise

    def follow(self):
        """Watch from the copy's revision, deciding after every revision."""
        call = self.stub.Watch(service_pb2.WatchRequest(from_revision=self.revision),
                               timeout=WATCH_SECONDS, metadata=self.metadata)
        try:
            # The server sends its header once the watch is established, or
            # ends the call at once if the revision is no longer retained
            # (the call is then the error, OUT_OF_RANGE, as iterating it
            # would raise).
            if dict(call.initial_metadata() or ()).get(WATCH_HEADER) != "ok":
                raise call
            log.info("watching from revision %d", self.revision)
            self.schedule()  # what the listing (or the missed revisions) left pending
            for revision, changes in self.revisions(call):
                self.apply(revision, changes)
                self.schedule()
        finally:
            call.cancel()

    def run(self):
        """List, watch, and start again on the errors that call for it."""
        backoff = 0.5
        while True:
            try:
                if self.revision is None:
                    self.list()
                self.follow()
                backoff = 0.5
            except (grpc.RpcError, Retry) as err:
                code = err.code() if isinstance(err, grpc.RpcError) else None
                text = err.details() if isinstance(err, grpc.RpcError) else str(err)
                if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.UNIMPLEMENTED):
                    raise Fatal(f"{code.name}: {text}")
                if code == grpc.StatusCode.OUT_OF_RANGE:
                    # ERROR_CODE_COMPACTED: the store no longer keeps the
                    # revisions after ours (the watch fell behind, or the
                    # server restarted and keeps only what came after). Or
                    # ERROR_CODE_FUTURE_REVISION, a copy ahead of the store.
                    # (The typed code rides in the status's details, an
                    # omega.v1.ErrorDetail.) A new listing answers both.
                    log.warning("watch from revision %d: %s: listing again", self.revision, text)
                    self.revision = None
                    continue
                # The server is away (UNAVAILABLE: restarting, draining) or
                # slow: keep the copy and watch again from its revision.
                delay = backoff * random.uniform(0.5, 1.5)  # jitter: not all at once
                log.warning("%s: %s: again in %.1f s", code.name if code else "error", text, delay)
                time.sleep(delay)
                backoff = min(backoff * 2, 10)

    # -- deciding and claiming -----------------------------------------------

    def mine(self):
        """The PENDING tasks of the jobs routed to this scheduler's kind. A
        job reaches a scheduler through its spec.scheduler field (a cell may
        run several schedulers of one kind; this example does not share the
        work among them, so two instances race for the same tasks — safely:
        the store lets exactly one claim win each task)."""
        by_job = {}
        for t in self.tasks.values():
            if t.status.state != PENDING or t.meta.uid in self.rejected:
                continue
            job = self.jobs.get(job_of(t))
            if job is None or job.spec.scheduler != self.kind or job.status.phase in FINISHED_JOB:
                continue
            by_job.setdefault(job.meta.uid, []).append(t)
        return by_job

    def schedule(self):
        """One scheduling pass over the local copy: decide, then commit. (It
        looks at every task each time: plenty for an example; a scheduler
        for a large cell keeps an index of its pending tasks instead.)"""
        if self.revision < self.wait_for:
            return  # the outcome of our last commit is still on its way
        by_job = self.mine()
        if not by_job:
            return
        # Where each job's tasks already are (for OPERATOR_DIFFERENT_MACHINES).
        placed = {}
        for t in self.tasks.values():
            if t.status.state in PLACED:
                placed.setdefault(job_of(t), set()).add(t.status.machine_uid)
        up = [m for m in self.machines.values() if m.status.state == UP]
        taken = {}  # machine uid -> resources claimed on it in this pass, or offered
        for offer in self.offers.values():
            for lock in offer.status.locks:  # locked for the offer's framework
                got = taken.setdefault(lock.machine_uid, {})
                for d, n in amounts(lock.resources).items():
                    got[d] = got.get(d, 0) + n
        incremental, gangs, unplaced = [], [], 0
        for job_uid, tasks in by_job.items():
            claims = []
            on = set(placed.get(job_uid, ()))
            for t in tasks:
                need = amounts(t.spec.resources)
                random.shuffle(up)  # randomized first fit
                for m in up:
                    got = taken.setdefault(m.meta.uid, {})
                    if allowed(t, m, on) and fits(need, m, got):
                        for d, n in need.items():
                            got[d] = got.get(d, 0) + n
                        on.add(m.meta.uid)
                        # The claim declares what it reserves and expects the
                        # task at the version this copy saw: if anyone placed
                        # or changed the task since, the claim conflicts
                        # (TASK_CHANGED) and no task is ever placed twice.
                        claims.append((t, m, txn_pb2.ClaimOp(
                            task_uid=t.meta.uid, machine_uid=m.meta.uid,
                            resources=t.spec.resources, expect_version=t.meta.version)))
                        break
                else:
                    unplaced += 1
            if self.jobs[job_uid].spec.gang:
                # A gang job's tasks are placed all together or not at all:
                # a transaction of its own, committed all-or-nothing.
                if len(claims) == len(tasks):
                    gangs.append(claims)
                else:
                    self.release(taken, claims)  # give the room back
            else:
                incremental.extend(claims)
        if unplaced != self.unplaced and unplaced > 0:
            log.info("%d pending tasks fit on no machine now: they wait for room", unplaced)
        self.unplaced = unplaced
        if incremental:
            self.commit(incremental, txn_pb2.COMMIT_MODE_INCREMENTAL)
        for claims in gangs:
            self.commit(claims, txn_pb2.COMMIT_MODE_ALL_OR_NOTHING)

    @staticmethod
    def release(taken, claims):
        for t, m, _ in claims:
            got = taken[m.meta.uid]
            for d, n in amounts(t.spec.resources).items():
                got[d] -= n

    def commit(self, claims, mode):
        tx = txn_pb2.Transaction(
            view_revision=self.revision,  # the copy the decisions were made on
            # Fine-grained conflicts: a claim conflicts only if its machine can
            # no longer hold it (or is not UP), not because someone else
            # touched the machine — the paper's fix for needless conflicts.
            conflict=txn_pb2.CONFLICT_MODE_FINE,
            # Incremental: what does not conflict commits and the rest is
            # reported (all-or-nothing for a gang: everything or nothing).
            commit=mode,
            component=self.component,
            unix_nanos=time.time_ns(),
            ops=[txn_pb2.Operation(claim=op) for _, _, op in claims])
        res = self.stub.Commit(tx, timeout=COMMIT_SECONDS, metadata=self.metadata)
        for (t, m, _), out in zip(claims, res.outcomes):
            if out.code == txn_pb2.OUTCOME_CODE_COMMITTED:
                log.info("task %s on %s", t.meta.name, m.meta.name)
            elif out.code == txn_pb2.OUTCOME_CODE_REJECTED:
                self.rejected.add(t.meta.uid)
                log.warning("task %s on %s: rejected by the store's policy (%s): %s",
                            t.meta.name, m.meta.name, txn_pb2.RejectReason.Name(out.reason), out.detail)
            else:
                log.info("task %s on %s: %s (%s): again once the copy is at revision %d",
                         t.meta.name, m.meta.name, txn_pb2.OutcomeCode.Name(out.code), out.detail,
                         max(res.revision, res.base))
        log.info("%d of %d claims committed%s, %d conflicted (view %d, base %d, %s)",
                 res.committed, len(claims), f" at revision {res.revision}" if res.revision else "",
                 res.claims_conflicted, self.revision, res.base, txn_pb2.CommitMode.Name(mode))
        # Whatever happened, the watch brings it: the committed claims (the
        # tasks ASSIGNED, the machines' allocation grown) at res.revision, and
        # everything the conflicting ones collided with at or before res.base.
        # Deciding before the copy is there would claim the same tasks again.
        self.wait_for = max(self.wait_for, res.revision, res.base)


def main():
    p = argparse.ArgumentParser(description="A batch scheduler for an omega cell, over its gRPC API.")
    p.add_argument("--server", default="127.0.0.1:7070", help="the cell's server (host:port)")
    p.add_argument("--name", required=True, help="this instance's name: it commits as NAME, which its token names")
    p.add_argument("--kind", default="python", help="schedule the jobs whose spec.scheduler is KIND")
    p.add_argument("--token-file", help="send the file's token as 'authorization: Bearer <token>'")
    args = p.parse_args()
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(message)s")

    metadata = ()
    if args.token_file:
        with open(args.token_file) as f:
            token = f.read().strip()
        if not token:
            sys.exit(f"--token-file {args.token_file}: empty")
        metadata = (("authorization", "Bearer " + token),)

    def stop(signum, _frame):
        raise Shutdown(signal.Signals(signum).name)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    options = [
        # Ping the server every 20 s, as the Go client does, so that a watch
        # that only receives learns of a dead server or a partition.
        ("grpc.keepalive_time_ms", 20_000),
        ("grpc.keepalive_timeout_ms", 10_000),
        ("grpc.http2.max_pings_without_data", 0),
        # Chunks and watch pieces are bounded (1 MiB) but a transaction's
        # result may be large: allow what the server allows.
        ("grpc.max_receive_message_length", 33 << 20),
        ("grpc.max_send_message_length", 33 << 20),
    ]
    # Plaintext for now: the server has no TLS yet (issue 8).
    with grpc.insecure_channel(args.server, options=options) as channel:
        stub = service_pb2_grpc.CellStub(channel)
        sched = Scheduler(stub, args.name, args.kind, metadata)
        lease = Lease(stub, args.name, args.kind, metadata)
        log.info("%s for jobs of spec.scheduler %r, cell %s", sched.component, args.kind, args.server)
        try:
            lease.start()
            sched.run()
        except Shutdown as s:
            log.info("%s: stopping", s)
        except Fatal as err:
            log.error("%s", err)
            return 1
        finally:
            lease.release()
    return 0


if __name__ == "__main__":
    sys.exit(main())
