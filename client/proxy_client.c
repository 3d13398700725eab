/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A sandbox's sandbox-proxy, from the host side (docs/network.md): `prepare` at create,
 * `run` beside every VMM of a networked sandbox (started before the VMM, stopped after it),
 * `forward` for sandboxctl port; and the CA certificate the proxy signs with, put in the
 * guest's trust stores once its agent answers.
 *
 * The proxy's files live in the sandbox's directory: policy.yaml, credentials, ca.pem and
 * ca.key (root's, 0600, read before it is jailed); what it writes while it runs is in
 * proxy/, its own directory and its jail's root (docs/hardening.md): audit.log, dns.map,
 * egress.left. proxy.pid and proxy.log are ours. A port forwarder's pid is in
 * port-<guest port>.pid.
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

#define PROXY_READY_MS 15000
#define PROXY_STOP_MS  5000
#define GUEST_CA_DIR   "/etc/sandbox"

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

int proxy_prepare(const struct sandbox *sb, char *const *opts, unsigned nopts)
{
	char **argv = calloc(nopts + 4, sizeof(char *));
	int status, err;
	pid_t pid;

	if (!argv)
		return -ENOMEM;
	argv[1] = "prepare";
	argv[2] = (char *)sb->dir;
	for (unsigned i = 0; i < nopts; i++)
		argv[3 + i] = opts[i];
	err = proxy_spawn(argv, NULL, false, -1, false, NULL, &pid);
	free(argv);
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
	    (err = sandbox_path(sb, "proxy.log", log, sizeof(log))) < 0 ||
	    (err = proxy_spawn_ready(argv, 6, log, jailed, sb, &pid)) < 0)
		return err;
	if ((err = write_pid(sb, "proxy.pid", pid)) < 0)
		proxy_kill(pid);
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

/* The proxy's files a snapshot keeps: where they are in the sandbox, their name in the
 * snapshot. dns.map may not exist yet. */
static const struct {
	const char *in_sandbox, *in_snapshot;
} proxy_files[] = {
	{"policy.yaml", "net.policy.yaml"}, {"credentials", "net.credentials"},
	{"ca.pem", "net.ca.pem"},	    {"ca.key", "net.ca.key"},
	{"proxy/dns.map", "net.dns.map"},
};

/* Copy `from` to `to` (atomically, mode 0600); -ENOENT when `from` is missing. */
static int copy_small_file(const char *from, const char *to)
{
	char *buf = NULL;
	size_t len;
	int err;

	if ((err = read_file(from, 16 << 20, &buf, &len)) < 0)
		return err;
	err = write_file_atomic(to, buf, len, 0600);
	free(buf);
	return err;
}

/* From the sandbox `sb_dir` into the snapshot `snap_dir` (`save`) or back. */
static int proxy_files_copy(const char *sb_dir, const char *snap_dir, bool save)
{
	char in_sb[4200], in_snap[4200];
	int err;

	for (size_t i = 0; i < sizeof(proxy_files) / sizeof(proxy_files[0]); i++) {
		if ((err = path_fmt(in_sb, sizeof(in_sb), "%s/%s", sb_dir,
				    proxy_files[i].in_sandbox)) < 0 ||
		    (err = path_fmt(in_snap, sizeof(in_snap), "%s/%s", snap_dir,
				    proxy_files[i].in_snapshot)) < 0)
			return err;
		err = save ? copy_small_file(in_sb, in_snap) : copy_small_file(in_snap, in_sb);
		if (err == -ENOENT && strcmp(proxy_files[i].in_snapshot, "net.dns.map") == 0)
			continue;
		if (err < 0)
			return err;
	}
	return 0;
}

int proxy_files_save(const struct sandbox *sb, const char *snap_dir)
{
	return proxy_files_copy(sb->dir, snap_dir, true);
}

int proxy_files_load(const char *snap_dir, const struct sandbox *sb)
{
	char dir[4200];
	int err;

	/* The proxy's own directory, root's until its next start makes it the proxy's. */
	if ((err = sandbox_path(sb, "proxy", dir, sizeof(dir))) < 0)
		return err;
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	return proxy_files_copy(sb->dir, snap_dir, false);
}
