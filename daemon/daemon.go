// Package daemon is `fikit serve`: it owns the UDP socket, the clock and the
// profile store, and drives the pure scheduling core (package scheduler) with
// the messages hooks send. One goroutine reads datagrams and takes each down
// intake (intake.go), the loop that steps the core (loop.go) and sending
// (send.go).
// Whatever else must reach the core — its deadline (a ppoll thread, see
// timer.go), the exit of a hooked process (exitwatch.go) — expires the
// socket's read deadline, which returns that goroutine's read at once.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fikit/fikit/k8s/pods"
	"github.com/fikit/fikit/profiler"
	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/store"
	"github.com/fikit/fikit/udp"
	"github.com/fikit/fikit/udp/board"
)

// Config configures a Server.
type Config struct {
	// Listen is the UDP address hooks send to (default 127.0.0.1:7070).
	Listen string
	// Store holds profiles; the Server closes it. Required.
	Store store.Store
	// AdminSocket, if set, is the unix socket serving status, profiles and
	// metrics over HTTP (normally <data-dir>/fikit.sock).
	AdminSocket string
	// Scheduler is the core's policy.
	Scheduler scheduler.Config
	// Logger receives structured logs (default: discard).
	Logger *slog.Logger
	// Record, if set, receives the decision record (record.go), and is
	// closed (an io.Closer) when the server stops. Server.Record starts or
	// ends a recording later.
	Record io.Writer
	// Board, if set, is the path of the board file to create for hooks on
	// this host (docs/design.md "Board"); "" runs UDP only.
	Board string
	// Policy says who may claim which priorities (nil: DefaultPolicy of
	// the daemon's uid).
	Policy *PriorityPolicy
	// AccessGroup, if > 0, is the gid of the group whose members' services
	// share the board and who may read the admin socket (status, metrics,
	// profiles; changes stay the daemon's user's): both are made that
	// group's, mode 0660 (docs/security.md). The directories above them
	// must let the group through.
	AccessGroup int
	// AuthKey, if set, is the key of the MACs that datagrams from and to
	// hooks on other hosts carry (docs/security.md "Remote hooks"); then a
	// datagram from a non-loopback address without a valid one is dropped.
	AuthKey []byte
	// ListenUnix are unix datagram sockets hooks may send to as well
	// (`--listen unix:PATH`; hooks in pods: udp.UnixConn, docs/kubernetes.md).
	ListenUnix []string
	// Pods, if set, tells which pod a unix-socket sender's cgroup names
	// (k8s/pods); without it pods are all "not known yet".
	Pods pods.Lookup
	// ProcRoot is where the daemon reads /proc/PID/cgroup ("": /proc).
	ProcRoot string
}

// Server is a running daemon.
type Server struct {
	cfg   Config
	log   *slog.Logger
	conn  *udp.Conn
	start int64 // CLOCK_MONOTONIC at start
	admin *adminServer
	pers  *persister
	met   *metrics
	timer *deadlineTimer
	exits *exitWatcher
	debug bool // log every decision
	// onDeadlineRead, if set, runs when a read returned at its deadline,
	// before the loop clears it (tests: the shutdown's wake-up races it).
	onDeadlineRead func()
	// beforeReap, if set, runs in the loop before it takes the exited
	// tasks (tests: a Goodbye and an exit that come meanwhile).
	beforeReap func()

	mu   sync.Mutex // guards everything below; held while the core works
	core *scheduler.Node
	// nextID is the next task ID to hand out.
	nextID uint32
	tasks  map[scheduler.TaskID]*taskAddr
	// usageSampledAt is when the tasks' GPU time was last sampled
	// (activity.go).
	usageSampledAt int64
	// errLimit rate-limits Error replies to bad datagrams.
	errLimit bucket
	// srcLog rate-limits the log lines datagrams cause, per source.
	srcLog *sourceLog
	// outBuf and out collect the replies of one batch for one sendmmsg.
	outBuf     []byte
	out        []udp.Datagram
	evs        []event  // what intake made of a datagram, reused
	kernels    []uint64 // a LaunchBatch's launches, reused
	times      []int64
	deadline   int64 // core time of the read deadline currently set (0: none)
	heard      int64 // every datagram that arrived before it was stepped (scheduler.Tick)
	profileHit map[string]*profiler.Profile
	rec        *recorder    // nil: not recording
	board      *board.Board // nil: none
	policy     *PriorityPolicy
	auth       *udp.Authenticator // nil: no key; datagrams from other hosts are believed (--insecure)
	uid        uint32             // the daemon's user
	registered [board.GPUs]uint64 // what the board says is registered (publishRegistered)
	hinted     [board.GPUs]board.Hint
	hints      []scheduler.BoardHint // reused
	acct       accounts              // GPU time of the tasks gone (accounts.go)
	// flushes are hooks' Flush requests not answered yet (flush.go).
	flushes []flushReq
	rost    roster // the roster's writes (rejoin.go)
	// rosterDone: the roster's writer has stopped (the store may close).
	rosterDone chan struct{}
	// unix are the unix sockets (unix.go), unixIn their queue to the
	// loop; cred is the kernel's word on the sender of the datagram in
	// intake (nil: a UDP one).
	unix   []*udp.UnixConn
	unixIn *unixIntake
	cred   *udp.Cred
	// boardFile is the board, opened to pass to pods the policy lets have it.
	boardFile *os.File
	// podsLearned: the informer learned pods since raiseLearned last ran.
	podsLearned atomic.Bool
	// podsHeard are the pods whose processes registered (pods.go).
	podsHeard map[string]bool
}

