/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench-snapshot: what a snapshot, a restore and a fork of a native guest cost, beside a cold
 * start of the same guest, and how much memory 16 forks take (tools/bench/snapshot.sh).
 *
 *   bench-snapshot [--runs N] --vmm SANDBOX_VMM --payload PAYLOAD_SNAP [--memory MiB]
 *       [--cpus N] [--dir DIR]
 *
 * The guest is payload-snap (tests/guests/snap.c): it fills its RAM above 64 MiB with a
 * pattern (512 MiB of the default --memory 577), counts on vCPU 1 and answers lines over
 * vsock port 1234. A guest is "up" when it answers `ping`: connect to its VMM's --vsock
 * socket, "CONNECT 1234\n", "OK <n>\n", "ping\n", "pong counter=N seed=S\n". A connect that
 * is refused, or a socket the VMM closes before the answer (a restored guest resets its
 * device and the VMM drops what came before), is retried after 1 ms: no longer sleep is in
 * a timed path. Times are CLOCK_MONOTONIC.
 *
 * One parent VMM boots (`--payload P --cpus C --memory M`) and stays up throughout; one
 * durable snapshot of it is made for the restores. Then, --runs times each (default 10):
 *   snapshot_ms    a durable SNAPSHOT (flags 0) of the running parent into a fresh empty
 *                  directory: the API call, connect to reply. The VMM's own total_us goes
 *                  beside it on stderr. It writes and fsyncs the memory file in DIR, so it is
 *                  a figure of DIR's file system too. The directory is removed after each.
 *   cold_start_ms  spawn `sandbox-vmm --payload P ...` to its first ping answer: that
 *                  includes the guest filling its 512 MiB.
 *   restore_ms     spawn `sandbox-vmm --restore SNAP` to its first ping answer. Nothing is
 *                  dropped from the page cache: the memory file was just written and stays
 *                  cached, and a restore maps it privately; that warm restore is the one users
 *                  get (restoring what they snapshotted a moment ago).
 *   fork1_ms       SNAPSHOT with API_SNAPSHOT_LIVE of the running parent into a fresh
 *                  directory (state only), then one child `--restore DIR --restore-memory
 *                  PATHS` (the reply's frozen RAM): from before the request to the child's
 *                  answer, which must carry the parent's seed. parent_pause_ms is the reply's
 *                  pause_us, as the VMM measured it.
 *   fork16_ms      the same with 16 children, all spawned right after the reply, then each
 *                  one's answer awaited in turn: to the last answer. In the last run, before
 *                  the children are killed, the density line: each child's Private_Clean +
 *                  Private_Dirty (/proc/PID/smaps_rollup), summed, and the fall of MemAvailable
 *                  (/proc/meminfo) from just before the spawns to the last answer.
 * Cold starts and restores alternate, so that drifts in load hit both alike. The figure of
 * each is the median of its runs; every run's figure, and bench_report's summary, go to
 * stderr. The last two lines on stdout (the only ones) are:
 *   snapshot restore_ms=.. fork1_ms=.. fork16_ms=.. parent_pause_ms=.. snapshot_ms=..
 *       cold_start_ms=..
 *   density forks=16 own_mib_total=.. own_mib_per_fork=.. memavailable_drop_mib=..
 *
 * The parent and the CPUs. Our machines have 2 CPUs, and payload-snap never halts: with
 * --cpus 2 vCPU 0 polls its device and vCPU 1 counts, so every guest keeps 2 CPUs busy.
 *   - Snapshots and forks are of the parent running, since that is what users do: its two
 *     vCPUs compete with the VMM's own work and with the children (16 children are 32 more
 *     busy vCPUs), and that is in the figures.
 *   - Cold starts and restores have nothing to do with the parent, so it is PAUSEd (API_PAUSE)
 *     through them, and RESUMEd before the forks.
 *
 * Every VMM runs with --timeout 600 in a directory of its own under DIR (its sockets, its
 * console and its stderr in vmm.log, whose end is shown when its run fails), is SIGKILLed
 * and reaped after its run, and sits in one table so that every exit kills what runs. DIR
 * (default: a mkdtemp under /tmp) must be empty or new; it is emptied at the end, and removed
 * if we made it, on a failure or SIGINT/SIGTERM/SIGHUP too (not on SIGKILL: the VMMs' own
 * --timeout ends them then). Every wait has a deadline of 60 s; a failed run ends the
 * benchmark with exit 1 and a message naming what failed; usage errors exit 2.
 */
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "api_proto.h"
#include "bench.h"

#define SNAPBENCH_RUNS_DEFAULT 10
#define SNAPBENCH_RUNS_MAX     1000
#define SNAPBENCH_FORKS	       16
#define SNAPBENCH_VMS_MAX      (1 + SNAPBENCH_FORKS) /* the parent, then one run's VMMs */
#define SNAPBENCH_WAIT_MS      60000		     /* the deadline of every wait */
#define SNAPBENCH_RETRY_NS     1000000		     /* before connecting again to a guest */
#define SNAPBENCH_VMM_TIMEOUT  "600"		     /* every VMM's --timeout, in seconds */
#define SNAPBENCH_PORT	       "1234"
#define SNAPBENCH_LINE_MAX     256 /* the longest line a guest or the VMM sends us */
#define SNAPBENCH_PATH_MAX     108 /* sizeof(sockaddr_un.sun_path): every path fits one */
#define SNAPBENCH_SHOW_LINES   8   /* lines of a failed VMM's log and console shown */

/* One VMM we started, and where it keeps its files. */
struct snapbench_vm {
	pid_t pid;		      /* 0: not running (never started, or reaped) */
	char dir[SNAPBENCH_PATH_MAX]; /* DIR/<name>: v.sock, api.sock, console.log, vmm.log */
	char vsock[SNAPBENCH_PATH_MAX], api[SNAPBENCH_PATH_MAX];
};

