/* hook-bench — what the hook adds to a kernel launch, measured side by side
 * in one run (`fikit bench` calls it; not a timed test):
 *
 *   hook-bench [--hook LIB] [--ptx FILE] [--launches N] [--rounds R] [--json]
 *
 * It re-executes itself once per mode and round, alternating modes so that
 * machine noise hits them alike, and reports each mode's median ns per
 * cuLaunchKernel call (zero-length kernels; the timed loop excludes the
 * synchronizations between batches):
 *   nohook       no LD_PRELOAD: the driver alone
 *   disabled     the hook preloaded with FIKIT_DISABLE=1
 *   passthrough  the hook preloaded, no scheduler (connection refused)
 *   holder       the hook preloaded, registered as holder in the sharing
 *                phase with an in-process fake scheduler: the hot path
 *   profiling    holder in the profiling phase: events around each launch
 *   board        holder of priority 0 sharing a board on which a lower
 *                priority is registered and sleeps (waiting to resume):
 *                every run end wakes it, the worst case of a request's cost
 * and per request: a CUDA-graph request (one graph launch of one kernel,
 * then a stream synchronization: the run end) and an eager one (20
 * launches, then the synchronization), medians per mode of many;
 * and, for the holder mode with a launch every 10 µs (a service's pace),
 * the notify latency (launch call → the datagram queued on the fake
 * scheduler's socket, the kernel's receive timestamp) and the sender
 * thread's CPU use, and its CPU use while idle.
 *
 * The driver is whatever libcuda.so.1 the loader finds (simgpu's via
 * LD_LIBRARY_PATH, or a real one). */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>

