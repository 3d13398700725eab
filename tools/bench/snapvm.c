/* SPDX-License-Identifier: Apache-2.0 */
/* The VMMs under test of bench-snapshot, as snapvm.h describes them. */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
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
#include "client.h"
#include "snapvm.h"

#define SNAPVM_RETRY_NS	   1000000 /* before connecting again to a guest */
#define SNAPVM_VMM_TIMEOUT "600"   /* every VMM's --timeout, in seconds */
#define SNAPVM_PORT	   "1234"  /* payload-snap's */
#define SNAPVM_SHOW_LINES  8	   /* lines of a failed VMM's log and console shown */

volatile sig_atomic_t snapvm_signal;

/* The run under way, for messages: "fork16 run 3/10", say. */
static char snapvm_phase[64] = "setup";

void snapvm_set_phase(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(snapvm_phase, sizeof(snapvm_phase), fmt, ap);
	va_end(ap);
}

void snapvm_msg(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "bench-snapshot: %s: ", snapvm_phase);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* A unix stream socket connected to path, non-blocking, in *fd. 0 or -errno. */
__attribute__((warn_unused_result)) static int snapvm_connect(const char *path, int *fd)
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
__attribute__((warn_unused_result)) static int snapvm_send(int fd, const void *buf, size_t len)
{
	ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);

	if (n < 0)
		return errno == EPIPE ? -ECONNRESET : -errno;
	return (size_t)n == len ? 0 : -EAGAIN;
}

int snapvm_api_simple(const char *api_path, uint16_t type, const char *what)
{
	char body[API_ERROR_MSG_MAX + 1];
	int32_t error = 0;
	size_t n = 0;
	int err = api_request_path(api_path, type, NULL, 0, SNAPVM_WAIT_MS, &error, body,
				   sizeof(body) - 1, &n);

	body[n] = '\0';
	if (err < 0)
		snapvm_msg("%s over %s: %s", what, api_path, strerror(-err));
	else if (error)
		snapvm_msg("%s: the VMM says %s", what, n ? body : strerror(-error));
	return err < 0 ? err : error ? -EIO : 0;
}

int snapvm_snapshot(const char *api_path, uint32_t flags, const char *dir, struct snapvm_snap *out)
{
	struct api_snapshot_out res;
	char msg[API_ERROR_MSG_MAX];
	int err = api_snapshot_path(api_path, flags, dir, NULL, 0, SNAPVM_WAIT_MS, &res, msg,
				    sizeof(msg));

	if (err < 0) {
		snapvm_msg("SNAPSHOT into %s over %s: %s", dir, api_path,
			   msg[0] ? msg : strerror(-err));
		return msg[0] ? -EIO : err;
	}
	out->pause_us = res.pause_us;
	out->total_us = res.total_us;
	out->memory_bytes = res.memory_bytes;
	snprintf(out->memory, sizeof(out->memory), "%s", res.memory_path);
	if ((flags & API_SNAPSHOT_LIVE) && !out->memory[0]) {
		snapvm_msg("SNAPSHOT into %s: a live snapshot's reply names no memory", dir);
		return -EPROTO;
	}
	return 0;
}

/* nftw's callback for snapvm_rmtree: remove each entry, the deepest first. */
static int snapvm_rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	if (remove(path) < 0 && errno != ENOENT)
		fprintf(stderr, "bench-snapshot: cannot remove %s: %s\n", path, strerror(errno));
	return 0;
}

void snapvm_rmtree(const char *path)
{
	if (nftw(path, snapvm_rm_entry, 16, FTW_DEPTH | FTW_PHYS) < 0 && errno != ENOENT)
		fprintf(stderr, "bench-snapshot: cannot walk %s: %s\n", path, strerror(errno));
}

/* Prints the last SNAPVM_SHOW_LINES lines of path (what a failed VMM said) to stderr. */
static void snapvm_show_tail(const char *path)
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
		if (p[-1] == '\n' && ++lines == SNAPVM_SHOW_LINES)
			break;
	fprintf(stderr, "bench-snapshot: %s ends:\n", path);
	while (*p) {
		size_t len = strcspn(p, "\n");

		fprintf(stderr, "bench-snapshot:   | %.*s\n", (int)len, p);
		p += len + (p[len] == '\n');
	}
}

/* Shows vm's log and console on stderr, after a message said what it failed to do. */
static void snapvm_show(const struct snapvm *vm)
{
	char path[SNAPVM_PATH_MAX + 16];

	if (!path_fmt(path, sizeof(path), "%s/vmm.log", vm->dir))
		snapvm_show_tail(path);
	if (!path_fmt(path, sizeof(path), "%s/console.log", vm->dir))
		snapvm_show_tail(path);
}

