package progress

import (
	"io"
	"os"

	"golang.org/x/term"
)

// IsTerminal reports whether w is a terminal: an *os.File that is a tty.
// A character device is not enough (/dev/null is one), and redraw escapes
// written to a file or a pipe only garble it.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Width returns the number of columns of the terminal w is, or 0 when w is
// not a terminal or its size is unknown.
func Width(w io.Writer) int {
	if !IsTerminal(w) {
		return 0
	}
	cols, _, err := term.GetSize(int(w.(*os.File).Fd()))
	if err != nil {
		return 0
	}
	return cols
}
