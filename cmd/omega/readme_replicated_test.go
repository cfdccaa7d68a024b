package main_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeReplicatedBlocks runs the README's blocks under "Run a
// replicated cell" as they are written, one bash script (their /tmp
// directories moved into the test's), on their own loopback ports: three
// members, the leader killed, the servers changed (an add, a dead server
// replaced with --join, a transfer of the lead, member 1 removed) and a
// single server's data upgraded. What the blocks print must say each step
// worked: the last `omega get servers` lists members 2, 3 and 4, none
// joining or unreachable, and the upgraded cell's job is on its second
// member.
func TestReadmeReplicatedBlocks(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin, err := omegaBinary()
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(readme), "### Run a replicated cell")
	sec, _, _ = strings.Cut(sec, "\n## ")
	var blocks []string
	for _, part := range strings.Split(sec, "```sh\n")[1:] {
		block, _, _ := strings.Cut(part, "```")
		blocks = append(blocks, block)
	}
	if !ok || len(blocks) != 3 {
		t.Fatalf("the README's replicated cell section has %d blocks; this test knows 3", len(blocks))
	}
	dir := t.TempDir()
	script := strings.Join(blocks, "\n")
	script = strings.ReplaceAll(script, "/tmp/", dir+"/")
	script += "\nsleep 1\n"
	out, stderr, runErr := runScript(t, bin, dir, "bash", script)
	fail := func(why string) {
		t.Helper()
		t.Fatalf("%s (the script: %v)\nstdout:\n%s\nstderr (last 4,000 bytes):\n%s", why, runErr, out, stderr[max(0, len(stderr)-4000):])
	}
	for _, want := range []string{"member 4 added at 127.0.0.1:7084", "member 4 leads now", "member 1 removed", "holds member 1 of cell", "member 2 added at 127.0.0.1:7073"} {
		if !strings.Contains(out, want) {
			fail("the blocks did not say " + want)
		}
	}
	tables := regexp.MustCompile(`(?m)^MEMBER .*\n((?:[0-9]+ .*\n)+)`).FindAllStringSubmatch(out, -1)
	if len(tables) < 3 {
		fail("fewer than three server tables")
	}
	last := tables[len(tables)-1][1]
	rows := strings.Split(strings.TrimSpace(last), "\n")
	if len(rows) != 3 || !strings.HasPrefix(rows[0], "2 ") || !strings.HasPrefix(rows[2], "4 ") || strings.Contains(last, "joining") || strings.Contains(last, "unreachable") {
		fail("the last server table is not members 2, 3 and 4, all in")
	}
	if n := strings.Count(out, "\nhello "); n < 2 {
		fail("the hello job is not listed twice (the replicated cell's, the upgraded cell's)")
	}
}
