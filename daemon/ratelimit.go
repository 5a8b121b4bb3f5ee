package daemon

import (
	"context"
	"log/slog"
	"net/netip"
	"time"
)

// bucket is a token bucket: burst tokens, refilled at perSec.
type bucket struct {
	tokens float64
	at     time.Time
}

// take spends a token if there is one at now.
func (b *bucket) take(now time.Time, burst, perSec float64) bool {
	if b.at.IsZero() {
		b.tokens = burst
	} else {
		b.tokens = min(burst, b.tokens+now.Sub(b.at).Seconds()*perSec)
	}
	b.at = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// Log lines caused by datagrams are rate limited per source socket (every
// hook has its own, and local hooks share an address): a Register flood
// wrote 240 bytes of log per 39-byte datagram. Past the limit lines are
// counted, and the count is logged with the source's next line. A limit on
// all sources together bounds a flood from many sockets.
const (
	logBurst      = 20
	logPerSec     = 5
	logAllBurst   = 200
	logAllPerSec  = 50
	logSourcesMax = 4096 // sources remembered; idle ones are forgotten first
)

// sourceLog rate-limits log lines per source socket.
type sourceLog struct {
	log     *slog.Logger
	sources map[netip.AddrPort]*sourceBucket
	all     sourceBucket
}

type sourceBucket struct {
	bucket
	suppressed int
}

func newSourceLog(log *slog.Logger) *sourceLog {
	return &sourceLog{log: log, sources: map[netip.AddrPort]*sourceBucket{}}
}

// logAt logs msg for a datagram from src, within src's rate limit and the
// limit on all sources. Debug lines are not limited (debug logging is for
// following a problem).
func (l *sourceLog) logAt(src netip.AddrPort, level slog.Level, msg string, args ...any) {
	if level <= slog.LevelDebug || !src.IsValid() {
		l.log.Log(context.Background(), level, msg, args...)
		return
	}
	if !l.log.Enabled(context.Background(), level) {
		return
	}
	now := time.Now()
	b := l.sources[src]
	if b == nil {
		if len(l.sources) >= logSourcesMax {
			l.forgetIdle(now)
		}
		b = &sourceBucket{}
		l.sources[src] = b
	}
	if !b.take(now, logBurst, logPerSec) {
		b.suppressed++
		return
	}
	if !l.all.take(now, logAllBurst, logAllPerSec) {
		l.all.suppressed++
		return
	}
	if l.all.suppressed > 0 {
		l.log.Warn("log lines suppressed: too many from all sources", "lines", l.all.suppressed)
		l.all.suppressed = 0
	}
	if b.suppressed > 0 {
		l.log.Warn("log lines suppressed: too many from one source", "from", src.String(), "lines", b.suppressed)
		b.suppressed = 0
	}
	l.log.Log(context.Background(), level, msg, args...)
}

// forgetIdle drops the sources whose buckets are full again (nothing to
// remember), or, if none, all of them.
func (l *sourceLog) forgetIdle(now time.Time) {
	for a, b := range l.sources {
		if b.suppressed == 0 && now.Sub(b.at).Seconds()*logPerSec >= logBurst {
			delete(l.sources, a)
		}
	}
	if len(l.sources) >= logSourcesMax {
		clear(l.sources)
	}
}