/* The series of figures a benchmark run collects, one entry per run each. */
enum snapbench_series {
	SNAPBENCH_SNAPSHOT,	/* snapshot_ms */
	SNAPBENCH_SNAPSHOT_VMM, /* its total_us */
	SNAPBENCH_COLD,		/* cold_start_ms */
	SNAPBENCH_RESTORE,	/* restore_ms */
	SNAPBENCH_FORK1,	/* fork1_ms */
	SNAPBENCH_FORK1_SNAP,	/* its SNAPSHOT call */
	SNAPBENCH_FORK1_PAUSE,	/* parent_pause_ms */
	SNAPBENCH_FORK16,	/* fork16_ms */
	SNAPBENCH_FORK16_SNAP,	/* its SNAPSHOT call */
	SNAPBENCH_FORK16_PAUSE, /* its pause_us */
	SNAPBENCH_NSERIES,
};

/* What bench_report calls each series on stderr. */
static const char *const snapbench_labels[SNAPBENCH_NSERIES] = {
	[SNAPBENCH_SNAPSHOT] = "snapshot: durable SNAPSHOT, the API call",
	[SNAPBENCH_SNAPSHOT_VMM] = "snapshot: the VMM's total_us",
	[SNAPBENCH_COLD] = "cold start: spawn to the first ping answer",
	[SNAPBENCH_RESTORE] = "restore: spawn --restore to the first ping answer",
	[SNAPBENCH_FORK1] = "fork1: SNAPSHOT live to the child's ping answer",
	[SNAPBENCH_FORK1_SNAP] = "fork1: its SNAPSHOT live, the API call",
	[SNAPBENCH_FORK1_PAUSE] = "fork1: the parent's pause (pause_us)",
	[SNAPBENCH_FORK16] = "fork16: SNAPSHOT live to the last child's answer",
	[SNAPBENCH_FORK16_SNAP] = "fork16: its SNAPSHOT live, the API call",
	[SNAPBENCH_FORK16_PAUSE] = "fork16: the parent's pause (pause_us)",
};

/* How the last fork16 run found the memory of its children. */
struct snapbench_density {
	double own_mib_total, memavailable_drop_mib;
};

/* What the runs need, and what they measured. */
struct snapbench {
	const char *vmm, *payload, *memory, *cpus;
	int runs;
	char dir[SNAPBENCH_PATH_MAX]; /* DIR */
	bool made_dir;		      /* a mkdtemp: removed at the end, not only emptied */
	char restore_snap[SNAPBENCH_PATH_MAX];
	char seed[32];				    /* the parent's, from its first ping */
	struct snapbench_vm vms[SNAPBENCH_VMS_MAX]; /* [0] the parent */
	double *ms[SNAPBENCH_NSERIES];		    /* [series][run], in ms */
	struct snapbench_density density;	    /* of the last fork16 run */
};

/* What a SNAPSHOT reply says. */
struct snapbench_snap {
	uint64_t pause_us, total_us, memory_bytes;
	char memory[API_PAYLOAD_MAX]; /* API_SNAPSHOT_LIVE: the frozen RAM, PATH[,PATH...] */
};

/* The signal that asked us to stop, else 0: every wait gives up with -EINTR once it is set. */
static volatile sig_atomic_t snapbench_stop;
/* The run under way, for messages: "fork16 run 3/10", say. */
static char snapbench_phase[64] = "setup";

static void snapbench_on_signal(int sig)
{
	snapbench_stop = sig;
}

/* "bench-snapshot: <phase>: " + the message + "\n" on stderr. */
__attribute__((format(printf, 1, 2))) static void snapbench_err(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "bench-snapshot: %s: ", snapbench_phase);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* snprintf that reports truncation as -ENAMETOOLONG. */
__attribute__((format(printf, 3, 4), warn_unused_result)) static int
snapbench_path(char *out, size_t len, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(out, len, fmt, ap);
	va_end(ap);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* Sleeps SNAPBENCH_RETRY_NS. -EINTR when we are to stop, else 0. */
static int snapbench_pause_retry(void)
{
	const struct timespec tick = {.tv_nsec = SNAPBENCH_RETRY_NS};

	nanosleep(&tick, NULL);
	return snapbench_stop ? -EINTR : 0;
}

/* Waits until fd is readable: 0, -ETIMEDOUT at deadline_ns, -EINTR to stop, or -errno. */
__attribute__((warn_unused_result)) static int snapbench_wait_in(int fd, int64_t deadline_ns)
{
	for (;;) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		int64_t left_ns = deadline_ns - bench_clock_ns();
		int ret;

		if (snapbench_stop)
			return -EINTR;
		if (left_ns <= 0)
			return -ETIMEDOUT;
		/* Round up: a poll that wakes a little early just goes round again. */
		ret = poll(&pfd, 1, (int)((left_ns + 999999) / 1000000));
		if (ret > 0)
			return 0;
		if (ret < 0 && errno != EINTR)
			return -errno;
	}
}

