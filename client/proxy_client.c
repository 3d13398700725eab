/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A sandbox's sandbox-proxy, from the host side (docs/network.md): `prepare` at create,
 * `run` beside every VMM of a networked sandbox (started before the VMM, stopped after it),
 * `forward` for sandboxctl port; and the CA certificate the proxy signs with, put in the
 * guest's trust stores once its agent answers.
 *
 * The policy reaches the proxy as a request file (netpolicy.h), policy.request, which make.c
 * writes and removes once prepare has read it. The proxy's files live in the sandbox's
 * directory: policy.yaml, credentials, ca.pem and ca.key (root's, 0600, read before it is
 * jailed); what it writes while it runs is in proxy/, its own directory and its jail's root
 * (docs/hardening.md): audit.log, dns.map, egress.left. proxy.pid and proxy.log are ours. A
 * port forwarder's pid is in port-<guest port>.pid.
 *
 * A jailed proxy connects upstream from the host's network namespace under the kernel's guard
 * (docs/hardening.md "The proxy's jail"): `sandbox-proxy guard` prints its nftables script
 * from the sandbox's policy (the proxy owns the policy's parser and the ranges), and we load
 * it here, in the host's namespace, before the proxy starts, and remove it once it is gone.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client.h"

#define PROXY_READY_MS	     15000
#define PROXY_STOP_MS	     5000
#define GUEST_CA_DIR	     "/etc/sandbox"
/* `sandbox-proxy guard` prints its script within this (it reads one policy file). */
#define PROXY_GUARD_MS	     15000
/* The guard's script: ~70 rules of the shared table and ~70 bytes a rule of this proxy's (its
 * resolver, an allow-cidr each: at most 4096, the proxy's POL_MAX_LIST), with room to spare. */
#define PROXY_GUARD_TEXT_MAX (1u << 20)
/* Every proxy uid (sandbox_proxy_uid of the ids' 16 bits): one without a guard is refused. */
#define PROXY_UID_FIRST	     (SANDBOX_UID_BASE + SANDBOX_PROXY_UID_OFFSET)
#define PROXY_UID_LAST	     (PROXY_UID_FIRST + 0xffffu)

int proxy_binary(char *out, size_t len)
{
	return program_find("SANDBOX_PROXY", "proxy", "sandbox-proxy", out, len);
}

/* Fork and exec the proxy with `argv` (argv[0] is filled in), stdin /dev/null, stdout and
 * stderr to `log` (NULL: ours), in a session of its own when `daemon`, in the cgroup of
 * `sb` when it is not NULL. `keep_fd` stays open in the child. With `pid_ns`, the child is
 * PID 1 of a pid namespace of its own (run --jail). */
static int proxy_spawn(char **argv, const char *log, bool daemon, int keep_fd, bool pid_ns,
		       const struct sandbox *sb, pid_t *pid)
{
	static char bin[PATH_MAX];
	pid_t child;
	int fd;

	if (proxy_binary(bin, sizeof(bin)) < 0)
		return -ENAMETOOLONG;
	argv[0] = bin;
	fflush(NULL);
	child = pid_ns ? (pid_t)syscall(SYS_clone, CLONE_NEWPID | SIGCHLD, NULL, NULL, NULL, NULL)
		       : fork();
	if (child < 0)
		return -errno;
	if (child == 0) {
		if (sb && cgroup_enter(sb) < 0) {
			fprintf(stderr, "sandboxctl: %s: the proxy cannot enter its cgroup\n",
				sb->id);
			_exit(127);
		}
		if (daemon)
			setsid();
		fd = open("/dev/null", O_RDONLY);
		if (fd > 0) {
			dup2(fd, 0);
			close(fd);
		}
		if (log) {
			fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_NOCTTY, 0600);
			if (fd < 0)
				_exit(127);
			dup2(fd, 1);
			dup2(fd, 2);
			if (fd > 2)
				close(fd);
		}
		if (keep_fd >= 0)
			(void)fcntl(keep_fd, F_SETFD, 0);
		/* prepare reads the credentials' variables; the daemon needs none of them */
		if (daemon)
			execvpe(bin, argv, child_env());
		else
			execvp(bin, argv);
		fprintf(stderr, "sandboxctl: cannot run %s: %m\n", bin);
		_exit(127);
	}
	*pid = child;
	return 0;
}

