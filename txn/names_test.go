package txn

import (
	"regexp"
	"strings"
	"testing"
	"testing/quick"
)

// The RFC 1123 label as a regular expression: the model CheckLabel is held
// to.
var labelModel = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

func TestCheckLabel(t *testing.T) {
	for _, tc := range []struct{ in, says string }{
		{"a", ""}, {"web-1", ""}, {"0", ""}, {"a--b", ""}, {strings.Repeat("a", 63), ""},
		{"", "empty"},
		{strings.Repeat("a", 64), "64 bytes"},
		{"Bad Name!", `"Bad Name!": not a DNS label`},
		{"Bad", "upper-case 'B' at byte 0"},
		{"a b", "' ' at byte 1"},
		{"a.b", "'.' at byte 1"},
		{"-a", "starts with '-'"},
		{"a-", "ends with '-'"},
		{"é", "non-ASCII byte at 0"},
		{strings.Repeat("A", 70000), `(70000 bytes)`},
	} {
		err := CheckLabel(tc.in)
		switch {
		case tc.says == "" && err != nil:
			t.Errorf("CheckLabel(%s) = %v, want nil", Quote(tc.in), err)
		case tc.says != "" && (err == nil || !strings.Contains(err.Error(), tc.says)):
			t.Errorf("CheckLabel(%s) = %v, want an error saying %q", Quote(tc.in), err, tc.says)
		case err != nil && len(err.Error()) > 300:
			t.Errorf("CheckLabel(%s): %d bytes of error, want it bounded", Quote(tc.in), len(err.Error()))
		}
	}
}

// TestCheckLabelModel: CheckLabel accepts exactly what the RFC's regular
// expression does, on strings drawn mostly from the label's alphabet and
// its near misses.
func TestCheckLabelModel(t *testing.T) {
	const alphabet = "abz09-A.Z_ é"
	f := func(picks []uint8) bool {
		var b strings.Builder
		for _, p := range picks {
			b.WriteByte(alphabet[int(p)%len(alphabet)])
		}
		s := b.String()
		return (CheckLabel(s) == nil) == labelModel.MatchString(s)
	}
	if err := quick.Check(f, &quick.Config{MaxCount: 20000}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{62, 63, 64} { // the length bound, which short draws miss
		if s := strings.Repeat("a", n); (CheckLabel(s) == nil) != labelModel.MatchString(s) {
			t.Errorf("length %d: CheckLabel and the model disagree", n)
		}
	}
}