/* Reads exactly len bytes: 0, -ECONNRESET at an early end, or snapbench_wait_in's errors. */
__attribute__((warn_unused_result)) static int snapbench_read_full(int fd, void *buf, size_t len,
								   int64_t deadline_ns)
{
	uint8_t *p = buf;
	int err;

	while (len) {
		ssize_t n = recv(fd, p, len, MSG_DONTWAIT);

		if (n < 0 && errno == EAGAIN && (err = snapbench_wait_in(fd, deadline_ns)) < 0)
			return err;
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n < 0)
			return -errno; /* ECONNRESET among them */
		if (n == 0)
			return -ECONNRESET;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/*
 * Reads one line from fd (its newline cut, NUL-terminated) into line, and nothing after it:
 * what arrived is peeked at, and only the bytes up to the newline taken. 0, -ECONNRESET when
 * the other side closed first, -EMSGSIZE for a line longer than line_len - 1, or
 * snapbench_wait_in's errors.
 */
__attribute__((warn_unused_result)) static int
snapbench_read_line(int fd, char *line, size_t line_len, int64_t deadline_ns)
{
	size_t have = 0;
	int err;

	for (;;) {
		ssize_t n = recv(fd, line + have, line_len - 1 - have, MSG_DONTWAIT | MSG_PEEK);
		char *nl;

		if (n < 0 && errno == EAGAIN && (err = snapbench_wait_in(fd, deadline_ns)) < 0)
			return err;
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ECONNRESET;
		nl = memchr(line + have, '\n', (size_t)n);
		if (nl)
			n = nl - (line + have) + 1;
		/* What was peeked is there to take: no wait. */
		if ((err = snapbench_read_full(fd, line + have, (size_t)n, deadline_ns)) < 0)
			return err;
		have += (size_t)n;
		if (nl) {
			line[have - 1] = '\0';
			return 0;
		}
		if (have == line_len - 1)
			return -EMSGSIZE;
	}
}

/* A unix stream socket connected to path, non-blocking, in *fd. 0 or -errno. */
__attribute__((warn_unused_result)) static int snapbench_connect(const char *path, int *fd)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	int err;

	if (strlen(path) >= sizeof(addr.sun_path))
		return -ENAMETOOLONG;
	strcpy(addr.sun_path, path);
	*fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (*fd < 0)
		return -errno;
	if (connect(*fd, (struct sockaddr *)&addr, sizeof(addr)) == 0)
		return 0;
	err = -errno;
	close(*fd);
	*fd = -1;
	return err;
}

/* Writes all of buf to a connected socket (small messages: the buffer takes them). */
__attribute__((warn_unused_result)) static int snapbench_send(int fd, const void *buf, size_t len)
{
	ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);

	if (n < 0)
		return errno == EPIPE ? -ECONNRESET : -errno;
	return (size_t)n == len ? 0 : -EAGAIN;
}

/*
 * One request of `type` (payload req, req_len bytes) on a fresh connection to the VMM's
 * api.sock at api_path, and its reply: *error gets the reply's error, body (up to body_max
 * bytes, NUL-terminated after them) what follows api_result, *body_len its length. Returns 0,
 * -EPROTO for a reply that breaks wire/api_proto.h, or -errno of the socket.
 */
__attribute__((warn_unused_result)) static int
snapbench_api_call(const char *api_path, uint16_t type, const void *req, uint32_t req_len,
		   int64_t deadline_ns, int32_t *error, char *body, size_t body_max,
		   size_t *body_len)
{
	struct api_hdr h = {
		.magic = htole32(API_MAGIC),
		.version = htole16(API_VERSION),
		.type = htole16(type),
		.id = htole32(1),
		.len = htole32(req_len),
	};
	uint8_t msg[sizeof(h) + API_PAYLOAD_MAX], payload[API_PAYLOAD_MAX];
	struct api_result r;
	uint32_t len;
	int fd = -1, err;

	if (req_len > API_PAYLOAD_MAX)
		return -E2BIG;
	/* Refused while its listen backlog is full: go round, as for a guest. */
	while ((err = snapbench_connect(api_path, &fd)) == -EAGAIN)
		if (bench_clock_ns() >= deadline_ns || (err = snapbench_pause_retry()) < 0)
			return err < 0 ? err : -ETIMEDOUT;
	if (err < 0)
		return err;
	memcpy(msg, &h, sizeof(h));
	memcpy(msg + sizeof(h), req, req_len);
	if ((err = snapbench_send(fd, msg, sizeof(h) + req_len)) < 0 ||
	    (err = snapbench_read_full(fd, &h, sizeof(h), deadline_ns)) < 0)
		goto out;
	len = le32toh(h.len);
	/* The reply is checked like any input before its payload is read. */
	err = -EPROTO;
	if (le32toh(h.magic) != API_MAGIC || le16toh(h.version) != API_VERSION ||
	    le16toh(h.type) != (type | API_REPLY) || le32toh(h.id) != 1 || len > sizeof(payload) ||
	    len < sizeof(r))
		goto out;
	if ((err = snapbench_read_full(fd, payload, len, deadline_ns)) < 0)
		goto out;
	memcpy(&r, payload, sizeof(r));
	*error = (int32_t)le32toh((uint32_t)r.error);
	*body_len = len - sizeof(r) < body_max ? len - sizeof(r) : body_max;
	memcpy(body, payload + sizeof(r), *body_len);
	body[*body_len] = '\0';
	err = 0;
out:
	close(fd);
	return err;
}

/* A request without payload (PAUSE, RESUME) that must succeed; a message if not. */
__attribute__((warn_unused_result)) static int snapbench_api_simple(const char *api_path,
								    uint16_t type, const char *what)
{
	char body[API_ERROR_MSG_MAX + 1];
	int32_t error = 0;
	size_t n;
	int err = snapbench_api_call(api_path, type, NULL, 0,
				     bench_clock_ns() + (int64_t)SNAPBENCH_WAIT_MS * 1000000,
				     &error, body, sizeof(body) - 1, &n);

	if (err < 0)
		snapbench_err("%s over %s: %s", what, api_path, strerror(-err));
	else if (error)
		snapbench_err("%s: the VMM says %s", what, n ? body : strerror(-error));
	return err < 0 ? err : error ? -EIO : 0;
}

/*
 * SNAPSHOT with `flags` into dir (one string: no writable disks here), the reply in *out.
 * 0, or a negative number after a message saying what failed.
 */
__attribute__((warn_unused_result)) static int snapbench_snapshot(const char *api_path,
								  uint32_t flags, const char *dir,
								  struct snapbench_snap *out)
{
	struct api_snapshot_req h = {.flags = htole32(flags), .nstrings = htole32(1)};
	char req[API_PAYLOAD_MAX], body[sizeof(struct api_snapshot_result) + API_PAYLOAD_MAX];
	struct api_snapshot_result res;
	size_t dir_len = strlen(dir) + 1, n;
	int32_t error = 0;
	int err;

