/* link.c — the connection to the scheduler: its address (resolved once),
 * connected sockets, the MACs of datagrams to a scheduler on another host,
 * and the control socket's outgoing batch (sendmmsg), which the sender
 * thread fills. Pure I/O: what to send is decided elsewhere (core.c). */
#include "hook.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define BATCH 64

static struct sockaddr_storage sched_sa;
static socklen_t sched_salen;
static int ctl = -1; /* control socket, connected to the scheduler */
static int auth_on;  /* datagrams carry a MAC (set before the sender starts) */
static fk_hmac auth_key;
static int refused;  /* a send was refused since fk_link_refused */

/* ---- address, MACs, sockets ---- */

static int resolve(void)
{
	struct sockaddr_in *in4 = (struct sockaddr_in *)&sched_sa;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&sched_sa;
	memset(&sched_sa, 0, sizeof sched_sa);
	if (fk_cfg.unix_path[0]) {
		struct sockaddr_un *un = (struct sockaddr_un *)&sched_sa;
		un->sun_family = AF_UNIX;
		memcpy(un->sun_path, fk_cfg.unix_path, strlen(fk_cfg.unix_path) + 1);
		sched_salen = (socklen_t)sizeof *un;
		return 0;
	}
	if (inet_pton(AF_INET, fk_cfg.host, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons((uint16_t)fk_cfg.port);
		sched_salen = sizeof *in4;
		return 0;
	}
	if (inet_pton(AF_INET6, fk_cfg.host, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)fk_cfg.port);
		sched_salen = sizeof *in6;
		return 0;
	}
	/* A name: resolved once, here, on the first launch's thread. */
	char port[8];
	snprintf(port, sizeof port, "%d", fk_cfg.port);
	struct addrinfo hints = {.ai_socktype = SOCK_DGRAM, .ai_flags = AI_NUMERICSERV}, *res = NULL;
	if (getaddrinfo(fk_cfg.host, port, &hints, &res) != 0 || !res)
		return -1;
	memcpy(&sched_sa, res->ai_addr, res->ai_addrlen);
	sched_salen = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

/* The scheduler's address is loopback: the kernel tells it who we are, and
 * no MAC is due (the daemon decides the same from our address). */
static int sched_loopback(void)
{
	if (sched_sa.ss_family == AF_UNIX)
		return 1; /* the kernel tells the daemon who we are */
	if (sched_sa.ss_family == AF_INET)
		return (ntohl(((struct sockaddr_in *)&sched_sa)->sin_addr.s_addr) >> 24) == 127;
	const struct in6_addr *a = &((struct sockaddr_in6 *)&sched_sa)->sin6_addr;
	if (IN6_IS_ADDR_V4MAPPED(a))
		return a->s6_addr[12] == 127;
	return IN6_IS_ADDR_LOOPBACK(a);
}

/* auth_setup reads FIKIT_AUTH_KEY_FILE for a scheduler on another host. A
 * key that cannot be read leaves the hook un-hooked: its datagrams would be
 * dropped by a daemon that wants them signed. */
static int auth_setup(void)
{
	auth_on = 0;
	if (!fk_cfg.auth_key_file[0] || sched_loopback())
		return 0;
	static uint8_t key[FK_KEY_FILE_MAX];
	char err[512];
	int loose;
	long n = fk_read_key_file(fk_cfg.auth_key_file, key, sizeof key, &loose, err, sizeof err);
	if (n < 0) {
		fk_log(FK_LOG_WARN, "FIKIT_AUTH_KEY_FILE: %s; running un-hooked", err);
		return -1;
	}
	if (loose)
		fk_log(FK_LOG_WARN, "FIKIT_AUTH_KEY_FILE %s may be read by other users (chmod 600 it)", fk_cfg.auth_key_file);
	fk_hmac_init(&auth_key, key, (size_t)n);
	memset(key, 0, sizeof key);
	auth_on = 1;
	return 0;
}

/* proc_tag is this process's tag in its reply sockets' names, drawn once
 * per process (again in a forked child: the pid it was drawn for moved). */
static _Atomic int tag_pid;
static _Atomic unsigned tag;
static _Atomic unsigned reply_n; /* reply sockets bound so far (their N) */

static unsigned proc_tag(void)
{
	int pid = (int)getpid();
	if (atomic_load(&tag_pid) != pid) {
		unsigned r = 0;
		int rfd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
		if (rfd >= 0) {
			ssize_t n = read(rfd, &r, sizeof r);
			(void)n;
			close(rfd);
		}
		if (!r)
			r = (unsigned)fk_now_ns() ^ (unsigned)pid;
		atomic_store(&tag, r);
		atomic_store(&tag_pid, pid);
	}
	return atomic_load(&tag);
}

/* bind_reply binds a unix socket in the reply directory, under a name of
 * its own, fk-PID-TAG-N (pid, the process's random tag, a counter): the
 * daemon answers it there, and only the daemon can (the socket is
 * connected to the daemon's, and the kernel refuses a connected unix
 * socket's datagrams from anyone else). The directory is mode 1733:
 * others can neither list nor remove it. A process killed before its
 * atexit handler leaves its sockets there; the daemon, seeing it exit,
 * removes every fk-PID-TAG-* of the paths it heard from (its threads'
 * sockets that never spoke to that daemon too), and no other process's:
 * PIDs repeat across pods' namespaces, their tags do not. */
static int bind_reply(int fd)
{
	struct sockaddr_un un = {.sun_family = AF_UNIX};
	for (int tries = 0; tries < 4; tries++) {
		int n = snprintf(un.sun_path, sizeof un.sun_path, "%s/fk-%d-%08x-%u", fk_cfg.reply_dir, (int)getpid(),
				 proc_tag(), atomic_fetch_add(&reply_n, 1));
		if (n <= 0 || (size_t)n >= sizeof un.sun_path)
			return -1;
		if (bind(fd, (struct sockaddr *)&un, (socklen_t)sizeof un) == 0) {
			/* The daemon (root, or the socket's owner) answers: keep it
			 * private to us and it. */
			chmod(un.sun_path, 0600);
			return 0;
		}
		if (errno != EADDRINUSE)
			return -1;
	}
	return -1;
}

int fk_link_socket(void)
{
	int fd = socket(sched_sa.ss_family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	if (sched_sa.ss_family == AF_UNIX && bind_reply(fd) < 0) {
		fk_log(FK_LOG_WARN, "cannot bind a reply socket in %s (%s)", fk_cfg.reply_dir, strerror(errno));
		close(fd);
		return -1;
	}
	/* Connected, so an ICMP port-unreachable surfaces as ECONNREFUSED and
	 * only the scheduler's datagrams are received. */
	if (connect(fd, (struct sockaddr *)&sched_sa, sched_salen) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

int fk_link_open(void)
{
	if (resolve()) {
		fk_log(FK_LOG_WARN, "cannot resolve scheduler host \"%s\"; running un-hooked", fk_cfg.host);
		return -1;
	}
	if (auth_setup())
		return -1;
	if (ctl < 0 && (ctl = fk_link_socket()) < 0) {
		fk_log(FK_LOG_WARN, "cannot create sockets (%s); running un-hooked", strerror(errno));
		return -1;
	}
	return 0;
}

int fk_link_ctl(void) { return ctl; }

size_t fk_out_cap(void) { return FK_MAX_DATAGRAM - (auth_on ? FK_MAC_TRAILER : 0); }

size_t fk_seal(uint8_t *buf, size_t len, size_t cap)
{
	return auth_on && len ? fk_auth_seal(&auth_key, FK_TO_DAEMON, buf, len, cap) : len;
}

size_t fk_open(const uint8_t *buf, size_t len)
{
	if (!auth_on)
		return len;
	size_t n = fk_auth_open(&auth_key, FK_TO_HOOK, buf, len);
	if (!n)
		fk_log(FK_LOG_DEBUG, "a datagram of %zu bytes without the scheduler's MAC: dropped", len);
	return n;
}

/* ---- the control socket's outgoing batch (sender thread only) ---- */

static uint8_t out_buf[BATCH][FK_MAX_DATAGRAM];
static struct mmsghdr out_msg[BATCH];
static struct iovec out_iov[BATCH];
static int out_n;

void fk_link_unlink_own(int fd)
{
	struct sockaddr_un un;
	socklen_t len = sizeof un;
	if (fd < 0 || getsockname(fd, (struct sockaddr *)&un, &len) < 0 || un.sun_family != AF_UNIX ||
	    len <= offsetof(struct sockaddr_un, sun_path) || !un.sun_path[0])
		return;
	un.sun_path[sizeof un.sun_path - 1] = '\0';
	char own[sizeof un.sun_path];
	int n = snprintf(own, sizeof own, "%s/fk-%d-", fk_cfg.reply_dir, (int)getpid());
	if (n > 0 && (size_t)n < sizeof own && !strncmp(un.sun_path, own, (size_t)n))
		unlink(un.sun_path);
}

void fk_link_unlink_all(void)
{
	if (sched_sa.ss_family != AF_UNIX || atomic_load(&tag_pid) != (int)getpid())
		return; /* no reply socket bound by this process */
	unsigned t = atomic_load(&tag), n = atomic_load(&reply_n);
	for (unsigned i = 0; i < n; i++) {
		char p[sizeof((struct sockaddr_un *)0)->sun_path];
		int k = snprintf(p, sizeof p, "%s/fk-%d-%08x-%u", fk_cfg.reply_dir, (int)getpid(), t, i);
		if (k > 0 && (size_t)k < sizeof p)
			unlink(p); /* ENOENT for those a thread's end removed, or a parent's N */
	}
}

/* gone: the error a unix socket gives once its daemon went away. */
static int gone(int e) { return e == ECONNREFUSED || e == ENOTCONN || e == ECONNRESET; }

/* reconnect connects a unix socket again to the daemon's path (a new
 * daemon's socket, after a restart). */
static int reconnect(int fd)
{
	return sched_sa.ss_family == AF_UNIX ? connect(fd, (struct sockaddr *)&sched_sa, sched_salen) : -1;
}

ssize_t fk_link_send(int fd, const void *buf, size_t len, int flags)
{
	ssize_t r = send(fd, buf, len, flags);
	if (r < 0 && gone(errno) && sched_sa.ss_family == AF_UNIX) {
		int e = errno;
		if (reconnect(fd) == 0)
			return send(fd, buf, len, flags);
		errno = e == ENOTCONN ? ECONNREFUSED : e;
	}
	return r;
}

ssize_t fk_link_recv_fd(int fd, void *buf, size_t len, int *fd_out)
{
	*fd_out = -1;
	if (sched_sa.ss_family != AF_UNIX)
		return recv(fd, buf, len, MSG_DONTWAIT);
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int) * 4)];
	} cm;
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b, .msg_controllen = sizeof cm.b};
	ssize_t r = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (r < 0) {
		if (gone(errno))
			errno = ECONNREFUSED;
		return r;
	}
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int got;
			memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof got);
			if (*fd_out < 0)
				*fd_out = got;
			else
				close(got); /* one descriptor per answer: the rest are not ours */
		}
	}
	return r;
}

