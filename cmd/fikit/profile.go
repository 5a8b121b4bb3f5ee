package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/fikit/fikit/kernelid"
	"github.com/fikit/fikit/profiler"
	"github.com/fikit/fikit/store"
)

// profileCommand is `fikit profile`: inspect, export, import and remove the
// stored task profiles. It opens the Badger store directly, or asks the
// daemon over <data-dir>/fikit.sock when the daemon holds it.
func profileCommand() *cli.Command {
	common := func(extra ...cli.Flag) []cli.Flag {
		return append([]cli.Flag{
			dataDirFlag(),
			&cli.StringFlag{Name: "gpu", Usage: "GPU `MODEL` to use when the task key has profiles on several"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON"},
		}, extra...)
	}
	wide := func() cli.Flag { return &cli.BoolFlag{Name: "wide", Usage: "do not shorten kernel names"} }
	return &cli.Command{
		Name:  "profile",
		Usage: "inspect and manage task profiles",
		Description: "Profiles are stored per task key and GPU model. Flags may follow the arguments.\n" +
			"In JSON output kernel IDs are 16 hex digits and times are nanoseconds.",
		Subcommands: []*cli.Command{
			{Name: "ls", Usage: "list profiles", Flags: common(), Action: profileAction(0, profileLs)},
			{Name: "show", Usage: "show a profile's kernels, by total time", ArgsUsage: "KEY",
				Flags: common(wide()), Action: profileAction(1, profileShow)},
			{Name: "export", Usage: "write a profile in the export format (JSON)", ArgsUsage: "KEY",
				Flags:  common(&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Usage: "write to `FILE` instead of standard output"}),
				Action: profileAction(1, profileExport)},
			{Name: "import", Usage: "store a profile from an export file (- for standard input)", ArgsUsage: "FILE",
				Flags:  common(&cli.BoolFlag{Name: "force", Usage: "replace an existing profile"}),
				Action: profileAction(1, profileImport)},
			{Name: "rm", Usage: "remove a profile", ArgsUsage: "KEY", Flags: common(), Action: profileAction(1, profileRm)},
			{Name: "diff", Usage: "compare the kernels of two profiles", ArgsUsage: "A B",
				Flags:  common(wide(), &cli.StringFlag{Name: "gpu-b", Usage: "GPU `MODEL` of B (default: --gpu)"}),
				Action: profileAction(2, profileDiff)},
		},
	}
}

// profileAction parses flags given after the arguments (urfave/cli v2 stops
// at the first argument), checks the argument count, and runs fn.
func profileAction(nargs int, fn func(c *cli.Context, args []string) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		args, err := interspersedFlags(c)
		if errors.Is(err, errHelpShown) {
			return nil
		}
		if err != nil {
			return &exitError{code: 2, err: fmt.Errorf("%s: %w (see '%s --help')", strings.TrimPrefix(c.Command.HelpName, "fikit "), readableFlagError(err), c.Command.HelpName)}
		}
		if len(args) != nargs {
			return &exitError{code: 2, err: fmt.Errorf("%s: want %d argument(s) (%s), got %d",
				c.Command.FullName(), nargs, c.Command.ArgsUsage, len(args))}
		}
		if c.String("data-dir") == "" {
			return errors.New("no data directory: set --data-dir or FIKIT_DATA_DIR")
		}
		return fn(c, args)
	}
}

// errHelpShown stops a command after -h among its arguments.
var errHelpShown = errors.New("help shown")

