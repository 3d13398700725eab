/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sandbox-proxy (docs/network.md "sandbox-proxy"): the egress proxy of one sandbox.
 *
 *   sandbox-proxy prepare DIR --request FILE
 *   sandbox-proxy prepare DIR [--policy FILE] [--allow DOMAIN].. [--deny DOMAIN]..
 *                 [--allow-cidr CIDR].. [--allow-port N].. [--deny-all]
 *                 [--credential HOST:HEADER=ENVVAR].. [--egress-bytes N]
 *                 [--resolver IP[:PORT]] [--ca-file FILE]
 *   sandbox-proxy run DIR --netns PATH [--ready-fd N] [--jail uid=N,gid=N]
 *   sandbox-proxy forward --netns PATH --listen 127.0.0.1:HOSTPORT --to 10.0.2.2:GUESTPORT
 *                 [--ready-fd N] [--jail uid=N,gid=N]
 *
 * Exit 2 on a bad command line or policy (one line, FILE:LINE: for the file), 1 on another
 * error; run ends with 0 on SIGTERM or SIGINT.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mitm.h"
#include "proxy.h"

static const char usage[] =
	"usage: sandbox-proxy prepare DIR --request FILE\n"
	"       sandbox-proxy prepare DIR [--policy FILE] [--allow DOMAIN] [--deny DOMAIN]\n"
	"                     [--allow-cidr CIDR] [--allow-port N] [--deny-all]\n"
	"                     [--credential HOST:HEADER=ENVVAR] [--egress-bytes N]\n"
	"                     [--resolver IP[:PORT]] [--ca-file FILE]\n"
	"       sandbox-proxy run DIR --netns PATH [--ready-fd N] [--jail uid=N,gid=N]\n"
	"       sandbox-proxy forward --netns PATH --listen 127.0.0.1:HOSTPORT --to "
	"10.0.2.2:GUESTPORT\n"
	"                     [--ready-fd N] [--jail uid=N,gid=N]\n";

static int main_usage(const char *why)
{
	if (why)
		fprintf(stderr, "sandbox-proxy: %s\n", why);
	fputs(usage, stderr);
	return PROXY_EXIT_USAGE;
}

static int main_path(char *out, size_t len, const char *dir, const char *file)
{
	return snprintf(out, len, "%s/%s", dir, file) < (int)len ? 0 : -ENAMETOOLONG;
}