int snapvm_start(struct snapvm *vm, const char *vmm, const char *dir, const char *const *args)
{
	char console[SNAPVM_PATH_MAX], log[SNAPVM_PATH_MAX];
	char *argv[24]; /* the VMM, at most 6 of args, 8 of ours, NULL */
	int n = 0, fd, err;

	if ((err = path_fmt(vm->dir, sizeof(vm->dir), "%s", dir)) < 0 ||
	    (err = path_fmt(vm->vsock, sizeof(vm->vsock), "%s/v.sock", vm->dir)) < 0 ||
	    (err = path_fmt(vm->api, sizeof(vm->api), "%s/api.sock", vm->dir)) < 0 ||
	    (err = path_fmt(console, sizeof(console), "%s/console.log", vm->dir)) < 0 ||
	    (err = path_fmt(log, sizeof(log), "%s/vmm.log", vm->dir)) < 0) {
		snapvm_msg("%s: paths too long for a unix socket", dir);
		return err;
	}
	if (mkdir(vm->dir, 0700) < 0) {
		err = -errno;
		snapvm_msg("cannot make %s: %s", vm->dir, strerror(errno));
		vm->dir[0] = '\0'; /* not ours to remove */
		return err;
	}
	fd = open(log, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		err = -errno;
		snapvm_msg("cannot make %s: %s", log, strerror(errno));
		return err;
	}
	argv[n++] = (char *)vmm;
	while (*args)
		argv[n++] = (char *)*args++;
	argv[n++] = "--vsock";
	argv[n++] = vm->vsock;
	argv[n++] = "--api";
	argv[n++] = vm->api;
	argv[n++] = "--console";
	argv[n++] = console;
	argv[n++] = "--timeout";
	argv[n++] = SNAPVM_VMM_TIMEOUT;
	argv[n] = NULL;
	err = bench_spawn_cmd(argv, fd, BENCH_SPAWN_ERR_OUT, &vm->pid);
	close(fd);
	if (err < 0) {
		vm->pid = 0;
		snapvm_msg("cannot run %s: %s", vmm, strerror(-err));
	}
	return err;
}

void snapvm_kill(struct snapvm *vm)
{
	if (vm->pid > 0) {
		kill(vm->pid, SIGKILL);
		while (waitpid(vm->pid, NULL, 0) < 0 && errno == EINTR)
			;
		vm->pid = 0;
	}
	if (vm->dir[0])
		snapvm_rmtree(vm->dir);
	vm->dir[0] = '\0';
}

/* Whether vm's VMM still runs; if it ended, it is reaped and a message says how. */
static bool snapvm_alive(struct snapvm *vm)
{
	int status;

	if (vm->pid <= 0 || waitpid(vm->pid, &status, WNOHANG) != vm->pid)
		return vm->pid > 0;
	vm->pid = 0;
	if (WIFEXITED(status))
		snapvm_msg("the VMM in %s exited with status %d", vm->dir, WEXITSTATUS(status));
	else
		snapvm_msg("the VMM in %s was killed by signal %d", vm->dir, WTERMSIG(status));
	return false;
}

/* Closes vm's connection to its guest; the next try connects again SNAPVM_RETRY_NS later. */
static void snapvm_probe_drop(struct snapvm *vm, int64_t now_ns)
{
	if (vm->fd >= 0)
		close(vm->fd);
	vm->fd = -1;
	vm->have = 0;
	vm->state = SNAPVM_PROBE_IDLE;
	vm->retry_ns = now_ns + SNAPVM_RETRY_NS;
}

/*
 * Connects to vm's guest and sends CONNECT; a socket not there yet, refused or closed at
 * once is tried again later, unless the VMM ended. 0, or a negative number after a message.
 */
__attribute__((warn_unused_result)) static int snapvm_probe_connect(struct snapvm *vm,
								    int64_t now_ns)
{
	int err = snapvm_connect(vm->vsock, &vm->fd);

	if (!err && (err = snapvm_send(vm->fd, "CONNECT " SNAPVM_PORT "\n", 13)) == 0) {
		vm->state = SNAPVM_PROBE_OK;
		return 0;
	}
	snapvm_probe_drop(vm, now_ns);
	if (err != -ENOENT && err != -ECONNREFUSED && err != -EAGAIN && err != -ECONNRESET) {
		snapvm_msg("connecting to %s: %s", vm->vsock, strerror(-err));
		return err;
	}
	return snapvm_alive(vm) ? 0 : -ECHILD;
}

/*
 * One line from vm's guest (its newline cut): "OK <n>" to CONNECT, then ping is sent; the
 * answer to ping ends the probe with the guest's seed. 0, or a negative number after a message.
 */
__attribute__((warn_unused_result)) static int snapvm_probe_line(struct snapvm *vm,
								 const char *line, int64_t now_ns)
{
	const char *seed = strstr(line, " seed=");

	if (vm->state == SNAPVM_PROBE_OK) {
		if (strncmp(line, "OK ", 3)) {
			snapvm_msg("CONNECT " SNAPVM_PORT " on %s: the VMM answered '%s'",
				   vm->vsock, line);
			return -EPROTO;
		}
		vm->state = SNAPVM_PROBE_PONG;
		if (snapvm_send(vm->fd, "ping\n", 5) < 0)
			snapvm_probe_drop(vm, now_ns); /* closed meanwhile: from the top */
		return 0;
	}
	if (strncmp(line, "pong counter=", 13) || !seed || strlen(seed + 6) >= sizeof(vm->seed)) {
		snapvm_msg("the guest in %s answered ping with '%s'", vm->dir, line);
		return -EPROTO;
	}
	strcpy(vm->seed, seed + 6);
	vm->answer_ns = now_ns;
	snapvm_probe_drop(vm, now_ns);
	vm->state = SNAPVM_PROBE_DONE;
	return 0;
}

