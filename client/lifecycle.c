/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A sandbox's lifecycle (client.h): stop, start, pause and resume, rm, the verbs every front
 * end calls over the floor below (stop.c) and the other verbs' files (start.c, suspend.c).
 * They say what they had to do through the caller's reporter and return errors as values;
 * they never print or choose an exit status.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "api_proto.h"
#include "client.h"
#include "proto.h"

/* Ask the agent to sync the guest's file systems; best effort. */
static void sync_guest(const struct sandbox *sb)
{
	struct agent_conn c;
	struct proto_frame f;

	if (agent_connect(sb, 2000, &c) < 0)
		return;
	/* Best effort: whatever the answer, the VMM is stopped next. */
	(void)!agent_call(&c, PROTO_MSG_SYNC, NULL, 0, 5000, NULL, NULL, &f);
	agent_close(&c);
}

int sandbox_stop(struct sandbox *sb, struct lc_report *r)
{
	int err;

	if (sandbox_vmm_alive(sb) && sandbox_state(sb, NULL) == SB_RUNNING)
		sync_guest(sb);
	if ((err = sandbox_stop_vmm(sb, false, r)) < 0)
		return lc_fail(r, err, "%s: cannot stop the VMM (pid %d): %s", sb->id, (int)sb->pid,
			       strerror(-err));
	return 0;
}

int sandbox_start(struct sandbox *sb, unsigned timeout_s, struct lc_report *r)
{
	enum sandbox_state st;
	char marker[4200];
	int err;

	if ((err = sandbox_host_check(r)) < 0)
		return err;
	st = sandbox_state(sb, NULL);
	if (st != SB_STOPPED && st != SB_DEAD)
		return lc_fail(r, -EBUSY, "%s is %s: only a stopped or dead sandbox can be started",
			       sb->id, sandbox_state_name(st));
	if (st == SB_DEAD && (err = sandbox_stop_vmm(sb, true, r)) < 0)
		return lc_fail(r, err, "%s: cannot clean up after its dead VMM: %s", sb->id,
			       strerror(-err));
	if ((err = sandbox_path(sb, SANDBOX_LAZY_MARK, marker, sizeof(marker))) < 0 ||
	    access(marker, F_OK) == 0)
		return lc_fail(r, err < 0 ? err : -EUCLEAN,
			       "%s: its disk layers did not all come from the store before its VMM "
			       "ended (a lazy restore): it cannot start from them",
			       sb->id);
	if ((err = sandbox_path(sb, "stopped", marker, sizeof(marker))) < 0 ||
	    (unlink(marker) < 0 && errno != ENOENT)) {
		err = err < 0 ? err : -errno;
		return lc_fail(r, err, "%s: cannot clear its stopped marker: %s", sb->id,
			       strerror(-err));
	}
	if ((err = sandbox_start_vmm(sb, NULL, NULL, timeout_s, false, r)) < 0) {
		/* Leave it stopped, as it was, rather than half started. */
		if (sandbox_stop_vmm(sb, true, r) < 0)
			lc_note(r, "%s: cannot stop the VMM (pid %d)", sb->id, (int)sb->pid);
		return err;
	}
	return 0;
}

int sandbox_pause(struct sandbox *sb, bool pause, struct lc_report *r)
{
	int32_t error;
	int err;

	if (!sandbox_vmm_alive(sb))
		return lc_fail(r, -ESRCH, "%s: not running (%s)", sb->id,
			       sandbox_state_name(sandbox_state(sb, NULL)));
	err = api_call(sb, pause ? API_PAUSE : API_RESUME, 5000, &error, NULL);
	if (err < 0)
		return lc_fail(r, -ESRCH, "%s: the VMM's api.sock does not answer: %s", sb->id,
			       strerror(-err));
	if (error)
		return lc_fail(r, -EIO, "%s: %s failed: %s", sb->id, pause ? "pause" : "resume",
			       strerror(-error));
	return 0;
}

int sandbox_rm(struct sandbox *sb, bool force, struct lc_report *r)
{
	int err;

	if (sandbox_vmm_alive(sb)) {
		if (!force)
			return lc_fail(r, -EBUSY, "%s is %s: stop it first, or rm -f", sb->id,
				       sandbox_state_name(sandbox_state(sb, NULL)));
		if ((err = sandbox_stop_vmm(sb, true, r)) < 0)
			return lc_fail(r, err, "%s: cannot kill the VMM (pid %d): %s", sb->id,
				       (int)sb->pid, strerror(-err));
	}
	if (sb->network) { /* a dead VMM's proxy and namespace */
		proxy_stop(sb);
		net_teardown(sb);
	}
	cgroup_remove(sb, r); /* a dead VMM's */
	remove_flat_dir(sb->dir);
	snapshots_gc(sb, r);
	return 0;
}
