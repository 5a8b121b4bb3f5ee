package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fikit/fikit/profiler"
)

// RemoteTimeout bounds each request of a RemoteStore.
const RemoteTimeout = 30 * time.Second

// RemoteStore is a Store served by Handler on a unix socket, normally by
// `fikit serve` on <data dir>/fikit.sock. Failures to reach the socket
// wrap ErrUnavailable.
type RemoteStore struct {
	socket string
	client *http.Client
	closed atomic.Bool
}

var _ Store = (*RemoteStore)(nil)

// Remote returns a Store that talks to Handler on the unix socket at
// socketPath. It connects on first use.
func Remote(socketPath string) *RemoteStore {
	// A connection per request: a unix socket is cheap to dial, and
	// net/http's idle pool fails a PUT outright ("transport connection
	// broken: putIdleConn: too many idle connections", golang/go#41600)
	// when concurrent callers overflow it, a request it will not replay.
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socketPath)
		},
		DisableKeepAlives: true,
	}
	return &RemoteStore{socket: socketPath, client: &http.Client{Transport: tr, Timeout: RemoteTimeout}}
}

// Socket is the path of the unix socket.
func (r *RemoteStore) Socket() string { return r.socket }

func profileURL(model, taskKey string) *url.URL {
	return &url.URL{
		Scheme:  "http",
		Host:    "fikit",
		Path:    apiPrefix + "/" + model + "/" + taskKey,
		RawPath: apiPrefix + "/" + escapeSegment(model) + "/" + escapeSegment(taskKey),
	}
}

// escapeSegment escapes a path segment; "." and ".." become %2E and %2E%2E,
// which http.ServeMux does not clean away.
func escapeSegment(s string) string {
	if s == "." || s == ".." {
		return strings.Repeat("%2E", len(s))
	}
	return url.PathEscape(s)
}

func collectionURL() *url.URL {
	return &url.URL{Scheme: "http", Host: "fikit", Path: apiPrefix}
}

// do sends a request and decodes a 2xx JSON body into out (if not nil).
func (r *RemoteStore) do(method string, u *url.URL, body []byte, out func(io.Reader) error) error {
	if r.closed.Load() {
		return ErrClosed
	}
	req, err := http.NewRequest(method, u.String(), bytes.NewReader(body))
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w: %w", method, r.socket, ErrUnavailable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		var e apiError
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if json.Unmarshal(b, &e) != nil {
			e.Error = string(bytes.TrimSpace(b))
		}
		return errorFromCode(resp.StatusCode, e)
	}
	if out == nil {
		return nil
	}
	if err := out(resp.Body); err != nil {
		return fmt.Errorf("%s %s: %w", method, u.Path, err)
	}
	return nil
}

// Get implements Store.
func (r *RemoteStore) Get(model, taskKey string) (*profiler.Profile, error) {
	if err := checkKey(model, taskKey); err != nil {
		return nil, err
	}
	var p *profiler.Profile
	err := r.do(http.MethodGet, profileURL(model, taskKey), nil, func(body io.Reader) error {
		var err error
		p, err = profiler.DecodeJSON(body)
		return err
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// Put implements Store.
func (r *RemoteStore) Put(p *profiler.Profile) error {
	if err := checkProfile(p); err != nil {
		return err
	}
	body, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return r.do(http.MethodPut, collectionURL(), body, nil)
}

// Delete implements Store.
func (r *RemoteStore) Delete(model, taskKey string) error {
	if err := checkKey(model, taskKey); err != nil {
		return err
	}
	return r.do(http.MethodDelete, profileURL(model, taskKey), nil, nil)
}

// List implements Store.
func (r *RemoteStore) List() ([]Summary, error) {
	var list []Summary
	err := r.do(http.MethodGet, collectionURL(), nil, func(body io.Reader) error {
		return json.NewDecoder(body).Decode(&list)
	})
	if err != nil {
		return nil, err
	}
	if list == nil {
		list = []Summary{}
	}
	return list, nil
}

// Close implements Store: it drops idle connections; the daemon's store
// stays open.
func (r *RemoteStore) Close() error {
	r.closed.Store(true)
	r.client.CloseIdleConnections()
	return nil
}