int proxy_prepare(const struct sandbox *sb, const char *request)
{
	char *argv[] = {NULL, "prepare", (char *)sb->dir, "--request", (char *)request, NULL};
	int status, err;
	pid_t pid;

	err = proxy_spawn(argv, NULL, false, -1, false, NULL, &pid);
	if (err < 0)
		return err;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (!WIFEXITED(status))
		return -EIO;
	return WEXITSTATUS(status) == 0 ? 0 : WEXITSTATUS(status) == 2 ? -EINVAL : -EIO;
}

/* The pid in the sandbox's `file`, when that process runs and its command line names the
 * sandbox's directory (so a recycled pid is never signalled); else 0. */
static pid_t proxy_pid_of(const struct sandbox *sb, const char *file)
{
	char path[4200], *buf = NULL, cmd[8192];
	size_t len;
	ssize_t n;
	long v;
	int fd;
	pid_t pid = 0;

	if (sandbox_path(sb, file, path, sizeof(path)) < 0 || read_file(path, 64, &buf, &len) < 0)
		return 0;
	v = strtol(buf, NULL, 10);
	free(buf);
	if (v <= 1 || v > INT_MAX)
		return 0;
	snprintf(path, sizeof(path), "/proc/%ld/cmdline", v);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, cmd, sizeof(cmd) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	cmd[n] = '\0';
	for (ssize_t i = 0; i < n; i++)
		if (cmd[i] == '\0')
			cmd[i] = ' ';
	if (strstr(cmd, "sandbox-proxy") && strstr(cmd, sb->id))
		pid = (pid_t)v;
	return pid;
}

static void proxy_kill(pid_t pid)
{
	uint64_t until = now_ms() + PROXY_STOP_MS;

	kill(pid, SIGTERM);
	while (kill(pid, 0) == 0 && now_ms() < until) {
		(void)waitpid(pid, NULL, WNOHANG); /* our child when we started it */
		usleep(10000);
	}
	if (kill(pid, 0) == 0) {
		kill(pid, SIGKILL);
		(void)waitpid(pid, NULL, 0);
	}
}

static int write_pid(const struct sandbox *sb, const char *file, pid_t pid)
{
	char path[4200], buf[32];
	int n = snprintf(buf, sizeof(buf), "%d\n", (int)pid), err;

	if ((err = sandbox_path(sb, file, path, sizeof(path))) < 0)
		return err;
	return write_file_atomic(path, buf, (size_t)n, 0600);
}

/* Spawn the proxy with `argv` (argv[0] filled in; word `fd_at` is the buffer for
 * --ready-fd's number) as a daemon logging to `log`, in the cgroup of `sb`, and wait until it
 * says "ready". On failure it is gone. */
static int proxy_spawn_ready(char **argv, unsigned fd_at, const char *log, bool pid_ns,
			     const struct sandbox *sb, pid_t *out)
{
	static char fdarg[16];
	struct pollfd pfd;
	char buf[16];
	int p[2], err, status;
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	snprintf(fdarg, sizeof(fdarg), "%d", p[1]);
	argv[fd_at] = fdarg;
	err = proxy_spawn(argv, log, true, p[1], pid_ns, sb, &pid);
	close(p[1]);
	if (err < 0) {
		close(p[0]);
		return err;
	}
	pfd = (struct pollfd){.fd = p[0], .events = POLLIN};
	err = -ETIMEDOUT;
	if (poll(&pfd, 1, PROXY_READY_MS) == 1) {
		ssize_t n = read(p[0], buf, sizeof(buf));

		err = n >= 6 && memcmp(buf, "ready\n", 6) == 0 ? 0 : -EIO;
	}
	close(p[0]);
	if (err == 0) {
		*out = pid;
		return 0;
	}
	if (waitpid(pid, &status, WNOHANG) == 0)
		proxy_kill(pid);
	return err;
}

/* Run `sandbox-proxy guard` with `argv` (argv[0] filled in) and its stdout in *text (NUL
 * ended, at most PROXY_GUARD_TEXT_MAX), its stderr to `log_fd`, within PROXY_GUARD_MS. */
