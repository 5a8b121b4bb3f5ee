package main

import (
	"slices"

	"github.com/urfave/cli/v2"

	"github.com/fikit/fikit/bench/variant"
	"github.com/fikit/fikit/scheduler"
)

// variantFlag selects an ablation of the core's configuration
// (bench/variant) for tests, tests/gpu/ and the bench: one hidden flag for
// all of them, so that no ablation is a user's setting.
const variantFlag = "variant"

// schedulerFlags are the scheduler's settings (scheduler.Settings) as flags,
// but those named in except (a command's own flag of that name). Values are
// parsed and bounded by the setting's row, so a flag, a scenario file and
// the docs say the same.
func schedulerFlags(except ...string) []cli.Flag {
	var out []cli.Flag
	for _, s := range scheduler.Settings {
		if slices.Contains(except, s.Name) {
			continue
		}
		usage := s.Help + " (" + s.Bounds() + ")"
		if s.Kind == scheduler.KindBool {
			out = append(out, &cli.BoolFlag{Name: s.Name, Value: s.Default() == "true", Usage: usage, Category: "scheduler"})
			continue
		}
		out = append(out, &cli.StringFlag{Name: s.Name, Value: s.Default(), Usage: usage, Category: "scheduler"})
	}
	return append(out, &cli.StringFlag{Name: variantFlag, Hidden: true, Category: "scheduler",
		Usage: "for tests and the bench only: NAME[,setting=value...], an ablation of the scheduler (bench/variant) and settings over it, applied before the other flags"})
}

// schedulerConfig is DefaultConfig with every scheduler flag given applied.
// A bad value is a usage error naming the flag and its bounds.
func schedulerConfig(c *cli.Context, except ...string) (scheduler.Config, error) {
	cfg := scheduler.DefaultConfig()
	if spec := c.String(variantFlag); spec != "" {
		apply, err := variant.Parse(spec)
		if err == nil {
			err = apply(&cfg)
		}
		if err != nil {
			return cfg, usageError(c, "--%s: %v", variantFlag, err)
		}
	}
	for _, s := range scheduler.Settings {
		if slices.Contains(except, s.Name) || !c.IsSet(s.Name) {
			continue
		}
		v := c.String(s.Name)
		if s.Kind == scheduler.KindBool {
			v = "false"
			if c.Bool(s.Name) {
				v = "true"
			}
		}
		if err := s.Set(&cfg, v); err != nil {
			return cfg, usageError(c, "--%s: %v", s.Name, err)
		}
	}
	if err := cfg.Validate(); err != nil {
		return cfg, usageError(c, "%v", err)
	}
	return cfg, nil
}
