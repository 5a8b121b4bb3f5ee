package daemon

import (
	"slices"
	"time"

	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/store"
)

// The roster: the tasks registered, kept in the store so that a restarted
// daemon holds their places for --rejoin-grace (scheduler/rejoin.go;
// docs/operations.md "After an outage"). Without it the first hook back
// after an outage was the best priority the daemon knew, whatever its
// priority: a low priority that re-registered first held the GPU, and the
// high priority ran behind it once back.

// roster is what the daemon knows of its roster's writes. Guarded by mu.
type roster struct {
	ver     uint64        // the core's roster version last handed to the writer
	pending []store.Known // the roster to write; nil: nothing new
	wake    chan struct{} // the writer's: a roster is pending
	failing bool          // the last write failed (logged once per spell)
}

// holdPlaces reads the roster the previous daemon left and has the core hold
// those tasks' places for the grace. Called from New, before serving.
func (s *Server) holdPlaces() {
	s.rost.wake = make(chan struct{}, 1)
	rs, ok := s.cfg.Store.(store.RosterStore)
	if !ok {
		return
	}
	known, err := rs.Roster()
	if err != nil {
		s.log.Error("reading the roster: no places held for the tasks known before", "err", err)
		return
	}
	grace := s.cfg.Scheduler.RejoinGrace
	if len(known) == 0 || grace <= 0 {
		return
	}
	ev := scheduler.PlacesHeld{Now: s.start, Until: s.start + grace}
	var keys []string
	for _, k := range known {
		ev.Tasks = append(ev.Tasks, scheduler.KnownTask{Key: k.TaskKey, PID: k.PID, Priority: k.Priority, GPU: k.GPU})
		keys = append(keys, k.TaskKey)
	}
	if !s.step(event{core: ev}) { // why: logged by refused
		s.log.Error("the roster: no places held for the tasks known before")
		return
	}
	s.log.Info("holding the places of the tasks known before the restart until they register again",
		"tasks", len(known), "keys", keys, "grace", time.Duration(grace))
}

// noteRoster hands the roster to the writer when the core's changed. Called
// with mu held, after every batch: comparing a counter costs nothing.
func (s *Server) noteRoster() {
	v := s.core.RosterVersion()
	if v == s.rost.ver {
		return
	}
	s.rost.ver = v
	s.rost.pending = []store.Known{}
	for _, k := range s.core.Roster() {
		s.rost.pending = append(s.rost.pending, store.Known{TaskKey: k.Key, PID: k.PID, Priority: k.Priority, GPU: k.GPU})
	}
	select {
	case s.rost.wake <- struct{}{}:
	default:
	}
}

// writeRoster writes each roster handed to it, the latest only, outside mu
// (a synced store write), until done; then what is still pending.
func (s *Server) writeRoster(done <-chan struct{}) {
	rs, ok := s.cfg.Store.(store.RosterStore)
	for {
		stop := false
		select {
		case <-s.rost.wake:
		case <-done:
			stop = true
		}
		s.mu.Lock()
		ks := s.rost.pending
		s.rost.pending = nil
		s.mu.Unlock()
		if ok && ks != nil {
			err := rs.PutRoster(ks)
			s.mu.Lock()
			switch {
			case err != nil && !s.rost.failing:
				s.log.Error("saving the roster failed: after a restart the places of the tasks known now may not be held", "err", err)
			case err == nil && s.rost.failing:
				s.log.Info("roster saved again")
			}
			s.rost.failing = err != nil
			if err != nil && s.rost.pending == nil {
				s.rost.pending = slices.Clone(ks) // retried with the next change
			}
			s.mu.Unlock()
		}
		if stop {
			return
		}
	}
}
