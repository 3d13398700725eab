/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Starting a sandbox's VMM (create, start, restore, fork, resume): its namespace and proxy,
 * its jail's directory, its cgroup, the detached sandbox-vmm itself (a pid namespace of its
 * own, its output in console.log, a lifetime), and the wait until its guest agent answers.
 * A lifecycle verb (client.h): errors as values, in the caller's report.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "api_proto.h"
#include "disk.h"
#include "proto.h"
#include "client.h"

/* The VMM binary: $SANDBOX_VMM, the build tree's (build/tools/sandboxctl/../../vmm), an
 * installed one beside us, else "sandbox-vmm" for execvp's PATH search. */
int find_vmm(char *out, size_t len)
{
	return program_find("SANDBOX_VMM", "vmm", "sandbox-vmm", out, len);
}

/* The VMM stops writing the console at SERIAL_OUT_MAX (vmm.h: 64 MiB): a console.log past
 * half of that becomes console.log.1 (replacing the one before) before a VMM starts, so every
 * start of a long-lived sandbox has room to log. */
static void console_rotate(const char *path)
{
	char old[4300];
	struct stat st;

	if (stat(path, &st) < 0 || st.st_size < (off_t)(32u << 20) ||
	    snprintf(old, sizeof(old), "%s.1", path) >= (int)sizeof(old))
		return;
	(void)rename(path, old);
}

/* The VMM's lifetime options, appended to argv at *argc: --timeout for what is left of the
 * sandbox's --ttl (-ETIME when nothing is), --lifeline for sandboxctl run's pipe. */
static int vmm_lifetime_args(const struct sandbox *sb, char **argv, unsigned *argc, char ttl[24],
			     char lifeline[16])
{
	uint64_t now = (uint64_t)time(NULL), left;

	if (sb->deadline) {
		if (now >= sb->deadline)
			return -ETIME;
		left = sb->deadline - now;
		snprintf(ttl, 24, "%llu",
			 (unsigned long long)(left < CREATE_TTL_MAX_S ? left : CREATE_TTL_MAX_S));
		argv[(*argc)++] = "--timeout";
		argv[(*argc)++] = ttl;
	}
	if (sb->lifeline_fd > 0) {
		snprintf(lifeline, 16, "%d", sb->lifeline_fd);
		argv[(*argc)++] = "--lifeline";
		argv[(*argc)++] = lifeline;
	}
	return 0;
}

/* Start the VMM in its own session with stdin /dev/null and stdout/stderr to `console`:
 * booting the image's kernel, or (src) restoring a snapshot. */
