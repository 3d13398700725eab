/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sandbox-pull: oci_pull as a program, for `sandboxctl images pull` (docs/images.md,
 * "Pulling from a registry"). A program of its own because sandboxctl is linked statically
 * and Debian ships libcurl's dependencies (nghttp2, psl, gssapi, ldap) as shared libraries
 * only; it also keeps libcurl, TLS and every byte a registry sends out of sandboxctl's
 * process. sandboxd links oci_pull itself.
 *
 * usage: sandbox-pull REF DIR [--user U --password-stdin] [--insecure] [--ca-file F]
 *                     [--timeout S] [--stall S] [--max-size BYTES]
 * The password is read from stdin (up to 4096 bytes, one trailing newline dropped), never
 * from the command line or the environment, and wiped after the pull. Exit 0: DIR holds the
 * layout; 1: the pull failed (one line on stderr says why); 2: bad usage.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "oci.h"

#define PASSWORD_READ_MAX 4096

static void say(void *arg, const char *line)
{
	(void)arg;
	fprintf(stderr, "sandbox-pull: %s\n", line);
}

static int usage(void)
{
	fprintf(stderr, "usage: sandbox-pull REF DIR [--user U --password-stdin] [--insecure] "
			"[--ca-file F] [--timeout S] [--stall S] [--max-size BYTES]\n");
	return 2;
}

/* The password from stdin into buf (NUL-terminated): -E2BIG past its bound. */
static int read_password(char *buf, size_t cap)
{
	size_t n = 0;

	for (;;) {
		ssize_t r = read(STDIN_FILENO, buf + n, cap - 1 - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		n += (size_t)r;
		if (n == cap - 1) {
			char extra;

			if (read(STDIN_FILENO, &extra, 1) > 0)
				return -E2BIG;
			break;
		}
	}
	if (n && buf[n - 1] == '\n')
		n--;
	if (n && buf[n - 1] == '\r')
		n--;
	buf[n] = '\0';
	return memchr(buf, '\0', n) ? -EINVAL : 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"user", required_argument, NULL, 'u'},
		{"password-stdin", no_argument, NULL, 'p'},
		{"insecure", no_argument, NULL, 'k'},
		{"ca-file", required_argument, NULL, 'c'},
		{"timeout", required_argument, NULL, 't'},
		{"stall", required_argument, NULL, 's'},
		{"max-size", required_argument, NULL, 'm'},
		{NULL, 0, NULL, 0},
	};
	struct oci_pull_req q = {.progress = say};
	static char password[PASSWORD_READ_MAX + 1];
	struct oci_msg m = {{0}};
	bool pw_stdin = false;
	uint64_t v;
	int c, err;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'u':
			q.user = optarg;
			break;
		case 'p':
			pw_stdin = true;
			break;
		case 'k':
			q.insecure = true;
			break;
		case 'c':
			q.ca_file = optarg;
			break;
		case 't':
		case 's':
			if (!parse_u64(optarg, 1, 86400, &v))
				return usage();
			if (c == 't')
				q.deadline_s = (unsigned)v;
			else
				q.stall_s = (unsigned)v;
			break;
		case 'm':
			if (!parse_u64(optarg, 1, UINT64_MAX, &q.layers_max))
				return usage();
			break;
		default:
			return usage();
		}
	}
	if (optind + 2 != argc || !q.user != !pw_stdin)
		return usage();
	q.ref = argv[optind];
	if (pw_stdin) {
		if ((err = read_password(password, sizeof(password))) < 0) {
			fprintf(stderr, "sandbox-pull: the password on stdin: %s\n",
				err == -E2BIG	 ? "longer than 4096 bytes"
				: err == -EINVAL ? "holds a NUL byte"
						 : strerror(-err));
			return 1;
		}
		q.password = password;
	}
	if (q.stall_s && q.deadline_s && q.stall_s > q.deadline_s)
		q.stall_s = q.deadline_s;
	if (!q.stall_s && q.deadline_s && q.deadline_s < 30)
		q.stall_s = q.deadline_s; /* the deadline is the tighter bound */
	err = oci_pull(&q, argv[optind + 1], &m);
	explicit_bzero(password, sizeof(password));
	if (err < 0) {
		fprintf(stderr, "sandbox-pull: %s\n", m.text[0] ? m.text : strerror(-err));
		return 1;
	}
	return 0;
}