	if (dir_len > sizeof(req) - sizeof(h))
		return -E2BIG;
	memcpy(req, &h, sizeof(h));
	memcpy(req + sizeof(h), dir, dir_len);
	err = snapbench_api_call(api_path, API_SNAPSHOT, req, (uint32_t)(sizeof(h) + dir_len),
				 bench_clock_ns() + (int64_t)SNAPBENCH_WAIT_MS * 1000000, &error,
				 body, sizeof(body) - 1, &n);
	if (err < 0) {
		snapbench_err("SNAPSHOT into %s over %s: %s", dir, api_path, strerror(-err));
		return err;
	}
	if (error) {
		snapbench_err("SNAPSHOT into %s: the VMM says %s", dir,
			      n ? body : strerror(-error));
		return -EIO;
	}
	if (n < sizeof(res)) {
		snapbench_err("SNAPSHOT into %s: a reply of %zu bytes", dir, n);
		return -EPROTO;
	}
	memcpy(&res, body, sizeof(res));
	out->pause_us = le64toh(res.pause_us);
	out->total_us = le64toh(res.total_us);
	out->memory_bytes = le64toh(res.memory_bytes);
	/* The path list is NUL-terminated within the body; body[n] is a NUL in any case. */
	snprintf(out->memory, sizeof(out->memory), "%s", body + sizeof(res));
	if ((flags & API_SNAPSHOT_LIVE) && !out->memory[0]) {
		snapbench_err("SNAPSHOT into %s: a live snapshot's reply names no memory", dir);
		return -EPROTO;
	}
	return 0;
}

/* nftw's callback for snapbench_rmtree: remove each entry, the deepest first. */
static int snapbench_rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	if (remove(path) < 0 && errno != ENOENT)
		fprintf(stderr, "bench-snapshot: cannot remove %s: %s\n", path, strerror(errno));
	return 0;
}

/* Removes path and everything under it (rm -rf); errors are reported, not returned. */
static void snapbench_rmtree(const char *path)
{
	if (nftw(path, snapbench_rm_entry, 16, FTW_DEPTH | FTW_PHYS) < 0 && errno != ENOENT)
		fprintf(stderr, "bench-snapshot: cannot walk %s: %s\n", path, strerror(errno));
}

/* Removes everything in dir, dir itself staying. */
static void snapbench_empty_dir(const char *dir)
{
	char path[SNAPBENCH_PATH_MAX * 2];
	struct dirent *de;
	DIR *d = opendir(dir);

	if (!d)
		return;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
		    !snapbench_path(path, sizeof(path), "%s/%s", dir, de->d_name))
			snapbench_rmtree(path);
	closedir(d);
}

/* Prints the last SNAPBENCH_SHOW_LINES lines of path (what a failed VMM said) to stderr. */
static void snapbench_show_tail(const char *path)
{
	char buf[4096];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC), lines = 0;
	off_t size, start = 0;
	char *p;

	if (fd < 0)
		return;
	size = lseek(fd, 0, SEEK_END);
	if (size > (off_t)sizeof(buf) - 1)
		start = size - (off_t)sizeof(buf) + 1;
	n = pread(fd, buf, sizeof(buf) - 1, start);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	for (p = buf + n - (buf[n - 1] == '\n' ? 1 : 0); p > buf; p--)
		if (p[-1] == '\n' && ++lines == SNAPBENCH_SHOW_LINES)
			break;
	fprintf(stderr, "bench-snapshot: %s ends:\n", path);
	while (*p) {
		size_t len = strcspn(p, "\n");

		fprintf(stderr, "bench-snapshot:   | %.*s\n", (int)len, p);
		p += len + (p[len] == '\n');
	}
}

/* Shows vm's log and console on stderr, after a message said what it failed to do. */
static void snapbench_vm_show(const struct snapbench_vm *vm)
{
	char path[SNAPBENCH_PATH_MAX + 16];

	if (!snapbench_path(path, sizeof(path), "%s/vmm.log", vm->dir))
		snapbench_show_tail(path);
	if (!snapbench_path(path, sizeof(path), "%s/console.log", vm->dir))
		snapbench_show_tail(path);
}

/*
 * Starts a VMM in the free slot vm: makes its directory DIR/name (which must not exist) and
 * runs `VMM ARGS... --vsock --api --console (there) --timeout`, its stdout and stderr into
 * vmm.log there. 0, or a negative number after a message.
 */
__attribute__((warn_unused_result)) static int snapbench_vm_start(const struct snapbench *b,
								  struct snapbench_vm *vm,
								  const char *name,
								  const char *const *args)
{
	char console[SNAPBENCH_PATH_MAX], log[SNAPBENCH_PATH_MAX];
	char *argv[16];
	int n = 0, fd, err;

	if ((err = snapbench_path(vm->dir, sizeof(vm->dir), "%s/%s", b->dir, name)) < 0 ||
	    (err = snapbench_path(vm->vsock, sizeof(vm->vsock), "%s/v.sock", vm->dir)) < 0 ||
	    (err = snapbench_path(vm->api, sizeof(vm->api), "%s/api.sock", vm->dir)) < 0 ||
	    (err = snapbench_path(console, sizeof(console), "%s/console.log", vm->dir)) < 0 ||
	    (err = snapbench_path(log, sizeof(log), "%s/vmm.log", vm->dir)) < 0) {
		snapbench_err("%s/%s: paths too long for a unix socket", b->dir, name);
		return err;
	}
	if (mkdir(vm->dir, 0700) < 0) {
		err = -errno;
		snapbench_err("cannot make %s: %s", vm->dir, strerror(errno));
		return err;
	}
	fd = open(log, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		err = -errno;
		snapbench_err("cannot make %s: %s", log, strerror(errno));
		return err;
	}
	argv[n++] = (char *)b->vmm;
	while (*args)
		argv[n++] = (char *)*args++;
	argv[n++] = "--vsock";
	argv[n++] = vm->vsock;
	argv[n++] = "--api";
	argv[n++] = vm->api;
	argv[n++] = "--console";
	argv[n++] = console;
	argv[n++] = "--timeout";
	argv[n++] = SNAPBENCH_VMM_TIMEOUT;
	argv[n] = NULL;
	err = bench_spawn_cmd(argv, fd, BENCH_SPAWN_ERR_OUT, &vm->pid);
	close(fd);
	if (err < 0) {
		vm->pid = 0;
		snapbench_err("cannot run %s: %s", b->vmm, strerror(-err));
	}
	return err;
}

