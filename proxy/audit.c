/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The audit log (docs/network.md "The audit log"): one JSON object a line, per connection
 * attempt or DNS query, appended with one write(2) on an O_APPEND fd, so lines from many
 * threads (and a restarted proxy) never interleave. Every string is JSON-escaped: names come
 * from the guest.
 *
 * The guest decides how many lines there are, so they are bounded, but never by dropping what
 * the log is for: every allow and error line (a connection made, with its bytes; a failure)
 * is written whole. Denials are what a guest can make without end (a refused query costs it
 * one packet): AUDIT_DENY_RATE a second are written whole, the rest are counted by protocol
 * and rule and said once a second in one "deny-summary" line with their counts. The file is
 * rotated past AUDIT_FILE_MAX into AUDIT_GENERATIONS older files (audit.log.1 the newest), so
 * a sandbox keeps at most (AUDIT_GENERATIONS + 1) x AUDIT_FILE_MAX on the host's disk and a
 * rotation loses only the oldest generation.
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

#define AUDIT_LINE_MAX	  2048
#define AUDIT_SUMMARY_MAX (AUDIT_SUM_SLOTS * 512 + 512)
#define AUDIT_DENY_RATE	  20u /* deny lines a second written whole */
#define AUDIT_SUM_SLOTS	  32  /* (protocol, rule) pairs a summary counts apart */

static int audit_fd = -1;
static char audit_path[4096];
static uint64_t audit_file_max = AUDIT_FILE_MAX;
static pthread_mutex_t audit_lock = PTHREAD_MUTEX_INITIALIZER;
static time_t audit_second;   /* the second being counted */
static unsigned audit_denies; /* deny lines written whole in it */
static struct audit_sum {     /* deny lines counted, not written, since the last summary */
	char proto[16], rule[128];
	unsigned long long n;
} audit_sums[AUDIT_SUM_SLOTS];
static unsigned audit_nsums;
static unsigned long long audit_sum_other; /* of pairs past AUDIT_SUM_SLOTS */

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

/* Past the size bound: audit.log.N-1 becomes audit.log.N (the oldest, .AUDIT_GENERATIONS,
 * replaced), ..., audit.log becomes audit.log.1 and a new one starts. Caller holds audit_lock. */
static void audit_rotate(void)
{
	char from[sizeof(audit_path) + 8], to[sizeof(audit_path) + 8];
	struct stat st;
	int fd;

	if (!audit_path[0] || fstat(audit_fd, &st) < 0 || (uint64_t)st.st_size < audit_file_max)
		return;
	for (unsigned g = AUDIT_GENERATIONS; g > 1; g--) {
		snprintf(from, sizeof(from), "%s.%u", audit_path, g - 1);
		snprintf(to, sizeof(to), "%s.%u", audit_path, g);
		(void)rename(from, to); /* (a generation not there yet: nothing to move) */
	}
	snprintf(to, sizeof(to), "%s.1", audit_path);
	if (rename(audit_path, to) < 0)
		return;
	fd = open(audit_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return; /* the old fd goes on into audit.log.1 */
	close(audit_fd);
	audit_fd = fd;
}

void audit_set_file_max(uint64_t bytes)
{
	pthread_mutex_lock(&audit_lock);
	audit_file_max = bytes ? bytes : AUDIT_FILE_MAX;
	pthread_mutex_unlock(&audit_lock);
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

/* The deny lines counted since the last summary, as one line into `buf`; 0 when none. */
static size_t audit_format_summary(char *buf, size_t len, uint64_t time_ms)
{
	struct audit_event ev = {.proto = "audit", .decision = "deny-summary"};
	unsigned long long total = audit_sum_other;
	char esc_p[64], esc_r[512];
	size_t n;

	for (unsigned i = 0; i < audit_nsums; i++)
		total += audit_sums[i].n;
	if (!total)
		return 0;
	n = audit_format(buf, len, &ev, time_ms);
	if (n < 2 || n >= len)
		return 0;
	n -= 2; /* reopen the object: its counts follow */
	n += (size_t)snprintf(buf + n, len - n, ",\"count\":%llu,\"rules\":[", total);
	for (unsigned i = 0; i < audit_nsums && n < len; i++) {
		audit_json_escape(audit_sums[i].proto, esc_p, sizeof(esc_p));
		audit_json_escape(audit_sums[i].rule, esc_r, sizeof(esc_r));
		n += (size_t)snprintf(buf + n, len - n,
				      "%s{\"proto\":\"%s\",\"rule\":\"%s\",\"count\":%llu}",
				      i ? "," : "", esc_p, esc_r, audit_sums[i].n);
	}
	if (n < len)
		n += (size_t)snprintf(buf + n, len - n, "],\"other\":%llu}\n", audit_sum_other);
	if (n >= len) { /* cannot be: the slots are bounded; still one well-formed line */
		n = (size_t)snprintf(buf, len,
				     "{\"proto\":\"audit\",\"decision\":\"deny-summary\","
				     "\"count\":%llu}\n",
				     total);
		n = n < len ? n : len - 1;
	}
	return n;
}

/* Count a deny line not written: by its (protocol, rule), or as other. */
static void audit_count(const struct audit_event *ev)
{
	const char *proto = ev->proto ? ev->proto : "", *rule = ev->rule ? ev->rule : "";
	unsigned i;

	for (i = 0; i < audit_nsums; i++)
		if (strncmp(audit_sums[i].proto, proto, sizeof(audit_sums[i].proto) - 1) == 0 &&
		    strncmp(audit_sums[i].rule, rule, sizeof(audit_sums[i].rule) - 1) == 0)
			break;
	if (i == audit_nsums) {
		if (audit_nsums == AUDIT_SUM_SLOTS) {
			audit_sum_other++;
			return;
		}
		snprintf(audit_sums[i].proto, sizeof(audit_sums[i].proto), "%s", proto);
		snprintf(audit_sums[i].rule, sizeof(audit_sums[i].rule), "%s", rule);
		audit_sums[i].n = 0;
		audit_nsums++;
	}
	audit_sums[i].n++;
}

/* A new second: the summary of the one before (if any denials were counted), then a rotation
 * when the file is past its bound. Caller holds audit_lock. */
static void audit_new_second(time_t now)
{
	static char sum[AUDIT_SUMMARY_MAX];
	size_t m;

	if (now == audit_second)
		return;
	audit_second = now;
	audit_denies = 0;
	m = audit_format_summary(sum, sizeof(sum), (uint64_t)now * 1000);
	if (m && write(audit_fd, sum, m) < 0) {
		/* as audit_log's */
	}
	memset(audit_sums, 0, sizeof(audit_sums));
	audit_nsums = 0;
	audit_sum_other = 0;
	audit_rotate();
}

void audit_tick(void)
{
	struct timespec ts;

	if (audit_fd < 0)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	pthread_mutex_lock(&audit_lock);
	audit_new_second(ts.tv_sec);
	pthread_mutex_unlock(&audit_lock);
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
	audit_new_second(ts.tv_sec);
	if (ev->decision && strcmp(ev->decision, "deny") == 0 &&
	    audit_denies++ >= AUDIT_DENY_RATE) {
		audit_count(ev);
		pthread_mutex_unlock(&audit_lock);
		return;
	}
	n = audit_format(line, sizeof(line), ev,
			 (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000);
	if (write(audit_fd, line, n) < 0) {
		/* a full disk loses audit lines, never connections */
	}
	pthread_mutex_unlock(&audit_lock);
}