/* The CA's label: the directory's last component, cut to what mitm_ca_create takes. */
static void main_ca_label(const char *dir, char *out, size_t len)
{
	const char *base = strrchr(dir, '/');
	size_t o = 0;

	for (base = base && base[1] ? base + 1 : dir; *base && o + 1 < len && o < 48; base++) {
		char ch = *base;

		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		    (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-')
			out[o++] = ch;
	}
	if (o == 0)
		out[o++] = 'x';
	out[o] = 0;
}

/* The request of `prepare DIR --request FILE` (sandboxctl's), read with netpolicy's reader:
 * 0, or -EIO with `err` saying why (the file is sandboxctl's: a bad one is not the user's). */
static int main_request_file(const char *path, struct netpol_request *req, char *err, size_t errlen)
{
	char *text;
	size_t len;
	int e;

	/* root's, in the sandbox's directory: never through a link left there */
	if ((e = read_file(path, NETPOL_REQUEST_MAX, &text, &len)) < 0) {
		policy_errf(err, errlen, "%s: %s", path, strerror(-e));
		return -EIO;
	}
	e = netpol_request_parse(req, path, text, len, err, errlen);
	free(text);
	return e < 0 ? -EIO : 0;
}

static int cmd_prepare(int argc, char **argv)
{
	struct policy *p = policy_new();
	struct netpol_request req = {0};
	const char *dir, *policy_file = NULL;
	char err[600] = "", path[4096], key[4096], label[64], *text = NULL, unknown[80] = "";
	int rc = PROXY_EXIT_USAGE, e = 0;

	if (argc < 2 || argv[1][0] == '-') {
		policy_free(p);
		return main_usage("prepare: DIR missing");
	}
	dir = argv[1];
	if (argc == 4 && strcmp(argv[2], "--request") == 0) {
		if (main_request_file(argv[3], &req, err, sizeof(err)) < 0) {
			rc = PROXY_EXIT_ERR;
			goto out;
		}
	} else {
		/* By hand: the words, parsed by the same table. A word it lacks is said once the
		 * words before it are applied (their errors come first), as they come. */
		e = netpol_request_words(&req, argv + 2, (unsigned)argc - 2, err, sizeof(err));
		if (e == -EINVAL) {
			netpol_request_free(&req);
			policy_free(p);
			return main_usage("prepare: an option lacks its value");
		}
		if (e == -ENOENT)
			snprintf(unknown, sizeof(unknown), "prepare: %.70s", err);
		else if (e < 0)
			goto out;
	}
	err[0] = '\0';
	for (unsigned i = 0; i < req.nitems; i++)
		if (req.items[i].opt == NETPOL_POLICY)
			policy_file = req.items[i].value;
	/* The file first: the options' lists add to it, its scalars override it. */
	if (policy_file && policy_load(p, policy_file, err, sizeof(err)) < 0)
		goto out;
	e = 0;
	for (unsigned i = 0; i < req.nitems && e == 0; i++)
		e = policy_apply(p, &req.items[i], err, sizeof(err));
	if (e == 0 && unknown[0])
		e = policy_errf(err, sizeof(err), "%s", unknown);
	if (e < 0)
		goto out;
	e = policy_default_resolver(p, NULL, err, sizeof(err));
	if (e < 0)
		goto out;
	if (e > 0) {
		fprintf(stderr, "sandbox-proxy: warning: %s\n", err);
		err[0] = '\0';
	}
	if (p->ca_file && access(p->ca_file, R_OK) < 0) {
		snprintf(err, sizeof(err), "ca-file %s: %s", p->ca_file, strerror(errno));
		goto out;
	}
	if (policy_resolve_creds(p, err, sizeof(err)) < 0)
		goto out;
	rc = PROXY_EXIT_ERR;
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		snprintf(err, sizeof(err), "%s: %s", dir, strerror(errno));
		goto out;
	}
	text = policy_format(p);
	if (!text || main_path(path, sizeof(path), dir, "policy.yaml") < 0 ||
	    (e = write_file_atomic(path, text, strlen(text), 0644)) < 0) {
		snprintf(err, sizeof(err), "%s/policy.yaml: %s", dir, strerror(e ? -e : ENOMEM));
		goto out;
	}
	free(text);
	text = policy_format_creds(p);
	if (!text || main_path(path, sizeof(path), dir, "credentials") < 0 ||
	    (e = write_file_atomic(path, text, strlen(text), 0600)) < 0) {
		snprintf(err, sizeof(err), "%s/credentials: %s", dir, strerror(e ? -e : ENOMEM));
		goto out;
	}
	/* The CA is made once: a prepared sandbox keeps the one its guest trusts. */
	if (main_path(path, sizeof(path), dir, "ca.pem") < 0 ||
	    main_path(key, sizeof(key), dir, "ca.key") < 0)
		goto out;
	main_ca_label(dir, label, sizeof(label));
	if ((access(path, F_OK) < 0 || access(key, F_OK) < 0) &&
	    (e = mitm_ca_create(path, key, label)) < 0) {
		snprintf(err, sizeof(err), "%.400s: cannot make the CA: %s", path, strerror(-e));
		goto out;
	}
	rc = 0;
out:
	if (text) {
		explicit_bzero(text, strlen(text));
		free(text);
	}
	if (rc)
		fprintf(stderr, "sandbox-proxy: %s\n", err[0] ? err : "failed");
	netpol_request_free(&req);
	policy_free(p);
	return rc;
}