/* SIGKILLs vm's VMM (if it runs), reaps it and removes its directory. */
static void snapbench_vm_stop(struct snapbench_vm *vm)
{
	if (vm->pid > 0) {
		kill(vm->pid, SIGKILL);
		while (waitpid(vm->pid, NULL, 0) < 0 && errno == EINTR)
			;
		vm->pid = 0;
	}
	if (vm->dir[0])
		snapbench_rmtree(vm->dir);
	vm->dir[0] = '\0';
}

/* Whether vm's VMM still runs; if it ended, it is reaped and a message says how. */
static bool snapbench_vm_alive(struct snapbench_vm *vm)
{
	int status;

	if (vm->pid <= 0 || waitpid(vm->pid, &status, WNOHANG) != vm->pid)
		return vm->pid > 0;
	vm->pid = 0;
	if (WIFEXITED(status))
		snapbench_err("the VMM in %s exited with status %d", vm->dir, WEXITSTATUS(status));
	else
		snapbench_err("the VMM in %s was killed by signal %d", vm->dir, WTERMSIG(status));
	return false;
}

/*
 * One try at vm's guest: connect, CONNECT, ping, the reply line in reply. 0; -EAGAIN when it
 * is worth another try (the socket is not there yet, refused, or closed before the answer);
 * other errors are final.
 */
__attribute__((warn_unused_result)) static int snapbench_ping_once(const struct snapbench_vm *vm,
								   int64_t deadline_ns, char *reply,
								   size_t reply_len)
{
	char line[SNAPBENCH_LINE_MAX];
	int fd, err;

	err = snapbench_connect(vm->vsock, &fd);
	if (err == -ENOENT || err == -ECONNREFUSED || err == -EAGAIN)
		return -EAGAIN;
	if (err < 0)
		return err;
	if ((err = snapbench_send(fd, "CONNECT " SNAPBENCH_PORT "\n", 13)) < 0 ||
	    (err = snapbench_read_line(fd, line, sizeof(line), deadline_ns)) < 0)
		goto out;
	if (strncmp(line, "OK ", 3)) {
		err = -EPROTO;
		snapbench_err("CONNECT " SNAPBENCH_PORT " on %s: the VMM answered '%s'", vm->vsock,
			      line);
		goto out;
	}
	if ((err = snapbench_send(fd, "ping\n", 5)) < 0)
		goto out;
	err = snapbench_read_line(fd, reply, reply_len, deadline_ns);
out:
	close(fd);
	return err == -ECONNRESET ? -EAGAIN : err;
}

/*
 * Waits for vm's guest to answer a ping, trying again every SNAPBENCH_RETRY_NS, until
 * deadline_ns; the reply's seed (after "seed=") in seed. 0, or a negative number after a
 * message (and vm's log) saying what failed.
 */
__attribute__((warn_unused_result)) static int
snapbench_vm_ping(struct snapbench_vm *vm, int64_t deadline_ns, char *seed, size_t seed_len)
{
	char reply[SNAPBENCH_LINE_MAX];
	const char *s;
	int err;

	while ((err = snapbench_ping_once(vm, deadline_ns, reply, sizeof(reply))) == -EAGAIN) {
		if (!snapbench_vm_alive(vm)) {
			err = -ECHILD;
			goto fail;
		}
		if (bench_clock_ns() >= deadline_ns) {
			err = -ETIMEDOUT;
			break;
		}
		if ((err = snapbench_pause_retry()) < 0)
			break;
	}
	if (err == -EINTR)
		return err; /* a signal: no run failed */
	if (err < 0) {
		snapbench_err("no ping answer from the guest in %s: %s", vm->dir,
			      err == -ETIMEDOUT ? "none in time" : strerror(-err));
		goto fail;
	}
	s = strstr(reply, " seed=");
	if (strncmp(reply, "pong counter=", 13) || !s || strlen(s + 6) >= seed_len) {
		snapbench_err("the guest in %s answered ping with '%s'", vm->dir, reply);
		err = -EPROTO;
		goto fail;
	}
	strcpy(seed, s + 6);
	return 0;
fail:
	snapbench_vm_show(vm);
	return err;
}

/* The deadline of a wait that starts now. */
static int64_t snapbench_deadline(void)
{
	return bench_clock_ns() + (int64_t)SNAPBENCH_WAIT_MS * 1000000;
}

/* Waits for vm's answer and checks that its seed is the parent's. */
__attribute__((warn_unused_result)) static int
snapbench_vm_check(const struct snapbench *b, struct snapbench_vm *vm, int64_t deadline_ns)
{
	char seed[sizeof(b->seed)];
	int err = snapbench_vm_ping(vm, deadline_ns, seed, sizeof(seed));

	if (err < 0)
		return err;
	if (strcmp(seed, b->seed)) {
		snapbench_err("the guest in %s has seed %s, the parent %s", vm->dir, seed, b->seed);
		return -EBADMSG;
	}
	return 0;
}

