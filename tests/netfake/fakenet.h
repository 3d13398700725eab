/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fakenet: the fake internet's servers and clients in one program (tests/netfake/README.md).
 * One file per service: dns.c, http.c (HTTP and HTTPS), banner.c, mkcert.c; fakenet.c holds
 * the command table and what they share (addresses, logs, listeners, limits). Functions return
 * 0 or -errno unless the comment says otherwise. Test code: bounded, but not hardened like the
 * proxy.
 */
#ifndef SANDBOX_TESTS_NETFAKE_H
#define SANDBOX_TESTS_NETFAKE_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>

/* Every server: at most this many connections at once; more are accepted and closed, logged. */
#define FAKENET_MAX_CONNS 256
/* A connection that sends nothing for this long is closed (default of --timeout). */
#define FAKENET_IDLE_SEC  30

/* The options every subcommand shares, parsed by fakenet_parse_common. */
struct fakenet_opts {
	struct sockaddr_in listen; /* --listen IP:PORT (servers) or --connect (clients) */
	bool have_listen;
	const char *log_path;	  /* --log FILE (default: stderr) */
	const char *pidfile_path; /* --pidfile FILE: our pid, written once listening */
	unsigned timeout_sec;	  /* --timeout SEC: idle limit per connection */
};

/* Subcommands: argv[0] is the subcommand's name; the exit status of the program. */
int dns_main(int argc, char **argv);
int query_main(int argc, char **argv);
int http_main(int argc, char **argv);
int https_main(int argc, char **argv);
int banner_main(int argc, char **argv);
int client_main(int argc, char **argv);
int mkcert_main(int argc, char **argv);
int udp_main(int argc, char **argv);
int get_main(int argc, char **argv);
int connect_bench_main(int argc, char **argv);

/* Parse "a.b.c.d:port" into *sa. */
int fakenet_parse_addr(const char *text, struct sockaddr_in *sa);
/* "a.b.c.d:port" of *sa into buf (at least 24 bytes). */
void fakenet_format_addr(const struct sockaddr_in *sa, char *buf, size_t len);

/*
 * If argv[*i] is a shared option (--listen, --connect, --log, --pidfile, --timeout), consume it
 * and its value (advancing *i) and return 1; 0 if it is not one; -EINVAL (message printed) if
 * its value is missing or bad.
 */
int fakenet_parse_common(int argc, char **argv, int *i, struct fakenet_opts *opts);
/* Defaults into *opts. */
void fakenet_opts_init(struct fakenet_opts *opts);

/*
 * Open the log (--log, appended, or stderr) and install the signal handlers: SIGTERM and
 * SIGINT end the process at once (_exit(0): every log line is already written), SIGPIPE is
 * ignored.
 */
int fakenet_start(const struct fakenet_opts *opts);
/* One log line (a newline is added), written with a single write(2): never buffered. */
void fakenet_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Write len bytes to the log as they are, in one write(2). */
void fakenet_log_raw(const char *buf, size_t len);

/* A bound socket of type (SOCK_STREAM listening, or SOCK_DGRAM) on opts->listen; fd or -errno. */
int fakenet_listen(const struct fakenet_opts *opts, int type);
/* Write the pidfile if one was asked for (after the listener exists). */
int fakenet_write_pidfile(const struct fakenet_opts *opts);

/* Receive and send timeouts of sec seconds on fd. */
void fakenet_set_timeouts(int fd, unsigned sec);

/*
 * Accept connections on lfd forever; each one is handed to serve(fd, peer, arg) on a detached
 * thread of its own, which closes fd. Past FAKENET_MAX_CONNS the connection is closed at once
 * and logged. Returns only on an accept error (-errno).
 */
int fakenet_accept_loop(int lfd, unsigned timeout_sec,
			void (*serve)(int fd, const struct sockaddr_in *peer, void *arg),
			void *arg);

/* Print a message prefixed "fakenet: " to stderr. */
void fakenet_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
