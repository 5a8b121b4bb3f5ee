package udp

import (
	"fmt"
	"net"
	"net/netip"
	"time"
)

// Client is a small UDP client for tests and tools: it talks to one daemon
// address. It is not safe for concurrent use.
type Client struct {
	uc  *net.UDPConn
	buf []byte
	out []byte
}

// Dial returns a Client that sends to addr and receives only from it.
func Dial(addr string) (*Client, error) {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	uc, err := net.DialUDP("udp", nil, ua)
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	return &Client{uc: uc, buf: make([]byte, readBufferSize), out: make([]byte, 0, MaxDatagram)}, nil
}

// LocalAddr returns the client's address, the one the daemon sees.
func (c *Client) LocalAddr() netip.AddrPort {
	return c.uc.LocalAddr().(*net.UDPAddr).AddrPort()
}

// Send encodes and sends m.
func (c *Client) Send(m Message) error {
	b, err := Append(c.out[:0], m)
	if err != nil {
		return err
	}
	return c.SendRaw(b)
}

// SendRaw sends a datagram as it is.
func (c *Client) SendRaw(b []byte) error {
	if _, err := c.uc.Write(b); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	return nil
}

// ReceiveRaw waits up to timeout for a datagram and returns it; the slice is
// valid until the next receive. A timeout is an error wrapping
// os.ErrDeadlineExceeded.
func (c *Client) ReceiveRaw(timeout time.Duration) ([]byte, error) {
	if err := c.uc.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return nil, fmt.Errorf("receive: %w", err)
	}
	n, err := c.uc.Read(c.buf)
	if err != nil {
		return nil, fmt.Errorf("receive: %w", err)
	}
	return c.buf[:n], nil
}

// Receive waits up to timeout for a datagram and decodes it into a new
// message.
func (c *Client) Receive(timeout time.Duration) (Message, error) {
	b, err := c.ReceiveRaw(timeout)
	if err != nil {
		return nil, err
	}
	return Decode(b)
}

// Request sends m and waits up to timeout for the reply.
func (c *Client) Request(m Message, timeout time.Duration) (Message, error) {
	if err := c.Send(m); err != nil {
		return nil, err
	}
	return c.Receive(timeout)
}

// Close closes the client's socket.
func (c *Client) Close() error {
	return c.uc.Close()
}
