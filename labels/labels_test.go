package labels

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// The examples of the Kubernetes documentation's "Labels and Selectors",
// and what each must match.
func TestParseKubernetesExamples(t *testing.T) {
	prod := map[string]string{"environment": "production", "tier": "backend"}
	qa := map[string]string{"environment": "qa", "tier": "frontend", "partition": "customerA"}
	none := map[string]string{}
	for _, c := range []struct {
		sel   string
		canon string
		match []map[string]string
		miss  []map[string]string
	}{
		{"environment = production", "environment=production", []map[string]string{prod}, []map[string]string{qa, none}},
		{"environment == production", "environment=production", []map[string]string{prod}, []map[string]string{qa}},
		{"tier != frontend", "tier!=frontend", []map[string]string{prod, none}, []map[string]string{qa}},
		{"environment in (production, qa)", "environment in (production,qa)", []map[string]string{prod, qa}, []map[string]string{none}},
		{"tier notin (frontend, backend)", "tier notin (backend,frontend)", []map[string]string{none}, []map[string]string{prod, qa}},
		{"partition", "partition", []map[string]string{qa}, []map[string]string{prod, none}},
		{"!partition", "!partition", []map[string]string{prod, none}, []map[string]string{qa}},
		{"environment=production,tier!=frontend", "environment=production,tier!=frontend", []map[string]string{prod}, []map[string]string{qa}},
		{"app.kubernetes.io/name=omega", "app.kubernetes.io/name=omega", []map[string]string{{"app.kubernetes.io/name": "omega"}}, []map[string]string{prod}},
		{"", "", []map[string]string{prod, qa, none}, nil},
		{"  ", "", []map[string]string{prod}, nil},
		{"k=", "k=", []map[string]string{{"k": ""}}, []map[string]string{{"k": "x"}, none}},
	} {
		s, err := Parse(c.sel)
		if err != nil {
			t.Fatalf("Parse(%q): %v", c.sel, err)
		}
		if s.String() != c.canon {
			t.Errorf("Parse(%q).String() = %q, want %q", c.sel, s.String(), c.canon)
		}
		for _, l := range c.match {
			if !s.Matches(l) {
				t.Errorf("%q does not match %v", c.sel, l)
			}
		}
		for _, l := range c.miss {
			if s.Matches(l) {
				t.Errorf("%q matches %v", c.sel, l)
			}
		}
	}
}

// Bad selectors are errors that say where and why.
func TestParseErrors(t *testing.T) {
	for _, c := range []struct {
		sel  string
		pos  int
		says string
	}{
		{"a=b,", 4, "a requirement after ','"},
		{"a b", 2, "want an operator"},
		{"a in b", 5, "want '('"},
		{"a in (x", 7, "want ',' or ')'"},
		{"a in (x;y)", 7, "want ',' or ')'"},
		{"-a=b", 0, "must begin and end"},
		{"a-=b", 0, "must begin and end"},
		{"a=b c", 4, "want ','"},
		{"a=" + strings.Repeat("v", 64), 2, "longer than 63"},
		{"=b", 0, "want a key"},
		{"a=b!", 3, "want ','"},
		{"Bad_Prefix/a=b", 10, "want an operator"}, // not a DNS subdomain: the key ends at the slash
		{strings.Repeat("a", MaxLen+1), MaxLen, "longer than"},
	} {
		_, err := Parse(c.sel)
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("Parse(%q) = %v, want a *labels.Error", c.sel, err)
			continue
		}
		if e.Pos != c.pos || !strings.Contains(e.Why, c.says) {
			t.Errorf("Parse(%q): at %d %q, want at %d saying %q", c.sel, e.Pos, e.Why, c.pos, c.says)
		}
	}
}

func genName(t *rapid.T, label string) string {
	return rapid.StringMatching(`[a-z0-9]([a-z0-9._-]{0,6}[a-z0-9])?`).Draw(t, label)
}

// Property: a generated selector prints to what parses back to it, and
// matches a label set exactly when each of its requirements does, by the
// rules written out again here.
func TestSelectorProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var sel Selector
		for i := range rapid.IntRange(0, 4).Draw(t, "n") {
			key := genName(t, "key")
			if rapid.Bool().Draw(t, "prefixed") {
				key = "x.io/" + key
			}
			op := Op(rapid.IntRange(int(Equals), int(DoesNotExist)).Draw(t, "op"))
			r := Requirement{Key: key, Op: op}
			switch op {
			case Equals, NotEquals:
				r.Values = []string{genName(t, "value")}
			case In, NotIn:
				vs := rapid.SliceOfNDistinct(rapid.StringMatching(`[a-z0-9]{1,4}`), 1, 3, rapid.ID[string]).Draw(t, "values")
				r.Values = append([]string(nil), vs...)
				sortStrings(r.Values)
			}
			_ = i
			sel = append(sel, r)
		}
		got, err := Parse(sel.String())
		if err != nil {
			t.Fatalf("Parse(%q): %v", sel.String(), err)
		}
		if !reflect.DeepEqual(got, sel) && !(len(got) == 0 && len(sel) == 0) {
			t.Fatalf("Parse(%q) = %#v, want %#v", sel.String(), got, sel)
		}
		labels := map[string]string{}
		for range rapid.IntRange(0, 4).Draw(t, "labels") {
			labels[genName(t, "lk")] = rapid.StringMatching(`[a-z0-9]{0,4}`).Draw(t, "lv")
		}
		for _, r := range sel { // sometimes carry a selector key
			if rapid.Bool().Draw(t, "carry") {
				v := "zz"
				if len(r.Values) > 0 && rapid.Bool().Draw(t, "hit") {
					v = r.Values[0]
				}
				labels[r.Key] = v
			}
		}
		want := true
		for _, r := range sel {
			v, has := labels[r.Key]
			in := false
			for _, x := range r.Values {
				in = in || x == v
			}
			ok := map[Op]bool{Equals: has && in, In: has && in, NotEquals: !has || !in, NotIn: !has || !in, Exists: has, DoesNotExist: !has}[r.Op]
			want = want && ok
		}
		if sel.Matches(labels) != want {
			t.Fatalf("%q on %v: Matches %v, want %v", sel.String(), labels, !want, want)
		}
	})
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// FuzzParse: no input panics; whatever parses prints to what parses back
// to the same selector.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"environment = production", "tier != frontend", "environment in (production, qa)",
		"tier notin (frontend, backend)", "partition", "!partition", "environment=production,tier!=frontend",
		"app.kubernetes.io/name=omega,job in (a,b)", "k=", "a in (x", "a=b,",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sel, err := Parse(s)
		if err != nil {
			return
		}
		again, err := Parse(sel.String())
		if err != nil {
			t.Fatalf("Parse(%q) gave %q, which does not parse: %v", s, sel.String(), err)
		}
		if again.String() != sel.String() {
			t.Fatalf("Parse(%q): %q, then %q", s, sel.String(), again.String())
		}
	})
}
