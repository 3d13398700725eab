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

void proxy_addr_text(const struct sockaddr *sa, char *out, size_t len)
{
	const void *a = sa->sa_family == AF_INET6
				? (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr
				: (const void *)&((const struct sockaddr_in *)sa)->sin_addr;

	if (!inet_ntop(sa->sa_family, a, out, (socklen_t)len))
		snprintf(out, len, "?");
}