void fk_link_flush(void)
{
	int off = 0, retried = 0;
	while (off < out_n) {
		int r = sendmmsg(ctl, out_msg + off, (unsigned)(out_n - off), MSG_DONTWAIT);
		if (r > 0) {
			off += r;
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && gone(errno) && !retried && reconnect(ctl) == 0) {
			retried = 1; /* a restarted daemon: the rest goes to it */
			refused = 1;
			continue;
		}
		if (r < 0 && errno == ENOTCONN)
			errno = ECONNREFUSED;
		if (r < 0 && errno == ECONNREFUSED)
			refused = 1;
		/* EAGAIN (socket buffer full) or an error: drop the rest, the
		 * daemon sees the gap in seq. Never block here. */
		break;
	}
	out_n = 0;
}

int fk_link_pending(void) { return out_n; }

int fk_link_refused(void)
{
	int r = refused;
	refused = 0;
	return r;
}

void fk_link_put(const fk_msg_out *m)
{
	if (out_n == BATCH)
		fk_link_flush();
	size_t len = fk_seal(out_buf[out_n], fk_encode(out_buf[out_n], fk_out_cap(), m), FK_MAX_DATAGRAM);
	if (len == 0)
		return;
	out_iov[out_n].iov_base = out_buf[out_n];
	out_iov[out_n].iov_len = len;
	memset(&out_msg[out_n], 0, sizeof out_msg[out_n]);
	out_msg[out_n].msg_hdr.msg_iov = &out_iov[out_n];
	out_msg[out_n].msg_hdr.msg_iovlen = 1;
	out_n++;
}

void fk_link_send_now(const fk_msg_out *m)
{
	uint8_t buf[FK_MAX_DATAGRAM];
	size_t len = fk_seal(buf, fk_encode(buf, fk_out_cap(), m), sizeof buf);
	if (len) {
		ssize_t r = fk_link_send(ctl, buf, len, MSG_DONTWAIT);
		(void)r;
	}
}

void fk_link_reset_child(void)
{
	if (ctl >= 0)
		close(ctl);
	ctl = -1;
	out_n = 0;
	refused = 0;
}
