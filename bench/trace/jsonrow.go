package trace

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
)

// JSON rows: the traces exported as JSON lines (Google's 2019 trace, from
// BigQuery) hold one object per line. ScanObject walks one object's members
// without building a map or reflecting on a struct, so a reader takes the
// fields it knows and skips the rest (objects, arrays, strings with escapes
// included): several times faster than encoding/json, which the readers
// would otherwise spend most of their time in.

// JSON value kinds, as ScanObject reports them: the first byte of the value.
const (
	JSONString = '"'
	JSONObject = '{'
	JSONArray  = '['
	JSONNull   = 'n'
	JSONTrue   = 't'
	JSONFalse  = 'f'
	JSONNumber = '0'
)

var errJSON = ErrSyntax

// ScanObject calls visit with each member of the JSON object in b: its key
// (as written, escapes and all: keys of the traces have none; switch on
// string(key), which does not allocate), the
// raw bytes of its value and the value's kind. It fails on anything but
// one well-formed object, optionally surrounded by white space.
func ScanObject(b []byte, visit func(key, raw []byte, kind byte) error) error {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return errJSON
	}
	end, err := scanMembers(b, i, visit)
	if err != nil {
		return err
	}
	if skipWS(b, end) != len(b) {
		return errJSON
	}
	return nil
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// scanMembers scans the object starting at b[i] == '{' and returns the
// index after its '}'.
func scanMembers(b []byte, i int, visit func(key, raw []byte, kind byte) error) (int, error) {
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return 0, errJSON
		}
		kend, err := scanString(b, i)
		if err != nil {
			return 0, err
		}
		key := b[i+1 : kend-1]
		i = skipWS(b, kend)
		if i >= len(b) || b[i] != ':' {
			return 0, errJSON
		}
		i = skipWS(b, i+1)
		vend, kind, err := scanValue(b, i)
		if err != nil {
			return 0, err
		}
		if visit != nil {
			if err := visit(key, b[i:vend], kind); err != nil {
				return 0, err
			}
		}
		i = skipWS(b, vend)
		if i >= len(b) {
			return 0, errJSON
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case '}':
			return i + 1, nil
		default:
			return 0, errJSON
		}
	}
}

// scanString returns the index after the string starting at b[i] == '"'.
func scanString(b []byte, i int) (int, error) {
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return j + 1, nil
		case c == '\\':
			j++ // the escaped byte (a \u's hex digits are plain bytes)
		case c < 0x20:
			return 0, errJSON
		}
	}
	return 0, errJSON
}

func scanValue(b []byte, i int) (int, byte, error) {
	if i >= len(b) {
		return 0, 0, errJSON
	}
	switch c := b[i]; c {
	case '"':
		end, err := scanString(b, i)
		return end, JSONString, err
	case '{':
		end, err := scanMembers(b, i, nil)
		return end, JSONObject, err
	case '[':
		j := skipWS(b, i+1)
		if j < len(b) && b[j] == ']' {
			return j + 1, JSONArray, nil
		}
		for {
			end, _, err := scanValue(b, j)
			if err != nil {
				return 0, 0, err
			}
			j = skipWS(b, end)
			if j >= len(b) {
				return 0, 0, errJSON
			}
			if b[j] == ']' {
				return j + 1, JSONArray, nil
			}
			if b[j] != ',' {
				return 0, 0, errJSON
			}
			j = skipWS(b, j+1)
		}
	case 'n':
		return literal(b, i, "null", JSONNull)
	case 't':
		return literal(b, i, "true", JSONTrue)
	case 'f':
		return literal(b, i, "false", JSONFalse)
	default:
		j := i
		for j < len(b) && (b[j] >= '0' && b[j] <= '9' || b[j] == '-' || b[j] == '+' || b[j] == '.' || b[j] == 'e' || b[j] == 'E') {
			j++
		}
		if j == i {
			return 0, 0, errJSON
		}
		return j, JSONNumber, nil
	}
}

func literal(b []byte, i int, lit string, kind byte) (int, byte, error) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return 0, 0, errJSON
	}
	return i + len(lit), kind, nil
}

// ScanArray calls visit with each element of the JSON array raw.
func ScanArray(raw []byte, visit func(elem []byte, kind byte) error) error {
	j := skipWS(raw, 0)
	if j >= len(raw) || raw[j] != '[' {
		return errJSON
	}
	j = skipWS(raw, j+1)
	if j < len(raw) && raw[j] == ']' {
		return nil
	}
	for {
		end, kind, err := scanValue(raw, j)
		if err != nil {
			return err
		}
		if err := visit(raw[j:end], kind); err != nil {
			return err
		}
		j = skipWS(raw, end)
		if j >= len(raw) {
			return errJSON
		}
		if raw[j] == ']' {
			return nil
		}
		if raw[j] != ',' {
			return errJSON
		}
		j = skipWS(raw, j+1)
	}
}

// JSONText decodes a string value; null is empty.
func JSONText(field string, raw []byte, kind byte) (string, error) {
	if kind == JSONNull {
		return "", nil
	}
	if kind != JSONString {
		return "", FieldError(field, string(raw), ErrSyntax)
	}
	inner := raw[1 : len(raw)-1]
	for _, c := range inner {
		if c == '\\' {
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return "", FieldError(field, string(raw), ErrSyntax)
			}
			return s, nil
		}
	}
	return string(inner), nil
}

// JSONInt decodes an integer in [lo, hi] written as a number or, as
// BigQuery exports 64-bit integers, a string of one; ok is false for null
// (the column is unknown).
func JSONInt(field string, raw []byte, kind byte, lo, hi int64) (v int64, ok bool, err error) {
	switch kind {
	case JSONNull:
		return 0, false, nil
	case JSONString:
		raw = raw[1 : len(raw)-1]
	case JSONNumber:
	default:
		return 0, false, FieldError(field, string(raw), ErrSyntax)
	}
	v, err = ParseInt(field, string(raw), lo, hi)
	return v, err == nil, err
}

// JSONAmount decodes an optional non-negative amount (a number, or a string
// of one); null is unknown.
func JSONAmount(field string, raw []byte, kind byte) (Amount, error) {
	switch kind {
	case JSONNull:
		return Amount{}, nil
	case JSONString:
		raw = raw[1 : len(raw)-1]
	case JSONNumber:
	default:
		return Amount{}, FieldError(field, string(raw), ErrSyntax)
	}
	v, err := ParseFloat(field, string(raw), 0, math.MaxFloat64)
	if err != nil {
		return Amount{}, err
	}
	return Known(v), nil
}

// JSONBool decodes a boolean (true/false, or "true"/"false"); null is
// false.
func JSONBool(field string, raw []byte, kind byte) (bool, error) {
	switch kind {
	case JSONTrue:
		return true, nil
	case JSONFalse, JSONNull:
		return false, nil
	case JSONString:
		if v, err := strconv.ParseBool(string(raw[1 : len(raw)-1])); err == nil {
			return v, nil
		}
	}
	return false, FieldError(field, string(raw), ErrSyntax)
}

// IsSyntax reports whether err is a JSON row that does not parse.
func IsSyntax(err error) bool { return errors.Is(err, ErrSyntax) }
