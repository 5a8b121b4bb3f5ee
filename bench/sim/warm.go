package sim

import (
	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/simgpu/devmodel"
)

// warm answers a pre-switch's warm-up as the hook does (hookclient/warm.c):
// one launch of the hook's own kernel on its private stream, in the
// service's context, unless the service is inside a run (its own kernels
// are on their way: nothing to warm). The device model charges the switch
// to it, as it does to any kernel of another context than the last.
func (s *sim) warm(st *svcState, w scheduler.Warmup) {
	if st.waitSeq != 0 || st.next > 0 && st.next < len(st.spec.Kernels) {
		st.h.warmSkipped++
		return
	}
	st.h.warmups++
	_, _ = s.dev.Enqueue(st.ctx, devmodel.Op{Type: devmodel.Kernel, Stream: 2, Duration: timeNs(w.ProbeNs)}, s.now)
}