// interspersedFlags applies the command's flags found among its arguments
// and returns the other arguments. "--" ends flags.
func interspersedFlags(c *cli.Context) ([]string, error) {
	var args []string
	in := c.Args().Slice()
	if len(in) > 0 && len(in[0]) > 1 && in[0][0] == '-' {
		return in, nil // the flag package stopped at "--"
	}
	for i := 0; i < len(in); i++ {
		tok := in[i]
		if tok == "--" {
			return append(args, in[i+1:]...), nil
		}
		if len(tok) < 2 || tok[0] != '-' {
			args = append(args, tok)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(tok, "-"), "=")
		if name == "h" || name == "help" {
			return nil, errors.Join(errHelpShown, cli.ShowSubcommandHelp(c))
		}
		var flag cli.Flag
		for _, f := range c.Command.Flags {
			for _, n := range f.Names() {
				if n == name {
					flag = f
				}
			}
		}
		if flag == nil {
			return nil, fmt.Errorf("flag provided but not defined: -%s", strings.TrimLeft(name, "-"))
		}
		if _, isBool := flag.(*cli.BoolFlag); isBool && !hasValue {
			value = "true"
		} else if !hasValue {
			if i+1 >= len(in) {
				return nil, fmt.Errorf("flag needs an argument: %s", tok)
			}
			i++
			value = in[i]
		}
		if err := c.Set(flag.Names()[0], value); err != nil {
			return nil, fmt.Errorf("flag %s: %w", tok, err)
		}
	}
	return args, nil
}

// openStore opens the profile store of the data directory: Badger directly,
// or the daemon's socket when the daemon holds the directory. A read-only
// command on a directory without a store sees an empty one; on a directory
// that does not exist it fails (errNoDataDir).
func openStore(dataDir string, create bool) (store.Store, error) {
	if !create {
		if err := checkDataDir(dataDir); err != nil {
			return nil, err
		}
	}
	_, err := os.Stat(filepath.Join(dataDir, "MANIFEST"))
	if errors.Is(err, os.ErrNotExist) && !create {
		return store.NewMemory(), nil
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, err := store.OpenBadger(dataDir, &store.BadgerOptions{Logger: logger})
	if err == nil {
		return s, nil
	}
	// The daemon holds the directory, or owns it (root) while we are not.
	if !errors.Is(err, store.ErrLocked) && !errors.Is(err, os.ErrPermission) {
		return nil, fmt.Errorf("profile store: %w", err)
	}
	sock := socketPath(dataDir)
	r := store.Remote(sock)
	if _, rerr := r.List(); rerr != nil {
		if errors.Is(rerr, os.ErrPermission) {
			return nil, accessError(sock, rerr)
		}
		return nil, fmt.Errorf("profile store %s cannot be opened (%w), and the daemon socket %s does not answer: %w",
			dataDir, err, sock, rerr)
	}
	return r, nil
}

// withStore runs fn on the data directory's store.
func withStore(c *cli.Context, create bool, fn func(s store.Store) error) error {
	s, err := openStore(c.String("data-dir"), create)
	if err != nil {
		return err
	}
	err = fn(s)
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	return err
}

// resolveModel picks the GPU model of a task key: gpu if given, else the
// only model with a profile for the key.
func resolveModel(s store.Store, dataDir, key, gpu string) (string, error) {
	if gpu != "" {
		return gpu, nil
	}
	list, err := s.List()
	if err != nil {
		return "", err
	}
	var models []string
	for _, sum := range list {
		if sum.TaskKey == key {
			models = append(models, strconv.Quote(sum.GPU))
		}
	}
	switch len(models) {
	case 0:
		return "", notFound(fmt.Sprintf("no profile for task key %q in %s (see 'fikit profile ls')", key, dataDir))
	case 1:
		m, _ := strconv.Unquote(models[0])
		return m, nil
	}
	return "", fmt.Errorf("task key %q has profiles on %d GPU models (%s): choose one with --gpu",
		key, len(models), strings.Join(models, ", "))
}

// notFoundError is a missing profile, said once.
type notFoundError struct{ msg string }

func (e *notFoundError) Error() string { return e.msg }
func (e *notFoundError) Unwrap() error { return store.ErrNotFound }

func notFound(msg string) error { return &notFoundError{msg} }

// getProfile resolves and reads a profile.
func getProfile(s store.Store, dataDir, key, gpu string) (*profiler.Profile, error) {
	model, err := resolveModel(s, dataDir, key, gpu)
	if err != nil {
		return nil, err
	}
	p, err := s.Get(model, key)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound(fmt.Sprintf("no profile for task key %q on GPU %q in %s", key, model, dataDir))
	}
	return p, err
}

