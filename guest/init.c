/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sandbox-init: PID 1 of the guest. Sets up the minimal system (console, pseudo filesystems,
 * hostname), reads its options from the kernel command line, prints the readiness banner
 * "sandbox-init: ready uptime_ms=<N>" that the host waits for, then does what the command line
 * asks: reset the VM (the default), crash the kernel (sandbox.panic=1, for tests of the VMM's
 * panic status) or stay up and serve the guest agent (sandbox.reboot=0): listen on vsock port
 * PROTO_VSOCK_PORT and run the agent loop of agent.c forever (it reaps every child). Without a
 * vsock device init logs a warning and only reaps.
 *
 * With sandbox.root=/dev/vda, init boots from that disk before the banner: it waits for the
 * device, mounts it on /newroot, moves its own mounts (/dev, /proc, /sys, /run, /tmp, with what
 * is mounted under them) there and makes /newroot the root as switch_root(8) does, but stays
 * PID 1 instead of exec'ing another init. A root that cannot be used is a clear error line
 * and a reset of the VM, never a guest running half-way on the initramfs.
 *
 * PID 1 must never exit by accident (the kernel panics when it does), so every other failure
 * before the banner is logged and init carries on with what it has; main() only returns on
 * purpose.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sys/socket.h>
#include <linux/vm_sockets.h>

#include "agent.h"
#include "cmdline.h"
#include "net.h"
#include "growfs.h"
#include "init.h"
#include "log.h"

#define INIT_HOSTNAME	  "sandbox"
#define INIT_CONSOLE_PATH "/dev/console"
#define INIT_CMDLINE_PATH "/proc/cmdline"
#define INIT_SYSRQ_PATH	  "/proc/sysrq-trigger"
#define INIT_DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define INIT_NEWROOT_PATH "/newroot"

/* How long init waits for the root device to appear, and how often it looks. */
#define INIT_ROOT_WAIT_MS 5000
#define INIT_ROOT_POLL_MS 10

/* Mount policy bits. */
#define INIT_MOUNT_OPTIONAL 0x1u /* a failure is a warning: the kernel may lack this fs */
#define INIT_MOUNT_BUSY_OK  0x2u /* EBUSY means the kernel already mounted it there */

/* One filesystem init mounts, in table order (a target may live on an earlier mount). */
struct init_mount {
	const char *source;
	const char *target;
	const char *fstype;
	unsigned long flags;
	const char *data;
	unsigned int policy;
};

