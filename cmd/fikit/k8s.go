package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/fikit/fikit/k8s/pods"
	"github.com/fikit/fikit/k8s/webhook"
)

// webhookCommand is `fikit webhook`: the mutating admission webhook of the
// Helm chart (docs/kubernetes.md).
func webhookCommand() *cli.Command {
	d := webhook.DefaultConfig()
	return &cli.Command{
		Name:  "webhook",
		Usage: "serve the Kubernetes mutating admission webhook that puts GPU pods under the hook",
		Description: "Answers AdmissionReviews on POST /mutate over HTTPS (and /metrics, /healthz): each\n" +
			"container of a pod that asks for a GPU gets LD_PRELOAD, FIKIT_SCHEDULER and the\n" +
			"annotations' priority, weight and task key, and the node's fikit directories mounted.\n" +
			"Pods left alone are counted by reason and annotated fikit.io/injected=REASON.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "listen", Value: ":8443", Usage: "HTTPS address", EnvVars: []string{"FIKIT_WEBHOOK_LISTEN"}},
			&cli.StringFlag{Name: "tls-cert", Value: "/etc/fikit/tls/tls.crt", Usage: "certificate (PEM), reloaded a minute after a change", EnvVars: []string{"FIKIT_WEBHOOK_TLS_CERT"}},
			&cli.StringFlag{Name: "tls-key", Value: "/etc/fikit/tls/tls.key", Usage: "its key (PEM)", EnvVars: []string{"FIKIT_WEBHOOK_TLS_KEY"}},
			&cli.StringFlag{Name: "hook-dir", Value: d.HookDir, Usage: "the node's directory of the hook (fikit install-hook), mounted read-only at the same path"},
			&cli.StringFlag{Name: "socket-dir", Value: d.SockDir, Usage: "the node's directory of the daemon's hooks.sock, mounted read-only"},
			&cli.StringFlag{Name: "reply-dir", Value: d.ReplyDir, Usage: "the node's directory (mode 1733) where hooks bind their reply sockets, mounted read-write"},
			&cli.StringSliceFlag{Name: "gpu-resource", Value: cli.NewStringSlice(d.GPUResources...), Usage: "resource names that ask for a GPU ('*' at the end: a prefix)"},
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageError(c, "webhook takes no arguments, got %q", c.Args().First())
			}
			log, err := newLogger(c.String("log-level"), "json")
			if err != nil {
				return usageError(c, "%v", err)
			}
			cfg := webhook.Config{HookDir: c.String("hook-dir"), SockDir: c.String("socket-dir"),
				ReplyDir: c.String("reply-dir"), GPUResources: c.StringSlice("gpu-resource")}
			ln, err := net.Listen("tcp", c.String("listen"))
			if err != nil {
				return fmt.Errorf("webhook: %w", err)
			}
			log.Info("webhook serving", "listen", ln.Addr().String(), "hook_dir", cfg.HookDir, "socket_dir", cfg.SockDir)
			return webhook.Serve(c.Context, ln, webhook.NewHandler(cfg, log),
				&webhook.Certs{CertFile: c.String("tls-cert"), KeyFile: c.String("tls-key")})
		},
	}
}

// hookLibDirs are the names glibc's $LIB expands to on the distributions
// images come from (Debian and Ubuntu, Fedora and RHEL, Arch and others):
// the webhook's LD_PRELOAD is DIR/$LIB/libfikit_hook.so.
var hookLibDirs = []string{"lib/x86_64-linux-gnu", "lib64", "lib"}

// installHookCommand is `fikit install-hook DIR`: the chart's init
// container copies the hook out of the image (FROM scratch: no cp) into
// the node's directory that the webhook mounts into pods.
func installHookCommand() *cli.Command {
	return &cli.Command{
		Name:      "install-hook",
		Usage:     "copy the hook library into DIR/{lib/x86_64-linux-gnu,lib64,lib} for pods to preload",
		ArgsUsage: "DIR",
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usageError(c, "want one directory, got %d arguments", c.NArg())
			}
			src, err := companionDir(hookLib)
			if err != nil {
				return err
			}
			return installHook(filepath.Join(src, hookLib), c.Args().First(), c.App.Writer)
		},
	}
}