func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

func profileLs(c *cli.Context, _ []string) error {
	return withStore(c, false, func(s store.Store) error {
		all, err := s.List()
		if err != nil {
			return err
		}
		list := []store.Summary{}
		for _, sum := range all {
			if gpu := c.String("gpu"); gpu == "" || sum.GPU == gpu {
				list = append(list, sum)
			}
		}
		if c.Bool("json") {
			return writeJSON(c.App.Writer, list)
		}
		tw := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TASK KEY\tGPU\tPHASE\tRUNS\tKERNELS")
		for _, sum := range list {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\n", sum.TaskKey, sum.GPU, sum.Phase, sum.Runs, sum.Kernels)
		}
		return tw.Flush()
	})
}

// showKernel is one kernel of `profile show --json`.
type showKernel struct {
	ID          string    `json:"id"`
	Name        string    `json:"name"` // display name
	MangledName string    `json:"mangled_name"`
	Grid        [3]uint32 `json:"grid"`
	Block       [3]uint32 `json:"block"`
	Count       uint64    `json:"count"`
	MeanDur     float64   `json:"mean_duration_ns"`
	StddevDur   float64   `json:"stddev_duration_ns"`
	P90Dur      float64   `json:"p90_duration_ns"`
	GapCount    uint64    `json:"gap_count"`
	MeanGap     float64   `json:"mean_gap_ns"`
	StddevGap   float64   `json:"stddev_gap_ns"`
	P90Gap      float64   `json:"p90_gap_ns"`
	TotalNs     float64   `json:"total_ns"`
}

// showProfile is the output of `profile show --json`, a contract of the
// acceptance checks: "task_key", "phase" ("profiling" or "sharing"),
// "runs", and "kernels" by decreasing total time, each with "id" (16 hex
// digits), "name" (display name; "mangled_name" is the driver's), "grid"
// and "block" (3 numbers each), "count", "mean_duration_ns",
// "p90_duration_ns", "mean_gap_ns" and "p90_gap_ns". Other members are
// extras.
type showProfile struct {
	TaskKey       string `json:"task_key"`
	GPU           string `json:"gpu"`
	Phase         string `json:"phase"`
	Runs          uint32 `json:"runs"`
	TargetRuns    uint32 `json:"target_runs"`
	DiscardedRuns uint32 `json:"discarded_runs"`
	// BesideRuns of the runs were measured beside a better priority's
	// work: only what ran alone was kept (their run times are not).
	BesideRuns uint32  `json:"beside_runs"`
	MeanRunNs  float64 `json:"mean_run_ns"`
	P90RunNs   float64 `json:"p90_run_ns"`
	// Discards are discarded_runs by reason (profiler.DiscardReason's
	// names; "unclassified": runs discarded before reasons were kept).
	Discards map[string]uint32 `json:"discards"`
	// ProfileVersion is this profile's version, Reason why it came, and
	// Versions every completed version, when and why it came.
	ProfileVersion uint32        `json:"profile_version"`
	Reason         string        `json:"reason"`
	Versions       []showVersion `json:"versions"`
	Kernels        []showKernel  `json:"kernels"`
}

// showVersion is one version of a profile in `profile show --json`.
type showVersion struct {
	Version   uint32  `json:"version"`
	Time      string  `json:"time"` // RFC 3339, "" if unknown
	UnixNs    int64   `json:"unix_ns"`
	Reason    string  `json:"reason"`
	Runs      uint32  `json:"runs"`
	Discarded uint32  `json:"discarded_runs"`
	MeanRunNs float64 `json:"mean_run_ns"`
}