static int proxy_guard_script(char **argv, int log_fd, char **text)
{
	static char bin[PATH_MAX];
	uint64_t deadline = now_ms() + PROXY_GUARD_MS;
	size_t len = 0;
	char *buf = NULL;
	int p[2], status, err = 0;
	pid_t pid;

	if (proxy_binary(bin, sizeof(bin)) < 0)
		return -ENAMETOOLONG;
	argv[0] = bin;
	buf = malloc(PROXY_GUARD_TEXT_MAX + 1);
	if (!buf)
		return -ENOMEM;
	if (pipe2(p, O_CLOEXEC) < 0) {
		free(buf);
		return -errno;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		err = -errno;
		close(p[0]);
		close(p[1]);
		free(buf);
		return err;
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY);

		if (null > 0)
			dup2(null, 0);
		dup2(p[1], 1);
		if (log_fd >= 0)
			dup2(log_fd, 2);
		execv(bin, argv);
		fprintf(stderr, "sandboxctl: cannot run %s: %m\n", bin);
		_exit(127);
	}
	close(p[1]);
	for (;;) {
		struct pollfd pfd = {.fd = p[0], .events = POLLIN};
		uint64_t now = now_ms();
		ssize_t n;
		int ready;

		if (now >= deadline) {
			err = -ETIMEDOUT;
			break;
		}
		ready = poll(&pfd, 1, (int)(deadline - now));
		if (ready < 0 && errno != EINTR) {
			err = -errno;
			break;
		}
		if (ready <= 0)
			continue; /* the deadline is checked above */
		n = read(p[0], buf + len, PROXY_GUARD_TEXT_MAX + 1 - len);
		if (n < 0 && errno != EINTR && errno != EAGAIN) {
			err = -errno;
			break;
		}
		if (n == 0)
			break;
		if (n > 0 && (len += (size_t)n) > PROXY_GUARD_TEXT_MAX) {
			err = -E2BIG;
			break;
		}
	}
	close(p[0]);
	if (err < 0)
		kill(pid, SIGKILL);
	/* It closed its stdout, or was killed: its end is near either way. */
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR) {
			status = -1;
			break;
		}
	if (err == 0 && (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0))
		err = -EPROTO;
	if (err < 0) {
		free(buf);
		return err;
	}
	buf[len] = '\0';
	*text = buf;
	return 0;
}

/* The sandbox's proxy.log, for appending what the guard's steps say; -1 when it cannot be. */
static int proxy_log_open(const struct sandbox *sb)
{
	char log[4200];

	if (sandbox_path(sb, "proxy.log", log, sizeof(log)) < 0)
		return -1;
	return open(log, O_WRONLY | O_CREAT | O_APPEND | O_NOCTTY | O_CLOEXEC, 0600);
}

/* Load (`dir` given) or remove the kernel's guard of proxy uid `uid` in our network namespace
 * (the host's): the script from `sandbox-proxy guard`, through nft. What failed is said in
 * `log_fd` (proxy.log), besides what sandbox-proxy and nft printed there. */
static int proxy_guard(const char *dir, uid_t uid, int log_fd)
{
	char uid_s[16], range[32], *text = NULL, line[256];
	char *load[] = {NULL, "guard", (char *)dir, "--uid", uid_s, "--uids", range, NULL};
	char *remove[] = {NULL, "guard", "--remove", "--uid", uid_s, NULL};
	int err, n;

	snprintf(uid_s, sizeof(uid_s), "%u", (unsigned)uid);
	snprintf(range, sizeof(range), "%u-%u", PROXY_UID_FIRST, PROXY_UID_LAST);
	err = proxy_guard_script(dir ? load : remove, log_fd, &text);
	if (err == 0) {
		err = net_nft(text, log_fd);
		free(text);
		if (err < 0)
			n = snprintf(
				line, sizeof(line),
				"sandboxctl: nft -f - could not %s the proxy's guard (table inet "
				"sandbox_guard, uid %u): %s%s\n",
				dir ? "load" : "remove", (unsigned)uid, strerror(-err),
				err == -EPROTO ? " (nft refused it, or is not installed: "
						 "nftables, with nft_fib and nft_reject)"
					       : "");
	} else {
		n = snprintf(line, sizeof(line),
			     "sandboxctl: sandbox-proxy guard could not write the proxy's guard "
			     "(uid %u): %s\n",
			     (unsigned)uid, strerror(-err));
	}
	if (err < 0 && log_fd >= 0 && n > 0 &&
	    write_all(log_fd, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1) < 0) {
		/* the error is returned all the same */
	}
	return err;
}

