/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The audit log (docs/network.md "The audit log"): one JSON object a line, per connection
 * attempt or DNS query, appended with one write(2) on an O_APPEND fd, so lines from many
 * threads (and a restarted proxy) never interleave. Every string is JSON-escaped: names come
 * from the guest.
 *
 * The guest decides how many lines there are, so they are bounded: at most AUDIT_RATE a
 * second (the rest are counted, and one "suppressed" line says how many), and the file is
 * rotated to audit.log.1 once it passes AUDIT_FILE_MAX, so a sandbox keeps at most twice that
 * on the host's disk.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "proxy.h"

#define AUDIT_LINE_MAX 2048
#define AUDIT_RATE     200u	   /* lines a second */
#define AUDIT_FILE_MAX (32u << 20) /* bytes before audit.log becomes audit.log.1 */

static int audit_fd = -1;
static char audit_path[4096];
static pthread_mutex_t audit_lock = PTHREAD_MUTEX_INITIALIZER;
static time_t audit_second;		    /* the second being counted */
static unsigned audit_in_second;	    /* lines written in it */
static unsigned long long audit_suppressed; /* lines not written since the last summary */

int audit_open(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);

	if (fd < 0)
		return -errno;
	audit_close();
	audit_fd = fd;
	snprintf(audit_path, sizeof(audit_path), "%s", path);
	return 0;
}

/* Past AUDIT_FILE_MAX: the file becomes audit.log.1 (replacing the one before) and a new one
 * starts. Caller holds audit_lock. */
static void audit_rotate(void)
{
	char old[sizeof(audit_path) + 3];
	struct stat st;
	int fd;

	if (!audit_path[0] || fstat(audit_fd, &st) < 0 || st.st_size < (off_t)AUDIT_FILE_MAX)
		return;
	snprintf(old, sizeof(old), "%s.1", audit_path);
	if (rename(audit_path, old) < 0)
		return;
	fd = open(audit_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return; /* the old fd goes on into audit.log.1 */
	close(audit_fd);
	audit_fd = fd;
}

void audit_close(void)
{
	if (audit_fd >= 0)
		close(audit_fd);
	audit_fd = -1;
}

size_t audit_json_escape(const char *s, char *out, size_t len)
{
	size_t n = 0;

	if (len == 0)
		return 0;
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		char esc[8];
		size_t el;

		if (c == '"' || c == '\\') {
			esc[0] = '\\';
			esc[1] = (char)c;
			el = 2;
		} else if (c == '\n') {
			memcpy(esc, "\\n", 2);
			el = 2;
		} else if (c == '\t') {
			memcpy(esc, "\\t", 2);
			el = 2;
		} else if (c < 0x20 || c >= 0x7f) {
			/* Bytes past ASCII too: a guest's name need not be UTF-8. */
			snprintf(esc, sizeof(esc), "\\u%04x", c);
			el = 6;
		} else {
			esc[0] = (char)c;
			el = 1;
		}
		if (n + el + 1 > len)
			break;
		memcpy(out + n, esc, el);
		n += el;
	}
	out[n] = 0;
	return n;
}

/* Append `"key":"escaped"` (with a leading comma unless first). */
static void audit_put_str(char *buf, size_t len, size_t *n, const char *key, const char *val)
{
	char esc[768];

	if (!val || *n >= len)
		return;
	audit_json_escape(val, esc, sizeof(esc));
	*n += (size_t)snprintf(buf + *n, len - *n, ",\"%s\":\"%s\"", key, esc);
}

size_t audit_format(char *buf, size_t len, const struct audit_event *ev, uint64_t time_ms)
{
	time_t secs = (time_t)(time_ms / 1000);
	struct tm tm;
	size_t n;

	gmtime_r(&secs, &tm);
	n = (size_t)snprintf(buf, len, "{\"time\":\"%04d-%02d-%02dT%02d:%02d:%02d.%03uZ\"",
			     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
			     tm.tm_sec, (unsigned)(time_ms % 1000));
	audit_put_str(buf, len, &n, "proto", ev->proto);
	audit_put_str(buf, len, &n, "name", ev->name);
	audit_put_str(buf, len, &n, "addr", ev->addr);
	if (ev->port && n < len)
		n += (size_t)snprintf(buf + n, len - n, ",\"port\":%u", ev->port);
	audit_put_str(buf, len, &n, "decision", ev->decision);
	audit_put_str(buf, len, &n, "rule", ev->rule);
	audit_put_str(buf, len, &n, "error", ev->error);
	if (ev->has_bytes && n < len)
		n += (size_t)snprintf(buf + n, len - n, ",\"bytes_up\":%llu,\"bytes_down\":%llu",
				      (unsigned long long)ev->bytes_up,
				      (unsigned long long)ev->bytes_down);
	if (n + 3 > len) {
		/* Cut: still one well-formed line. */
		n = (size_t)snprintf(buf, len,
				     "{\"decision\":\"error\",\"error\":\"audit line "
				     "too long\"}\n");
		return n < len ? n : len - 1;
	}
	buf[n++] = '}';
	buf[n++] = '\n';
	buf[n] = 0;
	return n;
}

void audit_log(const struct audit_event *ev)
{
	char line[AUDIT_LINE_MAX];
	struct timespec ts;
	size_t n;

	if (audit_fd < 0)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	pthread_mutex_lock(&audit_lock);
	if (ts.tv_sec != audit_second) {
		audit_second = ts.tv_sec;
		audit_in_second = 0;
		if (audit_suppressed) {
			char rule[64];
			struct audit_event sum = {
				.proto = "audit", .decision = "suppressed", .rule = rule};
			size_t m;

			snprintf(rule, sizeof(rule), "%llu lines over %u a second",
				 audit_suppressed, AUDIT_RATE);
			m = audit_format(line, sizeof(line), &sum, (uint64_t)ts.tv_sec * 1000);
			if (write(audit_fd, line, m) < 0) {
				/* as below */
			}
			audit_suppressed = 0;
			audit_in_second++;
		}
		audit_rotate();
	}
	if (audit_in_second >= AUDIT_RATE) {
		audit_suppressed++;
		pthread_mutex_unlock(&audit_lock);
		return;
	}
	audit_in_second++;
	n = audit_format(line, sizeof(line), ev,
			 (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000);
	if (write(audit_fd, line, n) < 0) {
		/* a full disk loses audit lines, never connections */
	}
	pthread_mutex_unlock(&audit_lock);
}
