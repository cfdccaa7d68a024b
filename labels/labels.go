// Package labels parses and evaluates label selectors in the Kubernetes
// syntax (k8s.io/apimachinery/pkg/labels, the "set-based" and
// "equality-based" requirements of the Kubernetes documentation's "Labels
// and Selectors"): requirements separated by commas, all of which must
// hold —
//
//	key=value   key==value   key!=value
//	key in (v1,v2)           key notin (v1,v2)
//	key                      !key
//
// Keys are an optional DNS-subdomain prefix and a slash, then a name of at
// most 63 characters: alphanumerics, '-', '_' and '.', beginning and ending
// with an alphanumeric. Values are empty or like names. key!=value and
// notin also match objects without the key, as in Kubernetes. The server
// evaluates selectors for Get, List and Watch; `omega get -l` parses them.
package labels

import (
	"fmt"
	"slices"
	"strings"
)

// Op is a requirement's operator.
type Op int

const (
	Equals Op = iota + 1
	NotEquals
	In
	NotIn
	Exists
	DoesNotExist
)

// Requirement is one condition on one key.
type Requirement struct {
	Key    string
	Op     Op
	Values []string // sorted and unique; one for Equals and NotEquals, none for Exists and DoesNotExist
}

// Selector is requirements that must all hold; the empty selector matches
// everything.
type Selector []Requirement

// Matches reports whether labels satisfy every requirement.
func (s Selector) Matches(labels map[string]string) bool {
	for _, r := range s {
		v, has := labels[r.Key]
		switch r.Op {
		case Equals, In:
			if !has || !slices.Contains(r.Values, v) {
				return false
			}
		case NotEquals, NotIn:
			if has && slices.Contains(r.Values, v) {
				return false
			}
		case Exists:
			if !has {
				return false
			}
		case DoesNotExist:
			if has {
				return false
			}
		}
	}
	return true
}

// Empty reports whether the selector matches everything.
func (s Selector) Empty() bool { return len(s) == 0 }

// String is the selector in the syntax Parse reads (a canonical form: Parse
// of it gives the same selector).
func (s Selector) String() string {
	parts := make([]string, len(s))
	for i, r := range s {
		switch r.Op {
		case Equals:
			parts[i] = r.Key + "=" + r.Values[0]
		case NotEquals:
			parts[i] = r.Key + "!=" + r.Values[0]
		case In:
			parts[i] = r.Key + " in (" + strings.Join(r.Values, ",") + ")"
		case NotIn:
			parts[i] = r.Key + " notin (" + strings.Join(r.Values, ",") + ")"
		case Exists:
			parts[i] = r.Key
		case DoesNotExist:
			parts[i] = "!" + r.Key
		}
	}
	return strings.Join(parts, ",")
}

// Error is a selector that does not parse: where (a byte offset) and why.
type Error struct {
	Selector string
	Pos      int
	Why      string
}

func (e *Error) Error() string {
	return fmt.Sprintf("label selector %q: at byte %d: %s", e.Selector, e.Pos, e.Why)
}

// MaxLen bounds a selector's length.
const MaxLen = 4096

// Parse reads a selector. Whitespace around tokens is ignored.
func Parse(s string) (Selector, error) {
	p := &parser{s: s}
	if len(s) > MaxLen {
		return nil, p.fail(MaxLen, "longer than %d bytes", MaxLen)
	}
	var sel Selector
	p.space()
	if p.eof() {
		return nil, nil
	}
	for {
		r, err := p.requirement()
		if err != nil {
			return nil, err
		}
		sel = append(sel, r)
		p.space()
		if p.eof() {
			return sel, nil
		}
		if p.s[p.i] != ',' {
			return nil, p.fail(p.i, "want ',' between requirements, got %q", p.s[p.i])
		}
		p.i++
		p.space()
		if p.eof() {
			return nil, p.fail(p.i, "a requirement after ','")
		}
	}
}

type parser struct {
	s string
	i int
}

func (p *parser) fail(pos int, format string, args ...any) error {
	return &Error{Selector: p.s, Pos: pos, Why: fmt.Sprintf(format, args...)}
}

func (p *parser) eof() bool { return p.i >= len(p.s) }

