package scheduler

import (
	"fmt"
	"time"
)

// Config holds the policy's knobs. Durations are nanoseconds of daemon time.
type Config struct {
	// Policy names the fill policy (policy.go): "fair-prio-fit" (the
	// default: BestPrioFit across priorities, fair queuing among equals),
	// "best-prio-fit" (FIKIT's BestPrioFit) or "fifo".
	Policy string
	// FairLag is the lag bound T of fair queuing among equal priorities
	// (fair.go): a task whose virtual time (GPU time used / weight) runs
	// more than this ahead of the slowest active task of its priority on
	// its GPU waits for the others to catch up. ns of GPU time at weight 1.
	FairLag int64
	// FairIdle: a task of equal priority that neither launched nor asked
	// for this long no longer counts among the active ones (the slowest of
	// which the others must wait for); an anticipation of its next launch.
	FairIdle int64
	// MinGap is the shortest predicted holder gap worth filling (paper: 0.1 ms).
	MinGap int64
	// SwitchCost is the GPU time a context switch costs; filling a window
	// makes the holder's next kernel pay one switch back. SwitchCostAuto
	// (the default): each GPU's is measured (switchcost.go), and
	// SwitchCostPrior is assumed until it is.
	SwitchCost      int64
	SwitchCostPrior int64
	// SwitchCalibrate is how often a GPU's switch is measured again (auto).
	SwitchCalibrate int64
	// SwitchAware prices switches as they are: a fill inside a holder's run
	// must leave room for both switches (to the filler and back), while
	// the one switch back before a holder's next run — the price of
	// sharing at all — and an idle period's backlog, bounded by
	// InflightBudget, are not charged to the delay budget (fill.go).
	SwitchAware bool
	// InflightBudget bounds the predicted low-priority GPU time outstanding.
	InflightBudget int64
	// HookBound: hooks of a worse priority than one registered keep their
	// own predicted GPU time queued or running within InflightBudget (a
	// device-time cursor over the kernel durations the daemon sends them,
	// KernelTimes), for granted and holding launches alike; false: they
	// bound a holder's kernels by count (FIKIT_INFLIGHT) as before.
	HookBound bool
	// FixedBound switches off the bound that follows the slack (slack.go):
	// the hooks keep the rule before it, InflightBudget at all times and
	// nothing into a better priority's predicted run or its window. An
	// ablation (ablations.go), not a user setting: bench/variant's
	// fixed-bound sets it for the bench's before/after.
	FixedBound bool
	// BoardResume: a waiter whose better priorities are all between runs
	// on the board launches without asking, within its in-flight bound,
	// while the holders' predicted next run (BoardHints) leaves a switch
	// and its kernel's time (docs/scheduler.md "Resuming on the board").
	BoardResume bool
	// PreSwitch: ahead of the best priority's predicted run (periodic
	// arrivals) the low priorities stop PreSwitchMargin plus a switch
	// early and its hook makes its context resident (a warm-up), so that
	// the request pays no switch; they stay stopped until its run starts,
	// at most PreSwitchGuard past the prediction (preswitch.go).
	PreSwitch       bool
	PreSwitchGuard  int64
	PreSwitchMargin int64
	// GrantLead is how long before a window's start (the predicted end of
	// the holders' launched work) its first kernels are granted: about a
	// grant's trip to the waiting thread and its launch's to the GPU. A
	// kernel granted earlier would reach the GPU while the holders' work
	// still runs, and share it with that work (time slices) instead of
	// following it.
	GrantLead int64
	// DelayBudget is the share of a holder's mean JCT alone (its profile's)
	// that low-priority work may be expected to delay each of its runs
	// (0.05 = 5 %).
	DelayBudget float64
	// IdleAlpha × the holder's typical gap (never less than IdleFloor) without
	// a holder launch means the holder is idle.
	IdleAlpha float64
	IdleFloor int64
	// RunIdle is the silence after which a holder inside a run (between
	// its first launch and its run end) counts as idle: launch reports
	// arrive in bursts, and the gaps a run has are filled from its profile
	// (windows), not by idleness.
	RunIdle int64
	// IdleStarve: in an idle period, a waiting kernel too long for the
	// period's cap goes once the GPU has had no low-priority work for this
	// long (counted from the period's start or the end of the last
	// low-priority work granted): a holder idle between bursts of runs
	// must not stop everyone whose kernels are longer than the cap.
	IdleStarve int64
	// GrantLease is how long credit given in an idle period stays good
	// (a window's credit is good until the window's end): a thread that
	// wakes late must not launch on a permission the daemon gave for a
	// GPU that was idle then.
	GrantLease int64
	// HolderTTL: a task counts as active this long after its last launch or
	// registration; holders are the best-priority active tasks. With
	// HolderTTLAlpha > 0 a task whose run starts have been seen often
	// enough is active for HolderTTLAlpha × its mean interval between run
	// starts instead, within [HolderTTLMin, HolderTTLMax] (arrivals.go).
	HolderTTL      int64
	HolderTTLAlpha float64
	HolderTTLMin   int64
	HolderTTLMax   int64
	// ProfileTurn bounds the turn of a task profiling alone at the best
	// priority: ending no run for this long, it holds the others of its
	// priority back no more, until it ends a run.
	ProfileTurn int64
	// RejoinGrace: after a restart, a task the daemon knew before holds
	// its place this long at most, waiting for its hook to register again
	// (rejoin.go); 0: no place is held. Live hooks rejoin within a second
	// of the daemon's return however long the outage (they probe at a
	// fixed interval), so a place still empty after twice that belongs to
	// a task that is gone.
	RejoinGrace int64
	// DefaultKernel is the estimate for a kernel whose task has no profile.
	DefaultKernel int64
	// SkipLimit is how often a waiting kernel may be passed over before it
	// goes first.
	SkipLimit int
	// HoldInterval is how often a queued request is told to keep waiting.
	HoldInterval int64
	// DeadAfter drops a task that sent nothing for this long.
	DeadAfter int64
	// DeadAfterWatched replaces DeadAfter for a task whose exit the daemon
	// sees at once (TaskWatched).
	DeadAfterWatched int64
	// HeartbeatInterval is what hooks are told to use.
	HeartbeatInterval int64
	// ProfileRuns is T, the clean runs a task is measured for (10–1000).
	ProfileRuns int
	// MaxCredit caps the launches granted without a round trip.
	MaxCredit int
	// GapEWMA, if > 0, is the weight of the newest observation in the online
	// correction of gap predictions (by position in the run, or by kernel
	// ID): an observation below the estimate gets at least 1/2; 0 disables
	// the correction. On by default: it cut the windows filled past a
	// shorter gap (docs/scheduler.md "Prediction feedback").
	GapEWMA float64
	// Positional predicts from a kernel's position in its run (the
	// profile's sequence) when the profile has one, rather than from its
	// kernel ID alone (the paper's SK/SG); false: by kernel ID only.
	Positional bool
	// DriftSample: in the sharing phase, a task's hook measures one run in
	// DriftSample (0: none) so that the core sees its profile drift
	// (drift.go); DriftThreshold is the relative mismatch of a checked run;
	// DriftRuns consecutive mismatching runs are a drift (0: drift
	// detection off), after which the task is profiled again.
	DriftSample    int
	DriftThreshold float64
	DriftRuns      int
	// RunEndByPosition lets the launch of a run's last kernel (by position
	// in the profile's sequence) end the holder's run and open the window
	// to its next one, without waiting for the run-end report. It fills
	// more of the inter-run gap, but is off by default: measured, it slowed
	// the high-priority service more than it added fill (figures in
	// docs/scheduler.md).
	RunEndByPosition bool
}