// byTotalTime returns the kernels by decreasing total time, then ID.
func byTotalTime(p *profiler.Profile) []*profiler.KernelStats {
	ks := p.SortedKernels()
	sort.SliceStable(ks, func(i, j int) bool { return ks[i].TotalNs() > ks[j].TotalNs() })
	return ks
}

func displayName(k *profiler.KernelStats) string {
	if k.Name == "" {
		return "(unnamed)"
	}
	return kernelid.DisplayName(k.Name)
}

func profileShow(c *cli.Context, args []string) error {
	return withStore(c, false, func(s store.Store) error {
		p, err := getProfile(s, c.String("data-dir"), args[0], c.String("gpu"))
		if err != nil {
			return err
		}
		out := showProfile{
			TaskKey: p.TaskKey, GPU: p.GPU, Phase: p.Phase.String(),
			Runs: p.Runs, TargetRuns: p.TargetRuns, DiscardedRuns: p.DiscardedRuns, BesideRuns: p.BesideRuns,
			MeanRunNs: p.MeanJCT(), P90RunNs: p.P90JCT(), Kernels: []showKernel{},
			Discards: p.Discards.Map(), ProfileVersion: p.Version, Reason: p.Reason, Versions: []showVersion{},
		}
		if u := p.Unclassified(); u > 0 {
			out.Discards["unclassified"] = u
		}
		for _, h := range p.History {
			v := showVersion{Version: h.Version, UnixNs: h.UnixNs, Reason: h.Reason, Runs: h.Runs, Discarded: h.Discarded,
				MeanRunNs: h.MeanRunNs}
			if h.UnixNs > 0 {
				v.Time = time.Unix(0, h.UnixNs).UTC().Format(time.RFC3339)
			}
			out.Versions = append(out.Versions, v)
		}
		var total float64
		for _, k := range byTotalTime(p) {
			total += k.TotalNs()
			out.Kernels = append(out.Kernels, showKernel{
				ID: profiler.FormatKernelID(k.ID), Name: displayName(k), MangledName: k.Name,
				Grid: k.Grid, Block: k.Block, Count: k.Count(),
				MeanDur: k.Duration.Mean, StddevDur: k.Duration.Stddev(), P90Dur: k.Duration.P90,
				GapCount: k.Gap.Count, MeanGap: k.Gap.Mean, StddevGap: k.Gap.Stddev(), P90Gap: k.Gap.P90,
				TotalNs: k.TotalNs(),
			})
		}
		if c.Bool("json") {
			return writeJSON(c.App.Writer, out)
		}
		w := c.App.Writer
		fmt.Fprintf(w, "task key  %s\ngpu       %s\n", p.TaskKey, p.GPU)
		beside := ""
		if p.BesideRuns > 0 {
			beside = fmt.Sprintf(", %d beside a better priority", p.BesideRuns)
		}
		fmt.Fprintf(w, "phase     %s, %d of %d runs%s (%d discarded%s)\n", p.Phase, p.Runs, p.TargetRuns, beside,
			p.DiscardedRuns, discardsText(out.Discards))
		fmt.Fprintf(w, "version   %d%s\n", p.Version, reasonText(p.Reason))
		for _, v := range out.Versions {
			when := v.Time
			if when == "" {
				when = "time unknown"
			}
			fmt.Fprintf(w, "  v%d  %s  %d runs, %d discarded, mean run %s  %s\n", v.Version, when, v.Runs, v.Discarded,
				fmtNs(v.MeanRunNs), v.Reason)
		}
		if p.RunTime.Count == 0 {
			fmt.Fprintln(w, "run time  unknown (no run measured alone)")
		} else {
			fmt.Fprintf(w, "run time  mean %s, p90 %s\n", fmtNs(p.MeanJCT()), fmtNs(p.P90JCT()))
		}
		fmt.Fprintf(w, "kernels   %d distinct, mean %s, p90 %s; gaps median %s, p90 %s\n\n",
			len(p.Kernels), fmtNs(p.Duration.Mean), fmtNs(p.Duration.P90), fmtNs(p.TypicalGap()), fmtNs(p.Gap.P90))
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "KERNEL\tGRID\tBLOCK\tCOUNT\tMEAN\tP90\tGAP MEAN\tGAP P90\tTIME")
		for _, k := range out.Kernels {
			share := 0.0
			if total > 0 {
				share = 100 * k.TotalNs / total
			}
			mean, p90 := fmtNs(k.MeanDur), fmtNs(k.P90Dur)
			if k.Count == 0 {
				mean, p90 = "unknown", "unknown" // seen beside a better priority, never alone
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%.1f%%\n",
				shorten(k.Name, c.Bool("wide")), dim3(k.Grid), dim3(k.Block), k.Count,
				mean, p90, fmtNs(k.MeanGap), fmtNs(k.P90Gap), share)
		}
		return tw.Flush()
	})
}