#include "board_gen.h"
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *const modes[] = {"nohook", "disabled", "passthrough", "holder", "profiling", "board"};
#define NMODES 6
#define REQUESTS 3000 /* per request kind and round */
#define EAGER 20      /* launches per eager request */
#define BATCH 256
#define PACED 20000 /* launches at a service's pace, for notify latency */

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *what, CUresult rc)
{
	const char *s = "?";
	cuGetErrorName(rc, &s);
	fprintf(stderr, "hook-bench: %s: %s\n", what, s);
	exit(1);
}
#define CK(call)                                                                                   \
	do {                                                                                       \
		CUresult rc_ = (call);                                                             \
		if (rc_ != CUDA_SUCCESS)                                                           \
			die(#call, rc_);                                                           \
	} while (0)

/* ---- the child's fake scheduler (holder and profiling modes) ---- */

typedef struct fake {
	int fd;
	int phase;
	const char *board; /* named in the RegisterAck (board mode), or NULL */
	uint64_t board_gen;
	uint64_t *recv_ns; /* per launch seq */
	size_t cap;
	volatile int stop;
} fake;

/* A msgpack unsigned integer (any width); -1 when it is not one. */
static int64_t mp_uint(const uint8_t **p, const uint8_t *end)
{
	if (*p >= end)
		return -1;
	uint8_t t = *(*p)++;
	if (t < 0x80)
		return t;
	int n = t == 0xcc ? 1 : t == 0xcd ? 2 : t == 0xce ? 4 : t == 0xcf ? 8 : 0;
	if (!n || end - *p < n)
		return -1;
	uint64_t v = 0;
	for (int i = 0; i < n; i++)
		v = v << 8 | *(*p)++;
	return (int64_t)v;
}

/* The kernel's receive timestamp of a datagram (when the sender's
 * sendmmsg queued it here), on CLOCK_MONOTONIC: independent of when this
 * thread gets to run. */
static int64_t rt_to_mono;

static void *fake_main(void *arg)
{
	fake *f = arg;
	uint8_t buf[2048];
	char cbuf[256];
	while (!f->stop) {
		struct sockaddr_in from;
		struct iovec iov = {buf, sizeof buf};
		struct msghdr mh = {.msg_name = &from, .msg_namelen = sizeof from, .msg_iov = &iov, .msg_iovlen = 1,
				    .msg_control = cbuf, .msg_controllen = sizeof cbuf};
		ssize_t n = recvmsg(f->fd, &mh, 0);
		uint64_t t = now_ns();
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
			if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
				struct timespec ts;
				memcpy(&ts, CMSG_DATA(c), sizeof ts);
				t = (uint64_t)((int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec - rt_to_mono);
			}
		if (n < 3)
			continue;
		const uint8_t *p = buf + 1, *end = buf + n;
		int64_t ver = mp_uint(&p, end), type = mp_uint(&p, end);
		if (ver != 1)
			continue;
		if (type == 1) { /* Register: answer holder, the mode's phase */
			int64_t seq = mp_uint(&p, end);
			uint8_t ack[400] = {0x98, 1, 8, 0xce, 0, 0, 0, 0, 1, 1, (uint8_t)f->phase, 100, 0xcd, 0x03, 0xe8};
			ack[4] = (uint8_t)(seq >> 24), ack[5] = (uint8_t)(seq >> 16), ack[6] = (uint8_t)(seq >> 8),
			ack[7] = (uint8_t)seq;
			size_t n = 15;
			if (f->board) { /* … and the board: path, generation, GPU section 0 */
				size_t l = strlen(f->board);
				ack[0] = 0x9b;
				ack[n++] = 0xd9;
				ack[n++] = (uint8_t)l;
				memcpy(ack + n, f->board, l);
				n += l;
				ack[n++] = 0xcf;
				for (int i = 7; i >= 0; i--)
					ack[n++] = (uint8_t)(f->board_gen >> (8 * i));
				ack[n++] = 0;
			}
			sendto(f->fd, ack, n, 0, (struct sockaddr *)&from, mh.msg_namelen);
		} else if (type == 2) { /* LaunchNotify: when did it arrive? */
			mp_uint(&p, end);
			int64_t seq = mp_uint(&p, end);
			if (seq > 0 && (size_t)seq < f->cap && !f->recv_ns[seq])
				f->recv_ns[seq] = t;
		} else if (type == 14) { /* LaunchBatch: launches seq, seq+1, … arrived now */
			mp_uint(&p, end);
			int64_t seq = mp_uint(&p, end);
			mp_uint(&p, end); /* base_ns */
			int64_t n = -1;
			if (p < end && (*p & 0xf0) == 0x90)
				n = *p++ & 0x0f;
			else if (p + 3 <= end && *p == 0xdc)
				n = (int64_t)p[1] << 8 | p[2], p += 3;
			for (int64_t i = 0; seq > 0 && i < n; i++)
				if ((size_t)(seq + i) < f->cap && !f->recv_ns[seq + i])
					f->recv_ns[seq + i] = t;
		}
	}
	return NULL;
}

/* CPU time (ns) of this process's thread named name: /proc's schedstat
 * (nanoseconds; the stat file's clock ticks are too coarse here). */
static uint64_t thread_cpu_ns(const char *name)
{
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return 0;
	struct dirent *e;
	uint64_t ns = 0;
	while ((e = readdir(d))) {
		char path[300], comm[64] = "";
		snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		if (!fgets(comm, sizeof comm, f))
			comm[0] = 0;
		fclose(f);
		comm[strcspn(comm, "\n")] = 0;
		if (strcmp(comm, name))
			continue;
		snprintf(path, sizeof path, "/proc/self/task/%s/schedstat", e->d_name);
		if (!(f = fopen(path, "r")))
			continue;
		unsigned long long run = 0;
		if (fscanf(f, "%llu", &run) == 1)
			ns = run;
		fclose(f);
	}
	closedir(d);
	return ns;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		exit(2);
	}
	static char buf[1 << 20];
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	buf[n] = 0;
	fclose(f);
	return buf;
}

/* A board (board mode): the GPU's section 0 is dev's, priorities 0 (this
 * process, FIKIT_PRIORITY=0) and 5 are registered, and one thread of
 * priority 5 sleeps there: each run end of this process wakes it (a
 * futex wake nobody waits for: the cost is the syscall). */