func (p *parser) space() {
	for !p.eof() && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

func (p *parser) requirement() (Requirement, error) {
	if p.s[p.i] == '!' {
		p.i++
		p.space()
		key, err := p.key()
		if err != nil {
			return Requirement{}, err
		}
		return Requirement{Key: key, Op: DoesNotExist}, nil
	}
	key, err := p.key()
	if err != nil {
		return Requirement{}, err
	}
	p.space()
	if p.eof() || p.s[p.i] == ',' {
		return Requirement{Key: key, Op: Exists}, nil
	}
	switch {
	case strings.HasPrefix(p.s[p.i:], "=="):
		p.i += 2
		return p.single(key, Equals)
	case strings.HasPrefix(p.s[p.i:], "!="):
		p.i += 2
		return p.single(key, NotEquals)
	case p.s[p.i] == '=':
		p.i++
		return p.single(key, Equals)
	case p.word("notin"):
		return p.set(key, NotIn)
	case p.word("in"):
		return p.set(key, In)
	}
	return Requirement{}, p.fail(p.i, "want an operator (=, ==, !=, in, notin), ',' or the end after key %q", key)
}

// word consumes w if it stands alone (followed by a space or '(').
func (p *parser) word(w string) bool {
	if !strings.HasPrefix(p.s[p.i:], w) {
		return false
	}
	j := p.i + len(w)
	if j < len(p.s) && p.s[j] != ' ' && p.s[j] != '\t' && p.s[j] != '(' {
		return false
	}
	p.i = j
	return true
}

func (p *parser) single(key string, op Op) (Requirement, error) {
	p.space()
	v, err := p.value()
	if err != nil {
		return Requirement{}, err
	}
	return Requirement{Key: key, Op: op, Values: []string{v}}, nil
}

func (p *parser) set(key string, op Op) (Requirement, error) {
	p.space()
	if p.eof() || p.s[p.i] != '(' {
		return Requirement{}, p.fail(p.i, "want '(' after %s", map[Op]string{In: "in", NotIn: "notin"}[op])
	}
	p.i++
	var vs []string
	for {
		p.space()
		v, err := p.value()
		if err != nil {
			return Requirement{}, err
		}
		vs = append(vs, v)
		p.space()
		if p.eof() {
			return Requirement{}, p.fail(p.i, "want ',' or ')' in the set of values")
		}
		if p.s[p.i] == ')' {
			p.i++
			break
		}
		if p.s[p.i] != ',' {
			return Requirement{}, p.fail(p.i, "want ',' or ')' in the set of values, got %q", p.s[p.i])
		}
		p.i++
	}
	slices.Sort(vs)
	return Requirement{Key: key, Op: op, Values: slices.Compact(vs)}, nil
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func isNameChar(c byte) bool { return isAlnum(c) || c == '-' || c == '_' || c == '.' }

// name reads a name (or value) at p.i: at most 63 characters, alphanumeric
// at both ends; empty allowed only if empty is true.
func (p *parser) name(what string, empty bool) (string, error) {
	start := p.i
	for !p.eof() && isNameChar(p.s[p.i]) {
		p.i++
	}
	n := p.s[start:p.i]
	switch {
	case n == "" && empty:
		return "", nil
	case n == "":
		if p.eof() {
			return "", p.fail(start, "want a %s, got the end", what)
		}
		return "", p.fail(start, "want a %s, got %q", what, p.s[start])
	case len(n) > 63:
		return "", p.fail(start, "%s %q is longer than 63 characters", what, n)
	case !isAlnum(n[0]) || !isAlnum(n[len(n)-1]):
		return "", p.fail(start, "%s %q must begin and end with a letter or digit", what, n)
	}
	return n, nil
}

func (p *parser) key() (string, error) {
	start := p.i
	// An optional prefix: a DNS subdomain (lowercase alphanumerics, '-'
	// and '.'), then '/'.
	if j := strings.IndexByte(p.s[p.i:], '/'); j > 0 {
		prefix := p.s[p.i : p.i+j]
		if strings.Trim(prefix, "abcdefghijklmnopqrstuvwxyz0123456789-.") == "" {
			if len(prefix) > 253 || !isAlnum(prefix[0]) || !isAlnum(prefix[len(prefix)-1]) {
				return "", p.fail(start, "key prefix %q is not a DNS subdomain of at most 253 characters", prefix)
			}
			p.i += j + 1
			n, err := p.name("key name", false)
			if err != nil {
				return "", err
			}
			return prefix + "/" + n, nil
		}
	}
	return p.name("key", false)
}

func (p *parser) value() (string, error) { return p.name("value", true) }
