package cli

import (
	"io"
	"os"
)

// progressTo is where a progress bar draws: w when it is a terminal, else
// nowhere. A bar redraws itself with carriage returns, which a redirected
// stderr (a log file, a CI job's output) would keep as noise; the lines a
// command prints besides its bar go to w as they are.
func progressTo(w io.Writer) io.Writer {
	if f, ok := w.(*os.File); ok && isTerminal(f) {
		return w
	}
	return io.Discard
}

// isTerminal reports whether f is a terminal (a character device: a
// console or a pseudo-terminal; /dev/null too, where a bar does no harm).
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