func profileExport(c *cli.Context, args []string) error {
	return withStore(c, false, func(s store.Store) error {
		p, err := getProfile(s, c.String("data-dir"), args[0], c.String("gpu"))
		if err != nil {
			return err
		}
		b, err := json.MarshalIndent(p, "", "  ")
		if err != nil {
			return err
		}
		b = append(b, '\n')
		out := c.String("out")
		if out == "" || out == "-" {
			_, err = c.App.Writer.Write(b)
			return err
		}
		if err := writeFileAtomic(out, b); err != nil {
			return fmt.Errorf("export: %w", err)
		}
		return nil
	})
}

// writeFileAtomic writes next to the target and renames, so that a reader
// never sees half a file.
func writeFileAtomic(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".fikit-export-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(b)
	err = errors.Join(err, tmp.Chmod(0o644), tmp.Close())
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func profileImport(c *cli.Context, args []string) error {
	var r io.Reader = os.Stdin
	if args[0] != "-" {
		f, err := os.Open(args[0])
		if err != nil {
			return fmt.Errorf("import: %w", err)
		}
		defer f.Close()
		r = f
	}
	p, err := profiler.DecodeJSON(r)
	if err != nil {
		return fmt.Errorf("import %s: %w", args[0], err)
	}
	if gpu := c.String("gpu"); gpu != "" {
		p.GPU = gpu // file it under another GPU model, on the operator's word
	}
	return withStore(c, true, func(s store.Store) error {
		_, err := s.Get(p.GPU, p.TaskKey)
		switch {
		case err == nil && !c.Bool("force"):
			return fmt.Errorf("a profile for task key %q on GPU %q exists; use --force to replace it", p.TaskKey, p.GPU)
		case err != nil && !errors.Is(err, store.ErrNotFound):
			return err
		}
		if err := s.Put(p); err != nil {
			return fmt.Errorf("import: %w", err)
		}
		if c.Bool("json") {
			return writeJSON(c.App.Writer, store.Summarize(p))
		}
		_, err = fmt.Fprintf(c.App.Writer, "imported %q on %q: %s, %d runs, %d kernels\n",
			p.TaskKey, p.GPU, p.Phase, p.Runs, len(p.Kernels))
		return err
	})
}

func profileRm(c *cli.Context, args []string) error {
	return withStore(c, false, func(s store.Store) error {
		model, err := resolveModel(s, c.String("data-dir"), args[0], c.String("gpu"))
		if err != nil {
			return err
		}
		if err := s.Delete(model, args[0]); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return notFound(fmt.Sprintf("no profile for task key %q on GPU %q in %s", args[0], model, c.String("data-dir")))
			}
			return err
		}
		if c.Bool("json") {
			return writeJSON(c.App.Writer, map[string]any{"task_key": args[0], "gpu": model, "removed": true})
		}
		_, err = fmt.Fprintf(c.App.Writer, "removed %q on %q\n", args[0], model)
		return err
	})
}

