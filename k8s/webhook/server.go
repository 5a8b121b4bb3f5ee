package webhook

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"sync"
	"time"
)

// MaxBody bounds an AdmissionReview read (the API server sends at most
// about 3 MiB objects; a pod is far smaller).
const MaxBody = 4 << 20

// Handler answers AdmissionReviews and counts what it did.
type Handler struct {
	Config Config
	Log    *slog.Logger

	mu     sync.Mutex
	counts map[string]uint64
}

// NewHandler returns a Handler for cfg.
func NewHandler(cfg Config, log *slog.Logger) *Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Handler{Config: cfg, Log: log, counts: map[string]uint64{}}
}

// Review answers one AdmissionReview: always allowed (the daemon enforces
// who a pod is; a webhook that refused would only stop pods), with a patch
// where Mutate made one.
func (h *Handler) Review(body []byte) ([]byte, error) {
	var rv Review
	if err := json.Unmarshal(body, &rv); err != nil || rv.Request == nil {
		h.count(Undecodable)
		if err == nil {
			err = errors.New("no request")
		}
		return nil, fmt.Errorf("webhook: AdmissionReview: %w", err)
	}
	req := rv.Request
	resp := &Response{UID: req.UID, Allowed: true}
	var outcome string
	if req.Kind.Kind != "Pod" || req.Kind.Group != "" || (req.Operation != "CREATE" && req.Operation != "") {
		outcome = NotAPod
	} else {
		ops, o, err := h.Config.Mutate(req.Object)
		outcome = o
		if err != nil {
			resp.Warnings = append(resp.Warnings, "fikit: pod not put under the hook: "+err.Error())
			h.Log.Warn("pod not put under the hook", "namespace", req.Namespace, "name", req.Name, "err", err)
		}
		if len(ops) > 0 {
			patch, err := json.Marshal(ops)
			if err != nil {
				return nil, fmt.Errorf("webhook: patch: %w", err)
			}
			jp := "JSONPatch"
			resp.Patch, resp.PatchType = patch, &jp
		}
		if o != Mutated && o != AlreadyDone {
			h.Log.Info("pod left un-hooked", "namespace", req.Namespace, "name", req.Name, "reason", o)
		}
	}
	h.count(outcome)
	out := Review{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview", Response: resp}
	if rv.APIVersion != "" {
		out.APIVersion = rv.APIVersion
	}
	return json.Marshal(out)
}

func (h *Handler) count(outcome string) {
	h.mu.Lock()
	h.counts[outcome]++
	h.mu.Unlock()
}

// Counts is how many pods had each outcome.
func (h *Handler) Counts() map[string]uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := make(map[string]uint64, len(h.counts))
	for k, v := range h.counts {
		m[k] = v
	}
	return m
}

// ServeHTTP serves /mutate (POST AdmissionReview), /metrics and /healthz.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/healthz":
		_, _ = io.WriteString(w, "ok\n")
	case "/metrics":
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = io.WriteString(w, "# HELP fikit_webhook_pods_total Pods the webhook was asked about, by what it did.\n# TYPE fikit_webhook_pods_total counter\n")
		c := h.Counts()
		keys := make([]string, 0, len(c))
		for k := range c {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "fikit_webhook_pods_total{outcome=%q} %d\n", k, c[k])
		}
	case "/mutate":
		if r.Method != http.MethodPost {
			http.Error(w, "POST an AdmissionReview", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
		if err != nil {
			http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		out, err := h.Review(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	default:
		http.NotFound(w, r)
	}
}

// Certs loads a certificate and key pair and reloads it when asked for it
// a minute or more after the last load, so a renewed Secret (cert-manager,
// or the chart's) is served without a restart.
type Certs struct {
	CertFile, KeyFile string

	mu   sync.Mutex
	cert *tls.Certificate
	at   time.Time
}

// Get is a tls.Config.GetCertificate.
func (c *Certs) Get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cert != nil && time.Since(c.at) < time.Minute {
		return c.cert, nil
	}
	cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		if c.cert != nil {
			return c.cert, nil
		}
		return nil, fmt.Errorf("webhook: certificate: %w", err)
	}
	c.cert, c.at = &cert, time.Now()
	return c.cert, nil
}

// Serve serves h over HTTPS on ln until ctx ends.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, certs *Certs) error {
	if _, err := certs.Get(nil); err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: certs.Get}}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("webhook: %w", err)
	}
	return nil
}
