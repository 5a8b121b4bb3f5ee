package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/fikit/fikit/udp"
	"golang.org/x/sys/unix"
)

// hookLib is the hook's file name (hookclient/, built into bin/).
const hookLib = "libfikit_hook.so"

// forwarded are the signals `fikit run` passes on to its child.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2}

func runCommand() *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "start a service with the fikit hook preloaded at a priority",
		ArgsUsage: "-- CMD [ARGS...]",
		Description: "Starts CMD with libfikit_hook.so in LD_PRELOAD (before any existing entries) and the\n" +
			"FIKIT_* environment set from the flags, forwards SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1\n" +
			"and SIGUSR2 to it, and exits with its status (128+N if a signal N killed it). The hook is\n" +
			"found beside the fikit binary, else in <prefix>/lib/fikit/; --hook overrides.",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "priority", Aliases: []string{"p"}, Value: 5, Usage: "priority, 0 (highest) to 9"},
			&cli.IntFlag{Name: "weight", Aliases: []string{"w"}, Value: udp.DefaultWeight,
				Usage: fmt.Sprintf("share of the GPU among tasks of its priority, 1 to %d (within what the daemon's policy allows)", udp.MaxWeight)},
			&cli.StringFlag{Name: "task-key", Usage: "task key (default: the command line, as the hook computes it)"},
			&cli.StringFlag{Name: "scheduler", Usage: "scheduler address host:port (default: FIKIT_SCHEDULER, else 127.0.0.1:7070)"},
			&cli.StringFlag{Name: "auth-key-file", Usage: "key file of a scheduler on another host (its --auth-key-file; default: FIKIT_AUTH_KEY_FILE)"},
			&cli.StringFlag{Name: "hook", Usage: "path of " + hookLib},
		},
		Action: runAction,
	}
}

func runAction(c *cli.Context) error {
	prio := c.Int("priority")
	if prio < 0 || prio > 9 {
		return usageError(c, "--priority %d: want 0 (highest) to 9", prio)
	}
	weight := c.Int("weight")
	if weight < 1 || weight > udp.MaxWeight {
		return usageError(c, "--weight %d: want 1 to %d", weight, udp.MaxWeight)
	}
	if c.NArg() == 0 {
		return usageError(c, "no command to run; usage: fikit run --priority N -- CMD [ARGS...]")
	}
	if c.IsSet("task-key") && c.String("task-key") == "" {
		return usageError(c, "--task-key must not be empty")
	}
	hook, err := findHook(c.String("hook"))
	if err != nil {
		return err
	}
	args := c.Args().Slice()
	path, err := exec.LookPath(args[0])
	if err != nil {
		return &exitError{code: 127, err: fmt.Errorf("run: %w", err)}
	}
	keyFile := c.String("auth-key-file")
	if keyFile != "" {
		// The hook reads it at the first launch; a path relative to this
		// directory must still name it if CMD changes directory.
		if _, err := udp.ReadKeyFile(keyFile); err != nil {
			return usageError(c, "--auth-key-file: %v", err)
		}
		if keyFile, err = filepath.Abs(keyFile); err != nil {
			return usageError(c, "--auth-key-file: %v", err)
		}
	}
	w := 0 // the hook's default, or FIKIT_WEIGHT as the environment has it
	if c.IsSet("weight") {
		w = weight
	}
	env := hookEnv(os.Environ(), hook, prio, w, c.String("task-key"), c.String("scheduler"), keyFile)
	return runChild(path, args, env)
}

// findHook returns the hook library: explicit (--hook), beside the running
// binary (a build tree's bin/), or <prefix>/lib/fikit/ for a binary in
// <prefix>/bin/ (an installation).
func findHook(explicit string) (string, error) {
	if explicit != "" {
		if _, err := os.Stat(explicit); err != nil {
			return "", fmt.Errorf("run: --hook: %w", err)
		}
		return filepath.Abs(explicit)
	}
	dir, err := companionDir(hookLib)
	if err != nil {
		return "", fmt.Errorf("run: %w; build it (make hook) or pass --hook PATH", err)
	}
	return filepath.Join(dir, hookLib), nil
}

// hookEnv is env with the hook first in LD_PRELOAD (kept once) and the
// FIKIT_* variables of the flags; an unset flag (a weight of 0) leaves the
// variable as the environment has it.
func hookEnv(env []string, hook string, prio, weight int, taskKey, scheduler, keyFile string) []string {
	set := map[string]string{"FIKIT_PRIORITY": strconv.Itoa(prio)}
	if weight > 0 {
		set["FIKIT_WEIGHT"] = strconv.Itoa(weight)
	}
	if taskKey != "" {
		set["FIKIT_TASK_KEY"] = taskKey
	}
	if scheduler != "" {
		set["FIKIT_SCHEDULER"] = scheduler
	}
	if keyFile != "" {
		set["FIKIT_AUTH_KEY_FILE"] = keyFile
	}
	preload := hook
	out := make([]string, 0, len(env)+len(set)+1)
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if k == "LD_PRELOAD" {
			// ld.so splits LD_PRELOAD at spaces and colons.
			for _, e := range strings.FieldsFunc(v, func(r rune) bool { return r == ' ' || r == ':' }) {
				if e != hook {
					preload += ":" + e
				}
			}
			continue
		}
		if _, ok := set[k]; ok {
			continue
		}
		out = append(out, kv)
	}
	out = append(out, "LD_PRELOAD="+preload)
	for _, k := range []string{"FIKIT_PRIORITY", "FIKIT_WEIGHT", "FIKIT_TASK_KEY", "FIKIT_SCHEDULER", "FIKIT_AUTH_KEY_FILE"} {
		if v, ok := set[k]; ok {
			out = append(out, k+"="+v)
		}
	}
	return out
}

// runChild runs the service in fikit's process group (it keeps the
// terminal), forwards signals, and returns its exit status as an exitError
// (nil for status 0). Should fikit itself be killed (SIGKILL cannot be
// forwarded), the service gets SIGTERM rather than running on unsupervised.
func runChild(path string, args, env []string) error {
	cmd := exec.Command(path, args[1:]...)
	cmd.Args[0] = args[0]
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	// The parent-death signal follows the thread that started the child:
	// keep this goroutine on it until the child is gone.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return &exitError{code: 126, err: fmt.Errorf("run: %w", err)}
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case s := <-sigs:
			if !fromTerminal(s) {
				_ = cmd.Process.Signal(s)
			}
		case err := <-done:
			return exitStatus(args[0], err)
		}
	}
}

// fromTerminal reports whether s is a terminal-generated signal (^C, ^\)
// that the child, in the terminal's foreground process group with us, has
// received itself: forwarding it would deliver it twice.
func fromTerminal(s os.Signal) bool {
	if s != syscall.SIGINT && s != syscall.SIGQUIT {
		return false
	}
	fg, err := unix.IoctlGetInt(int(os.Stdin.Fd()), unix.TIOCGPGRP)
	return err == nil && fg == syscall.Getpgrp()
}

// exitStatus turns the child's end into fikit's: its exit status, or
// 128+N when signal N killed it (as shells report it).
func exitStatus(name string, err error) error {
	if err == nil {
		return nil
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return &exitError{code: 1, err: fmt.Errorf("run: %s: %w", name, err)}
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return &exitError{code: 128 + int(ws.Signal()), err: fmt.Errorf("run: %s killed by signal %d (%v)", name, int(ws.Signal()), ws.Signal())}
	}
	return &exitError{code: ee.ExitCode(), err: fmt.Errorf("run: %s exited with status %d", name, ee.ExitCode())}
}