// diffSide names one profile of a diff.
type diffSide struct {
	TaskKey   string  `json:"task_key"`
	GPU       string  `json:"gpu"`
	Phase     string  `json:"phase"`
	Runs      uint32  `json:"runs"`
	MeanRunNs float64 `json:"mean_run_ns"`
}

// diffKernel compares one kernel ID; A or B fields are absent when the
// kernel is only in the other profile. Ratios are B/A (null when A is 0).
type diffKernel struct {
	ID       string   `json:"id"`
	Name     string   `json:"name"`
	PerRunA  *float64 `json:"per_run_a,omitempty"`
	PerRunB  *float64 `json:"per_run_b,omitempty"`
	MeanDurA *float64 `json:"mean_duration_ns_a,omitempty"`
	MeanDurB *float64 `json:"mean_duration_ns_b,omitempty"`
	DurRatio *float64 `json:"duration_ratio,omitempty"`
	MeanGapA *float64 `json:"mean_gap_ns_a,omitempty"`
	MeanGapB *float64 `json:"mean_gap_ns_b,omitempty"`
	GapRatio *float64 `json:"gap_ratio,omitempty"`
	tot      float64  // total time in A and B, for ordering
}

type diffOut struct {
	A            diffSide     `json:"a"`
	B            diffSide     `json:"b"`
	RunTimeRatio *float64     `json:"run_time_ratio"`
	Kernels      []diffKernel `json:"kernels"` // in both
	OnlyA        []diffKernel `json:"only_a"`
	OnlyB        []diffKernel `json:"only_b"`
}

func ptr(f float64) *float64 { return &f }

func ratio(a, b float64) *float64 {
	if a == 0 || math.IsNaN(b/a) {
		return nil
	}
	return ptr(b / a)
}

func perRun(k *profiler.KernelStats, p *profiler.Profile) float64 {
	return float64(k.Count()) / math.Max(float64(p.Runs), 1)
}

func profileDiff(c *cli.Context, args []string) error {
	return withStore(c, false, func(s store.Store) error {
		dir := c.String("data-dir")
		gpuB := c.String("gpu-b")
		if gpuB == "" {
			gpuB = c.String("gpu")
		}
		a, err := getProfile(s, dir, args[0], c.String("gpu"))
		if err != nil {
			return err
		}
		b, err := getProfile(s, dir, args[1], gpuB)
		if err != nil {
			return err
		}
		side := func(p *profiler.Profile) diffSide {
			return diffSide{TaskKey: p.TaskKey, GPU: p.GPU, Phase: p.Phase.String(), Runs: p.Runs, MeanRunNs: p.MeanJCT()}
		}
		out := diffOut{A: side(a), B: side(b), RunTimeRatio: ratio(a.MeanJCT(), b.MeanJCT()),
			Kernels: []diffKernel{}, OnlyA: []diffKernel{}, OnlyB: []diffKernel{}}
		for _, ka := range byTotalTime(a) {
			d := diffKernel{ID: profiler.FormatKernelID(ka.ID), Name: displayName(ka), tot: ka.TotalNs(),
				PerRunA: ptr(perRun(ka, a)), MeanDurA: ptr(ka.Duration.Mean), MeanGapA: ptr(ka.Gap.Mean)}
			kb, ok := b.Kernel(ka.ID)
			if !ok {
				out.OnlyA = append(out.OnlyA, d)
				continue
			}
			d.tot += kb.TotalNs()
			d.PerRunB, d.MeanDurB, d.MeanGapB = ptr(perRun(kb, b)), ptr(kb.Duration.Mean), ptr(kb.Gap.Mean)
			d.DurRatio, d.GapRatio = ratio(ka.Duration.Mean, kb.Duration.Mean), ratio(ka.Gap.Mean, kb.Gap.Mean)
			out.Kernels = append(out.Kernels, d)
		}
		for _, kb := range byTotalTime(b) {
			if _, ok := a.Kernel(kb.ID); !ok {
				out.OnlyB = append(out.OnlyB, diffKernel{ID: profiler.FormatKernelID(kb.ID), Name: displayName(kb),
					PerRunB: ptr(perRun(kb, b)), MeanDurB: ptr(kb.Duration.Mean), MeanGapB: ptr(kb.Gap.Mean)})
			}
		}
		sort.SliceStable(out.Kernels, func(i, j int) bool { return out.Kernels[i].tot > out.Kernels[j].tot })
		if c.Bool("json") {
			return writeJSON(c.App.Writer, out)
		}
		return printDiff(c.App.Writer, &out, c.Bool("wide"))
	})
}