/* Remove the guard of `sb`'s proxy uid `uid` (its proxy is gone); a failure is said in
 * proxy.log and leaves a guard no process uses, replaced at the next start. */
static void proxy_guard_drop(const struct sandbox *sb, uid_t uid)
{
	int log_fd = proxy_log_open(sb);

	if (proxy_guard(NULL, uid, log_fd) < 0) {
		/* said in proxy.log */
	}
	if (log_fd >= 0)
		close(log_fd);
}

int proxy_start(const struct sandbox *sb)
{
	char ns[256], log[4200], jail[64];
	char *argv[] = {NULL, "run", (char *)sb->dir, "--netns", ns, "--ready-fd", NULL, NULL,
			NULL, NULL};
	uid_t id = sandbox_proxy_uid(sb->id);
	bool jailed = jail_enabled();
	pid_t pid;
	int err;

	/* Jailed as the sandbox's proxy uid (never the VMM's), PID 1 of its own namespace. */
	snprintf(jail, sizeof(jail), "uid=%u,gid=%u", (unsigned)id, (unsigned)id);
	if (jailed) {
		argv[7] = "--jail";
		argv[8] = jail;
	}
	if ((err = net_ns_path(sb, ns, sizeof(ns))) < 0 ||
	    (err = sandbox_path(sb, "proxy.log", log, sizeof(log))) < 0)
		return err;
	/* Jailed, it starts under its guard, or not at all (a stale one is replaced). */
	if (jailed) {
		int log_fd = proxy_log_open(sb);

		err = proxy_guard(sb->dir, id, log_fd);
		if (log_fd >= 0)
			close(log_fd);
		if (err < 0)
			return err;
	}
	if ((err = proxy_spawn_ready(argv, 6, log, jailed, sb, &pid)) == 0 &&
	    (err = write_pid(sb, "proxy.pid", pid)) < 0)
		proxy_kill(pid);
	if (err < 0 && jailed)
		proxy_guard_drop(sb, id);
	return err;
}

bool proxy_alive(const struct sandbox *sb)
{
	return proxy_pid_of(sb, "proxy.pid") != 0;
}

void proxy_stop(const struct sandbox *sb)
{
	char path[4200];
	pid_t pid;
	DIR *d;
	struct dirent *e;

	pid = proxy_pid_of(sb, "proxy.pid");
	if (pid)
		proxy_kill(pid);
	if (sandbox_path(sb, "proxy.pid", path, sizeof(path)) == 0)
		unlink(path);
	/* Its guard, the proxy gone (a port forwarder, of the same uid, needs none: it only
	 * answers connections made to it, which the guard lets through for any proxy uid). */
	if (jail_enabled())
		proxy_guard_drop(sb, sandbox_proxy_uid(sb->id));
	/* and every port forwarder */
	d = opendir(sb->dir);
	if (!d)
		return;
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);

		if (strncmp(e->d_name, "port-", 5) != 0 || n < 9 ||
		    strcmp(e->d_name + n - 4, ".pid") != 0)
			continue;
		pid = proxy_pid_of(sb, e->d_name);
		if (pid)
			proxy_kill(pid);
		if (sandbox_path(sb, e->d_name, path, sizeof(path)) == 0)
			unlink(path);
	}
	closedir(d);
}