static int spawn_vmm(const struct sandbox *sb, const char *console_opt, const struct boot_src *src,
		     pid_t *pid)
{
	char vmm[PATH_MAX], kernel[4200], initrd[4200], disk[4200], api[4200], vsock[4200];
	char cpus[16], mem[32], console[4200], ns[256], net[320], jail[4200], ttl[24];
	char lifeline[16], state_fd[16], memory_fd[16];
	char cmdline[sizeof(GUEST_CMDLINE " " NET_GUEST_CMDLINE)];
	int err, fd;
	pid_t child;

	if ((err = find_vmm(vmm, sizeof(vmm))) < 0 ||
	    (err = image_path(sb->image, "kernel", kernel, sizeof(kernel))) < 0 ||
	    (err = image_path(sb->image, "initrd", initrd, sizeof(initrd))) < 0 ||
	    (err = sandbox_path(sb, sb->top, disk, sizeof(disk))) < 0 ||
	    (err = sandbox_path(sb, "api.sock", api, sizeof(api))) < 0 ||
	    (err = sandbox_path(sb, "vsock.sock", vsock, sizeof(vsock))) < 0)
		return err;
	if (console_opt)
		err = path_fmt(console, sizeof(console), "%s", console_opt);
	else
		err = sandbox_path(sb, "console.log", console, sizeof(console));
	if (err < 0)
		return err;
	if (!console_opt)
		console_rotate(console);
	snprintf(cpus, sizeof(cpus), "%u", sb->cpus);
	snprintf(mem, sizeof(mem), "%llu", (unsigned long long)sb->memory_mib);
	snprintf(cmdline, sizeof(cmdline), "%s%s", GUEST_CMDLINE,
		 sb->network ? " " NET_GUEST_CMDLINE : "");
	if (sb->network &&
	    ((err = net_ns_path(sb, ns, sizeof(ns))) < 0 ||
	     (err = path_fmt(net, sizeof(net), "tap=" NET_TAP ",netns=%s,mac=" NET_GUEST_MAC, ns)) <
		     0))
		return err;
	char extra[EXTRA_DISKS_MAX][DISK_PATH_MAX + 4];
	char *argv[26 + 2 * EXTRA_DISKS_MAX] = {
		vmm,  "--kernel",  kernel,  "--initrd", initrd, "--disk",
		disk, "--cmdline", cmdline, "--cpus",	cpus,	"--memory",
		mem,  "--api",	   api,	    "--vsock",	vsock};
	unsigned argc = 17;

	if (src) {
		/* The guest, its RAM and vCPUs are the snapshot's; the devices are this
		 * sandbox's, in the same order as when it was taken. The state and memory go
		 * as the fds they were checked through, never to be opened by path again. */
		if (!src->fds || src->fds->state_fd < 0 ||
		    (!src->memory && src->pager_fd <= 0 && src->fds->memory_fd < 0))
			return -EINVAL;
		argc = 0;
		argv[argc++] = vmm;
		argv[argc++] = "--restore";
		argv[argc++] = (char *)src->dir;
		snprintf(state_fd, sizeof(state_fd), "%d", src->fds->state_fd);
		argv[argc++] = "--restore-state-fd";
		argv[argc++] = state_fd;
		if (src->memory) {
			argv[argc++] = "--restore-memory";
			argv[argc++] = (char *)src->memory;
		} else if (src->pager_fd > 0) {
			snprintf(memory_fd, sizeof(memory_fd), "%d", src->pager_fd);
			argv[argc++] = "--restore-memory-pager-fd";
			argv[argc++] = memory_fd;
		} else {
			snprintf(memory_fd, sizeof(memory_fd), "%d", src->fds->memory_fd);
			argv[argc++] = "--restore-memory-fd";
			argv[argc++] = memory_fd;
		}
		argv[argc++] = "--disk";
		argv[argc++] = disk;
		argv[argc++] = "--api";
		argv[argc++] = api;
		argv[argc++] = "--vsock";
		argv[argc++] = vsock;
	}
	if (sb->network) {
		argv[argc++] = "--net";
		argv[argc++] = net;
	}

	for (unsigned i = 0; i < sb->ndisks; i++) {
		snprintf(extra[i], sizeof(extra[i]), "%s%s", sb->disks[i].path,
			 sb->disks[i].ro ? ",ro" : "");
		argv[argc++] = "--disk";
		argv[argc++] = extra[i];
	}
	if (jail_enabled()) {
		if ((err = sandbox_jail_arg(sb, jail, sizeof(jail))) < 0)
			return err;
		argv[argc++] = "--jail";
		argv[argc++] = jail;
	}
	if ((err = vmm_lifetime_args(sb, argv, &argc, ttl, lifeline)) < 0)
		return err;
	argv[argc] = NULL;

	fflush(NULL);
	/* Jailed, the VMM is PID 1 of a pid namespace of its own (sandbox-vmm --jail). */
	child = jail_enabled()
			? (pid_t)syscall(SYS_clone, CLONE_NEWPID | SIGCHLD, NULL, NULL, NULL, NULL)
			: fork();
	if (child < 0)
		return -errno;
	if (child == 0) {
		if ((err = cgroup_enter(sb)) < 0) {
			fprintf(stderr, "sandboxctl: %s: cannot enter its cgroup: %s\n", sb->id,
				strerror(-err));
			_exit(127);
		}
		setsid();
		fd = open("/dev/null", O_RDONLY);
		if (fd >= 0 && fd != 0) {
			dup2(fd, 0);
			close(fd);
		}
		fd = open(console, O_WRONLY | O_CREAT | O_APPEND | O_NOCTTY, 0600);
		if (fd < 0) {
			fprintf(stderr, "sandboxctl: cannot open %s: %m\n", console);
			_exit(127);
		}
		dup2(fd, 1);
		dup2(fd, 2);
		if (fd > 2)
			close(fd);
		/* The fds of ours it inherits: the lifeline, a restore's checked state and
		 * memory. */
		if (sb->lifeline_fd > 0)
			fcntl(sb->lifeline_fd, F_SETFD, 0);
		if (src && src->fds->state_fd >= 0)
			fcntl(src->fds->state_fd, F_SETFD, 0);
		if (src && !src->memory && src->fds->memory_fd >= 0)
			fcntl(src->fds->memory_fd, F_SETFD, 0);
		if (src && src->pager_fd > 0)
			fcntl(src->pager_fd, F_SETFD, 0);
		execvpe(vmm, argv, child_env());
		fprintf(stderr, "sandboxctl: cannot run %s: %m\n", vmm);
		_exit(127);
	}
	*pid = child;
	return 0;
}