/*
 * Takes what vm's guest sent and acts on each line in it. A connection closed before the
 * answer (the VMM drops those made before a restored guest reset its device) is tried again.
 * 0, or a negative number after a message.
 */
__attribute__((warn_unused_result)) static int snapvm_probe_read(struct snapvm *vm, int64_t now_ns)
{
	ssize_t n =
		recv(vm->fd, vm->line + vm->have, sizeof(vm->line) - 1 - vm->have, MSG_DONTWAIT);
	char *start = vm->line, *nl;
	int err;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n < 0 && errno != ECONNRESET) {
		snapvm_msg("reading %s: %s", vm->vsock, strerror(errno));
		return -errno;
	}
	if (n <= 0) {
		snapvm_probe_drop(vm, now_ns);
		return 0;
	}
	vm->have += (size_t)n;
	while (vm->state != SNAPVM_PROBE_DONE &&
	       (nl = memchr(start, '\n', vm->have - (size_t)(start - vm->line)))) {
		*nl = '\0';
		if ((err = snapvm_probe_line(vm, start, now_ns)) < 0)
			return err;
		start = nl + 1;
		if (vm->fd < 0)
			return 0; /* dropped or done: what followed is of no use */
	}
	vm->have -= (size_t)(start - vm->line);
	memmove(vm->line, start, vm->have);
	if (vm->have == sizeof(vm->line) - 1) {
		snapvm_msg("%s: a line longer than %zu bytes", vm->vsock, vm->have);
		return -EMSGSIZE;
	}
	return 0;
}

int snapvm_ping_all(struct snapvm *vms, int n, int64_t deadline_ns, const char *want_seed)
{
	struct pollfd pfds[SNAPVM_PING_MAX];
	struct snapvm *at[SNAPVM_PING_MAX], *bad = NULL;
	int err = 0, left = n;

	if (n > SNAPVM_PING_MAX)
		return -E2BIG;
	for (int i = 0; i < n; i++) {
		vms[i].fd = -1;
		vms[i].have = 0;
		vms[i].state = SNAPVM_PROBE_IDLE;
		vms[i].retry_ns = 0;
	}
	while (left > 0) {
		int64_t now_ns = bench_clock_ns(), wake_ns = deadline_ns;
		int npfds = 0, ret;

		if (snapvm_signal || now_ns >= deadline_ns) {
			err = snapvm_signal ? -EINTR : -ETIMEDOUT;
			goto out;
		}
		for (int i = 0; i < n; i++) {
			struct snapvm *vm = &vms[i];

			if (vm->state == SNAPVM_PROBE_IDLE && vm->retry_ns <= now_ns &&
			    (err = snapvm_probe_connect(vm, now_ns)) < 0) {
				bad = vm;
				goto out;
			}
			if (vm->state == SNAPVM_PROBE_IDLE && vm->retry_ns < wake_ns)
				wake_ns = vm->retry_ns;
			if (vm->fd >= 0) {
				pfds[npfds] = (struct pollfd){.fd = vm->fd, .events = POLLIN};
				at[npfds++] = vm;
			}
		}
		/* Rounded up: a poll that wakes a little early just goes round again. */
		ret = poll(pfds, (nfds_t)npfds, (int)((wake_ns - now_ns + 999999) / 1000000));
		if (ret < 0 && errno != EINTR) {
			err = -errno;
			snapvm_msg("poll: %s", strerror(errno));
			goto out;
		}
		now_ns = bench_clock_ns();
		for (int i = 0; ret > 0 && i < npfds; i++) {
			struct snapvm *vm = at[i];

			if (!pfds[i].revents)
				continue;
			if ((err = snapvm_probe_read(vm, now_ns)) < 0) {
				bad = vm;
				goto out;
			}
			if (vm->state != SNAPVM_PROBE_DONE)
				continue;
			left--;
			if (want_seed && strcmp(vm->seed, want_seed)) {
				snapvm_msg("the guest in %s has seed %s, the parent %s", vm->dir,
					   vm->seed, want_seed);
				err = -EBADMSG;
				bad = vm;
				goto out;
			}
		}
	}
out:
	for (int i = 0; i < n; i++) {
		if (vms[i].fd >= 0)
			close(vms[i].fd);
		vms[i].fd = -1;
		if (err == -ETIMEDOUT && vms[i].state != SNAPVM_PROBE_DONE) {
			snapvm_msg("no ping answer from the guest in %s in %d ms", vms[i].dir,
				   SNAPVM_WAIT_MS);
			snapvm_show(&vms[i]);
		}
	}
	if (bad)
		snapvm_show(bad);
	return err;
}
