package harness

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/fikit/fikit/simgpu/devmodel"
)

// Device is a simulated GPU as the harness sets it up: a device preset
// (FIKIT_SIMGPU_DEVICE, devmodel.Preset) and single parameters overriding it.
// Config gives the same device to the discrete-event simulator, so a
// measurement and its prediction run on one model.
type Device struct {
	// Preset names the device preset; "" is simgpu's default
	// (devmodel.DefaultPreset).
	Preset string
	// Model is "timeslice" or "fifo"; "" keeps the preset's.
	Model string
	// Switch, if not nil, replaces the preset's context-switch cost.
	Switch *time.Duration
}

// PresetName is the preset in force: Preset, or the default one.
func (d Device) PresetName() string {
	if d.Preset == "" {
		return devmodel.DefaultPreset
	}
	return d.Preset
}

// Config is the device's model configuration.
func (d Device) Config() (devmodel.Config, error) {
	cfg, err := devmodel.Preset(d.PresetName())
	if err != nil {
		return cfg, err
	}
	if d.Model != "" {
		if cfg.Model, err = devmodel.ParseModel(d.Model); err != nil {
			return cfg, fmt.Errorf("harness: %w", err)
		}
	}
	if d.Switch != nil {
		cfg.Switch = *d.Switch
	}
	return cfg, nil
}

// String names the device: the preset, and what overrides it.
func (d Device) String() string {
	parts := []string{d.PresetName()}
	if d.Model != "" {
		parts = append(parts, d.Model)
	}
	if d.Switch != nil {
		parts = append(parts, "switch "+d.Switch.String())
	}
	return strings.Join(parts, ", ")
}

// environ is the device's simgpu environment.
func (d Device) environ() []string {
	var env []string
	if d.Preset != "" {
		env = append(env, "FIKIT_SIMGPU_DEVICE="+d.Preset)
	}
	if d.Model != "" {
		env = append(env, "FIKIT_SIMGPU_MODEL="+d.Model)
	}
	if d.Switch != nil {
		env = append(env, "FIKIT_SIMGPU_SWITCH_US="+strconv.FormatFloat(float64(*d.Switch)/float64(time.Microsecond), 'f', -1, 64))
	}
	return env
}