/*
 * The socket the VMM connects to when the guest's sandbox-init announces its agent
 * (PROTO_READY_PORT, the guest-to-host vsock path `vsock.sock_53`). Bound before the VMM
 * starts, so the announcement cannot be missed. Returns the listening fd, or -errno (then
 * wait_agent polls the agent instead).
 */
static int ready_listen(const struct sandbox *sb, char *path, size_t len)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	char file[32];
	int fd, err;

	snprintf(file, sizeof(file), "vsock.sock_%u", PROTO_READY_PORT);
	if ((err = sandbox_path(sb, file, path, len)) < 0)
		return err;
	if (strlen(path) >= sizeof(addr.sun_path))
		return -ENAMETOOLONG;
	memcpy(addr.sun_path, path, strlen(path) + 1);
	(void)unlink(path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 || listen(fd, 4) < 0) {
		err = -errno;
		close(fd);
		(void)unlink(path);
		return err;
	}
	return fd;
}

/*
 * Wait for the agent's answer, or the VMM's death, or the deadline. The guest announces its
 * agent on `ready_fd` (when >= 0); only then is the agent pinged, so a booting guest is not
 * interrupted by connection attempts. Without an announcement (an older initramfs, or no
 * ready socket) the agent is pinged every 500 ms (every 50 ms without a ready socket).
 */
static int wait_agent(struct sandbox *sb, pid_t pid, unsigned timeout_s, const char *console,
		      int ready_fd, struct lc_report *rep)
{
	uint64_t deadline = now_ms() + timeout_s * 1000ull, now;
	int status, err = -ETIMEDOUT, pidfd = (int)syscall(SYS_pidfd_open, pid, 0);

	while ((now = now_ms()) < deadline) {
		struct pollfd p[2] = {{.fd = ready_fd, .events = POLLIN},
				      {.fd = pidfd, .events = POLLIN}};
		uint64_t wait = ready_fd >= 0 ? 500 : 50;
		bool announced = false;
		pid_t r;

		if (lc_interrupted(rep)) {
			err = -EINTR;
			break;
		}
		if (wait > deadline - now)
			wait = deadline - now;
		if (poll(p, 2, (int)wait) < 0 && errno != EINTR) {
			err = -errno;
			break;
		}
		if (p[0].revents & POLLIN) {
			int c = accept4(ready_fd, NULL, NULL, SOCK_CLOEXEC);

			if (c >= 0)
				close(c);
			announced = true;
		}
		r = waitpid(pid, &status, WNOHANG);
		if (r == pid) {
			if (pidfd >= 0)
				close(pidfd);
			lc_log(rep, console, 15);
			if (WIFEXITED(status))
				return lc_fail(rep, -ESRCH,
					       "%s: the VMM exited with status %d before the agent "
					       "answered",
					       sb->id, WEXITSTATUS(status));
			return lc_fail(
				rep, -ESRCH,
				"%s: the VMM was killed by signal %d before the agent answered",
				sb->id, WTERMSIG(status));
		}
		if (!announced && (p[0].revents || p[1].revents))
			continue; /* woken for nothing to ping about */
		err = agent_ping(sb, 1000, NULL);
		if (err == 0)
			break;
	}
	if (pidfd >= 0)
		close(pidfd);
	if (err == 0)
		return 0;
	if (err == -EINTR)
		return lc_fail(rep, -ESRCH,
			       "%s: interrupted by signal %d before the agent answered", sb->id,
			       (int)lc_interrupted(rep));
	lc_log(rep, console, 15);
	return lc_fail(rep, -ESRCH,
		       "%s: the guest agent did not answer within %u s (last error: %s)", sb->id,
		       timeout_s, strerror(-err));
}

