/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What sandboxctl run reports (docs/jobspec.md, "Running"): the steps' output on our stdout
 * and stderr, or (--json) as events, one JSON object a line on stdout; a JUnit report
 * (--junit FILE), a test case a step; and in all of them no secret's value.
 *
 * A guest never holds a secret, but an upstream may send one back (a service echoing the
 * request's headers): every byte of a step's output goes through report_output, which masks
 * each secret's value as "***" before anything is written, across chunk boundaries (it holds
 * back the last bytes that could begin a value until the next chunk or the step's end).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "jobs.h"

#define REPORT_KEEP	(64u << 10) /* the end of a step's output a JUnit report holds */
#define REPORT_MASK_MIN 3u	    /* shorter values are not masked (they would mask all) */
#define REPORT_HOLD_MAX 4096u	    /* a secret longer than this is not masked */

/* ---- text for JSON and XML ---- */

/* The length of the valid UTF-8 sequence at s (at most n bytes), 0 when it is not one. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	size_t len;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0)
		len = 2, cp = s[0] & 0x1f;
	else if ((s[0] & 0xf0) == 0xe0)
		len = 3, cp = s[0] & 0x0f;
	else if ((s[0] & 0xf8) == 0xf0)
		len = 4, cp = s[0] & 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
	    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

void json_str(FILE *f, const void *data, size_t len)
{
	const unsigned char *s = data;

	fputc('"', f);
	for (size_t i = 0; i < len;) {
		size_t l = utf8_len(s + i, len - i);

		if (l == 0) {
			fputs("\\ufffd", f);
			i++;
			continue;
		}
		if (l == 1) {
			unsigned char c = s[i];

			if (c == '"' || c == '\\')
				fprintf(f, "\\%c", c);
			else if (c == '\n')
				fputs("\\n", f);
			else if (c == '\t')
				fputs("\\t", f);
			else if (c < 0x20 || c == 0x7f)
				fprintf(f, "\\u%04x", c);
			else
				fputc(c, f);
		} else {
			fwrite(s + i, 1, l, f);
		}
		i += l;
	}
	fputc('"', f);
}

/* XML 1.0 character data (or an attribute's value): what it cannot hold is dropped, bytes
 * that are not UTF-8 become U+FFFD. */
static void xml_str(FILE *f, const void *data, size_t len)
{
	const unsigned char *s = data;

	for (size_t i = 0; i < len;) {
		size_t l = utf8_len(s + i, len - i);

		if (l == 0) {
			fputs("\xef\xbf\xbd", f);
			i++;
			continue;
		}
		if (l == 1) {
			unsigned char c = s[i];

			if (c == '&')
				fputs("&amp;", f);
			else if (c == '<')
				fputs("&lt;", f);
			else if (c == '>')
				fputs("&gt;", f);
			else if (c == '"')
				fputs("&quot;", f);
			else if (c >= 0x20 || c == '\n' || c == '\t' || c == '\r')
				fputc(c, f);
		} else if (!(l == 3 && s[i] == 0xef && s[i + 1] == 0xbf &&
			     (s[i + 2] == 0xbe || s[i + 2] == 0xbf))) { /* U+FFFE, U+FFFF */
			fwrite(s + i, 1, l, f);
		}
		i += l;
	}
}

/* ---- the report ---- */

int report_init(struct job_report *r, const struct jobspec *js, const char *spec, bool json,
		const char *junit)
{
	memset(r, 0, sizeof(*r));
	r->json = json;
	r->junit = junit;
	r->spec = spec;
	r->nsteps = js->nsteps;
	if (!(r->steps = calloc(js->nsteps, sizeof(*r->steps))))
		return -ENOMEM;
	for (unsigned i = 0; i < js->nsteps; i++)
		r->steps[i].name = js->steps[i].name;
	/* The secrets' values: the variables of --credential HOST:HEADER=VAR. The words are
	 * pairs of a flag and its value (as the proxy reads them), but for --deny-all: a value
	 * that looks like a flag ("--credential" is a valid domain) is a value. */
	for (unsigned i = 0; i < js->nnet_opts;) {
		const char *flag = js->net_opts[i], *eq, *val;

		if (strcmp(flag, "--deny-all") == 0) {
			i++;
			continue;
		}
		if (i + 1 >= js->nnet_opts)
			break;
		i += 2;
		if (strcmp(flag, "--credential") != 0)
			continue;
		eq = strrchr(js->net_opts[i - 1], '=');
		val = eq ? getenv(eq + 1) : NULL;
		if (!val || strlen(val) < REPORT_MASK_MIN || strlen(val) > REPORT_HOLD_MAX ||
		    r->nsecrets == REPORT_SECRETS_MAX)
			continue;
		r->secrets[r->nsecrets++] = val;
		if (strlen(val) > r->hold)
			r->hold = strlen(val);
	}
	/* Longest first: with "abc" and "abcdef" both secrets, "abcdef" is masked whole. */
	for (unsigned i = 1; i < r->nsecrets; i++)
		for (unsigned j = i; j > 0 && strlen(r->secrets[j]) > strlen(r->secrets[j - 1]);
		     j--) {
			const char *t = r->secrets[j];

			r->secrets[j] = r->secrets[j - 1];
			r->secrets[j - 1] = t;
		}
	/* and in every message and name we print (errmsg, printable_copy) */
	output_mask(r->secrets, r->nsecrets);
	if (r->hold)
		r->hold--; /* bytes that may begin a value the next chunk ends */
	return 0;
}

/* What an event's "time" says: seconds since the epoch, to the millisecond. */
static void json_head(struct job_report *r, const char *event)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	printf("{\"event\":\"%s\",\"time\":%lld.%03ld", event, (long long)ts.tv_sec,
	       ts.tv_nsec / 1000000);
}