static char board_path[64];
static uint64_t make_board(CUdevice dev)
{
	snprintf(board_path, sizeof board_path, "/dev/shm/hook-bench-%d.board", (int)getpid());
	int fd = open(board_path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || ftruncate(fd, FK_BOARD_FILE_SIZE)) {
		perror(board_path);
		exit(1);
	}
	fk_board *b = mmap(NULL, FK_BOARD_FILE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (b == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	uint64_t gen = now_ns() | 1;
	b->version = FK_BOARD_VERSION;
	b->gpus = FK_BOARD_GPUS;
	atomic_store(&b->generation, gen);
	atomic_store(&b->heartbeat_ns, now_ns() + 3600ull * 1000000000u);
	CUuuid u;
	CK(cuDeviceGetUuid(&u, dev));
	memcpy(b->gpu[0].uuid, u.bytes, 16);
	atomic_store(&b->gpu[0].registered, 1ull | 1ull << 5);
	atomic_store(&b->gpu[0].sleepers, 1);
	atomic_store(&b->magic, FK_BOARD_MAGIC);
	return gen;
}

static int cmp_u64(const void *a, const void *b);

/* Median ns of n requests: a graph launch (ge) or EAGER launches of fn,
 * each followed by a synchronization of s. */
static uint64_t requests(CUgraphExec ge, CUfunction fn, CUstream s, void **args, int n)
{
	static uint64_t t[REQUESTS];
	for (int i = 0; i < n; i++) {
		uint64_t t0 = now_ns();
		if (ge)
			CK(cuGraphLaunch(ge, s));
		else
			for (int k = 0; k < EAGER; k++)
				CK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, s, args, NULL));
		CK(cuStreamSynchronize(s));
		t[i] = now_ns() - t0;
	}
	qsort(t, (size_t)n, sizeof t[0], cmp_u64);
	return t[n / 2];
}

/* One measurement in this process: prints one JSON line. */
static int child(const char *mode, const char *ptx_path, long launches)
{
	fake f = {.fd = -1};
	pthread_t th;
	int board = !strcmp(mode, "board");
	int with_sched = !strcmp(mode, "holder") || !strcmp(mode, "profiling") || board;
	CK(cuInit(0));
	CUdevice dev;
	CK(cuDeviceGet(&dev, 0));
	if (board) {
		f.board_gen = make_board(dev);
		f.board = board_path;
		setenv("FIKIT_PRIORITY", "0", 1);
	}
	if (with_sched) {
		f.phase = !strcmp(mode, "profiling") ? 1 : 2;
		f.cap = (size_t)launches + 2 * BATCH + PACED + 2;
		f.recv_ns = calloc(f.cap, sizeof *f.recv_ns);
		f.fd = socket(AF_INET, SOCK_DGRAM, 0);
		struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		socklen_t sl = sizeof sa;
		int rcv = 8 << 20;
		setsockopt(f.fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof rcv);
		if (bind(f.fd, (struct sockaddr *)&sa, sl) || getsockname(f.fd, (struct sockaddr *)&sa, &sl)) {
			perror("bind");
			return 1;
		}
		struct timeval tv = {0, 100000};
		setsockopt(f.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
		int on = 1;
		setsockopt(f.fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on);
		struct timespec rt, mono;
		clock_gettime(CLOCK_REALTIME, &rt);
		clock_gettime(CLOCK_MONOTONIC, &mono);
		rt_to_mono = ((int64_t)rt.tv_sec - mono.tv_sec) * 1000000000 + (rt.tv_nsec - mono.tv_nsec);
		char addr[64];
		snprintf(addr, sizeof addr, "127.0.0.1:%d", ntohs(sa.sin_port));
		setenv("FIKIT_SCHEDULER", addr, 1); /* read by the hook at its first CUDA call */
		pthread_create(&th, NULL, fake_main, &f);
	}
	CUcontext ctx;
	CK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CK(cuCtxSetCurrent(ctx));
	CUmodule mod;
	CK(cuModuleLoadData(&mod, slurp(ptx_path)));
	CUfunction fn;
	CK(cuModuleGetFunction(&fn, mod, "fk_scale_ns"));
	CUstream s;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	unsigned long long dur = 0;
	void *args[] = {&dur};
	long seq = 0;
	/* Warm up (registration happens at the first launch), then time. */
	for (int i = 0; i < 2 * BATCH; i++, seq++)
		CK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, s, args, NULL));
	CK(cuStreamSynchronize(s));
	uint64_t total = 0;
	for (long done = 0; done < launches; done += BATCH) {
		uint64_t t0 = now_ns();
		for (int i = 0; i < BATCH; i++, seq++)
			CK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, s, args, NULL));
		total += now_ns() - t0;
		CK(cuStreamSynchronize(s));
	}
	printf("{\"mode\":\"%s\",\"ns_per_launch\":%.1f", mode, (double)total / (double)launches);
	/* Requests: a CUDA graph of one kernel (captured), and eager ones. */
	CUgraph g;
	CUgraphExec ge;
	CK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
	CK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, s, args, NULL));
	CK(cuStreamEndCapture(s, &g));
	CK(cuGraphInstantiateWithFlags(&ge, g, 0));
	requests(ge, fn, s, args, 100); /* warm */
	uint64_t graph_ns = requests(ge, fn, s, args, REQUESTS);
	uint64_t eager_ns = requests(NULL, fn, s, args, REQUESTS / 4);
	seq += 100 + REQUESTS + REQUESTS / 4 * EAGER; /* the hook's seqs: one per graph launch, one per kernel */
	printf(",\"ns_per_graph_request\":%llu,\"ns_per_eager_request\":%llu", (unsigned long long)graph_ns,
	       (unsigned long long)eager_ns);
	if (board)
		unlink(board_path);
	if (with_sched && !board) {
		/* Notify latency at a service's pace (a launch every 10 µs of host
		 * time, as eager PyTorch): the tight loop above outruns any sender
		 * (one datagram per launch), which is not what latency is about. */
		usleep(100000);
		long first = seq + 1, paced = PACED;
		uint64_t *launch_ns = calloc((size_t)paced, sizeof *launch_ns);
		uint64_t cpu0 = thread_cpu_ns("fikit-sender"), wall0 = now_ns();
		for (long i = 0; i < paced; i++, seq++) {
			uint64_t t = now_ns();
			while (now_ns() - t < 10000)
				;
			launch_ns[i] = now_ns();
			CK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, s, args, NULL));
			if (i % BATCH == BATCH - 1)
				CK(cuStreamSynchronize(s));
		}
		CK(cuStreamSynchronize(s));
		uint64_t cpu1 = thread_cpu_ns("fikit-sender"), wall1 = now_ns();
		/* Idle: no launches for a second. */
		usleep(200000);
		uint64_t c2 = thread_cpu_ns("fikit-sender"), w2 = now_ns();
		usleep(1000000);
		uint64_t c3 = thread_cpu_ns("fikit-sender"), w3 = now_ns();
		size_t n = 0;
		uint64_t *lat = calloc((size_t)paced, sizeof *lat);
		for (long i = 0; i < paced; i++) {
			size_t sq = (size_t)(first + i);
			if (sq < f.cap && f.recv_ns[sq] > launch_ns[i])
				lat[n++] = f.recv_ns[sq] - launch_ns[i];
		}
		qsort(lat, n, sizeof *lat, cmp_u64);
		printf(",\"notified\":%zu,\"notify_p50_ns\":%llu,\"notify_p99_ns\":%llu", n,
		       (unsigned long long)(n ? lat[n / 2] : 0), (unsigned long long)(n ? lat[n * 99 / 100] : 0));
		printf(",\"sender_cpu_active_pct\":%.1f,\"sender_cpu_idle_pct\":%.2f",
		       100.0 * (double)(cpu1 - cpu0) / (double)(wall1 - wall0),
		       100.0 * (double)(c3 - c2) / (double)(w3 - w2));
		f.stop = 1;
	}
	printf("}\n");
	fflush(stdout);
	_exit(0); /* no atexit flush: the fake scheduler is gone */
}

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	if (n <= 0)
		return 0;
	qsort(v, (size_t)n, sizeof *v, cmp_dbl);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double parse_num(const char *line, const char *key)
{
	const char *p = strstr(line, key);
	return p ? atof(p + strlen(key) + 2) : -1;
}

