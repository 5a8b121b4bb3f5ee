package profiler

import (
	"fmt"
)

// Limits of the profiling phase.
const (
	// DefaultProfileRuns is T, the committed runs a task profiles for.
	DefaultProfileRuns = 100
	// MinProfileRuns and MaxProfileRuns bound T (paper §3.2: 10–1000).
	MinProfileRuns = 10
	MaxProfileRuns = 1000

	// MaxRunRecords bounds the records buffered for one run; a run with
	// more is discarded as incomplete.
	MaxRunRecords = 1 << 20
	// MaxPendingRuns bounds the runs buffered at once (measurements of the
	// next run may arrive before the RunEnd of the previous one). Beginning
	// one more drops the oldest.
	MaxPendingRuns = 4
	// MaxKernelInfos bounds the kernel names a Builder remembers.
	MaxKernelInfos = 1 << 16
	// MaxRunNs is the longest run a profile takes (an hour): a run's
	// kernels and in-run gaps fit inside it, so no measurement in a profile
	// is longer. A run reported longer, or with a kernel or gap longer than
	// the run, is implausible and not folded.
	MaxRunNs = uint64(3600e9)
)

// ValidateProfileRuns checks that T is within MinProfileRuns–MaxProfileRuns.
func ValidateProfileRuns(t int) error {
	if t < MinProfileRuns || t > MaxProfileRuns {
		return fmt.Errorf("%d not in %d–%d: %w", t, MinProfileRuns, MaxProfileRuns, ErrInvalidProfileRuns)
	}
	return nil
}

// RunOutcome says what EndRun did with a run.
type RunOutcome uint8

const (
	// RunCommitted: the run's records were folded and it counts towards T.
	RunCommitted RunOutcome = iota + 1
	// RunDiscarded: the caller did not commit it (it overlapped another
	// task's kernels, or the hook sent it without records); nothing was
	// folded.
	RunDiscarded
	// RunIncomplete: the buffered records do not match the run's kernel
	// count (records were lost or duplicated, or the run exceeded
	// MaxRunRecords); nothing was folded.
	RunIncomplete
	// RunEmpty: the run launched no kernel; it does not count.
	RunEmpty
	// RunIgnored: the profile is already complete; nothing was folded.
	RunIgnored
	// RunImplausible: the run's time, or a kernel's duration or in-run gap,
	// is longer than the run could be (MaxRunNs, the run's own time):
	// nothing was folded.
	RunImplausible
	// RunBeside: the run was measured beside a better priority's work; what
	// it still says truly (DecideBeside) was folded and it counts towards T.
	RunBeside
)