static void ready_close(int fd, const char *path)
{
	if (fd < 0)
		return;
	close(fd);
	(void)unlink(path);
}

/* How long a restore may go on in all while its memory keeps coming (wait_restored's wait,
 * then the CA's install): timeout_s, or RESTORE_PROGRESS_MAX_S if longer, in ms. */
static uint64_t restore_bound_ms(unsigned timeout_s)
{
	return (timeout_s > RESTORE_PROGRESS_MAX_S ? timeout_s : RESTORE_PROGRESS_MAX_S) * 1000ull;
}

/*
 * A restored guest's agent is up already (it announced itself before the snapshot): connect
 * as soon as the VMM serves vsock.sock, retrying every few milliseconds while the guest
 * drops the connections of before its restore, and on that connection give it new entropy
 * and the host's time before anyone else talks to it (agent_refresh).
 */
static int wait_restored(struct sandbox *sb, pid_t pid, unsigned timeout_s,
			 const struct boot_src *src, const char *console, struct lc_report *r)
{
	uint64_t t0 = now_ms(), deadline = t0 + timeout_s * 1000ull, seen = 0;
	uint64_t cap = t0 + restore_bound_ms(timeout_s);
	bool lazy = src && src->progress;
	struct agent_conn c;
	int err = -ETIMEDOUT, status;

	if (lazy)
		seen = src->progress(src->progress_arg);
	for (;;) {
		uint64_t now = now_ms();

		if (lazy && now < cap) { /* its memory still coming: timeout_s from the last */
			uint64_t v = src->progress(src->progress_arg);

			if (v != seen) {
				seen = v;
				deadline = now + timeout_s * 1000ull < cap
						   ? now + timeout_s * 1000ull
						   : cap;
			}
		}
		if (now >= deadline)
			break;
		if (lc_interrupted(r))
			return lc_fail(
				r, -ESRCH,
				"%s: interrupted by signal %d before the restored agent answered",
				sb->id, (int)lc_interrupted(r));
		if (waitpid(pid, &status, WNOHANG) == pid) {
			lc_log(r, console, 15);
			return lc_fail(r, -ESRCH,
				       "%s: the VMM exited (status 0x%x) before the restored agent "
				       "answered",
				       sb->id, status);
		}
		err = agent_connect(sb, 1000, &c);
		if (err == 0) {
			err = agent_refresh(&c, timeout_s * 1000);
			agent_close(&c);
			if (err < 0)
				return lc_fail(r, -ESRCH,
					       "%s: cannot reseed the restored guest's RNG and set "
					       "its clock: %s",
					       sb->id, strerror(-err));
			return 0;
		}
		usleep(5000);
	}
	lc_log(r, console, 15);
	if (lazy)
		return lc_fail(r, -ESRCH,
			       "%s: the restored guest's agent did not answer within %u s of its "
			       "memory's last page from the store (%llu s in all; last error: %s)",
			       sb->id, timeout_s, (unsigned long long)((now_ms() - t0) / 1000),
			       strerror(-err));
	return lc_fail(r, -ESRCH,
		       "%s: the restored guest's agent did not answer within %u s (last error: %s)",
		       sb->id, timeout_s, strerror(-err));
}

int sandbox_wait_restored(struct sandbox *sb, unsigned timeout_s, struct lc_report *r)
{
	char console[4200];

	if (sandbox_path(sb, "console.log", console, sizeof(console)) < 0)
		console[0] = '\0';
	return wait_restored(sb, sb->pid, timeout_s, NULL, console, r);
}

