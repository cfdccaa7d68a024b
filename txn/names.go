package txn

import "fmt"

// MaxLabelBytes is the longest DNS label (RFC 1123): a name a user gives
// an object (a job, the scheduler it names) is one.
const MaxLabelBytes = 63

// CheckLabel says why s is not a DNS label as RFC 1123 has it (and
// Kubernetes its names): 1 to 63 lower-case ASCII letters, digits and '-',
// starting and ending with a letter or digit; nil when it is one. The
// error quotes s with Quote, so it is bounded however long s is.
//
// The store does not apply it: a name's form is no invariant of the cell
// (nothing the store, a scheduler or an agent does reads it; they go by
// uids), and the names of replayed traces are not labels. The submission
// path (jobs.Complete) does, beside the live-name rule.
func CheckLabel(s string) error {
	bad := func(why string) error {
		return fmt.Errorf("%s: not a DNS label (RFC 1123: 1 to %d lower-case letters, digits and '-', starting and ending with a letter or digit): %s",
			Quote(s), MaxLabelBytes, why)
	}
	if s == "" {
		return bad("empty")
	}
	if len(s) > MaxLabelBytes {
		return bad(fmt.Sprintf("%d bytes", len(s)))
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' && i == 0:
			return bad("starts with '-'")
		case c == '-' && i == len(s)-1:
			return bad("ends with '-'")
		case c == '-':
		case c >= 'A' && c <= 'Z':
			return bad(fmt.Sprintf("upper-case %q at byte %d", c, i))
		case c < 0x80:
			return bad(fmt.Sprintf("%q at byte %d", c, i))
		default:
			return bad(fmt.Sprintf("a non-ASCII byte at %d", i))
		}
	}
	return nil
}
