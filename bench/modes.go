package bench

import (
	"context"
	"fmt"

	"github.com/fikit/fikit/bench/harness"
	variants "github.com/fikit/fikit/bench/variant"
	"github.com/fikit/fikit/scheduler"
)

// modeSpec is one way of running a scenario's two services together. The
// modes are rows of modeSpecs: a named variant of fikit (other scheduler
// settings, another hook environment) is one more row, and a scenario names
// the rows it runs (pairCfg.modes), all side by side on one device.
type modeSpec struct {
	Name  string // ModeResult.Mode
	Title string // as the report names it
	// Hooked: both services under `fikit run` (otherwise neither: the
	// device's own sharing decides).
	Hooked bool
	// Env is added to both services' environment (the hook's settings).
	Env []string
	// LPOtherDevice runs the LP on a second private device (the control).
	LPOtherDevice bool
	// Scheduler, if set, changes the daemon's settings for this mode: it
	// runs under a daemon of its own that shares the bench daemon's
	// profiles (harness.Daemon.Sibling).
	Scheduler func(*scheduler.Config)
}

// modeSpecs are the co-located modes, in the order they run.
var modeSpecs = []modeSpec{
	{Name: ModeSharing, Title: "default sharing"},
	{Name: ModeFikit, Title: "fikit", Hooked: true},
	{Name: ModeFikitUDP, Title: "fikit, FIKIT_BOARD=off", Hooked: true, Env: []string{"FIKIT_BOARD=off"}},
	{Name: ModeFikitCPU, Title: "control (LP on another device)", Hooked: true, LPOtherDevice: true},
	{Name: ModeFikitPreSwitch, Title: "fikit + pre-switch (gain by construction on simgpu)", Hooked: true, Scheduler: preSwitchOn},
}

// The usual mode lists: default sharing, fikit with the board and without
// (every co-location scenario), and the control where it is measured.
var (
	colocModes   = []string{ModeSharing, ModeFikit, ModeFikitUDP}
	controlModes = append(append([]string(nil), colocModes...), ModeFikitCPU)
)

// ablationModes are the gate's ablations (variants.Variants) as mode rows,
// in the variants' order: fikit under a daemon with the variant's settings.
// The variant "all" is the defaults, ModeFikit itself, and not run twice.
var ablationModes = func() []string {
	var names []string
	for _, v := range variants.Variants {
		if v.Name == variants.All {
			names = append(names, ModeFikit)
			continue
		}
		modeSpecs = append(modeSpecs, modeSpec{Name: ablationMode(v.Name), Title: "fikit, " + v.Title, Hooked: true,
			Scheduler: func(c *scheduler.Config) {
				// The variants' settings are checked by their package's
				// tests: an error here is a bug there.
				if err := v.Apply(c); err != nil {
					panic(err)
				}
			}})
		names = append(names, ablationMode(v.Name))
	}
	return names
}()

// ablationMode is the mode name of variant v.
func ablationMode(v string) string { return "fikit_" + v }

// modeByName is the row of a mode; false if there is none.
func modeByName(name string) (modeSpec, bool) {
	for _, m := range modeSpecs {
		if m.Name == name {
			return m, true
		}
	}
	return modeSpec{}, false
}

// modeName is a mode as the report's tables name it.
func modeName(m string) string {
	if s, ok := modeByName(m); ok {
		return s.Title
	}
	return m
}

// daemonFor is the daemon a mode runs under: the bench's, or for a mode
// with its own scheduler settings a sibling started on first use (stopped
// with the run).
func (r *runner) daemonFor(ctx context.Context, m modeSpec) (*harness.Daemon, error) {
	if m.Scheduler == nil {
		return r.d, nil
	}
	if d, ok := r.siblings[m.Name]; ok {
		return d, nil
	}
	cfg := r.schedCfg
	m.Scheduler(&cfg)
	d, err := r.d.Sibling(ctx, cfg, r.o.DaemonLog)
	if err != nil {
		return nil, fmt.Errorf("mode %s: daemon: %w", m.Name, err)
	}
	r.siblings[m.Name] = d
	return d, nil
}

// stopSiblings stops the modes' own daemons.
func (r *runner) stopSiblings() {
	for name, d := range r.siblings {
		_ = d.Stop()
		delete(r.siblings, name)
	}
}
