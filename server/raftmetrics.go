package server

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/omega-cell/omega/replica"
	replicalive "github.com/omega-cell/omega/replica/live"
)

// raftCollector reports a replicated member's raft state at scrape time,
// read on its driver's goroutine (nothing when it does not answer within
// a second: a member too busy to say is a finding of its own).
type raftCollector struct {
	member                                        *replicalive.Driver
	term, leader, leads, commit, applied, pending *prometheus.Desc
	snapshots, compactions, snapSeconds           *prometheus.Desc
	peerMatch, peerActive, peerProgress, isVoter  *prometheus.Desc
}

func newRaftCollector(member *replicalive.Driver) *raftCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("omega_raft_"+name, help, labels, nil)
	}
	return &raftCollector{
		member:       member,
		term:         d("term", "The member's raft term."),
		leader:       d("leader", "The member number of the leader this member knows (0: none)."),
		leads:        d("is_leader", "1 while this member leads."),
		isVoter:      d("is_voter", "1 once this member is a voter of the configuration it holds (0 while it joins)."),
		commit:       d("commit_index", "Raft's commit index on this member."),
		applied:      d("applied_index", "The last raft index this member applied."),
		pending:      d("proposals_pending", "Commits proposed by this member and not yet answered."),
		snapshots:    d("snapshots_total", "Snapshots this member made since it started."),
		compactions:  d("compactions_total", "Compactions of this member's raft log since it started."),
		snapSeconds:  d("snapshot_seconds_total", "Seconds spent in the applies that made a snapshot (encoding and writing it, mostly)."),
		peerMatch:    d("peer_match_index", "On the leader: the raft index each member is known to hold.", "member"),
		peerActive:   d("peer_recent_active", "On the leader: 1 if the member was heard from within an election timeout.", "member"),
		peerProgress: d("peer_progress", "On the leader: 1 for the state the leader's replication to each member is in.", "member", "state"),
	}
}

func (c *raftCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.term, c.leader, c.leads, c.isVoter, c.commit, c.applied, c.pending, c.snapshots, c.compactions, c.snapSeconds, c.peerMatch, c.peerActive, c.peerProgress} {
		ch <- d
	}
}

func (c *raftCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	st, err := c.member.Status(ctx)
	if err != nil {
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	gauge(c.term, float64(st.Term))
	gauge(c.leader, float64(replica.MemberOf(st.Leader)))
	gauge(c.leads, b(st.State == "leader"))
	gauge(c.isVoter, b(st.Voter))
	gauge(c.commit, float64(st.Commit))
	gauge(c.applied, float64(st.Applied))
	gauge(c.pending, float64(st.Pending))
	counter(c.snapshots, float64(st.Snapshots))
	counter(c.compactions, float64(st.Compactions))
	counter(c.snapSeconds, st.SnapshotSeconds)
	if st.State != "leader" {
		return
	}
	for id, pr := range st.Progress {
		m := strconv.FormatUint(replica.MemberOf(id), 10)
		gauge(c.peerMatch, float64(pr.Match), m)
		gauge(c.peerActive, b(pr.RecentActive), m)
		for _, s := range []string{"probe", "replicate", "snapshot"} {
			gauge(c.peerProgress, b(pr.State == s), m, s)
		}
	}
}