func printDiff(w io.Writer, d *diffOut, wide bool) error {
	fmt.Fprintf(w, "A  %q on %q: %s, %d runs, mean run %s\n", d.A.TaskKey, d.A.GPU, d.A.Phase, d.A.Runs, fmtNs(d.A.MeanRunNs))
	fmt.Fprintf(w, "B  %q on %q: %s, %d runs, mean run %s\n", d.B.TaskKey, d.B.GPU, d.B.Phase, d.B.Runs, fmtNs(d.B.MeanRunNs))
	fmt.Fprintf(w, "run time B/A %s; %d kernels in both, %d only in A, %d only in B\n\n",
		fmtRatio(d.RunTimeRatio), len(d.Kernels), len(d.OnlyA), len(d.OnlyB))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KERNEL\tPER RUN A\tPER RUN B\tMEAN A\tMEAN B\tB/A\tGAP A\tGAP B\tB/A")
	row := func(k diffKernel) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", shorten(k.Name, wide),
			fmtOpt(k.PerRunA, fmtCount), fmtOpt(k.PerRunB, fmtCount), fmtOpt(k.MeanDurA, fmtNs), fmtOpt(k.MeanDurB, fmtNs),
			fmtRatio(k.DurRatio), fmtOpt(k.MeanGapA, fmtNs), fmtOpt(k.MeanGapB, fmtNs), fmtRatio(k.GapRatio))
	}
	for _, k := range append(append(append([]diffKernel{}, d.Kernels...), d.OnlyA...), d.OnlyB...) {
		row(k)
	}
	return tw.Flush()
}

func fmtOpt(v *float64, f func(float64) string) string {
	if v == nil {
		return "-"
	}
	return f(*v)
}

func fmtRatio(r *float64) string {
	return fmtOpt(r, func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) })
}

func fmtCount(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// fmtNs writes nanoseconds with three significant digits and a unit.
func fmtNs(ns float64) string {
	div, unit := 1.0, "ns"
	for _, u := range []struct {
		div  float64
		unit string
	}{{1e9, "s"}, {1e6, "ms"}, {1e3, "µs"}} {
		if math.Abs(ns) >= u.div {
			div, unit = u.div, u.unit
			break
		}
	}
	v, prec := ns/div, 0
	if a := math.Abs(v); div > 1 && a < 10 {
		prec = 2
	} else if div > 1 && a < 100 {
		prec = 1
	}
	return strconv.FormatFloat(v, 'f', prec, 64) + unit
}

func dim3(d [3]uint32) string { return fmt.Sprintf("%d,%d,%d", d[0], d[1], d[2]) }

// shorten cuts a kernel name for a table unless wide.
func shorten(name string, wide bool) string {
	const max = 60
	if r := []rune(name); !wide && len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return name
}

// discardsText is ": overlap 2, hook_uncertain 1" (nothing without discards).
func discardsText(d map[string]uint32) string {
	if len(d) == 0 {
		return ""
	}
	names := make([]string, 0, len(d))
	for k := range d {
		names = append(names, k)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%s %d", k, d[k])
	}
	return ": " + strings.Join(parts, ", ")
}

func reasonText(r string) string {
	if r == "" {
		return ""
	}
	return " (" + r + ")"
}