// aLongTimeAgo is a read deadline in the past: it wakes the loop.
var aLongTimeAgo = time.Unix(1, 0)

// taskAddr is where a task's messages go.
type taskAddr struct {
	ctrl   netip.AddrPort // the socket it registered from: acks and states
	gpu    string         // device UUID
	model  string
	key    string
	reqs   map[uint32]netip.AddrPort // waiting requests: grants and holds
	regSeq uint32
	// watched: its exit is seen through a pidfd; for the log of a drop.
	watched bool
	// proven: process pid owns the socket the task registered from; then
	// only that process's sockets speak for it (identity.go).
	pid     uint32
	proven  bool
	sources map[netip.AddrPort]sourceCheck
	checks  bucket // of sources checks
	// local: it registered from this host (loopback), so it shares the
	// daemon's clock; boardGPU is its GPU's board section (-1: none).
	local    bool
	boardGPU int
	// slot: it owns its waiter slot on the board (udp/board: Claim).
	slot bool
	prio uint8
	// token is the registration's secret (RegisterAck): a hook that said
	// it sends it (HookSendsToken) is heard only with it. 0: not required.
	token uint64
	// act is what it did lately, for the status (activity.go).
	act activity
	// A pod's task (unix socket, pods.go): its pod's UID, whether the
	// informer knew it at registration, and its namespace and name.
	podUID, namespace, podName string
	podKnown                   bool
	// unixPid: its pid came from the kernel (a unix socket), so a datagram
	// speaks for it when the kernel names the same pid (identity.go);
	// unixPeers are its process's other sockets that spoke for it (its
	// threads'), to forget when it leaves.
	unixPid   bool
	unixPeers []netip.AddrPort
}

// New binds the socket and prepares the core; Run serves.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, errors.New("daemon: no profile store")
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:7070"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(discard{}, nil))
	}
	core, err := scheduler.New(cfg.Scheduler)
	if err != nil {
		return nil, fmt.Errorf("scheduler config: %w", err)
	}
	conn, err := udp.Listen(cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("daemon: %w", err)
	}
	s := &Server{
		cfg: cfg, log: cfg.Logger, conn: conn, start: monotonic(), core: core,
		nextID: 1, tasks: map[scheduler.TaskID]*taskAddr{}, srcLog: newSourceLog(cfg.Logger),
		outBuf: make([]byte, 0, 16*udp.MaxDatagram), profileHit: map[string]*profiler.Profile{},
	}
	s.uid = uint32(os.Getuid())
	s.policy = cfg.Policy
	if cfg.AuthKey != nil {
		a, err := udp.NewAuthenticator(cfg.AuthKey)
		if err != nil {
			return nil, err
		}
		s.auth = a
	}
	if s.policy == nil {
		s.policy = DefaultPolicy(s.uid)
	}
	s.loadAccounts()
	s.holdPlaces()
	s.met = newMetrics(s)
	s.debug = cfg.Logger.Enabled(context.Background(), slog.LevelDebug)
	wake := func() { _ = conn.SetReadDeadline(time.Unix(1, 0)) }
	if s.timer, err = newDeadlineTimer(wake); err != nil {
		conn.Close()
		return nil, fmt.Errorf("daemon: timer: %w", err)
	}
	s.exits = newExitWatcher(wake)
	s.pers = newPersister(cfg.Store, cfg.Logger, wake)
	if cfg.AdminSocket != "" {
		if s.admin, err = newAdminServer(s, cfg.AdminSocket); err != nil {
			conn.Close()
			s.pers.close()
			return nil, err
		}
	}
	if cfg.Record != nil {
		s.rec = newRecorder(cfg.Record, s)
	}
	if err := s.listenUnix(wake); err != nil {
		conn.Close()
		s.pers.close()
		if s.admin != nil {
			s.admin.close()
		}
		return nil, fmt.Errorf("daemon: %w", err)
	}
	if cfg.Board != "" {
		gid := -1
		if cfg.AccessGroup > 0 {
			gid = cfg.AccessGroup
		}
		if s.board, err = board.CreateShared(cfg.Board, gid); err != nil {
			// Hooks then go by UDP alone, as with --board off.
			s.log.Warn("no board: hooks on this host are gated by UDP only", "err", err)
		} else {
			s.board.Heartbeat(monotonic())
			if len(s.unix) > 0 {
				if s.boardFile, err = os.OpenFile(s.board.Path(), os.O_RDWR, 0); err != nil {
					s.log.Warn("board not opened for pods: they are gated by messages only", "err", err)
				}
			}
		}
	}
	return s, nil
}