// String names the outcome.
func (o RunOutcome) String() string {
	switch o {
	case RunCommitted:
		return "committed"
	case RunDiscarded:
		return "discarded"
	case RunIncomplete:
		return "incomplete"
	case RunEmpty:
		return "empty"
	case RunIgnored:
		return "ignored"
	case RunImplausible:
		return "implausible"
	case RunBeside:
		return "beside"
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

type pendingRun struct {
	run      uint32
	records  []Record
	overflow bool
}

// Builder folds the measurements of a task's profiling runs into a Profile.
// Records of a run are buffered until EndRun; only committed runs change the
// profile, so a discarded run leaves no trace. After T committed runs the
// profile moves to PhaseSharing and further runs are ignored.
//
// A Builder follows the run counter of one registration of the hook. When a
// task registers again (its run numbers start over), continue with
// ResumeBuilder(b.Profile(), T), which keeps everything folded so far.
//
// A Builder does no IO and reads no clock. It is not safe for concurrent
// use.
type Builder struct {
	p       *Profile
	pending []*pendingRun // in order of BeginRun
	infos   map[uint64]KernelInfo
	// lastEnded is the newest run EndRun saw (valid when ended): records
	// of it or older runs arriving late are ignored.
	lastEnded uint32
	ended     bool
	// dirty holds the kernels whose cached quantiles are stale; Profile
	// refreshes them, so that folding a run costs no quantile queries.
	dirty map[uint64]*KernelStats
}

// NewBuilder starts an empty profile for a task on a GPU model, to be
// complete after profileRuns committed runs.
func NewBuilder(taskKey, gpu string, profileRuns int) (*Builder, error) {
	if err := ValidateProfileRuns(profileRuns); err != nil {
		return nil, err
	}
	return newBuilder(NewProfile(taskKey, gpu, uint32(profileRuns))), nil
}

// ResumeBuilder continues folding into a copy of p (for example a
// profiling-phase profile read back from the store after a restart) until it
// has profileRuns committed runs. A profile already in PhaseSharing, or
// with at least profileRuns runs, is complete.
func ResumeBuilder(p *Profile, profileRuns int) (*Builder, error) {
	if err := ValidateProfileRuns(profileRuns); err != nil {
		return nil, err
	}
	c := p.Clone()
	if c.Version == 0 {
		c.Version = 1
	}
	if c.Phase != PhaseSharing {
		c.TargetRuns = uint32(profileRuns)
		if c.Runs >= c.TargetRuns {
			c.Phase = PhaseSharing
		} else {
			c.Phase = PhaseProfiling
		}
	}
	b := newBuilder(c)
	for id, k := range c.Kernels {
		if k.Name != "" {
			b.infos[id] = KernelInfo{ID: id, Name: k.Name, Grid: k.Grid, Block: k.Block}
		}
	}
	return b, nil
}

// NewVersion starts the next version of prev's profile (the service
// drifted from it, reason says how): empty, to be complete after
// profileRuns committed runs, with prev's history and kernel names.
func NewVersion(prev *Profile, reason string, profileRuns int) (*Builder, error) {
	if err := ValidateProfileRuns(profileRuns); err != nil {
		return nil, err
	}
	if len(reason) > MaxReasonLen {
		reason = reason[:MaxReasonLen]
	}
	p := NewProfile(prev.TaskKey, prev.GPU, uint32(profileRuns))
	p.Version = max(prev.Version, 1) + 1
	p.Reason = reason
	p.History = append([]VersionInfo(nil), prev.History...)
	b := newBuilder(p)
	for id, k := range prev.Kernels {
		if k.Name != "" {
			b.infos[id] = KernelInfo{ID: id, Name: k.Name, Grid: k.Grid, Block: k.Block}
		}
	}
	return b, nil
}

func newBuilder(p *Profile) *Builder {
	return &Builder{
		p:     p,
		infos: make(map[uint64]KernelInfo),
		dirty: make(map[uint64]*KernelStats),
	}
}

// Phase is the profile's phase.
func (b *Builder) Phase() Phase { return b.p.Phase }

// Complete reports whether the profile has its T committed runs.
func (b *Builder) Complete() bool { return b.p.Phase == PhaseSharing }

// Runs is the number of committed runs.
func (b *Builder) Runs() uint32 { return b.p.Runs }

// TargetRuns is T.
func (b *Builder) TargetRuns() uint32 { return b.p.TargetRuns }

// BesideRuns is how many of Runs were measured beside a better priority's
// work (DecideBeside).
func (b *Builder) BesideRuns() uint32 { return b.p.BesideRuns }

// Discarded is the runs left out so far, and by reason.
func (b *Builder) Discarded() (uint32, Discards) { return b.p.DiscardedRuns, b.p.Discards }

// Profile returns a deep copy of the profile as folded so far, safe to hand
// to other goroutines.
func (b *Builder) Profile() *Profile {
	for id, k := range b.dirty {
		k.Duration.refresh()
		k.Gap.refresh()
		delete(b.dirty, id)
	}
	return b.p.Clone()
}

// AddKernelInfo records the name and geometry of a kernel ID. It may come
// before or after the records that mention the ID.
func (b *Builder) AddKernelInfo(info KernelInfo) {
	if _, ok := b.infos[info.ID]; !ok && len(b.infos) >= MaxKernelInfos {
		return
	}
	b.infos[info.ID] = info
	if k, ok := b.p.Kernels[info.ID]; ok {
		k.Name, k.Grid, k.Block = info.Name, info.Grid, info.Block
	}
}

// BeginRun starts buffering a run, forgetting anything buffered for the same
// run number. AddRecords begins a run implicitly, so calling BeginRun is
// only needed to reset one.
func (b *Builder) BeginRun(run uint32) {
	if b.Complete() || b.stale(run) {
		return
	}
	b.drop(run)
	b.begin(run)
}

// stale reports whether run is not newer than the last ended run (in
// serial-number order, so that the uint32 run counter may wrap).
func (b *Builder) stale(run uint32) bool {
	return b.ended && int32(run-b.lastEnded) <= 0
}

func (b *Builder) begin(run uint32) *pendingRun {
	if len(b.pending) >= MaxPendingRuns {
		b.pending = b.pending[1:]
		b.discard(DiscardRunEndLost)
	}
	pr := &pendingRun{run: run}
	b.pending = append(b.pending, pr)
	return pr
}

func (b *Builder) find(run uint32) *pendingRun {
	for _, pr := range b.pending {
		if pr.run == run {
			return pr
		}
	}
	return nil
}

// drop forgets a pending run and reports whether there was one.
func (b *Builder) drop(run uint32) bool {
	for i, pr := range b.pending {
		if pr.run == run {
			b.pending = append(b.pending[:i], b.pending[i+1:]...)
			return true
		}
	}
	return false
}

// AddRecords buffers measurement records of a run. The slice is copied.
func (b *Builder) AddRecords(run uint32, recs []Record) {
	if b.Complete() {
		return
	}
	if b.stale(run) {
		return
	}
	pr := b.find(run)
	if pr == nil {
		pr = b.begin(run)
	}
	if pr.overflow {
		return
	}
	if len(pr.records)+len(recs) > MaxRunRecords {
		pr.overflow = true
		pr.records = nil
		return
	}
	pr.records = append(pr.records, recs...)
}

// discard counts a run left out for reason r.
func (b *Builder) discard(r DiscardReason) {
	b.p.DiscardedRuns++
	if r > 0 && r < NumDiscardReasons {
		b.p.Discards[r]++
	}
}

// EndRun ends a run that launched kernels kernels and took runNs, folding
// its buffered records into the profile if commit is true and exactly
// kernels records arrived; a run not committed counts as DiscardOverlap
// (EndRunWhy says another reason). Runs begun before this one that are
// still pending lost their RunEnd and are dropped (counted as discarded);
// records of this run or older ones that arrive later are ignored.
func (b *Builder) EndRun(run, kernels uint32, runNs uint64, commit bool) RunOutcome {
	why := DiscardOverlap
	if commit {
		why = 0
	}
	out, _ := b.EndRunWhy(run, kernels, runNs, why)
	return out
}

// EndRunWhy is EndRun where the caller says why it leaves the run out (why
// 0: it commits the run). It returns what it did and, for a run left out,
// why.
func (b *Builder) EndRunWhy(run, kernels uint32, runNs uint64, why DiscardReason) (RunOutcome, DiscardReason) {
	return b.Decide(b.Detach(run), kernels, runNs, why)
}

// EndedRun is a run whose end was reported, taken out of the Builder's
// buffer (Detach) until the caller decides on it (Decide): the daemon
// waits for the truth about other tasks' work before it says whether a run
// was clean.
type EndedRun struct {
	run      uint32
	recs     []Record
	found    bool
	overflow bool
	ignored  bool // the profile was complete when it ended
}

// Run is the run's number.
func (e *EndedRun) Run() uint32 { return e.run }

// Detach ends run as EndRun does — runs begun before it that are still
// pending lost their RunEnd and are dropped, later records of it or older
// runs are ignored — and returns its records for Decide.
func (b *Builder) Detach(run uint32) *EndedRun {
	e := &EndedRun{run: run}
	if b.Complete() {
		b.pending = nil
		e.ignored = true
		return e
	}
	if pr := b.find(run); pr != nil {
		e.recs, e.found, e.overflow = pr.records, true, pr.overflow
	}
	b.drop(run)
	if !b.stale(run) {
		b.lastEnded, b.ended = run, true
	}
	kept := b.pending[:0]
	for _, o := range b.pending {
		if int32(o.run-run) < 0 {
			b.discard(DiscardRunEndLost)
			continue
		}
		kept = append(kept, o)
	}
	b.pending = kept
	return e
}

// Decide folds a detached run that launched kernels kernels and took runNs
// into the profile if why is 0 and exactly kernels records arrived, else
// counts it discarded (by why, or by what is wrong with it). A run decided
// after the profile completed is ignored.
func (b *Builder) Decide(e *EndedRun, kernels uint32, runNs uint64, why DiscardReason) (RunOutcome, DiscardReason) {
	if out, r, done := b.screen(e, kernels, runNs, why); done {
		return out, r
	}
	b.fold(e.recs, runNs)
	return RunCommitted, 0
}

// screen decides the runs that neither Decide nor DecideBeside folds:
// ignored, empty, discarded for why (when not 0), records missing, or
// implausible, in that order; done is false for a run to fold.
func (b *Builder) screen(e *EndedRun, kernels uint32, runNs uint64, why DiscardReason) (RunOutcome, DiscardReason, bool) {
	if e.ignored || b.Complete() {
		return RunIgnored, 0, true
	}
	n := len(e.recs)
	switch {
	case kernels == 0 && n == 0 && !e.overflow:
		return RunEmpty, 0, true
	case why != 0:
		b.discard(why)
		return RunDiscarded, why, true
	case !e.found || e.overflow || uint64(n) != uint64(kernels):
		b.discard(DiscardRecordsLost)
		return RunIncomplete, DiscardRecordsLost, true
	case !plausible(e.recs, runNs):
		b.discard(DiscardImplausible)
		return RunImplausible, DiscardImplausible, true
	}
	return 0, 0, false
}

// Records are the run's records in launch order (nil when none arrived):
// for the caller to place each kernel in time. They must not be changed.
func (e *EndedRun) Records() []Record { return e.recs }

// Known says, for the record at index i of a run measured beside other
// work, whether its duration and the gap after it are true measurements.
type Known func(i int) (duration, gap bool)

// DecideBeside folds a detached run measured beside a better priority's
// work: the durations known says are true, and the gaps it says are true
// after a kernel whose duration is (a gap of a kernel whose duration is
// unknown is left out too, so that no kernel has more gaps than
// executions). Its run time and its place in the sequence are not folded:
// they are the other work's as much as the run's. The run counts towards
// T, as one of BesideRuns. A run with no true measurement at all, records
// missing, or implausible, is discarded as Decide would (why for the first).
func (b *Builder) DecideBeside(e *EndedRun, kernels uint32, runNs uint64, known Known, why DiscardReason) (RunOutcome, DiscardReason) {
	if out, r, done := b.screen(e, kernels, runNs, 0); done {
		return out, r
	}
	n := len(e.recs)
	dur := make([]bool, n)
	gap := make([]bool, n)
	someKnown := false
	for i := range e.recs {
		dur[i], gap[i] = known(i)
		gap[i] = gap[i] && dur[i]
		someKnown = someKnown || dur[i]
	}
	if !someKnown {
		b.discard(why)
		return RunDiscarded, why
	}
	p := b.p
	for i, r := range e.recs {
		k := b.kernel(r.KernelID)
		if !dur[i] {
			continue
		}
		b.dirty[r.KernelID] = k
		k.Duration.add(r.DurationNs)
		p.Duration.add(r.DurationNs)
		if gap[i] && r.Flags&FlagGapSpansRunEnd == 0 {
			k.Gap.add(r.GapNs)
			p.Gap.add(r.GapNs)
		}
	}
	p.Duration.refresh()
	p.Gap.refresh()
	p.BesideRuns++
	b.counted()
	return RunBeside, 0
}

// kernel is the statistics of kernel id, made (with its name, if known)
// when new.
func (b *Builder) kernel(id uint64) *KernelStats {
	k, ok := b.p.Kernels[id]
	if !ok {
		k = &KernelStats{ID: id, Duration: newDist(), Gap: newDist()}
		if info, ok := b.infos[id]; ok {
			k.Name, k.Grid, k.Block = info.Name, info.Grid, info.Block
		}
		b.p.Kernels[id] = k
	}
	return k
}

// counted counts one more run towards T; the T-th completes the profile.
func (b *Builder) counted() {
	p := b.p
	p.Runs++
	if p.Runs >= p.TargetRuns {
		p.Phase = PhaseSharing
		b.pending = nil
		p.addHistory()
	}
}

// Pending reports whether records of run are buffered.
func (b *Builder) Pending(run uint32) bool { return b.find(run) != nil }

// plausible: the run fits MaxRunNs, and each kernel and in-run gap fits the
// run (a gap flagged as spanning the run end reaches into the next run and
// is not used).
func plausible(recs []Record, runNs uint64) bool {
	if runNs == 0 || runNs > MaxRunNs {
		return false
	}
	for _, r := range recs {
		if r.DurationNs > runNs || (r.Flags&FlagGapSpansRunEnd == 0 && r.GapNs > runNs) {
			return false
		}
	}
	return true
}

// fold adds a committed run to the profile.
func (b *Builder) fold(recs []Record, runNs uint64) {
	p := b.p
	for _, r := range recs {
		k := b.kernel(r.KernelID)
		b.dirty[r.KernelID] = k
		k.Duration.add(r.DurationNs)
		p.Duration.add(r.DurationNs)
		if r.Flags&FlagGapSpansRunEnd == 0 {
			k.Gap.add(r.GapNs)
			p.Gap.add(r.GapNs)
		}
	}
	foldSequence(p, recs)
	p.RunTime.add(runNs)
	p.RunTime.refresh()
	p.Duration.refresh()
	p.Gap.refresh()
	b.counted()
}

// foldSequence adds a committed run to the positional sequence: the first
// run sets the order, later runs in the same order update each position's
// means, runs in another order are left out.
func foldSequence(p *Profile, recs []Record) {
	if len(recs) == 0 || len(recs) > MaxSequence {
		return
	}
	gap := func(r Record) float64 {
		if r.Flags&FlagGapSpansRunEnd != 0 {
			return 0
		}
		return float64(r.GapNs)
	}
	if p.SeqRuns == 0 {
		p.Sequence = make([]SeqKernel, len(recs))
		for i, r := range recs {
			p.Sequence[i] = SeqKernel{ID: r.KernelID, DurationNs: float64(r.DurationNs), GapNs: gap(r)}
		}
		p.SeqRuns = 1
		return
	}
	if len(recs) != len(p.Sequence) {
		return
	}
	for i, r := range recs {
		if p.Sequence[i].ID != r.KernelID {
			return
		}
	}
	p.SeqRuns++
	n := float64(p.SeqRuns)
	for i, r := range recs {
		s := &p.Sequence[i]
		s.DurationNs += (float64(r.DurationNs) - s.DurationNs) / n
		s.GapNs += (gap(r) - s.GapNs) / n
	}
}