static const struct init_mount init_mounts[] = {
	{"proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL, 0},
	{"sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL, 0},
	{"devtmpfs", "/dev", "devtmpfs", MS_NOSUID, NULL, INIT_MOUNT_BUSY_OK},
	{"devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "gid=5,mode=0620,ptmxmode=0666", 0},
	{"tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777", 0},
	{"tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777", 0},
	{"tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755", 0},
	{"cgroup2", "/sys/fs/cgroup", "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL,
	 INIT_MOUNT_OPTIONAL},
};

/*
 * The mounts of init_mounts that move into the new root. A move takes the submounts with it
 * (/dev/pts, /dev/shm, /sys/fs/cgroup), so only the top ones are listed.
 */
static const char *const init_moved_mounts[] = {"/dev", "/proc", "/sys", "/run", "/tmp"};

/* One symlink in /dev that programs expect and devtmpfs does not provide. */
struct init_link {
	const char *target;
	const char *path;
};

static const struct init_link init_dev_links[] = {
	{"/proc/self/fd", "/dev/fd"},
	{"/proc/self/fd/0", "/dev/stdin"},
	{"/proc/self/fd/1", "/dev/stdout"},
	{"/proc/self/fd/2", "/dev/stderr"},
};

/*
 * SIGCHLD handler. It does nothing: its only job is to make sigsuspend() return so the waiting
 * loop reaps. (A signal left at its default disposition, ignore for SIGCHLD, would not wake it.)
 */
static void init_handle_sigchld(int sig)
{
}

/*
 * Install the SIGCHLD handler and block SIGCHLD, so that it is only taken where init chooses
 * to (sigsuspend, or a signalfd in the agent) and never races with a check. Returns 0 or -errno.
 */
static __attribute__((warn_unused_result)) int init_setup_signals(void)
{
	struct sigaction sa;
	sigset_t mask;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = init_handle_sigchld;
	sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGCHLD, &sa, NULL) < 0)
		return -errno;

	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
		return -errno;
	return 0;
}

/* Reap every exited child without blocking; see init.h. */
int init_reap_children(void)
{
	int saved_errno = errno;
	int count = 0;
	int rc;

	for (;;) {
		pid_t pid = waitpid(-1, NULL, WNOHANG);

		if (pid > 0) {
			count++;
			continue;
		}
		if (pid == 0) {
			rc = count;
			goto out;
		}
		if (errno == EINTR)
			continue;
		rc = errno == ECHILD ? count : -errno;
		goto out;
	}
out:
	errno = saved_errno;
	return rc;
}

/*
 * Make sure fds 0, 1 and 2 are open, on /dev/console for any that is not. The kernel normally
 * opens them for init, but cannot when the initramfs lacks /dev/console. Returns 0 or -errno
 * (the console does not exist yet, or a dup2 failed).
 */
static __attribute__((warn_unused_result)) int init_open_console(void)
{
	bool missing[3];
	bool any_missing = false;
	int fd, i;
	int rc = 0;

	for (i = 0; i < 3; i++) {
		missing[i] = fcntl(i, F_GETFD) < 0 && errno == EBADF;
		any_missing = any_missing || missing[i];
	}
	if (!any_missing)
		return 0;

	/* the lowest free fd, so this is the first missing one */
	fd = open(INIT_CONSOLE_PATH, O_RDWR | O_NOCTTY);
	if (fd < 0)
		return -errno;
	for (i = 0; i < 3; i++) {
		if (missing[i] && fd != i && dup2(fd, i) < 0) {
			rc = -errno;
			goto out;
		}
	}
out:
	if (fd > 2)
		close(fd);
	return rc;
}

/*
 * Create the mount point of m (if missing) and mount m there. Logs its own failure: as an
 * error for a required mount, as a warning for an optional one. Returns 0, or -errno for a
 * required mount that failed.
 */
static __attribute__((warn_unused_result)) int init_mount_one(const struct init_mount *m)
{
	bool optional = m->policy & INIT_MOUNT_OPTIONAL;
	const char *what;
	int err;

	if (mkdir(m->target, 0755) < 0 && errno != EEXIST) {
		what = "mkdir";
		err = errno;
		goto fail;
	}
	if (mount(m->source, m->target, m->fstype, m->flags, m->data) < 0) {
		if (errno == EBUSY && (m->policy & INIT_MOUNT_BUSY_OK))
			return 0;
		what = "mount";
		err = errno;
		goto fail;
	}
	return 0;

fail:
	if (optional) {
		log_warn("%s %s on %s: %s; continuing without it", what, m->fstype, m->target,
			 strerror(err));
		return 0;
	}
	log_error("%s %s on %s: %s", what, m->fstype, m->target, strerror(err));
	return -err;
}

/*
 * Mount every filesystem of init_mounts, in order, going on after a failure so that as much
 * of the system as possible comes up. Returns 0, or the first -errno of a required mount.
 */
static __attribute__((warn_unused_result)) int init_mount_all(void)
{
	int rc = 0;
	size_t i;

	for (i = 0; i < sizeof(init_mounts) / sizeof(init_mounts[0]); i++) {
		int err = init_mount_one(&init_mounts[i]);

		if (err < 0 && rc == 0)
			rc = err;
	}
	return rc;
}

/*
 * Create the /dev symlinks of init_dev_links (an existing entry is left alone). A failure is
 * logged as a warning: nothing in init needs them.
 */
static void init_link_dev(void)
{
	size_t i;

	for (i = 0; i < sizeof(init_dev_links) / sizeof(init_dev_links[0]); i++) {
		const struct init_link *l = &init_dev_links[i];

		if (symlink(l->target, l->path) < 0 && errno != EEXIST)
			log_warn("symlink %s -> %s: %s", l->path, l->target, strerror(errno));
	}
}

/* Set the hostname to INIT_HOSTNAME. Returns 0 or -errno. */
static __attribute__((warn_unused_result)) int init_set_hostname(void)
{
	if (sethostname(INIT_HOSTNAME, strlen(INIT_HOSTNAME)) < 0)
		return -errno;
	return 0;
}

/*
 * Give the environment a PATH; the kernel starts init with only HOME and TERM. Children that
 * init starts inherit it. Returns 0 or -errno.
 */
static __attribute__((warn_unused_result)) int init_set_env(void)
{
	if (setenv("PATH", INIT_DEFAULT_PATH, 0) < 0)
		return -errno;
	return 0;
}

/*
 * Read /proc/cmdline (at most CMDLINE_MAX_LEN bytes; anything longer is logged and cut) and
 * parse it into opts, which must hold the defaults already. Returns 0 or -errno; opts keeps
 * the defaults for whatever could not be read.
 */
static __attribute__((warn_unused_result)) int init_read_cmdline(struct cmdline_options *opts)
{
	char buf[CMDLINE_MAX_LEN + 1];
	size_t len = 0;
	int fd, rc = 0;

	fd = open(INIT_CMDLINE_PATH, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;

	/* one byte more than accepted, to tell "exactly full" from "too long" */
	while (len < sizeof(buf)) {
		ssize_t n = read(fd, buf + len, sizeof(buf) - len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			rc = -errno;
			goto out;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	if (len > CMDLINE_MAX_LEN) {
		log_warn("kernel command line longer than %d bytes; using the first %d",
			 CMDLINE_MAX_LEN, CMDLINE_MAX_LEN);
		len = CMDLINE_MAX_LEN;
	}
	rc = cmdline_parse(buf, len, opts);
out:
	close(fd);
	return rc;
}

/* Store in *now_ms the CLOCK_MONOTONIC time in ms. Returns 0 or -errno. */
static __attribute__((warn_unused_result)) int init_get_monotonic_ms(uint64_t *now_ms)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_MONOTONIC, &ts) < 0)
		return -errno;
	*now_ms = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
	return 0;
}

/*
 * Wait until path exists (devtmpfs creates the node when the driver has probed the disk),
 * looking every INIT_ROOT_POLL_MS for at most INIT_ROOT_WAIT_MS. Returns 0 once it is a block
 * device, -ENOTBLK if it is something else, -ETIMEDOUT if it never appeared, or the -errno of
 * a stat() that failed for another reason than its absence.
 */
static __attribute__((warn_unused_result)) int init_wait_for_device(const char *path)
{
	const struct timespec poll = {0, INIT_ROOT_POLL_MS * 1000000L};
	uint64_t start_ms = 0, now_ms = 0;
	struct stat st;
	int rc;

	rc = init_get_monotonic_ms(&start_ms);
	if (rc < 0)
		return rc;
	for (;;) {
		if (stat(path, &st) == 0)
			return S_ISBLK(st.st_mode) ? 0 : -ENOTBLK;
		if (errno != ENOENT && errno != ENXIO && errno != ENODEV)
			return -errno;
		rc = init_get_monotonic_ms(&now_ms);
		if (rc < 0)
			return rc;
		if (now_ms - start_ms >= INIT_ROOT_WAIT_MS)
			return -ETIMEDOUT;
		nanosleep(&poll, NULL); /* EINTR only shortens one poll */
	}
}

/*
 * Move each mount of init_moved_mounts (and what is mounted under it) to the same path under
 * INIT_NEWROOT_PATH, creating the mount point if the image lacks it. Logs its own failure.
 * Returns 0 or -errno.
 */
static __attribute__((warn_unused_result)) int init_move_mounts(void)
{
	char target[sizeof(INIT_NEWROOT_PATH) + 16];
	size_t i;

	for (i = 0; i < sizeof(init_moved_mounts) / sizeof(init_moved_mounts[0]); i++) {
		const char *path = init_moved_mounts[i];
		int n = snprintf(target, sizeof(target), "%s%s", INIT_NEWROOT_PATH, path);

		if (n < 0 || (size_t)n >= sizeof(target))
			return -ENAMETOOLONG; /* not reached: the paths above are short */
		if (mkdir(target, 0755) < 0 && errno != EEXIST) {
			int err = errno;

			log_error("root: mkdir %s: %s", path, strerror(err));
			return -err;
		}
		if (mount(path, target, NULL, MS_MOVE, NULL) < 0) {
			int err = errno;

			log_error("root: moving the %s mount: %s", path, strerror(err));
			return -err;
		}
	}
	return 0;
}

/*
 * Boot from the disk opts->root: wait for it, mount it (opts->rootfstype, read-write unless
 * sandbox.rw=0) on INIT_NEWROOT_PATH, move init's mounts there, then make it the root as
 * switch_root(8) does: chdir into it, move it onto "/" and chroot there (pivot_root does not
 * work on the initramfs). init stays PID 1. The initramfs is left as it is: besides a few
 * empty directories it holds only this program, whose pages stay mapped while init runs, so
 * deleting it would free next to nothing. Logs its own failure ("error: root: ...").
 * Returns 0 or -errno; after a failure the system is half-moved and only fit for a reset.
 */
static __attribute__((warn_unused_result)) int init_switch_root(const struct cmdline_options *opts)
{
	/* noatime: reads must not dirty the copy-on-write layers under the disk */
	unsigned long flags = MS_NOATIME | (opts->root_rw ? 0 : MS_RDONLY);
	const char *mode = opts->root_rw ? "rw" : "ro";
	int rc;

	rc = init_wait_for_device(opts->root);
	if (rc == -ETIMEDOUT) {
		log_error("root: %s did not appear within %d ms (no disk attached?)", opts->root,
			  INIT_ROOT_WAIT_MS);
		return rc;
	}
	if (rc < 0) {
		log_error("root: %s: %s", opts->root, strerror(-rc));
		return rc;
	}
	if (mkdir(INIT_NEWROOT_PATH, 0755) < 0 && errno != EEXIST) {
		rc = -errno;
		log_error("root: mkdir %s: %s", INIT_NEWROOT_PATH, strerror(-rc));
		return rc;
	}
	if (mount(opts->root, INIT_NEWROOT_PATH, opts->rootfstype, flags, NULL) < 0) {
		rc = -errno;
		log_error("root: mounting %s (%s, %s): %s", opts->root, opts->rootfstype, mode,
			  strerror(-rc));
		return rc;
	}
	rc = init_move_mounts();
	if (rc < 0)
		return rc;
	if (chdir(INIT_NEWROOT_PATH) < 0 || mount(".", "/", NULL, MS_MOVE, NULL) < 0 ||
	    chroot(".") < 0 || chdir("/") < 0) {
		rc = -errno;
		log_error("root: switching to %s: %s", INIT_NEWROOT_PATH, strerror(-rc));
		return rc;
	}
	log_info("root %s (%s, %s)", opts->root, opts->rootfstype, mode);
	if (opts->root_rw && strcmp(opts->rootfstype, "ext4") == 0) {
		int grew;

		/* A disk made larger than its image: the file system follows it. */
		rc = growfs_ext4(opts->root, "/", &grew);
		if (rc < 0)
			log_warn("root: growing the file system to the disk: %s", strerror(-rc));
		else if (grew)
			log_info("root: file system grown to fill %s", opts->root);
	}
	return 0;
}

/* Store in *uptime_ms the time since the kernel booted, in ms. Returns 0 or -errno. */
static __attribute__((warn_unused_result)) int init_get_uptime(uint64_t *uptime_ms)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_BOOTTIME, &ts) < 0)
		return -errno;
	*uptime_ms = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
	return 0;
}