// Addr is the UDP address the daemon listens on.
func (s *Server) Addr() netip.AddrPort { return s.conn.LocalAddr() }

// now is the core's clock: CLOCK_MONOTONIC in nanoseconds, the clock hooks
// on this machine stamp their launches with.
func (s *Server) now() int64 { return monotonic() }

// monotonic is CLOCK_MONOTONIC in nanoseconds. Go's monotonic clock is
// CLOCK_MONOTONIC read through the vDSO; x/sys's ClockGettime is a real
// system call (several per datagram would show in the grant round trip), so
// the clock is read once and then advanced by Go's.
func monotonic() int64 { return monoBase + int64(time.Since(monoStart)) }

var monoStart, monoBase = func() (time.Time, int64) {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return time.Now(), ts.Nano()
}()

// minReadBuffer is the receive buffer below which the daemon warns: 64
// clients' launch reports while the daemon waits for a CPU.
const minReadBuffer = 1 << 20

// Run serves until ctx is done, then shuts down cleanly: the socket closes,
// pending profiles are written and the store is closed.
func (s *Server) Run(ctx context.Context) error {
	st, _ := s.conn.SocketStats()
	s.log.Info("fikit daemon serving", "listen", s.Addr().String(), "admin", s.cfg.AdminSocket, "udp_buffer_kib", st.ReadBuffer>>10)
	s.log.Info("priority policy (first match decides the best priority allowed)", "rules", s.policy.String())
	if st.ReadBuffer > 0 && st.ReadBuffer < minReadBuffer {
		s.log.Warn("small UDP receive buffer: with many clients on a busy host datagrams will be dropped; raise net.core.rmem_max or run with CAP_NET_ADMIN",
			"udp_buffer_kib", st.ReadBuffer>>10, "want_kib", minReadBuffer>>10)
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-done:
		}
		s.conn.SetReadDeadline(time.Unix(1, 0)) // wake the loop
	}()
	if s.admin != nil {
		go s.admin.serve()
	}
	for _, c := range s.unix {
		s.log.Info("unix socket for hooks", "path", c.Path(), "pidfds", c.Pidfds)
		go s.unixIn.read(c)
	}
	if s.cfg.Pods != nil {
		go s.watchPods(done)
	}
	if s.board != nil {
		s.log.Info("board for hooks on this host", "path", s.board.Path())
		go s.heartbeatBoard(done)
	}
	go every(usageSaveEvery, done, s.saveAccounts)
	s.rosterDone = make(chan struct{})
	go func() {
		defer close(s.rosterDone)
		s.writeRoster(done)
	}()
	err := s.loop(ctx)
	close(done)
	s.shutdown()
	return err
}

func (s *Server) shutdown() {
	s.mu.Lock()
	tasks := len(s.tasks)
	s.mu.Unlock()
	s.timer.close()
	s.exits.close()
	s.conn.Close()
	for _, c := range s.unix {
		c.Close()
	}
	if s.unixIn != nil {
		s.unixIn.close()
	}
	if s.boardFile != nil {
		s.boardFile.Close()
	}
	if s.admin != nil {
		s.admin.close()
	}
	s.saveAccounts()
	if s.rosterDone != nil {
		<-s.rosterDone
	}
	s.pers.close()
	if err := s.Record(nil); err != nil {
		s.log.Error("decision record", "err", err)
	}
	if s.board != nil {
		s.mu.Lock()
		if err := s.board.Close(); err != nil {
			s.log.Warn("removing the board", "err", err)
		}
		s.mu.Unlock()
	}
	if err := s.cfg.Store.Close(); err != nil {
		s.log.Error("closing profile store", "err", err)
	}
	s.log.Info("fikit daemon stopped", "tasks_connected", tasks)
}

// SocketPath is where the admin socket lives for a data directory.
func SocketPath(dataDir string) string { return filepath.Join(dataDir, "fikit.sock") }

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// boardHeartbeat is how often the daemon says on the board that it is
// alive; hooks ignore a board whose heartbeat is older than a second.
const boardHeartbeat = 100 * time.Millisecond

func (s *Server) heartbeatBoard(done <-chan struct{}) {
	every(boardHeartbeat, done, func() {
		s.mu.Lock()
		s.board.Heartbeat(monotonic())
		s.mu.Unlock()
	})
}

// every calls f every d until done is closed.
func every(d time.Duration, done <-chan struct{}, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			f()
		}
	}
}