static void json_end(void)
{
	fputs("}\n", stdout);
	fflush(stdout);
}

void report_job_started(struct job_report *r, const char *id, const char *image)
{
	if (!r->json)
		return;
	json_head(r, "job-started");
	fputs(",\"sandbox\":", stdout);
	json_str(stdout, id, strlen(id));
	fputs(",\"image\":", stdout);
	json_str(stdout, image, strlen(image));
	printf(",\"steps\":%u", r->nsteps);
	json_end();
}

void report_step_started(struct job_report *r, unsigned i)
{
	r->cur = i;
	if (!r->json)
		return;
	json_head(r, "step-started");
	printf(",\"step\":%u,\"name\":", i + 1);
	json_str(stdout, r->steps[i].name, strlen(r->steps[i].name));
	json_end();
}

/* Masked output of the current step, `len` bytes of `stream` (1 stdout, 2 stderr). */
static void report_emit(struct job_report *r, int stream, const char *data, size_t len)
{
	struct report_step *st = &r->steps[r->cur];

	if (!len)
		return;
	if (r->junit) {
		/* the last REPORT_KEEP bytes, both streams in the order they came */
		if (len >= REPORT_KEEP) {
			data += len - REPORT_KEEP;
			len = REPORT_KEEP;
		}
		if (!st->out && !(st->out = malloc(REPORT_KEEP)))
			r->junit_err = ENOMEM;
		if (st->out) {
			if (st->outlen + len > REPORT_KEEP) {
				size_t drop = st->outlen + len - REPORT_KEEP;

				memmove(st->out, st->out + drop, st->outlen - drop);
				st->outlen -= drop;
				st->cut = true;
			}
			memcpy(st->out + st->outlen, data, len);
			st->outlen += len;
		}
	}
	if (r->json) {
		json_head(r, "output");
		printf(",\"step\":%u,\"stream\":\"%s\",\"data\":", r->cur + 1,
		       stream == 2 ? "stderr" : "stdout");
		json_str(stdout, data, len);
		json_end();
		return;
	}
	if (stream == 1)
		fflush(stderr);
	if (write_all(stream == 2 ? STDERR_FILENO : STDOUT_FILENO, data, len) < 0)
		r->write_err = errno;
}

/* Mask what `buf` holds of stream s and emit it, but for the last r->hold bytes unless
 * `flush`. */
static void report_mask(struct job_report *r, int s, bool flush)
{
	struct report_carry *c = &r->carry[s - 1];
	size_t done = 0, i = 0;

	while (i < c->len) {
		size_t hit = 0;

		for (size_t k = 0; k < r->nsecrets && !hit; k++) {
			size_t l = strlen(r->secrets[k]);

			if (l <= c->len - i && memcmp(c->buf + i, r->secrets[k], l) == 0)
				hit = l;
		}
		if (hit) {
			report_emit(r, s, c->buf + done, i - done);
			report_emit(r, s, "***", 3);
			i += hit;
			done = i;
			continue;
		}
		/* A value may begin in the last r->hold bytes and end in the next chunk. */
		if (!flush && c->len - i <= r->hold)
			break;
		i++;
	}
	report_emit(r, s, c->buf + done, i - done);
	memmove(c->buf, c->buf + i, c->len - i);
	c->len -= i;
}

void report_output(void *arg, int stream, const void *data, size_t len)
{
	struct job_report *r = arg;
	struct report_carry *c;
	const char *p = data;

	if (stream != 1 && stream != 2)
		return;
	if (!r->nsecrets) {
		report_emit(r, stream, data, len);
		return;
	}
	c = &r->carry[stream - 1];
	while (len) {
		/* room for a chunk beside what is held back */
		size_t take = len < REPORT_HOLD_MAX ? len : REPORT_HOLD_MAX;

		memcpy(c->buf + c->len, p, take);
		c->len += take;
		p += take;
		len -= take;
		report_mask(r, stream, false);
	}
}

