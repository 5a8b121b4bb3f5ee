package scheduler

import "time"

// This file is the daemon's side of the bound with the slack hint
// (docs/scheduler.md "The bound follows the slack"): what lower-priority
// work may be queued or running on a GPU, as a function of the time left
// until a better priority is predicted to need it. The core computes it
// and publishes it on the board (BoardHint.FillUntilNs, BoundNs, and the
// capped NextLateNs); the hooks only compare their device-time cursor
// against it (hookclient/bound.h, fk_slack_until).

// fillMargin is what lower-priority work leaves before a better priority's
// predicted run: the launch of its first kernel and the error of the
// cursor, a sum of mean durations. Not the switch back: a better priority
// arriving pays it whether the fill ended at the margin or a switch earlier,
// and the GPU would idle that long in every gap.
const fillMargin = int64(50 * time.Microsecond)

// slackHint sets h's slack hint for g, whose better tasks are those of a
// priority better than worst: BoundNs, what their arrival may meet (the
// in-flight budget) at any time; FillUntilNs, where h.NextNs is their
// predicted next run and every one of them that is active arrives
// periodically, that run less fillMargin, past which nothing may still run;
// and NextLateNs capped (dueShare). Unpredictable arrivals (Poisson,
// bursty, not yet learned) leave FillUntilNs 0: the bound alone, no window.
// Nothing with FixedBound (the rule before, an ablation), without the
// hooks' bound, or while a pre-switch stops the low priorities (it keeps
// them off the device until the run starts: the fixed rule's window is
// its stop).
func (n *Node) slackHint(g *gpu, worst uint8, h *BoardHint) {
	if n.cfg.FixedBound || !n.cfg.HookBound || n.preSwitchStop(g) > 0 {
		return
	}
	h.Slack, h.BoundNs = true, max(n.cfg.InflightBudget, 1)
	if h.NextNs == 0 || h.NextNs == NoneExpected {
		return
	}
	interval := int64(0)
	for _, t := range g.tasks {
		if t.prio >= worst || !n.wants(t) {
			continue
		}
		if t.arr.class() != ArrivalsPeriodic {
			return
		}
		if mean, _ := t.arr.stats(); interval == 0 || int64(mean) < interval {
			interval = int64(mean)
		}
	}
	h.FillUntilNs = max(h.NextNs-fillMargin, 1)
	// The floor: nothing goes while the run is due (next to late), but
	// that window lasts at most dueShare of the interval (at least the
	// bound): a busy host's late starts widen the intervals' range to
	// milliseconds, and the low priority lost all of it in every gap.
	if late := h.NextNs + max(int64(dueShare*float64(interval)), h.BoundNs); h.NextLateNs > late {
		h.NextLateNs = late
	}
}

// dueShare is the most of a periodic better priority's interval that its
// due window (BoardHint.NextNs to NextLateNs), in which the hooks let
// nothing go, may take with the bound that follows the slack: the low
// priority keeps the rest of the idle time however late its runs come.
const dueShare = 0.1
