package udp

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
)

// Datagrams between a hook and a daemon on different hosts carry a message
// authentication code (docs/security.md "Remote hooks"): the message, then a
// msgpack bin8 of MACSize bytes,
//
//	message | c4 10 | tag
//
// where tag is the first MACSize bytes of HMAC-SHA256(key, label | message)
// and label names the direction, so a datagram cannot be reflected back to
// its sender as the other side's. Both ends decide from the peer's address
// alone: a peer on a loopback address is identified by the kernel and sends
// no MAC; with a key, every datagram to or from any other address carries
// one, and one without it (or with a wrong one) is dropped. testdata/auth.txt
// pins the bytes for the Go and C tests.
const (
	// MACSize is how many bytes of the HMAC-SHA256 a datagram carries: 128
	// bits, the truncation RFC 2104 allows (at least half the output).
	MACSize = 16
	// TrailerSize is what a MAC adds to a datagram.
	TrailerSize = 2 + MACSize
	// MinKeySize is the shortest key a key file may hold.
	MinKeySize = 16
	// maxKeyFile bounds what a key file may hold.
	maxKeyFile = 4096
)

// The MAC covers the datagram's Direction (who sent it) as a label.
var macLabels = [...][]byte{ToDaemon: []byte("fikit hook->daemon v1\x00"), ToHook: []byte("fikit daemon->hook v1\x00")}

var (
	// ErrUnauthenticated: a datagram without a valid MAC where one is due.
	ErrUnauthenticated = errors.New("datagram not authenticated")
	// ErrKeyFile: a key file that cannot be a key (missing, not a regular
	// file, too short or too long).
	ErrKeyFile = errors.New("unusable key file")
)

// Authenticator seals and opens datagrams with one key. It keeps one
// HMAC state, so it is not safe for concurrent use.
type Authenticator struct {
	mac hash.Hash
	sum [sha256.Size]byte
}

// NewAuthenticator is an Authenticator for key (at least MinKeySize bytes).
func NewAuthenticator(key []byte) (*Authenticator, error) {
	if len(key) < MinKeySize {
		return nil, fmt.Errorf("%w: a key of %d bytes; want at least %d", ErrKeyFile, len(key), MinKeySize)
	}
	return &Authenticator{mac: hmac.New(sha256.New, bytes.Clone(key))}, nil
}

func (a *Authenticator) tag(msg []byte, dir Direction) []byte {
	a.mac.Reset()
	if dir != ToHook {
		dir = ToDaemon
	}
	a.mac.Write(macLabels[dir])
	a.mac.Write(msg)
	return a.mac.Sum(a.sum[:0])[:MACSize]
}

// Seal appends the MAC of msg (one whole encoded message, sent in direction
// dir) to msg and returns the datagram.
func (a *Authenticator) Seal(msg []byte, dir Direction) []byte {
	t := a.tag(msg, dir)
	msg = append(msg, 0xc4, MACSize)
	return append(msg, t...)
}

// Open checks the MAC of datagram b, sent in direction dir, and returns the
// message it carries (a subslice of b), or ErrUnauthenticated.
func (a *Authenticator) Open(b []byte, dir Direction) ([]byte, error) {
	if len(b) > MaxDatagram {
		return nil, fmt.Errorf("%d bytes: %w", len(b), ErrTooLarge)
	}
	if !HasTrailer(b) {
		return nil, fmt.Errorf("no MAC: %w", ErrUnauthenticated)
	}
	n := len(b) - TrailerSize
	if !hmac.Equal(a.tag(b[:n], dir), b[n+2:]) {
		return nil, fmt.Errorf("wrong MAC: %w", ErrUnauthenticated)
	}
	return b[:n], nil
}

// HasTrailer reports whether b ends as a sealed datagram does: a daemon
// without a key tells such a hook what is wrong, instead of "trailing bytes".
func HasTrailer(b []byte) bool {
	n := len(b) - TrailerSize
	return n >= 1 && b[n] == 0xc4 && b[n+1] == MACSize
}

// KeyFile is a key read from a file.
type KeyFile struct {
	Key []byte
	// Mode is the file's permission bits: a caller warns when other users
	// may read it (a key in a container's secret mount often is 0644).
	Mode fs.FileMode
}

// ReadKeyFile reads a key: the file's bytes without trailing white space
// (so `head -c 32 /dev/urandom | base64 > FILE` makes one), at least
// MinKeySize of them. The hook reads the same file the same way.
func ReadKeyFile(path string) (KeyFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return KeyFile{}, fmt.Errorf("%w: %w", ErrKeyFile, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return KeyFile{}, fmt.Errorf("%w: %w", ErrKeyFile, err)
	}
	if !fi.Mode().IsRegular() {
		return KeyFile{}, fmt.Errorf("%w: %s is not a regular file", ErrKeyFile, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return KeyFile{}, fmt.Errorf("%w: %w", ErrKeyFile, err)
	}
	if len(b) > maxKeyFile {
		return KeyFile{}, fmt.Errorf("%w: %s holds more than %d bytes", ErrKeyFile, path, maxKeyFile)
	}
	key := bytes.TrimRight(b, " \t\r\n")
	if len(key) < MinKeySize {
		return KeyFile{}, fmt.Errorf("%w: %s holds %d bytes (after trailing white space); want at least %d, e.g. from `head -c 32 /dev/urandom | base64`",
			ErrKeyFile, path, len(key), MinKeySize)
	}
	return KeyFile{Key: key, Mode: fi.Mode().Perm()}, nil
}
