package cli

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// Every command's help is whole and current: a short line, a long text
// (where there is one) whose last line ends a sentence, a list item or an
// example, and no "still to come" about anything. A help text cut off
// mid-sentence ("Still to come with the live", once) fails here.
func TestHelpTextsAreWhole(t *testing.T) {
	var walk func(c *cobra.Command)
	n := 0
	walk = func(c *cobra.Command) {
		n++
		name := c.CommandPath()
		if strings.TrimSpace(c.Short) == "" && c.Name() != "help" && c.Name() != "completion" {
			t.Errorf("%s: no short help", name)
		}
		for _, text := range []string{c.Short, c.Long} {
			low := strings.ToLower(text)
			for _, stale := range []string{"still to come", "comes later", "come later", "to be done", "todo"} {
				if strings.Contains(low, stale) {
					t.Errorf("%s: its help says %q: say what is true now", name, stale)
				}
			}
		}
		if long := strings.TrimRight(c.Long, " \n\t"); long != "" {
			lines := strings.Split(long, "\n")
			last := lines[len(lines)-1]
			code := strings.HasPrefix(last, "  ") || strings.HasPrefix(last, "\t")
			if !code && !strings.HasSuffix(last, ".") && !strings.HasSuffix(last, ":") && !strings.HasSuffix(last, ")") && !strings.HasSuffix(last, "`") {
				t.Errorf("%s: its long help ends mid-sentence: %q", name, last)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd())
	if n < 20 {
		t.Fatalf("walked %d commands: the tree is not what it seems", n)
	}
}
