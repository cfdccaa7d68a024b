package live

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/internal/script"
)

// The agent's protocol with the cell and its processes as scripts
// (testdata/*.txt; go test ./agents/live -rewrite writes their outputs
// anew). Each script runs on a fresh harness: a cell with the agent's
// machine ("agent") and another ("other"), the core on a MemExecutor, time
// starting at 0. The commands, each taking t=DURATION to move time on
// first:
//
//	place NAME [policy=never|on-failure|always] [delay=D] [check=PERIOD/THRESHOLD]
//	    the cell places a task on the agent's machine
//	evict NAME | move NAME
//	    the cell sends it back to PENDING | places it on "other"
//	exit NAME [code=N] [signal=S]
//	    its process ends
//	probe-answer NAME healthy|unhealthy
//	    answers the probe out, for the next step
//	race NAME
//	    the agent's next commit finds NAME's version moved
//	partition | heal
//	    the agent's commits fail (the cell unreachable) | no longer
//	step
//	    one Step: what the executor was asked, the reports and their
//	    outcomes, the probes asked for
//	agent-stop | agent-start | restart-agent
//	    the agent process ends (its processes go on) | a new one adopts
//	    them (what it asked of the executor) | both
//	cell | procs
//	    the cell's tasks | the executor's processes
func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			h := newHarness(t)
			stopped := false
			script.Run(t, f, func(t *testing.T, c *script.Command) string {
				if d := c.String(t, "t", ""); d != "" {
					at, err := time.ParseDuration(d)
					if err != nil {
						c.Fatalf(t, "t=%s: %v", d, err)
					}
					h.at(at)
				}
				var b strings.Builder
				switch c.Name {
				case "place":
					h.place(arg0(t, c), scriptTask(t, c))
				case "evict":
					h.evict(h.uid(t, c))
				case "move":
					h.move(h.uid(t, c))
				case "exit":
					st := &omegav1.ExitStatus{Code: int32(c.Int(t, "code", 0)), Signal: c.String(t, "signal", "")}
					if st.Signal != "" {
						st.Code = -1
					}
					h.exit(h.uid(t, c), st)
				case "probe-answer":
					if len(c.Args) < 2 || (c.Args[1].Key != "healthy" && c.Args[1].Key != "unhealthy") {
						c.Fatalf(t, "want NAME healthy|unhealthy")
					}
					h.answer(h.uid(t, c), c.Args[1].Key == "healthy")
				case "race":
					h.raceNext(h.uid(t, c))
				case "watch-gap":
					h.setGap()
				case "partition", "heal":
					h.setDown(c.Name == "partition")
				case "step":
					if stopped {
						c.Fatalf(t, "the agent is stopped")
					}
					probes := h.step()
					h.events(&b)
					h.reports(&b)
					for _, p := range probes {
						b.WriteString("probe " + h.name(p.Task) + "\n")
					}
				case "agent-stop":
					h.core.Close()
					stopped = true
				case "agent-start", "restart-agent":
					if c.Name == "restart-agent" {
						h.core.Close()
					}
					h.x.Events()
					h.startAgent()
					stopped = false
					h.events(&b)
					h.reports(&b) // none: the first step reports
				case "cell":
					h.cell(&b)
				case "procs":
					h.procs(&b)
				case "pool":
					fmt.Fprintf(&b, "addresses held: %d\n", h.pool.Held())
				default:
					c.Fatalf(t, "unknown command")
				}
				return b.String()
			})
		})
	}
}

// arg0 is the command's first bare argument.
func arg0(t *testing.T, c *script.Command) string {
	t.Helper()
	if len(c.Args) == 0 || len(c.Args[0].Vals) != 0 {
		c.Fatalf(t, "want a task's name first")
	}
	return c.Args[0].Key
}

func (h *harness) uid(t *testing.T, c *script.Command) uuid.UUID {
	t.Helper()
	u, ok := h.uids[arg0(t, c)]
	if !ok {
		c.Fatalf(t, "no task %s", arg0(t, c))
	}
	return u
}

// scriptTask reads a place command's options.
func scriptTask(t *testing.T, c *script.Command) taskOpts {
	t.Helper()
	var o taskOpts
	switch p := c.String(t, "policy", "never"); p {
	case "never":
		o.policy = omegav1.RestartPolicy_RESTART_POLICY_NEVER
	case "on-failure":
		o.policy = omegav1.RestartPolicy_RESTART_POLICY_ON_FAILURE
	case "always":
		o.policy = omegav1.RestartPolicy_RESTART_POLICY_ALWAYS
	default:
		c.Fatalf(t, "policy=%s: want never, on-failure or always", p)
	}
	if d := c.String(t, "delay", ""); d != "" {
		var err error
		if o.delay, err = time.ParseDuration(d); err != nil {
			c.Fatalf(t, "delay=%s: %v", d, err)
		}
	}
	if ch := c.String(t, "check", ""); ch != "" {
		period, threshold, ok := strings.Cut(ch, "/")
		p, err := time.ParseDuration(period)
		if !ok || err != nil || len(threshold) != 1 || threshold[0] < '1' || threshold[0] > '9' {
			c.Fatalf(t, "check=%s: want PERIOD/THRESHOLD (1s/3)", ch)
		}
		o.check = execCheck(p, int32(threshold[0]-'0'))
	}
	return o
}
