package udp

import "errors"

// Errors returned (wrapped) by [Decode], [Decoder.Decode], [Append] and
// [ParseText]. Use errors.Is to test for them; [ErrorCodeOf] maps them to the
// wire's error codes.
var (
	// ErrTooLarge: a datagram longer than MaxDatagram, or a message whose
	// encoding would be.
	ErrTooLarge = errors.New("datagram too large")
	// ErrMalformed: not a msgpack array of the expected shape: truncated
	// data, a value of the wrong msgpack kind, an invalid msgpack code.
	ErrMalformed = errors.New("malformed message")
	// ErrVersion: a protocol version other than ProtocolVersion.
	ErrVersion = errors.New("unsupported protocol version")
	// ErrUnknownType: a message type this version does not define.
	ErrUnknownType = errors.New("unknown message type")
	// ErrMissingField: an array shorter than the fields of its type.
	ErrMissingField = errors.New("missing field")
	// ErrRange: an integer or enum outside its field's range, or a bin field
	// of the wrong length.
	ErrRange = errors.New("value out of range")
	// ErrTrailing: bytes after the message's array.
	ErrTrailing = errors.New("trailing bytes after message")
	// ErrSyntax: text that ParseText cannot read.
	ErrSyntax = errors.New("syntax error")
)

// ErrorCodeOf returns the code of the Error message a daemon sends back for a
// datagram that failed to decode with err: CodeUnsupportedVersion for
// ErrVersion, CodeInvalidValue for ErrRange, CodeMalformed otherwise.
func ErrorCodeOf(err error) ErrorCode {
	switch {
	case errors.Is(err, ErrVersion):
		return CodeUnsupportedVersion
	case errors.Is(err, ErrRange):
		return CodeInvalidValue
	default:
		return CodeMalformed
	}
}