int main(int argc, char **argv)
{
	const char *hook = NULL, *ptx = NULL, *mode = NULL;
	long launches = 100000;
	int rounds = 7, json = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--hook") && i + 1 < argc)
			hook = argv[++i];
		else if (!strcmp(argv[i], "--ptx") && i + 1 < argc)
			ptx = argv[++i];
		else if (!strcmp(argv[i], "--launches") && i + 1 < argc)
			launches = atol(argv[++i]);
		else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
			rounds = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--child") && i + 1 < argc)
			mode = argv[++i];
		else if (!strcmp(argv[i], "--json"))
			json = 1;
		else {
			fprintf(stderr, "usage: hook-bench [--hook LIB] [--ptx FILE] [--launches N] [--rounds R] [--json]\n");
			return 2;
		}
	}
	launches = (launches + BATCH - 1) / BATCH * BATCH;
	/* Defaults: beside this binary (bin/), and the hook's test module. */
	char self[4096], defhook[4200], defptx[4300];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	self[n > 0 ? n : 0] = 0;
	char *slash = strrchr(self, '/');
	if (slash)
		*slash = 0;
	snprintf(defhook, sizeof defhook, "%s/libfikit_hook.so", self);
	snprintf(defptx, sizeof defptx, "%s/../hookclient/test/data/kernels.ptx", self);
	hook = hook ? hook : defhook;
	ptx = ptx ? ptx : defptx;
	if (mode)
		return child(mode, ptx, launches);

	static double ns[NMODES][64], graph[NMODES][64], eager[NMODES][64], p50[64], p99[64], act[64], idle[64];
	int nlat = 0;
	rounds = rounds > 64 ? 64 : rounds;
	for (int r = 0; r < rounds; r++) {
		for (int m = 0; m < NMODES; m++) {
			int pfd[2];
			if (pipe(pfd))
				return 1;
			pid_t pid = fork();
			if (pid == 0) {
				dup2(pfd[1], 1);
				close(pfd[0]);
				unsetenv("LD_PRELOAD");
				unsetenv("FIKIT_DISABLE");
				setenv("FIKIT_LOG", "off", 1);
				if (m > 0)
					setenv("LD_PRELOAD", hook, 1);
				if (m == 1)
					setenv("FIKIT_DISABLE", "1", 1);
				if (m == 2)
					setenv("FIKIT_SCHEDULER", "127.0.0.1:9", 1); /* discard port: nothing listens */
				char l[32];
				snprintf(l, sizeof l, "%ld", launches);
				execl("/proc/self/exe", "hook-bench", "--child", modes[m], "--ptx", ptx, "--launches", l,
				      (char *)NULL);
				_exit(127);
			}
			close(pfd[1]);
			char line[1024] = "";
			FILE *f = fdopen(pfd[0], "r");
			if (!fgets(line, sizeof line, f))
				line[0] = 0;
			fclose(f);
			int st;
			waitpid(pid, &st, 0);
			if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || !line[0]) {
				fprintf(stderr, "hook-bench: mode %s failed\n", modes[m]);
				return 1;
			}
			ns[m][r] = parse_num(line, "ns_per_launch");
			graph[m][r] = parse_num(line, "ns_per_graph_request");
			eager[m][r] = parse_num(line, "ns_per_eager_request");
			if (m == 3) {
				p50[nlat] = parse_num(line, "notify_p50_ns");
				p99[nlat] = parse_num(line, "notify_p99_ns");
				act[nlat] = parse_num(line, "sender_cpu_active_pct");
				idle[nlat++] = parse_num(line, "sender_cpu_idle_pct");
			}
		}
	}
	double med[NMODES], gmed[NMODES], emed[NMODES];
	for (int m = 0; m < NMODES; m++) {
		med[m] = median(ns[m], rounds);
		gmed[m] = median(graph[m], rounds);
		emed[m] = median(eager[m], rounds);
	}
	double lat50 = median(p50, nlat), lat99 = median(p99, nlat), cpua = median(act, nlat), cpui = median(idle, nlat);
	if (json) {
		printf("{\"launches\":%ld,\"rounds\":%d", launches, rounds);
		for (int m = 0; m < NMODES; m++)
			printf(",\"%s_ns\":%.1f,\"%s_graph_request_ns\":%.0f,\"%s_eager_request_ns\":%.0f", modes[m], med[m],
			       modes[m], gmed[m], modes[m], emed[m]);
		printf(",\"notify_p50_ns\":%.0f,\"notify_p99_ns\":%.0f,\"sender_cpu_active_pct\":%.1f,"
		       "\"sender_cpu_idle_pct\":%.2f}\n",
		       lat50, lat99, cpua, cpui);
		return 0;
	}
	printf("hook-bench: %ld launches per mode and round, %d rounds, medians (hook %s)\n", launches, rounds, hook);
	printf("%-12s %12s %12s %16s %12s %16s %12s\n", "mode", "ns/launch", "added ns", "ns/graph request", "added ns",
	       "ns/eager request", "added ns");
	for (int m = 0; m < NMODES; m++)
		printf("%-12s %12.1f %+12.1f %16.0f %+12.0f %16.0f %+12.0f\n", modes[m], med[m], med[m] - med[0], gmed[m],
		       gmed[m] - gmed[0], emed[m], emed[m] - emed[0]);
	printf("holder, a launch every 10 us: notify latency (launch call -> datagram at the scheduler) p50 %.1f us, "
	       "p99 %.1f us\n",
	       lat50 / 1e3, lat99 / 1e3);
	printf("holder: sender thread CPU %.1f%% of a core while launching every 10 us, %.2f%% idle\n", cpua, cpui);
	return 0;
}