// SwitchCostAuto is SwitchCost's value for "measure it" (`auto`).
const SwitchCostAuto = -1

// DefaultConfig returns the defaults documented in docs/scheduler.md.
func DefaultConfig() Config {
	return Config{
		Policy:            PolicyFairPrioFit,
		FairLag:           int64(5 * time.Millisecond),
		FairIdle:          int64(2 * time.Millisecond),
		MinGap:            int64(100 * time.Microsecond),
		SwitchCost:        SwitchCostAuto,
		SwitchCostPrior:   int64(140 * time.Microsecond),
		SwitchCalibrate:   int64(2 * time.Second),
		SwitchAware:       true,
		InflightBudget:    int64(200 * time.Microsecond),
		HookBound:         true,
		BoardResume:       true,
		PreSwitch:         false,
		PreSwitchGuard:    int64(time.Millisecond),
		PreSwitchMargin:   int64(200 * time.Microsecond),
		GrantLead:         int64(25 * time.Microsecond),
		DelayBudget:       0.05,
		IdleAlpha:         2,
		IdleFloor:         int64(50 * time.Microsecond),
		RunIdle:           int64(500 * time.Microsecond),
		IdleStarve:        int64(time.Millisecond),
		GrantLease:        int64(2 * time.Millisecond),
		HolderTTL:         int64(time.Second),
		HolderTTLAlpha:    2,
		HolderTTLMin:      int64(2 * time.Millisecond),
		HolderTTLMax:      int64(10 * time.Second),
		ProfileTurn:       int64(time.Second),
		RejoinGrace:       int64(2 * time.Second),
		DefaultKernel:     int64(100 * time.Microsecond),
		SkipLimit:         25,
		HoldInterval:      int64(50 * time.Millisecond),
		DeadAfter:         int64(80 * time.Millisecond),
		DeadAfterWatched:  int64(2 * time.Second),
		HeartbeatInterval: int64(20 * time.Millisecond),
		ProfileRuns:       100,
		MaxCredit:         64,
		GapEWMA:           0.125,
		Positional:        true,
		DriftSample:       16,
		DriftThreshold:    0.15,
		DriftRuns:         3,
	}
}

// Validate reports the first invalid setting: a value outside its row's
// bounds in Settings, or settings that contradict each other.
func (c Config) Validate() error {
	if err := c.validateSettings(); err != nil {
		return err
	}
	if c.HolderTTLMin > c.HolderTTLMax {
		return fmt.Errorf("%w: need holder-ttl-min (%v) ≤ holder-ttl-max (%v)", ErrConfig,
			time.Duration(c.HolderTTLMin), time.Duration(c.HolderTTLMax))
	}
	if c.DeadAfter <= c.HeartbeatInterval {
		return fmt.Errorf("%w: need heartbeat-interval (%v) < dead-after (%v)", ErrConfig,
			time.Duration(c.HeartbeatInterval), time.Duration(c.DeadAfter))
	}
	return nil
}