int proxy_forward(const struct sandbox *sb, unsigned guest_port, unsigned host_port)
{
	char ns[256], log[4200], listen[64], to[64], file[32], jail[64];
	/* Its command line names the namespace, and so the sandbox (proxy_pid_of). */
	char *argv[] = {NULL, "forward",    "--netns", ns,   "--listen", listen, "--to",
			to,   "--ready-fd", NULL,      NULL, NULL,	 NULL};
	uid_t id = sandbox_proxy_uid(sb->id);
	bool jailed = jail_enabled();
	pid_t pid;
	int err;

	/* Jailed as the sandbox's proxy uid, PID 1 of its own namespace, as `run` is: it relays
	 * what the guest sends. */
	snprintf(jail, sizeof(jail), "uid=%u,gid=%u", (unsigned)id, (unsigned)id);
	if (jailed) {
		argv[10] = "--jail";
		argv[11] = jail;
	}

	snprintf(listen, sizeof(listen), "127.0.0.1:%u", host_port);
	snprintf(to, sizeof(to), NET_GUEST_IP ":%u", guest_port);
	snprintf(file, sizeof(file), "port-%u.pid", guest_port);
	if (proxy_pid_of(sb, file))
		return -EEXIST;
	if ((err = net_ns_path(sb, ns, sizeof(ns))) < 0 ||
	    (err = sandbox_path(sb, "proxy.log", log, sizeof(log))) < 0)
		return err;
	if ((err = net_forward_port(sb, guest_port, true)) < 0)
		return err;
	/* Listening before this returns: the caller may connect at once. */
	if ((err = proxy_spawn_ready(argv, 9, log, jailed, sb, &pid)) < 0) {
		if (net_forward_port(sb, guest_port, false) < 0) {
			/* the port stays open to the namespace, with nothing listening */
		}
		return err;
	}
	if ((err = write_pid(sb, file, pid)) < 0)
		proxy_kill(pid);
	return err;
}

/* The guest's system bundle, when it has one, with the sandbox's CA appended. */
static const char *const guest_bundles[] = {
	"/etc/ssl/certs/ca-certificates.crt", /* Debian, Ubuntu, Alpine */
	"/etc/pki/tls/certs/ca-bundle.crt",   /* Fedora, RHEL */
};

int proxy_install_ca(const struct sandbox *sb, struct agent_conn *c)
{
	char path[4200], *ca = NULL, *sys = NULL, *bundle = NULL;
	size_t ca_len, sys_len = 0, bundle_len = 0;
	int err;

	if ((err = sandbox_path(sb, "ca.pem", path, sizeof(path))) < 0 ||
	    (err = read_file(path, 64 << 10, &ca, &ca_len)) < 0)
		return err;
	if ((err = agent_mkdir_p(c, GUEST_CA_DIR, 0755)) < 0 ||
	    (err = agent_file_put(c, GUEST_CA_DIR "/ca.pem", ca, ca_len, 0644)) < 0 ||
	    (err = agent_mkdir_p(c, "/usr/local/share/ca-certificates", 0755)) < 0 ||
	    (err = agent_file_put(c, "/usr/local/share/ca-certificates/sandbox-proxy.crt", ca,
				  ca_len, 0644)) < 0)
		goto out;
	for (size_t i = 0; i < sizeof(guest_bundles) / sizeof(guest_bundles[0]); i++) {
		free(sys);
		sys = NULL;
		if (agent_file_get(c, guest_bundles[i], 16 << 20, &sys, &sys_len) < 0)
			continue;
		if (strstr(sys, ca))
			break; /* a restored guest has it already */
		free(bundle);
		bundle = malloc(sys_len + ca_len + 2);
		if (!bundle) {
			err = -ENOMEM;
			goto out;
		}
		memcpy(bundle, sys, sys_len);
		if (sys_len && sys[sys_len - 1] != '\n')
			bundle[sys_len++] = '\n';
		memcpy(bundle + sys_len, ca, ca_len);
		bundle_len = sys_len + ca_len;
		if ((err = agent_file_put(c, guest_bundles[i], bundle, bundle_len, 0644)) < 0)
			goto out;
		break;
	}
	/* SSL_CERT_FILE's bundle: the system's (with ours) or ours alone. */
	if (bundle)
		err = agent_file_put(c, GUEST_CA_DIR "/bundle.pem", bundle, bundle_len, 0644);
	else if (sys)
		err = agent_file_put(c, GUEST_CA_DIR "/bundle.pem", sys, sys_len, 0644);
	else
		err = agent_file_put(c, GUEST_CA_DIR "/bundle.pem", ca, ca_len, 0644);
out:
	free(ca);
	free(sys);
	free(bundle);
	return err;
}
