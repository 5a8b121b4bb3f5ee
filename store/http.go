package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/fikit/fikit/profiler"
)

// HTTP API served by Handler (see doc.go).
const (
	apiPrefix = "/v1/profiles"
	// maxBodyBytes bounds a PUT body: a MaxProfileBytes profile as JSON.
	maxBodyBytes = 4 * MaxProfileBytes
)

// Error codes of the HTTP API, in the "code" member of an error body.
const (
	codeNotFound   = "not_found"
	codeInvalidKey = "invalid_key"
	codeInvalid    = "invalid_profile"
	codeClosed     = "closed"
	codeInternal   = "internal"
	codeNoRoute    = "no_route"
)

type apiError struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// Handler serves s over HTTP, for `fikit profile` when the daemon holds the
// Badger directory:
//
//	GET    /v1/profiles                 → 200, JSON array of Summary
//	GET    /v1/profiles/{model}/{key}   → 200, the profile in the export format
//	PUT    /v1/profiles                 ← the profile in the export format → 204
//	DELETE /v1/profiles/{model}/{key}   → 204
//
// {model} and {key} are path segments escaped with url.PathEscape. Errors
// are JSON {"error": message, "code": code} with code not_found (404),
// invalid_key or invalid_profile (400), closed (503), internal (500) or
// no_route (404, 405: not an endpoint of this API).
func Handler(s Store) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serve(s, w, r)
	})
}

func serve(s Store, w http.ResponseWriter, r *http.Request) {
	// Route on the escaped path, so that an escaped '/' stays inside its
	// segment; ServeMux is not used because it cleans "." and "..".
	path := r.URL.EscapedPath()
	if !strings.HasPrefix(path, apiPrefix) {
		noRoute(w)
		return
	}
	rest := strings.TrimPrefix(path, apiPrefix)
	if rest == "" || rest == "/" {
		switch r.Method {
		case http.MethodGet:
			list, err := s.List()
			if err != nil {
				writeError(w, err)
				return
			}
			writeJSON(w, http.StatusOK, list)
		case http.MethodPut:
			p, err := profiler.DecodeJSON(http.MaxBytesReader(w, r.Body, maxBodyBytes))
			if err != nil {
				writeError(w, err)
				return
			}
			if err := s.Put(p); err != nil {
				writeError(w, err)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		default:
			methodNotAllowed(w, "GET, PUT")
		}
		return
	}
	segs := strings.Split(strings.TrimPrefix(rest, "/"), "/")
	if !strings.HasPrefix(rest, "/") || len(segs) != 2 {
		noRoute(w)
		return
	}
	model, err1 := url.PathUnescape(segs[0])
	key, err2 := url.PathUnescape(segs[1])
	if err := errors.Join(err1, err2); err != nil {
		writeError(w, fmt.Errorf("%w: %w", ErrInvalidKey, err))
		return
	}
	switch r.Method {
	case http.MethodGet:
		p, err := s.Get(model, key)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, p)
	case http.MethodDelete:
		if err := s.Delete(model, key); err != nil {
			writeError(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		methodNotAllowed(w, "GET, DELETE")
	}
}

func noRoute(w http.ResponseWriter) {
	writeJSON(w, http.StatusNotFound, apiError{Error: "no such endpoint", Code: codeNoRoute})
}

func methodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	writeJSON(w, http.StatusMethodNotAllowed, apiError{Error: "method not allowed", Code: codeNoRoute})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(apiError{Error: err.Error(), Code: codeInternal})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, err error) {
	var mbe *http.MaxBytesError
	e := apiError{Error: err.Error(), Code: codeInternal}
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, ErrNotFound):
		e.Code, status = codeNotFound, http.StatusNotFound
	case errors.Is(err, ErrInvalidKey):
		e.Code, status = codeInvalidKey, http.StatusBadRequest
	case errors.Is(err, profiler.ErrInvalid), errors.Is(err, profiler.ErrMalformed),
		errors.Is(err, profiler.ErrVersion), errors.As(err, &mbe):
		e.Code, status = codeInvalid, http.StatusBadRequest
	case errors.Is(err, ErrClosed):
		e.Code, status = codeClosed, http.StatusServiceUnavailable
	}
	writeJSON(w, status, e)
}

// remoteError is an error reported by the daemon: its message, and the
// sentinel its code stands for.
type remoteError struct {
	msg      string
	sentinel error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.sentinel }

// errorFromCode turns an API error body back into an error wrapping the
// matching sentinel.
func errorFromCode(status int, e apiError) error {
	var sentinel error
	switch e.Code {
	case codeNotFound:
		sentinel = ErrNotFound
	case codeInvalidKey:
		sentinel = ErrInvalidKey
	case codeInvalid:
		sentinel = profiler.ErrInvalid
	case codeClosed:
		sentinel = ErrClosed
	}
	msg := e.Error
	if msg == "" {
		msg = http.StatusText(status)
	}
	if sentinel == nil {
		msg = fmt.Sprintf("%s (HTTP %d)", msg, status)
	}
	return &remoteError{msg: "daemon: " + msg, sentinel: sentinel}
}