/* Makes the fresh empty directory DIR/name for a snapshot, its path in out. */
__attribute__((warn_unused_result)) static int
snapbench_mkdir(const struct snapbench *b, const char *name, char *out, size_t out_len)
{
	int err = snapbench_path(out, out_len, "%s/%s", b->dir, name);

	if (err < 0) {
		snapbench_err("%s/%s: path too long", b->dir, name);
		return err;
	}
	if (mkdir(out, 0700) < 0) {
		err = -errno;
		snapbench_err("cannot make %s: %s", out, strerror(errno));
	}
	return err;
}

/*
 * Run i of snapshot_ms: a durable snapshot of the running parent into a fresh directory (made
 * before the clock starts), the API call timed; the directory is removed after.
 */
__attribute__((warn_unused_result)) static int snapbench_run_snapshot(struct snapbench *b, int i)
{
	struct snapbench_snap snap;
	char dir[SNAPBENCH_PATH_MAX];
	int64_t t0;
	int err;

	if ((err = snapbench_mkdir(b, "snapshot", dir, sizeof(dir))) < 0)
		return err;
	t0 = bench_clock_ns();
	err = snapbench_snapshot(b->vms[0].api, 0, dir, &snap);
	b->ms[SNAPBENCH_SNAPSHOT][i] = bench_since_ms(t0);
	if (!err) {
		b->ms[SNAPBENCH_SNAPSHOT_VMM][i] = (double)snap.total_us / 1e3;
		fprintf(stderr,
			"bench-snapshot: %s: %.3f ms (the VMM: %.3f ms, paused %.3f ms, "
			"%llu MiB written)\n",
			snapbench_phase, b->ms[SNAPBENCH_SNAPSHOT][i],
			b->ms[SNAPBENCH_SNAPSHOT_VMM][i], (double)snap.pause_us / 1e3,
			(unsigned long long)(snap.memory_bytes >> 20));
	}
	snapbench_rmtree(dir);
	return err;
}

/*
 * One cold start (`--payload`) or restore (`--restore` of b->restore_snap), spawn to the
 * first ping answer in *ms; the VMM is killed after.
 */
__attribute__((warn_unused_result)) static int snapbench_run_start(struct snapbench *b,
								   bool restore, double *ms)
{
	const char *boot[] = {"--payload", b->payload, "--cpus", b->cpus,
			      "--memory",  b->memory,  NULL};
	const char *from[] = {"--restore", b->restore_snap, NULL};
	struct snapbench_vm *vm = &b->vms[1];
	char seed[sizeof(b->seed)];
	int64_t t0 = bench_clock_ns();
	int err;

	if ((err = snapbench_vm_start(b, vm, restore ? "restore" : "cold", restore ? from : boot)) <
	    0)
		return err;
	err = restore ? snapbench_vm_check(b, vm, t0 + (int64_t)SNAPBENCH_WAIT_MS * 1000000)
		      : snapbench_vm_ping(vm, t0 + (int64_t)SNAPBENCH_WAIT_MS * 1000000, seed,
					  sizeof(seed));
	*ms = bench_since_ms(t0);
	if (!err)
		fprintf(stderr, "bench-snapshot: %s: %.3f ms\n", snapbench_phase, *ms);
	snapbench_vm_stop(vm);
	return err;
}

/* MemAvailable from /proc/meminfo, in KiB. */
__attribute__((warn_unused_result)) static int snapbench_memavailable(long long *kib)
{
	char line[256];
	FILE *f = fopen("/proc/meminfo", "re");
	int err = -ENOENT;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %lld kB", kib) == 1) {
			err = 0;
			break;
		}
	fclose(f);
	return err;
}

/* Private_Clean + Private_Dirty of pid (/proc/PID/smaps_rollup), in KiB. */
__attribute__((warn_unused_result)) static int snapbench_private_kib(pid_t pid, long long *kib)
{
	char path[64], line[256];
	long long v;
	FILE *f;
	int found = 0;

	snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", (int)pid);
	if (!(f = fopen(path, "re")))
		return -errno;
	*kib = 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Private_Clean: %lld kB", &v) == 1 ||
		    sscanf(line, "Private_Dirty: %lld kB", &v) == 1) {
			*kib += v;
			found++;
		}
	fclose(f);
	return found == 2 ? 0 : -EBADMSG;
}

/*
 * One fork of the running parent into nforks children: SNAPSHOT live into a fresh directory
 * (made before the clock starts), every child spawned, every answer awaited and its seed
 * checked. The whole in *ms, the API call in *snap_ms, the VMM's pause in *pause_ms; with
 * density, the children's memory before they are killed.
 */
__attribute__((warn_unused_result)) static int snapbench_run_fork(struct snapbench *b, int nforks,
								  double *ms, double *snap_ms,
								  double *pause_ms,
								  struct snapbench_density *density)
{
	struct snapbench_snap snap;
	char dir[SNAPBENCH_PATH_MAX], name[16];
	const char *args[] = {"--restore", dir, "--restore-memory", snap.memory, NULL};
	long long avail0 = 0, avail1 = 0, own_kib = 0, kib;
	int64_t t0, deadline_ns;
	int err;

