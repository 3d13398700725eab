/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Small helpers of sandbox-proxy: its log line, the clock, whole-file reads and atomic writes,
 * address text.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "proxy.h"

void proxy_log(const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n = snprintf(line, sizeof(line), "sandbox-proxy: ");

	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, (size_t)n) < 0) {
		/* nowhere else to say it */
	}
}

int proxy_parse_hostport(const char *s, uint16_t defport, struct sockaddr_storage *sa,
			 socklen_t *salen)
{
	char host[64];
	const char *port = NULL;
	unsigned long pv = defport;
	struct sockaddr_in *in4 = (struct sockaddr_in *)sa;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)sa;
	size_t hl;

	memset(sa, 0, sizeof(*sa));
	if (s[0] == '[') {
		const char *e = strchr(s, ']');

		if (!e || (e[1] && e[1] != ':'))
			return -EINVAL;
		hl = (size_t)(e - s - 1);
		if (hl >= sizeof(host))
			return -EINVAL;
		memcpy(host, s + 1, hl);
		host[hl] = 0;
		port = e[1] ? e + 2 : NULL;
	} else {
		const char *c = strchr(s, ':');

		if (c && strchr(c + 1, ':'))
			c = NULL; /* a bare IPv6 */
		hl = c ? (size_t)(c - s) : strlen(s);
		if (hl >= sizeof(host))
			return -EINVAL;
		memcpy(host, s, hl);
		host[hl] = 0;
		port = c ? c + 1 : NULL;
	}
	if (port) {
		char *end;

		if (!*port || *port < '0' || *port > '9')
			return -EINVAL;
		errno = 0;
		pv = strtoul(port, &end, 10);
		if (errno || *end || pv == 0 || pv > 65535)
			return -EINVAL;
	}
	if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons((uint16_t)pv);
		*salen = sizeof(*in4);
		return 0;
	}
	if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)pv);
		*salen = sizeof(*in6);
		return 0;
	}
	return -EINVAL;
}

void proxy_addr_text(const struct sockaddr *sa, char *out, size_t len)
{
	const void *a = sa->sa_family == AF_INET6
				? (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr
				: (const void *)&((const struct sockaddr_in *)sa)->sin_addr;

	if (!inet_ntop(sa->sa_family, a, out, (socklen_t)len))
		snprintf(out, len, "?");
}
