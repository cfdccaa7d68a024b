package cli

import (
	"errors"
	"io/fs"
	"testing"

	"github.com/omega-cell/omega/server"
)

// A refused server.Config, or one Run could not start with, is said by
// the flag the operator typed, its cause kept.
func TestServerErrorsNameTheFlag(t *testing.T) {
	cause := &fs.PathError{Op: "open", Path: "/x", Err: fs.ErrNotExist}
	for _, c := range []struct {
		in   error
		want string
	}{
		{&server.ConfigError{Field: "DataDir", Why: "required: the directory of the store"}, "--data: required: the directory of the store"},
		{&server.ConfigError{Field: "TokensFile", Err: cause}, "--tokens: open /x: file does not exist"},
		{&server.ConfigError{Field: "Listen", Err: cause}, "--listen: open /x: file does not exist"},
		{errors.New("serve gRPC: boom"), "serve gRPC: boom"},
	} {
		got := flagError(c.in)
		if got == nil || got.Error() != c.want {
			t.Errorf("%v: said %v, want %q", c.in, got, c.want)
		}
	}
	if got := flagError(&server.ConfigError{Field: "TokensFile", Err: cause}); !errors.Is(got, fs.ErrNotExist) {
		t.Errorf("the cause is lost: %v", got)
	}
	if flagError(nil) != nil {
		t.Error("no error became one")
	}
}