/*
 * Print the one readiness line the host waits for: "sandbox-init: ready uptime_ms=<N>\n",
 * where N is the kernel's uptime in ms (0 if the clock could not be read).
 */
static void init_banner(void)
{
	uint64_t uptime_ms = 0;
	int rc = init_get_uptime(&uptime_ms);

	if (rc < 0)
		log_warn("clock_gettime(CLOCK_BOOTTIME): %s", strerror(-rc));
	log_info("ready uptime_ms=%" PRIu64, uptime_ms);
}

/*
 * Crash the kernel on purpose through /proc/sysrq-trigger ('c'), after a sync. Returns only
 * if that did not work: -errno, or 0 if the write was accepted but no crash followed. The
 * caller then exits PID 1, which makes the kernel panic too ("Attempted to kill init").
 */
static __attribute__((warn_unused_result)) int init_trigger_panic(void)
{
	int fd, rc = 0;

	sync();
	fd = open(INIT_SYSRQ_PATH, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (write(fd, "c", 1) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

/*
 * Shut the VM down: sync, then reboot(RB_AUTOBOOT). The VMM boots the kernel with reboot=k,
 * so the kernel resets through the i8042 (0xfe to port 0x64) and the VMM exits 0. Returns only
 * on failure, with -errno.
 */
static __attribute__((warn_unused_result)) int init_shutdown(void)
{
	sync();
	if (reboot(RB_AUTOBOOT) < 0)
		return -errno;
	return -EAGAIN; /* not reached: a successful reboot does not return */
}

/*
 * The agent's SHUTDOWN: sync, then reset the VM (or power it off with PROTO_SHUTDOWN_POWEROFF).
 * Returns only on failure, with -errno.
 */
static int init_agent_shutdown(uint32_t flags)
{
	sync();
	if (reboot(flags & PROTO_SHUTDOWN_POWEROFF ? RB_POWER_OFF : RB_AUTOBOOT) < 0)
		return -errno;
	return -EAGAIN; /* not reached */
}

/*
 * Tell the host the agent listens: connect to the host's PROTO_READY_PORT, write
 * PROTO_READY_LINE, close. Nobody may be listening there (a `start --no-wait`): the VMM then
 * resets the connection at once. Best effort, bounded by a 1 s connect timeout.
 */
static void init_announce_ready(void)
{
	struct sockaddr_vm addr;
	struct timeval tv = {.tv_sec = 1};
	int fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return;
	memset(&addr, 0, sizeof(addr));
	addr.svm_family = AF_VSOCK;
	addr.svm_cid = VMADDR_CID_HOST;
	addr.svm_port = PROTO_READY_PORT;
	(void)setsockopt(fd, AF_VSOCK, SO_VM_SOCKETS_CONNECT_TIMEOUT, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0)
		(void)!write(fd, PROTO_READY_LINE, sizeof(PROTO_READY_LINE) - 1);
	close(fd);
}

/*
 * Listen on AF_VSOCK port PROTO_VSOCK_PORT (any CID) and run the agent there. Returns only if
 * that fails (no vsock device, or the loop could not be set up), with -errno.
 */
static __attribute__((warn_unused_result)) int init_run_agent(void)
{
	struct sockaddr_vm addr;
	struct agent_config cfg;
	int fd, rc;

	fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	memset(&addr, 0, sizeof(addr));
	addr.svm_family = AF_VSOCK;
	addr.svm_cid = VMADDR_CID_ANY;
	addr.svm_port = PROTO_VSOCK_PORT;
	if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 || listen(fd, 64) < 0) {
		rc = -errno;
		goto out;
	}
	log_info("agent listening on vsock port %u", PROTO_VSOCK_PORT);
	init_announce_ready();
	memset(&cfg, 0, sizeof(cfg));
	cfg.listen_fd = fd;
	cfg.shutdown = init_agent_shutdown;
	rc = agent_run(&cfg);
out:
	close(fd);
	return rc;
}

/*
 * Wait forever, reaping children whenever SIGCHLD arrives. sigsuspend() atomically unblocks
 * SIGCHLD and sleeps, so a child that exits just before the call still wakes it.
 */
static __attribute__((noreturn)) void init_wait_forever(void)
{
	sigset_t mask;

	if (sigprocmask(SIG_SETMASK, NULL, &mask) < 0)
		sigemptyset(&mask);
	sigdelset(&mask, SIGCHLD);
	for (;;) {
		int rc = init_reap_children();

		if (rc < 0)
			log_error("waitpid: %s", strerror(-rc));
		sigsuspend(&mask);
	}
}

/*
 * PID 1. Set up the system, switch to the root disk if the command line names one (or reset
 * the VM if that fails), print the banner, then reset, crash or wait as the command line
 * says. Returns (exits PID 1, so the kernel panics) only for sandbox.panic=1 when sysrq could
 * not crash the kernel.
 */
int main(void)
{
	struct cmdline_options opts;
	int console_rc;
	int rc;

	/* the initramfs's /dev/console; if it lacks one, devtmpfs provides it below */
	console_rc = init_open_console();
	umask(022);
	if (init_mount_all() < 0)
		log_error("carrying on without some filesystems");
	if (console_rc < 0)
		console_rc = init_open_console();
	if (console_rc < 0)
		log_error("opening %s: %s", INIT_CONSOLE_PATH, strerror(-console_rc));
	rc = init_setup_signals();
	if (rc < 0)
		log_error("SIGCHLD setup: %s", strerror(-rc));
	init_link_dev();
	rc = init_set_hostname();
	if (rc < 0)
		log_warn("sethostname %s: %s", INIT_HOSTNAME, strerror(-rc));
	rc = init_set_env();
	if (rc < 0)
		log_warn("setenv PATH: %s", strerror(-rc));

	cmdline_init_options(&opts);
	rc = init_read_cmdline(&opts);
	if (rc < 0)
		log_warn("reading %s: %s; using the defaults", INIT_CMDLINE_PATH, strerror(-rc));

	if (opts.root[0] != '\0' && init_switch_root(&opts) < 0) {
		/* no banner: the host sees the error line, then the VM going away */
		rc = init_shutdown();
		log_error("reboot: %s; waiting forever", strerror(-rc));
		init_wait_forever();
	}

	/* After the switch: /etc/resolv.conf belongs to the root the programs will see. */
	if (net_setup(&opts) < 0)
		log_error("carrying on without the network sandbox.net asked for");

	init_banner();

	if (opts.panic) {
		log_info("sandbox.panic=1: crashing the kernel on purpose");
		rc = init_trigger_panic();
		log_info("sysrq crash did not happen (%s); exiting PID 1 instead",
			 rc < 0 ? strerror(-rc) : "write accepted");
		return EXIT_FAILURE;
	}
	if (opts.reboot) {
		rc = init_shutdown();
		log_error("reboot: %s; waiting forever", strerror(-rc));
	} else {
		rc = init_run_agent();
		log_warn("agent on vsock port %u: %s; only reaping children", PROTO_VSOCK_PORT,
			 strerror(-rc));
	}
	init_wait_forever();
}
