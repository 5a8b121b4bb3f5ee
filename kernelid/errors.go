package kernelid

import "errors"

// ErrEscape is returned by [Unescape] for a malformed escape sequence.
var ErrEscape = errors.New("malformed escape")