// installHook copies the hook into each $LIB directory under dir, each
// through a temporary file renamed into place, so a pod starting meanwhile
// maps the old file or the new, never a torn one.
func installHook(src, dir string, out io.Writer) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("install-hook: %w", err)
	}
	for _, sub := range hookLibDirs {
		d := filepath.Join(dir, sub)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("install-hook: %w", err)
		}
		if err := os.Chmod(d, 0o755); err != nil {
			return fmt.Errorf("install-hook: %w", err)
		}
		f, err := os.CreateTemp(d, ".libfikit_hook.so.*")
		if err != nil {
			return fmt.Errorf("install-hook: %w", err)
		}
		_, werr := f.Write(b)
		cerr := f.Close()
		if err := firstErr(werr, cerr, os.Chmod(f.Name(), 0o755)); err != nil {
			os.Remove(f.Name())
			return fmt.Errorf("install-hook: %w", err)
		}
		if err := os.Rename(f.Name(), filepath.Join(d, hookLib)); err != nil {
			os.Remove(f.Name())
			return fmt.Errorf("install-hook: %w", err)
		}
		fmt.Fprintf(out, "installed %s\n", filepath.Join(d, hookLib))
	}
	return nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// splitListen sorts --listen values into the UDP address (one at most;
// 127.0.0.1:0 when only unix sockets are named: the daemon always has one)
// and unix socket paths.
func splitListen(vals []string) (string, []string, error) {
	udpAddr := ""
	var paths []string
	for _, v := range vals {
		if p, ok := strings.CutPrefix(v, "unix:"); ok {
			if !filepath.IsAbs(p) {
				return "", nil, fmt.Errorf("--listen %s: want an absolute path", v)
			}
			paths = append(paths, filepath.Clean(p))
			continue
		}
		if udpAddr != "" {
			return "", nil, fmt.Errorf("--listen %s: one UDP address at most (already %s)", v, udpAddr)
		}
		udpAddr = v
	}
	if udpAddr == "" {
		udpAddr = "127.0.0.1:0"
	}
	return udpAddr, paths, nil
}

// makeUnixDirs makes the directories of the unix sockets (0755) and the
// reply directory: mode 1733, so any process may bind its reply socket
// there, none may list it, and none may remove another's (sticky).
func makeUnixDirs(o serveOptions) error {
	if len(o.unix) == 0 {
		return nil
	}
	for _, p := range o.unix {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("unix socket directory: %w", err)
		}
	}
	dir := o.replyDir
	if dir == "" {
		dir = filepath.Join(filepath.Dir(filepath.Dir(o.unix[0])), "c")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("reply directory: %w", err)
	}
	if err := os.Chmod(dir, 0o733|os.ModeSticky); err != nil {
		return fmt.Errorf("reply directory: %w", err)
	}
	return nil
}

// startInformer is set where fikit is built with the k8s tag
// (k8s_informer.go).
var startInformer func(ctx context.Context, kubeconfig, node string) (pods.Lookup, error)

// podLookup is --k8s-node's pod informer (nil without it).
func podLookup(ctx context.Context, o serveOptions) (pods.Lookup, error) {
	if o.k8sNode == "" {
		return nil, nil
	}
	if startInformer == nil {
		return nil, &exitError{code: 2, err: fmt.Errorf("serve: --k8s-node: %w", errNoK8s)}
	}
	return startInformer(ctx, o.kubeconfig, o.k8sNode)
}

var errNoK8s = errors.New("this fikit was built without Kubernetes support (build with the k8s tag: make fikit-k8s)")