	if ((err = snapbench_mkdir(b, "fork", dir, sizeof(dir))) < 0)
		return err;
	t0 = bench_clock_ns();
	deadline_ns = t0 + (int64_t)SNAPBENCH_WAIT_MS * 1000000;
	if ((err = snapbench_snapshot(b->vms[0].api, API_SNAPSHOT_LIVE, dir, &snap)) < 0)
		goto out;
	*snap_ms = bench_since_ms(t0);
	*pause_ms = (double)snap.pause_us / 1e3;
	if (density && (err = snapbench_memavailable(&avail0)) < 0) {
		snapbench_err("/proc/meminfo: %s", strerror(-err));
		goto out;
	}
	for (int i = 0; i < nforks; i++) {
		snprintf(name, sizeof(name), "child-%02d", i);
		if ((err = snapbench_vm_start(b, &b->vms[1 + i], name, args)) < 0)
			goto out;
	}
	for (int i = 0; i < nforks; i++)
		if ((err = snapbench_vm_check(b, &b->vms[1 + i], deadline_ns)) < 0)
			goto out;
	*ms = bench_since_ms(t0);
	fprintf(stderr,
		"bench-snapshot: %s: %.3f ms (SNAPSHOT %.3f ms, the parent paused %.3f ms, "
		"%d child%s up %.3f ms later)\n",
		snapbench_phase, *ms, *snap_ms, *pause_ms, nforks, nforks > 1 ? "ren" : "",
		*ms - *snap_ms);
	if (!density)
		goto out;
	if ((err = snapbench_memavailable(&avail1)) < 0) {
		snapbench_err("/proc/meminfo: %s", strerror(-err));
		goto out;
	}
	for (int i = 0; i < nforks; i++) {
		if ((err = snapbench_private_kib(b->vms[1 + i].pid, &kib)) < 0) {
			snapbench_err("/proc/%d/smaps_rollup: %s", (int)b->vms[1 + i].pid,
				      strerror(-err));
			goto out;
		}
		fprintf(stderr, "bench-snapshot: %s: child %d owns %.2f MiB\n", snapbench_phase, i,
			(double)kib / 1024);
		own_kib += kib;
	}
	density->own_mib_total = (double)own_kib / 1024;
	density->memavailable_drop_mib = (double)(avail0 - avail1) / 1024;
out:
	for (int i = 0; i < nforks; i++)
		snapbench_vm_stop(&b->vms[1 + i]);
	snapbench_rmtree(dir);
	return err;
}

/* Kills every VMM still running and empties (or removes) DIR: every exit goes through here. */
static void snapbench_cleanup(struct snapbench *b)
{
	for (int i = 0; i < SNAPBENCH_VMS_MAX; i++)
		snapbench_vm_stop(&b->vms[i]);
	if (!b->dir[0])
		return;
	if (b->made_dir)
		snapbench_rmtree(b->dir);
	else
		snapbench_empty_dir(b->dir);
}

