//go:build !linux

package udp

import (
	"errors"
	"fmt"
	"net/netip"
)

// Without recvmmsg and sendmmsg, a batch is one datagram.

type batchReader struct{ buf []byte }

type batchWriter struct{}

func (c *Conn) init() error {
	c.rd.buf = make([]byte, readBufferSize)
	return nil
}

func (c *Conn) read(fn func(p []byte, from netip.AddrPort)) (int, error) {
	n, from, err := c.uc.ReadFromUDPAddrPort(c.rd.buf)
	if err != nil {
		return 0, fmt.Errorf("read: %w", err)
	}
	fn(c.rd.buf[:n], netip.AddrPortFrom(from.Addr().Unmap(), from.Port()))
	return 1, nil
}

func (c *Conn) writeBatch(ds []Datagram) (int, error) {
	for i, d := range ds {
		if err := c.WriteTo(d.Payload, d.Addr); err != nil {
			return i, err
		}
	}
	return len(ds), nil
}

func (c *Conn) forceBuffers() {}

// SocketStats is not available here.
func (c *Conn) SocketStats() (SocketStats, error) {
	return SocketStats{}, fmt.Errorf("socket stats: %w", errors.ErrUnsupported)
}

// Without a non-blocking batch read, ReadQueued reads nothing and reports the
// queue drained: time is judged as if every datagram had been read.
func (c *Conn) readQueued(fn func(p []byte, from netip.AddrPort)) (int, bool, error) {
	return 0, true, nil
}

// A Read of one datagram says nothing of the queue: assume it drained.
func (c *Conn) batch() int { return 2 }