/* A listening socket on 10.0.2.1:port in the current namespace. Its backlog holds a burst of
 * connections (the kernel caps it at net.core.somaxconn, 4096 by default) while the waiting
 * room accepts them: past it a SYN is dropped, and a normal connection among a guest's 2000
 * at once waited a second for its retransmission (proxy_flood.sh with a backlog of 1024). */
#define MAIN_BACKLOG 4096

static int main_listen(int type, uint16_t port, int *out)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
	int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0)
		return -errno;
	inet_pton(AF_INET, PROXY_GW_ADDR, &sa.sin_addr);
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    (type == SOCK_STREAM && listen(fd, MAIN_BACKLOG) < 0)) {
		int e = -errno;

		close(fd);
		return e;
	}
	*out = fd;
	return 0;
}

/* In the sandbox's namespace, before any thread: the three listeners; then back. */
static int main_listeners(struct proxy *px, const char *netns, char *err, size_t errlen)
{
	int self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC), ns, e = 0;

	if (self < 0)
		return policy_errf(err, errlen, "/proc/self/ns/net: %s", strerror(errno));
	ns = open(netns, O_RDONLY | O_CLOEXEC);
	if (ns < 0 || setns(ns, CLONE_NEWNET) < 0) {
		e = policy_errf(err, errlen, "%s: %s", netns, strerror(errno));
		goto out;
	}
	if ((e = main_listen(SOCK_STREAM, PROXY_PORT_EXPLICIT, &px->explicit_fd)) < 0 ||
	    (e = main_listen(SOCK_STREAM, PROXY_PORT_TPROXY, &px->tproxy_fd)) < 0 ||
	    (e = main_listen(SOCK_DGRAM, PROXY_PORT_DNS, &px->dns_fd)) < 0)
		policy_errf(err, errlen, "listen on %s in %s: %s", PROXY_GW_ADDR, netns,
			    strerror(-e));
	if (setns(self, CLONE_NEWNET) < 0) {
		/* Upstream connections from the sandbox's namespace would go nowhere: stop. */
		e = policy_errf(err, errlen, "back to the host's namespace: %s", strerror(errno));
	}
out:
	if (ns >= 0)
		close(ns);
	close(self);
	return e;
}

/* The policy in force, its credentials, the CA (from DIR); the run-time files (in the current
 * directory, DIR/proxy: jail_state_dir). */
static int main_load(struct proxy *px, char *err, size_t errlen)
{
	char path[4096], key[4096], *creds;
	int e;

	px->pol = policy_new();
	if (!px->pol || main_path(path, sizeof(path), px->dir, "policy.yaml") < 0)
		return -ENOMEM;
	if ((e = policy_load(px->pol, path, err, errlen)) < 0)
		return e;
	if (!px->pol->resolver)
		proxy_log("%s: no resolver: no name resolves", path);
	if ((e = policy_host_addrs(px->pol)) < 0)
		return policy_errf(err, errlen, "getifaddrs: %s", strerror(-e));
	if (px->pol->ncreds) {
		if (main_path(path, sizeof(path), px->dir, "credentials") < 0)
			return -ENAMETOOLONG;
		/* the proxy's own file: never through a link someone left in DIR */
		if ((e = read_file(path, 1 << 20, &creds, NULL)) < 0)
			return policy_errf(err, errlen, "%s: %s", path, strerror(-e));
		e = policy_load_creds(px->pol, creds, err, errlen);
		explicit_bzero(creds, strlen(creds));
		free(creds);
		if (e < 0)
			return e;
		if (main_path(path, sizeof(path), px->dir, "ca.pem") < 0 ||
		    main_path(key, sizeof(key), px->dir, "ca.key") < 0)
			return -ENAMETOOLONG;
		px->ca = mitm_ca_load(path, key, err, errlen);
		if (!px->ca)
			return -EINVAL;
		px->upstream_ctx =
			(struct ssl_ctx_st *)mitm_upstream_ctx(px->pol->ca_file, err, errlen);
		if (!px->upstream_ctx)
			return -EINVAL;
	}
	atomic_store(&px->budget, (int64_t)px->pol->egress_bytes);
	if (px->pol->egress_bytes) {
		/* What an earlier proxy of this sandbox left (stop, suspend: same sandbox). */
		char *left;

		if (read_file("egress.left", 64, &left, NULL) == 0) { /* its own: no link */
			char *end;
			unsigned long long v = strtoull(left, &end, 10);

			if (end != left && v <= px->pol->egress_bytes)
				atomic_store(&px->budget, (int64_t)v);
			free(left);
		}
	}
	if ((e = audit_open("audit.log")) < 0)
		return policy_errf(err, errlen, "%s/proxy/audit.log: %s", px->dir, strerror(-e));
	px->dns = dns_state_new("dns.map", err, errlen);
	return px->dns ? 0 : -EINVAL;
}