/* The namespace and the proxy of a networked sandbox, before its VMM. */
static int net_start(const struct sandbox *sb, struct lc_report *r)
{
	char msg[256];
	int err;

	if ((err = net_setup(sb, msg, sizeof(msg))) < 0)
		return lc_fail(r, err, "%s: %s", sb->id, msg[0] ? msg : strerror(-err));
	if ((err = proxy_start(sb)) < 0) {
		char log[4200];

		if (sandbox_path(sb, "proxy.log", log, sizeof(log)) == 0)
			lc_log(r, log, 10);
		net_teardown(sb);
		return lc_fail(r, err, "%s: cannot start its proxy: %s", sb->id, strerror(-err));
	}
	return 0;
}

/* One try of the CA's install, on a connection of its own: 0 or the error. */
static int install_ca_once(const struct sandbox *sb)
{
	struct agent_conn c;
	int err;

	if ((err = agent_connect(sb, 30000, &c)) == 0) {
		err = proxy_install_ca(sb, &c);
		agent_close(&c);
	}
	return err;
}

int sandbox_install_ca(const struct sandbox *sb, struct lc_report *r)
{
	int err = install_ca_once(sb);

	if (err < 0)
		return lc_fail(r, -ESRCH,
			       "%s: cannot put the proxy's CA certificate in the guest: %s", sb->id,
			       strerror(-err));
	return 0;
}

/* The CA put in a restored guest. In a lazy restore its memory may still be coming from the
 * store, and a guest that faults on every page it touches can take longer than one call's
 * bound over it: a try that timed out is made again (the install is idempotent), 200 ms
 * after, as long as its memory came in since the last try and until cap_ms, the bound
 * wait_restored had (one bound for both). Any other failure is the guest's answer. */
static int install_ca_restored(const struct sandbox *sb, const struct boot_src *src,
			       uint64_t cap_ms, struct lc_report *r)
{
	bool lazy = src->progress != NULL;
	uint64_t seen = lazy ? src->progress(src->progress_arg) : 0;
	int err;

	for (;;) {
		if ((err = install_ca_once(sb)) == 0)
			return 0;
		if (!lazy || err != -ETIMEDOUT || now_ms() >= cap_ms || lc_interrupted(r))
			break;
		uint64_t v = src->progress(src->progress_arg);

		if (v == seen)
			break; /* nothing came while it failed: not the store's slowness */
		seen = v;
		usleep(200 * 1000);
	}
	return lc_fail(r, -ESRCH, "%s: cannot put the proxy's CA certificate in the guest: %s",
		       sb->id, strerror(-err));
}

/* The sizes of the writable disks of `sb` that live on tmpfs (or ramfs): there every byte
 * the guest writes is memory charged to its VMM, so its memory limit must hold them. */
static uint64_t tmpfs_disk_bytes(const struct sandbox *sb)
{
	static struct disk_layer_info info;
	const char *paths[1 + EXTRA_DISKS_MAX];
	char top[4200];
	unsigned n = 0;
	uint64_t sum = 0;

	if (sandbox_path(sb, sb->top, top, sizeof(top)) == 0)
		paths[n++] = top;
	for (unsigned i = 0; i < sb->ndisks; i++)
		if (!sb->disks[i].ro)
			paths[n++] = sb->disks[i].path;
	for (unsigned i = 0; i < n; i++) {
		struct disk_error derr = {""};
		struct statfs fs;

		if (statfs(paths[i], &fs) < 0 ||
		    (fs.f_type != TMPFS_MAGIC && fs.f_type != RAMFS_MAGIC) ||
		    disk_inspect(paths[i], &info, &derr) < 0)
			continue;
		if (info.hdr.virtual_len > UINT64_MAX / 4 - sum)
			return UINT64_MAX / 4;
		sum += info.hdr.virtual_len;
	}
	return sum;
}