void report_step_ended(struct job_report *r, unsigned i, int status, const char *outcome,
		       double secs)
{
	struct report_step *st = &r->steps[i];

	if (r->nsecrets) {
		report_mask(r, 1, true);
		report_mask(r, 2, true);
	}
	st->ran = true;
	st->status = status;
	st->secs = secs;
	st->outcome = outcome;
	if (!r->json)
		return;
	json_head(r, "step-ended");
	printf(",\"step\":%u,\"name\":", i + 1);
	json_str(stdout, st->name, strlen(st->name));
	printf(",\"status\":%d,\"outcome\":\"%s\",\"seconds\":%.3f", status, outcome, secs);
	json_end();
}

void report_step_cached(struct job_report *r, unsigned n)
{
	for (unsigned i = 0; i < n && i < r->nsteps; i++)
		r->steps[i].outcome = "cached";
}

void report_event(struct job_report *r, const char *event, const char *fmt, ...)
{
	va_list ap;

	if (!r || !r->json)
		return;
	json_head(r, event);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	json_end();
}

void report_artifact(struct job_report *r, const char *path, const char *file, uint64_t bytes)
{
	char p[4200], f[8400];

	if (!r->json)
		return;
	/* the names are the guest's: masked (a guest may name a file for a secret it saw) */
	printable_copy(path, p, sizeof(p));
	printable_copy(file, f, sizeof(f));
	json_head(r, "artifact");
	fputs(",\"path\":", stdout);
	json_str(stdout, p, strlen(p));
	fputs(",\"file\":", stdout);
	json_str(stdout, f, strlen(f));
	printf(",\"bytes\":%llu", (unsigned long long)bytes);
	json_end();
}

/* The JUnit report: a test suite of the job, a test case a step. */
static int report_junit(struct job_report *r, int status, double secs)
{
	char tmp[4200];
	unsigned failures = 0, skipped = 0;
	FILE *f;
	int fd;

	for (unsigned i = 0; i < r->nsteps; i++) {
		if (!r->steps[i].ran)
			skipped++;
		else if (r->steps[i].status)
			failures++;
	}
	if (path_fmt(tmp, sizeof(tmp), "%s.sandboxctl-XXXXXX", r->junit) < 0)
		return -ENAMETOOLONG;
	if ((fd = mkstemp(tmp)) < 0)
		return -errno;
	if (!(f = fdopen(fd, "w"))) {
		close(fd);
		unlink(tmp);
		return -ENOMEM;
	}
	fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"", f);
	xml_str(f, r->spec, strlen(r->spec));
	fprintf(f, "\" tests=\"%u\" failures=\"%u\" skipped=\"%u\" time=\"%.3f\">\n", r->nsteps,
		failures, skipped, secs);
	fputs("  <testsuite name=\"", f);
	xml_str(f, r->spec, strlen(r->spec));
	fprintf(f, "\" tests=\"%u\" failures=\"%u\" errors=\"0\" skipped=\"%u\" time=\"%.3f\">\n",
		r->nsteps, failures, skipped, secs);
	for (unsigned i = 0; i < r->nsteps; i++) {
		const struct report_step *st = &r->steps[i];

		fprintf(f, "    <testcase classname=\"job\" name=\"%u. ", i + 1);
		xml_str(f, st->name, strlen(st->name));
		fprintf(f, "\" time=\"%.3f\">\n", st->secs);
		if (!st->ran)
			fprintf(f, "      <skipped message=\"%s\"/>\n",
				st->outcome ? "restored from the job cache" : "not run");
		else if (st->status)
			fprintf(f, "      <failure message=\"status %d%s\"/>\n", st->status,
				strcmp(st->outcome, "continued") == 0 ? " (continue-on-error)"
								      : "");
		if (st->outlen) {
			fprintf(f, "      <system-out>%s", st->cut ? "[...]\n" : "");
			xml_str(f, st->out, st->outlen);
			fputs("</system-out>\n", f);
		}
		fputs("    </testcase>\n", f);
	}
	fprintf(f, "  </testsuite>\n</testsuites>\n<!-- sandboxctl run: exit %d -->\n", status);
	if (fflush(f) != 0 || fsync(fileno(f)) < 0 || fclose(f) != 0) {
		unlink(tmp);
		return -EIO;
	}
	if (rename(tmp, r->junit) < 0) {
		int err = -errno;

		unlink(tmp);
		return err;
	}
	return 0;
}

int report_job_ended(struct job_report *r, int status, double secs)
{
	int err = 0;

	if (r->junit && (err = r->junit_err ? -r->junit_err : report_junit(r, status, secs)) < 0)
		errmsg("--junit %s: %s", r->junit, strerror(-err));
	if (r->json) {
		json_head(r, "job-ended");
		printf(",\"status\":%d,\"outcome\":\"%s\",\"seconds\":%.3f", status,
		       status ? "failed" : "passed", secs);
		json_end();
	}
	return err;
}

void report_free(struct job_report *r)
{
	output_mask(NULL, 0);
	for (unsigned i = 0; r->steps && i < r->nsteps; i++)
		free(r->steps[i].out);
	free(r->steps);
	memset(r, 0, sizeof(*r));
}
