/* SPDX-License-Identifier: Apache-2.0 */
/* Console logging for sandbox-init: one prefixed line per message, one write() per line. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "log.h"

/*
 * Write all of buf to fd, retrying after signals and short writes. Gives up silently on any
 * other error: there is nowhere else to report a console that does not work.
 */
static void log_write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		buf += n;
		len -= (size_t)n;
	}
}

/*
 * Format "<prefix><level><message>\n" into one bounded buffer and write it to stderr. The
 * newline always fits: the message is truncated to leave room for it.
 */
__attribute__((format(printf, 2, 0))) static void log_emit(const char *level, const char *fmt,
							   va_list ap)
{
	char line[LOG_LINE_MAX];
	int saved_errno = errno;
	size_t len = 0;
	size_t room;
	int n;

	n = snprintf(line, sizeof(line), "%s%s", LOG_PREFIX, level);
	if (n > 0)
		len = (size_t)n < sizeof(line) - 2 ? (size_t)n : sizeof(line) - 2;
	/* room for the message and its NUL, keeping one byte for the newline */
	room = sizeof(line) - len - 1;
	n = vsnprintf(line + len, room, fmt, ap);
	if (n > 0)
		len += (size_t)n < room - 1 ? (size_t)n : room - 1;
	line[len++] = '\n';
	log_write_all(STDERR_FILENO, line, len);
	errno = saved_errno;
}

/* Print "sandbox-init: <message>\n". */
void log_info(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_emit("", fmt, ap);
	va_end(ap);
}

/* Print "sandbox-init: warning: <message>\n". */
void log_warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_emit("warning: ", fmt, ap);
	va_end(ap);
}

/* Print "sandbox-init: error: <message>\n". */
void log_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_emit("error: ", fmt, ap);
	va_end(ap);
}
