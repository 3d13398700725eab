/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The audit log (docs/network.md "The audit log"): one JSON object a line, per connection
 * attempt or DNS query, appended with one write(2) on an O_APPEND fd, so lines from many
 * threads (and a restarted proxy) never interleave. Every string is JSON-escaped: names come
 * from the guest.
 *
 * The guest decides how many lines there are, so they are bounded, but never by dropping what
 * the log is for: every connection's allow and error line (with its bytes) is written whole.
 * What a guest can make without end at the cost of a packet, denials and DNS answers, is
 * summarised past AUDIT_SUMMARY_RATE a second: the rest are counted by protocol, decision and
 * rule and said once a second in one "summary" line with their counts. A line that would take
 * the file past AUDIT_FILE_MAX starts a new one, the old becoming the newest of
 * AUDIT_GENERATIONS older files (audit.log.1 .. .N), so a sandbox keeps at most
 * (AUDIT_GENERATIONS + 1) x AUDIT_FILE_MAX and a rotation loses only the oldest generation.
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

#define AUDIT_LINE_MAX	   2048
#define AUDIT_SUMMARY_RATE 20u /* denial and DNS lines a second written whole */
#define AUDIT_SUM_SLOTS	   32  /* (protocol, decision, rule) kinds a summary counts apart */
/* a summary: its head, and each kind's escaped protocol, decision and rule */
#define AUDIT_SUMMARY_MAX  (AUDIT_SUM_SLOTS * (64 + 64 + 512 + 64) + 512)

static int audit_fd = -1;
static uint64_t audit_size; /* of the file audit_fd writes */
static char audit_path[4096];
static uint64_t audit_file_max = AUDIT_FILE_MAX;
static pthread_mutex_t audit_lock = PTHREAD_MUTEX_INITIALIZER;
static time_t audit_second;	 /* the second being counted */
static unsigned audit_in_second; /* summarisable lines written whole in it */
static struct audit_sum {	 /* lines counted, not written, since the last summary */
	char proto[16], decision[16], rule[128];
	unsigned long long n;
} audit_sums[AUDIT_SUM_SLOTS];
static unsigned audit_nsums;
static unsigned long long audit_sum_other; /* of kinds past AUDIT_SUM_SLOTS */

int audit_open(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
	struct stat st;

	if (fd < 0)
		return -errno;
	pthread_mutex_lock(&audit_lock);
	if (audit_fd >= 0)
		close(audit_fd);
	audit_fd = fd;
	audit_size = fstat(fd, &st) == 0 ? (uint64_t)st.st_size : 0;
	snprintf(audit_path, sizeof(audit_path), "%s", path);
	pthread_mutex_unlock(&audit_lock);
	return 0;
}

/* Past the size bound: audit.log.N-1 becomes audit.log.N (the oldest, .AUDIT_GENERATIONS,
 * replaced), ..., audit.log becomes audit.log.1 and a new one starts. Caller holds audit_lock. */
