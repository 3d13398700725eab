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

uint64_t proxy_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int proxy_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int proxy_write_atomic(const char *path, const void *buf, size_t len, mode_t mode)
{
	char tmp[4096], dir[4096];
	int fd, dfd, err = 0;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
	if (fd < 0)
		return -errno;
	if (fchmod(fd, mode) < 0 || (err = proxy_write_all(fd, buf, len)) < 0 || fsync(fd) < 0) {
		err = err ? err : -errno;
		close(fd);
		unlink(tmp);
		return err;
	}
	if (close(fd) < 0 || rename(tmp, path) < 0) {
		err = -errno;
		unlink(tmp);
		return err;
	}
	snprintf(dir, sizeof(dir), "%s", path);
	dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	return 0;
}

int proxy_read_file(const char *path, size_t max, char **out, size_t *len)
{
	struct stat st;
	char *buf;
	size_t got = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC), err;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size > max) {
		err = S_ISREG(st.st_mode) ? -EFBIG : -EINVAL;
		close(fd);
		return err;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	buf[got] = 0;
	*out = buf;
	if (len)
		*len = got;
	return 0;
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
