/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fork (docs/snapshots.md): a live snapshot of a running sandbox, its RAM frozen in place,
 * and children restoring it that map that RAM copy-on-write, their VMMs started together and
 * then waited for. A lifecycle verb (client.h): errors as values, in the caller's report.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "api_proto.h"
#include "client.h"

/* A child's failure: the one the report held before is said as a note (with its log), and
 * this one takes its place. */
static int child_failed(struct lc_report *r, const struct lc_report *cr, int err, int last)
{
	if (!r)
		return err;
	if (last < 0)
		lc_demote(r);
	memcpy(r->error, cr->error, sizeof(r->error));
	memcpy(r->log, cr->log, sizeof(r->log));
	return err;
}

int sandbox_fork(struct sandbox *parent, unsigned n, struct sandbox *children, bool *ok,
		 unsigned *started, struct snap_take *t, struct lc_report *r)
{
	char name[NAME_MAX_LEN + 2];
	struct lc_report cr = {.note = NULL};
	struct boot_src src;
	int err, last = 0;

	*started = 0;
	memset(t, 0, sizeof(*t));
	if ((err = sandbox_host_check(r)) < 0)
		return err;
	snprintf(name, sizeof(name), ".fork-%s-%llu", parent->id, (unsigned long long)now_ms());
	*t = (struct snap_take){.name = name, .flags = API_SNAPSHOT_LIVE};
	err = sandbox_snapshot(parent, t, r);
	t->name = NULL; /* (name was ours) */
	if (err < 0) {
		t->dir[0] = '\0';
		return err;
	}
	if (r)
		cr = *r;
	/* The children map the parent's frozen RAM; their VMMs start together. */
	src = (struct boot_src){.dir = t->dir, .memory = t->out.memory_path};
	for (; *started < n; (*started)++) {
		ok[*started] = false;
		lc_clear(&cr);
		if ((err = sandbox_restore(t->dir, &t->meta, NULL, NULL, &src, true,
					   &children[*started], &cr)) < 0) {
			last = child_failed(r, &cr, err, last);
			break;
		}
	}
	for (unsigned i = 0; i < *started; i++) {
		lc_clear(&cr);
		if ((err = sandbox_wait_restored(&children[i], RESTORE_TIMEOUT_S, &cr)) < 0) {
			last = child_failed(r, &cr, err, last);
			sandbox_discard(&children[i], r);
			continue;
		}
		ok[i] = true;
	}
	return last;
}