static void audit_rotate(void)
{
	char from[sizeof(audit_path) + 8], to[sizeof(audit_path) + 8];
	struct stat fst, pst;
	int fd;

	if (!audit_path[0])
		return;
	/* The new file first: without it (no fd left, say) nothing moves, and the fd goes on
	 * into audit.log. And only when audit.log is still the file written: after a rotation
	 * cut short, a second one must not shift the generations over it. */
	snprintf(from, sizeof(from), "%s.new", audit_path);
	if (fstat(audit_fd, &fst) < 0 || lstat(audit_path, &pst) < 0 || fst.st_ino != pst.st_ino ||
	    fst.st_dev != pst.st_dev)
		return;
	fd = open(from, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return;
	for (unsigned g = AUDIT_GENERATIONS; g > 1; g--) {
		snprintf(from, sizeof(from), "%s.%u", audit_path, g - 1);
		snprintf(to, sizeof(to), "%s.%u", audit_path, g);
		(void)rename(from, to); /* (a generation not there yet: nothing to move) */
	}
	snprintf(to, sizeof(to), "%s.1", audit_path);
	snprintf(from, sizeof(from), "%s.new", audit_path);
	if (rename(audit_path, to) < 0 || rename(from, audit_path) < 0) {
		close(fd);
		return;
	}
	close(audit_fd);
	audit_fd = fd;
	audit_size = 0;
}

void audit_set_file_max(uint64_t bytes)
{
	pthread_mutex_lock(&audit_lock);
	audit_file_max = bytes ? bytes : AUDIT_FILE_MAX;
	pthread_mutex_unlock(&audit_lock);
}

void audit_close(void)
{
	pthread_mutex_lock(&audit_lock);
	if (audit_fd >= 0)
		close(audit_fd);
	audit_fd = -1;
	pthread_mutex_unlock(&audit_lock);
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

/* Write `n` bytes of `line`, into a new audit.log first when it would take this one past its
 * bound. Caller holds audit_lock. */
static void audit_write(const char *line, size_t n)
{
	ssize_t w;

	if (audit_size && audit_size + n > audit_file_max)
		audit_rotate();
	w = write(audit_fd, line, n);
	/* a full disk loses audit lines, never connections */
	if (w > 0)
		audit_size += (uint64_t)w;
}

/* The lines counted since the last summary, as one line into `buf`; 0 when none. */
static size_t audit_format_summary(char *buf, size_t len, uint64_t time_ms)
{
	struct audit_event ev = {.proto = "audit", .decision = "summary"};
	unsigned long long total = audit_sum_other;
	char esc_p[64], esc_d[64], esc_r[512];
	size_t n;

	for (unsigned i = 0; i < audit_nsums; i++)
		total += audit_sums[i].n;
	if (!total)
		return 0;
	n = audit_format(buf, len, &ev, time_ms);
	if (n < 2 || n >= len)
		return 0;
	n -= 2; /* reopen the object: its counts follow */
	n += (size_t)snprintf(buf + n, len - n, ",\"count\":%llu,\"kinds\":[", total);
	for (unsigned i = 0; i < audit_nsums && n < len; i++) {
		audit_json_escape(audit_sums[i].proto, esc_p, sizeof(esc_p));
		audit_json_escape(audit_sums[i].decision, esc_d, sizeof(esc_d));
		audit_json_escape(audit_sums[i].rule, esc_r, sizeof(esc_r));
		n += (size_t)snprintf(buf + n, len - n,
				      "%s{\"proto\":\"%s\",\"decision\":\"%s\",\"rule\":\"%s\","
				      "\"count\":%llu}",
				      i ? "," : "", esc_p, esc_d, esc_r, audit_sums[i].n);
	}
	if (n < len)
		n += (size_t)snprintf(buf + n, len - n, "],\"other\":%llu}\n", audit_sum_other);
	if (n >= len) /* AUDIT_SUMMARY_MAX holds every kind: never; still one whole line */
		return 0;
	return n;
}

/* Is slot `i` the kind (protocol, decision, rule)? */
static bool audit_sum_is(unsigned i, const char *proto, const char *decision, const char *rule)
{
	return strcmp(audit_sums[i].proto, proto) == 0 &&
	       strcmp(audit_sums[i].decision, decision) == 0 &&
	       strncmp(audit_sums[i].rule, rule, sizeof(audit_sums[i].rule) - 1) == 0;
}

/* Count a line not written: by its (protocol, decision, rule), or as other. */
static void audit_count(const struct audit_event *ev)
{
	const char *proto = ev->proto ? ev->proto : "", *rule = ev->rule ? ev->rule : "";
	const char *decision = ev->decision ? ev->decision : "";
	static unsigned last; /* a flood is of one kind: look there first */
	unsigned i = last < audit_nsums && audit_sum_is(last, proto, decision, rule) ? last : 0;

	while (i < audit_nsums && !audit_sum_is(i, proto, decision, rule))
		i++;
	if (i == audit_nsums) {
		if (audit_nsums == AUDIT_SUM_SLOTS) {
			audit_sum_other++;
			return;
		}
		snprintf(audit_sums[i].proto, sizeof(audit_sums[i].proto), "%s", proto);
		snprintf(audit_sums[i].decision, sizeof(audit_sums[i].decision), "%s", decision);
		snprintf(audit_sums[i].rule, sizeof(audit_sums[i].rule), "%s", rule);
		audit_sums[i].n = 0;
		audit_nsums++;
	}
	audit_sums[i].n++;
	last = i;
}

/* The summary of the lines counted (if any), now. Caller holds audit_lock. */
static void audit_summarise(time_t now)
{
	static char sum[AUDIT_SUMMARY_MAX];
	size_t m = audit_format_summary(sum, sizeof(sum), (uint64_t)now * 1000);

	if (m)
		audit_write(sum, m);
	memset(audit_sums, 0, sizeof(audit_sums));
	audit_nsums = 0;
	audit_sum_other = 0;
}

/* The clock, read under audit_lock; a new second (never an older one: a thread that read the
 * clock earlier cannot take the count back) says the one before's summary. */
static time_t audit_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	if (ts.tv_sec > audit_second) {
		audit_second = ts.tv_sec;
		audit_in_second = 0;
		audit_summarise(ts.tv_sec);
	}
	return ts.tv_sec;
}

void audit_tick(void)
{
	pthread_mutex_lock(&audit_lock);
	if (audit_fd >= 0)
		audit_now();
	pthread_mutex_unlock(&audit_lock);
}

void audit_flush(void)
{
	pthread_mutex_lock(&audit_lock);
	if (audit_fd >= 0)
		audit_summarise(audit_now());
	pthread_mutex_unlock(&audit_lock);
}

/* Lines a guest can make without end at the cost of a packet: denials, and DNS answers (a
 * connection's line, allow or error, is what the log is for: never summarised). */
static bool audit_summarisable(const struct audit_event *ev)
{
	return (ev->decision && strcmp(ev->decision, "deny") == 0) ||
	       (ev->proto && strcmp(ev->proto, "dns") == 0);
}

void audit_log(const struct audit_event *ev)
{
	char line[AUDIT_LINE_MAX];
	struct timespec ts;
	size_t n;

	/* Formatted before the lock (the slow part), with the time it was asked at. */
	clock_gettime(CLOCK_REALTIME, &ts);
	n = audit_format(line, sizeof(line), ev,
			 (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000);
	pthread_mutex_lock(&audit_lock);
	if (audit_fd < 0) {
		pthread_mutex_unlock(&audit_lock);
		return;
	}
	audit_now();
	if (audit_summarisable(ev) && audit_in_second++ >= AUDIT_SUMMARY_RATE)
		audit_count(ev);
	else
		audit_write(line, n);
	pthread_mutex_unlock(&audit_lock);
}