/* DIR/proxy/egress.left (the current directory's, jailed or not): the budget left, written
 * atomically when it changed since the last time. */
static void main_save_budget(struct proxy *px)
{
	static int64_t saved = -1;
	int64_t left = atomic_load(&px->budget);
	char buf[32];
	int n;

	if (left < 0)
		left = 0;
	if (left == saved)
		return;
	n = snprintf(buf, sizeof(buf), "%lld\n", (long long)left);
	if (write_file_atomic("egress.left", buf, (size_t)n, 0600) == 0)
		saved = left;
}

static int cmd_run(int argc, char **argv)
{
	static struct proxy px = {.explicit_fd = -1, .tproxy_fd = -1, .dns_fd = -1};
	static struct proxy_jail jail;
	const char *netns = NULL;
	char err[600] = "";
	int ready_fd = -1, sig;
	struct rlimit rl;
	sigset_t set;
	pthread_t t;

	if (argc < 2 || argv[1][0] == '-')
		return main_usage("run: DIR missing");
	snprintf(px.dir, sizeof(px.dir), "%s", argv[1]);
	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--netns") == 0 && i + 1 < argc)
			netns = argv[++i];
		else if (strcmp(argv[i], "--ready-fd") == 0 && i + 1 < argc)
			ready_fd = atoi(argv[++i]);
		else if (strcmp(argv[i], "--jail") == 0 && i + 1 < argc) {
			if (jail_parse(argv[++i], &jail) < 0)
				return main_usage("run: --jail takes uid=N,gid=N (not 0)");
		} else
			return main_usage("run: unknown option");
	}
	if (!netns)
		return main_usage("run: --netns PATH missing");
	px.idle_ms = CONN_IDLE_MS;
	if (jail.on && jail_close_inherited(ready_fd) < 0) {
		fprintf(stderr, "sandbox-proxy: --jail: closing inherited fds: %s\n",
			strerror(errno));
		return PROXY_EXIT_ERR;
	}
	if (jail_state_dir(px.dir, &jail, err, sizeof(err)) < 0) {
		fprintf(stderr, "sandbox-proxy: %s\n", err);
		return PROXY_EXIT_ERR;
	}
	if (main_load(&px, err, sizeof(err)) < 0) {
		fprintf(stderr, "sandbox-proxy: %s\n", err[0] ? err : "cannot load the policy");
		return PROXY_EXIT_ERR;
	}
	if (main_listeners(&px, netns, err, sizeof(err)) < 0 ||
	    waiting_init(&px, err, sizeof(err)) < 0) {
		fprintf(stderr, "sandbox-proxy: %s\n", err);
		return PROXY_EXIT_ERR;
	}
	/* Everything is open: the jail, before any thread, so that every one starts in it. */
	if (jail.on && jail_enter(&jail, err, sizeof(err)) < 0) {
		fprintf(stderr, "sandbox-proxy: --jail: %s\n", err);
		return PROXY_EXIT_ERR;
	}
	if (!jail.on)
		proxy_log("not jailed (no --jail): debugging only");
	/* The fds of its connections, waiting and served (the jail set its own limit). */
	if (!jail.on && getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < PROXY_JAIL_NOFILE) {
		rl.rlim_cur = rl.rlim_max < PROXY_JAIL_NOFILE ? rl.rlim_max : PROXY_JAIL_NOFILE;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	/* The signals wait for the main thread; no other thread sees them. */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* The fixed threads (PROXY_THREADS_FIXED): this one, the waiting room (which starts a
	 * thread a decided connection), the DNS server (a thread a query resolved). */
	if (pthread_create(&t, NULL, waiting_run, &px) != 0 ||
	    pthread_create(&t, NULL, dns_serve, &px) != 0) {
		fprintf(stderr, "sandbox-proxy: cannot start threads\n");
		return PROXY_EXIT_ERR;
	}
	if (ready_fd >= 0) {
		if (write_all(ready_fd, "ready\n", 6) < 0)
			proxy_log("--ready-fd %d: %s", ready_fd, strerror(errno));
		close(ready_fd);
	}
	/* Connections die with the process: only the egress budget left is kept, every few
	 * seconds and at the end, so a restarted proxy does not start it afresh. Each second
	 * the audit log says the denials it counted (audit_tick). */
	for (unsigned tick = 1;; tick++) {
		struct timespec every = {.tv_sec = 1};

		sig = sigtimedwait(&set, NULL, &every);
		audit_tick();
		if (px.pol->egress_bytes && (tick % 5 == 0 || sig == SIGTERM || sig == SIGINT))
			main_save_budget(&px);
		if (sig == SIGTERM || sig == SIGINT)
			break;
	}
	audit_flush(); /* the denials of the last second */
	_exit(0);
}