/* DIR: the one given (made if missing; it must be empty), or a mkdtemp under /tmp. */
__attribute__((warn_unused_result)) static int snapbench_setup_dir(struct snapbench *b,
								   const char *dir)
{
	struct dirent *de;
	DIR *d;

	if (!dir) {
		strcpy(b->dir, "/tmp/bench-snapshot-XXXXXX");
		if (!mkdtemp(b->dir)) {
			fprintf(stderr, "bench-snapshot: mkdtemp: %s\n", strerror(errno));
			b->dir[0] = '\0';
			return -errno;
		}
		b->made_dir = true;
		return 0;
	}
	/* Room for DIR/child-15/api.sock in a sun_path. */
	if (strlen(dir) > SNAPBENCH_PATH_MAX - 24) {
		fprintf(stderr, "bench-snapshot: --dir %s: too long for its sockets\n", dir);
		return -ENAMETOOLONG;
	}
	if (mkdir(dir, 0700) == 0)
		b->made_dir = true;
	else if (errno != EEXIST) {
		fprintf(stderr, "bench-snapshot: cannot make %s: %s\n", dir, strerror(errno));
		return -errno;
	}
	if (!(d = opendir(dir))) {
		fprintf(stderr, "bench-snapshot: --dir %s: %s\n", dir, strerror(errno));
		return -errno;
	}
	while ((de = readdir(d)) && (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")))
		;
	closedir(d);
	if (de) {
		fprintf(stderr, "bench-snapshot: --dir %s is not empty\n", dir);
		return -ENOTEMPTY;
	}
	strcpy(b->dir, dir);
	return 0;
}

/* Sets snapbench_phase to "what run i/n" (i from 0). */
static void snapbench_set_phase(const char *what, int i, int n)
{
	snprintf(snapbench_phase, sizeof(snapbench_phase), "%s run %d/%d", what, i + 1, n);
}

/* Every series, in the order the comment at the top gives. 0, or negative after a message. */
__attribute__((warn_unused_result)) static int snapbench_run_all(struct snapbench *b)
{
	const char *boot[] = {"--payload", b->payload, "--cpus", b->cpus,
			      "--memory",  b->memory,  NULL};
	struct snapbench_snap snap;
	int64_t t0 = bench_clock_ns();
	double **ms = b->ms;
	int err, last = b->runs - 1;

	snprintf(snapbench_phase, sizeof(snapbench_phase), "the parent's boot");
	if ((err = snapbench_vm_start(b, &b->vms[0], "parent", boot)) < 0 ||
	    (err = snapbench_vm_ping(&b->vms[0], snapbench_deadline(), b->seed, sizeof(b->seed))) <
		    0)
		return err;
	fprintf(stderr, "bench-snapshot: the parent answers after %.3f ms, seed %s\n",
		bench_since_ms(t0), b->seed);

	snprintf(snapbench_phase, sizeof(snapbench_phase), "the snapshot to restore");
	if ((err = snapbench_mkdir(b, "restore-snapshot", b->restore_snap,
				   sizeof(b->restore_snap))) < 0 ||
	    (err = snapbench_snapshot(b->vms[0].api, 0, b->restore_snap, &snap)) < 0)
		return err;

	for (int i = 0; i < b->runs; i++) {
		snapbench_set_phase("snapshot", i, b->runs);
		if ((err = snapbench_run_snapshot(b, i)) < 0)
			return err;
	}

	snprintf(snapbench_phase, sizeof(snapbench_phase), "pausing the parent");
	if ((err = snapbench_api_simple(b->vms[0].api, API_PAUSE, "PAUSE")) < 0)
		return err;
	for (int i = 0; i < b->runs; i++) {
		snapbench_set_phase("cold start", i, b->runs);
		if ((err = snapbench_run_start(b, false, &ms[SNAPBENCH_COLD][i])) < 0)
			return err;
		snapbench_set_phase("restore", i, b->runs);
		if ((err = snapbench_run_start(b, true, &ms[SNAPBENCH_RESTORE][i])) < 0)
			return err;
	}
	snprintf(snapbench_phase, sizeof(snapbench_phase), "resuming the parent");
	if ((err = snapbench_api_simple(b->vms[0].api, API_RESUME, "RESUME")) < 0)
		return err;

	for (int i = 0; i < b->runs; i++) {
		snapbench_set_phase("fork1", i, b->runs);
		if ((err = snapbench_run_fork(b, 1, &ms[SNAPBENCH_FORK1][i],
					      &ms[SNAPBENCH_FORK1_SNAP][i],
					      &ms[SNAPBENCH_FORK1_PAUSE][i], NULL)) < 0)
			return err;
	}
	for (int i = 0; i < b->runs; i++) {
		snapbench_set_phase("fork16", i, b->runs);
		if ((err = snapbench_run_fork(b, SNAPBENCH_FORKS, &ms[SNAPBENCH_FORK16][i],
					      &ms[SNAPBENCH_FORK16_SNAP][i],
					      &ms[SNAPBENCH_FORK16_PAUSE][i],
					      i == last ? &b->density : NULL)) < 0)
			return err;
	}
	return 0;
}

static void snapbench_usage(FILE *f)
{
	fprintf(f,
		"usage: bench-snapshot [--runs N] --vmm SANDBOX_VMM --payload PAYLOAD_SNAP\n"
		"                      [--memory MiB] [--cpus N] [--dir DIR]\n"
		"Snapshot, restore and fork of payload-snap against its cold start, and the\n"
		"memory of %d forks; the last two lines on stdout:\n"
		"  snapshot restore_ms=.. fork1_ms=.. fork16_ms=.. parent_pause_ms=.. "
		"snapshot_ms=.. cold_start_ms=..\n"
		"  density forks=%d own_mib_total=.. own_mib_per_fork=.. memavailable_drop_mib=..\n"
		"  --runs N      runs of each figure, their median reported (default %d)\n"
		"  --memory MiB  guest RAM (default 577: the guest fills 512 MiB of it)\n"
		"  --cpus N      the parent's and cold starts' vCPUs (default 2)\n"
		"  --dir DIR     an empty or new directory for the sockets and snapshots,\n"
		"                emptied at the end (default: a mkdtemp under /tmp)\n",
		SNAPBENCH_FORKS, SNAPBENCH_FORKS, SNAPBENCH_RUNS_DEFAULT);
}

int main(int argc, char **argv)
{
	static struct snapbench b = {.memory = "577", .cpus = "2", .runs = SNAPBENCH_RUNS_DEFAULT};
	struct sigaction sa = {.sa_handler = snapbench_on_signal};
	double med[SNAPBENCH_NSERIES];
	const char *dir = NULL;
	int err, n;

	for (int i = 1; i < argc; i += 2) {
		const char *val = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			snapbench_usage(stdout);
			return 0;
		}
		if (!val)
			goto usage;
		if (!strcmp(argv[i], "--runs")) {
			if (bench_parse_count(val, 1, SNAPBENCH_RUNS_MAX, &b.runs) < 0)
				goto usage;
		} else if (!strcmp(argv[i], "--memory")) {
			if (bench_parse_count(val, 1, INT32_MAX, &n) < 0)
				goto usage;
			b.memory = val;
		} else if (!strcmp(argv[i], "--cpus")) {
			if (bench_parse_count(val, 1, 1024, &n) < 0)
				goto usage;
			b.cpus = val;
		} else if (!strcmp(argv[i], "--vmm")) {
			b.vmm = val;
		} else if (!strcmp(argv[i], "--payload")) {
			b.payload = val;
		} else if (!strcmp(argv[i], "--dir")) {
			dir = val;
		} else {
			goto usage;
		}
	}
	if (!b.vmm || !b.payload)
		goto usage;
	for (int s = 0; s < SNAPBENCH_NSERIES; s++)
		if (!(b.ms[s] = calloc((size_t)b.runs, sizeof(double)))) {
			fprintf(stderr, "bench-snapshot: out of memory\n");
			return 1;
		}

	/* No SA_RESTART: a signal ends the wait under way with EINTR, which sees the flag. */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	if (snapbench_setup_dir(&b, dir) < 0)
		return 1;
	err = snapbench_run_all(&b);
	snapbench_cleanup(&b);
	if (snapbench_stop) {
		fprintf(stderr, "bench-snapshot: stopped by signal %d in %s\n", (int)snapbench_stop,
			snapbench_phase);
		return 1;
	}
	if (err < 0)
		return 1;

	for (int s = 0; s < SNAPBENCH_NSERIES; s++)
		med[s] = bench_report(snapbench_labels[s], b.ms[s], b.runs);
	printf("snapshot restore_ms=%.2f fork1_ms=%.2f fork16_ms=%.2f parent_pause_ms=%.2f "
	       "snapshot_ms=%.2f cold_start_ms=%.2f\n",
	       med[SNAPBENCH_RESTORE], med[SNAPBENCH_FORK1], med[SNAPBENCH_FORK16],
	       med[SNAPBENCH_FORK1_PAUSE], med[SNAPBENCH_SNAPSHOT], med[SNAPBENCH_COLD]);
	printf("density forks=%d own_mib_total=%.2f own_mib_per_fork=%.2f "
	       "memavailable_drop_mib=%.2f\n",
	       SNAPBENCH_FORKS, b.density.own_mib_total, b.density.own_mib_total / SNAPBENCH_FORKS,
	       b.density.memavailable_drop_mib);
	for (int s = 0; s < SNAPBENCH_NSERIES; s++)
		free(b.ms[s]);
	return 0;
usage:
	snapbench_usage(stderr);
	return 2;
}
