/* SPDX-License-Identifier: Apache-2.0 */
/*
 * How the lifecycle's verbs report (client.h, struct lc_report): notes as they go, and a
 * failure as a value: its message, whether the caller's options were at fault, the log that
 * says more. No verb prints.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "client.h"

void lc_note(const struct lc_report *r, const char *fmt, ...)
{
	char line[LC_ERROR_MAX];
	va_list ap;

	if (!r || !r->note)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	r->note(r->ctx, line);
}

int lc_fail(struct lc_report *r, int err, const char *fmt, ...)
{
	va_list ap;

	if (r) {
		va_start(ap, fmt);
		vsnprintf(r->error, sizeof(r->error), fmt, ap);
		va_end(ap);
	}
	return err;
}

int lc_bad_option(struct lc_report *r, const char *fmt, ...)
{
	va_list ap;

	if (r) {
		r->bad_option = true;
		va_start(ap, fmt);
		vsnprintf(r->error, sizeof(r->error), fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

void lc_log(struct lc_report *r, const char *path, unsigned lines)
{
	if (r && path)
		tail_format(path, lines, r->log, sizeof(r->log));
}

void lc_show_log(const struct lc_report *r)
{
	if (r && r->show_log && r->log[0])
		r->show_log(r->ctx, r->log);
}

void lc_demote(struct lc_report *r)
{
	if (r && r->error[0])
		lc_note(r, "%s", r->error);
	lc_show_log(r);
	lc_clear(r);
}

void lc_clear(struct lc_report *r)
{
	if (r) {
		r->error[0] = '\0';
		r->log[0] = '\0';
		r->bad_option = false;
	}
}

int lc_interrupted(const struct lc_report *r)
{
	return r && r->interrupted ? (int)*r->interrupted : 0;
}