int sandbox_start_vmm(struct sandbox *sb, const char *console_opt, const struct boot_src *src,
		      unsigned timeout_s, bool no_wait, struct lc_report *r)
{
	char path[4200], pidbuf[48], console[4200], ready_path[4200] = "";
	pid_t pid = 0;
	int err, n, ready_fd = -1;

	if (sb->deadline && (uint64_t)time(NULL) >= sb->deadline) {
		time_t t = (time_t)sb->deadline;
		char when[32];

		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", gmtime(&t));
		return lc_fail(r, -ESRCH,
			       "%s: its lifetime (create --ttl) ended at %s: sandboxctl rm it",
			       sb->id, when);
	}
	/* A layer a jailed VMM made at a snapshot cut short: its top since, if it is what
	 * that snapshot would have made. */
	if ((err = sandbox_adopt_stray_top(sb, r)) < 0)
		return err;
	if (jail_enabled() && (err = sandbox_jail_prepare(sb)) < 0)
		return lc_fail(r, err, "%s: cannot make its directory the VMM's jail: %s", sb->id,
			       strerror(-err));
	/* The cgroup first: the proxy and the VMM enter it as they start. A fork's child
	 * restores the parent's frozen RAM (src->memory). */
	if ((err = cgroup_create(sb, src && src->memory, tmpfs_disk_bytes(sb), path,
				 sizeof(path))) < 0)
		return lc_fail(r, err, "%s: %s", sb->id, path);
	if (err > 0 && path[0]) /* no cgroup here: said once */
		lc_note(r, "%s", path);
	if (sb->network && (err = net_start(sb, r)) < 0) {
		cgroup_remove(sb, r);
		return err;
	}
	/* A restored guest announced its agent before the snapshot: it is pinged instead. */
	if (!no_wait && !src)
		ready_fd = ready_listen(sb, ready_path, sizeof(ready_path));
	if (ready_fd >= 0 && jail_enabled() && (err = sandbox_jail_socket(sb, ready_path)) < 0) {
		lc_note(r, "%s: cannot open %s to the jailed VMM: %s", sb->id, ready_path,
			strerror(-err));
		ready_close(ready_fd, ready_path);
		ready_fd = -1;
	}
	if ((err = spawn_vmm(sb, console_opt, src, &pid)) < 0) {
		ready_close(ready_fd, ready_path);
		if (sb->network) {
			proxy_stop(sb);
			net_teardown(sb);
		}
		cgroup_remove(sb, r);
		return lc_fail(r, err, "%s: cannot start the VMM: %s", sb->id, strerror(-err));
	}
	sb->pid = pid;
	sb->pid_start = 0;
	if (pid_start_time(pid, &sb->pid_start) < 0)
		sb->pid_start = 0;
	n = snprintf(pidbuf, sizeof(pidbuf), "%d %llu\n", (int)pid,
		     (unsigned long long)sb->pid_start);
	if ((err = sandbox_path(sb, "pid", path, sizeof(path))) < 0 ||
	    (err = write_file_atomic(path, pidbuf, (size_t)n, 0600)) < 0) {
		ready_close(ready_fd, ready_path);
		return lc_fail(r, err, "%s: cannot write the pid file: %s", sb->id, strerror(-err));
	}
	if (console_opt)
		snprintf(console, sizeof(console), "%s", console_opt);
	else if (sandbox_path(sb, "console.log", console, sizeof(console)) < 0)
		console[0] = '\0';
	/* (the restore's bound, wait_restored's and then the CA's) */
	uint64_t cap_ms = now_ms() + restore_bound_ms(timeout_s);

	if (no_wait)
		err = 0;
	else if (src)
		err = wait_restored(sb, pid, timeout_s, src, console, r);
	else
		err = wait_agent(sb, pid, timeout_s, console, ready_fd, r);
	ready_close(ready_fd, ready_path);
	if (err < 0)
		return err;
	/* A booted guest's pages touched from here are what a restore of its snapshots would
	 * touch first (docs/snapshots.md, touched-pages), not its boot's. A hint: an answer of
	 * an older VMM or a failure changes nothing else. */
	if (!src && !no_wait) {
		int32_t e = 0;

		/* (an older VMM's -EOPNOTSUPP: nothing to say) */
		if ((api_call(sb, API_TOUCH_MARK, 5000, &e, NULL) < 0 || e != 0) &&
		    e != -EOPNOTSUPP)
			lc_note(r, "%s: its touched pages count from its boot (%s)", sb->id,
				strerror(e ? -e : EIO));
	}
	/* A restored guest may come from a snapshot without this sandbox's CA (a ready one). */
	if (src && !no_wait && sb->network)
		return install_ca_restored(sb, src, cap_ms, r);
	return 0;
}