static int cmd_forward(int argc, char **argv)
{
	const char *netns = NULL, *listen_at = NULL, *to = NULL;
	static struct proxy_jail jail;
	int ready_fd = -1;

	for (int i = 1; i < argc; i++) {
		if (i + 1 >= argc)
			return main_usage("forward: an option lacks its value");
		if (strcmp(argv[i], "--netns") == 0)
			netns = argv[++i];
		else if (strcmp(argv[i], "--ready-fd") == 0)
			ready_fd = atoi(argv[++i]);
		else if (strcmp(argv[i], "--listen") == 0)
			listen_at = argv[++i];
		else if (strcmp(argv[i], "--to") == 0)
			to = argv[++i];
		else if (strcmp(argv[i], "--jail") == 0) {
			if (jail_parse(argv[++i], &jail) < 0)
				return main_usage("forward: --jail takes uid=N,gid=N (not 0)");
		} else
			return main_usage("forward: unknown option");
	}
	if (!netns || !listen_at || !to)
		return main_usage("forward: --netns, --listen and --to are needed");
	/* What is open goes into the jail only if it is stdin, stdout, stderr or --ready-fd. */
	if (jail.on && jail_close_inherited(ready_fd) < 0) {
		proxy_log("forward: cannot close the inherited fds: %s", strerror(errno));
		return PROXY_EXIT_ERR;
	}
	if (!jail.on)
		proxy_log("forward: no --jail: running as root, unconfined");
	return forward_run(netns, listen_at, to, ready_fd, &jail) < 0 ? PROXY_EXIT_ERR : 0;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return main_usage(NULL);
	if (strcmp(argv[1], "prepare") == 0)
		return cmd_prepare(argc - 1, argv + 1);
	if (strcmp(argv[1], "run") == 0)
		return cmd_run(argc - 1, argv + 1);
	if (strcmp(argv[1], "forward") == 0)
		return cmd_forward(argc - 1, argv + 1);
	if (strcmp(argv[1], "guard") == 0)
		return guard_command(argc - 1, argv + 1);
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0) {
		fputs(usage, stdout);
		return 0;
	}
	return main_usage("unknown command");
}
