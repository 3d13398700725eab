/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The floor of the lifecycle (client.h): a sandbox's state as its VMM and markers say, and the
 * ending of its VMM with what goes with it (proxy, network, cgroup, sockets). Every verb that
 * ends or replaces a VMM comes here; this file calls no verb above it.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include "api_proto.h"
#include "client.h"

enum sandbox_state sandbox_state(const struct sandbox *sb, uint64_t *uptime_ms)
{
	struct api_status st;
	char path[4200];
	int32_t error;

	if (uptime_ms)
		*uptime_ms = 0;
	if (sandbox_vmm_alive(sb)) {
		if (api_call(sb, API_STATUS, 2000, &error, &st) == 0 && error == 0) {
			if (uptime_ms)
				*uptime_ms = st.uptime_ms;
			if (st.state == API_STATE_PAUSED)
				return SB_PAUSED;
		}
		return SB_RUNNING;
	}
	if (sandbox_path(sb, "suspended", path, sizeof(path)) == 0 && access(path, F_OK) == 0)
		return SB_SUSPENDED;
	if (sandbox_path(sb, "stopped", path, sizeof(path)) == 0 && access(path, F_OK) == 0)
		return SB_STOPPED;
	return SB_DEAD;
}

/*
 * Wait up to `ms` for the VMM (known to be ours when the wait starts) to have exited. Not
 * sandbox_vmm_alive: an exiting process's cmdline reads empty as soon as its memory is gone,
 * while it still holds its files and its VM for a while (seen in the emulated host: rm
 * returned and the VMM was still running), so this waits for the process itself.
 */
static bool wait_gone(const struct sandbox *sb, unsigned ms)
{
	uint64_t until = now_ms() + ms;

	while (pid_running(sb->pid)) {
		if (now_ms() >= until)
			return false;
		usleep(20000);
	}
	return true;
}

int sandbox_stop_vmm(struct sandbox *sb, bool force, const struct lc_report *r)
{
	static const char *const leftovers[] = {"api.sock", "vsock.sock", "pid"};
	char path[4200];
	int32_t error;
	int err;

	if (sandbox_vmm_alive(sb)) {
		bool gone = false;

		if (!force && api_call(sb, API_SHUTDOWN, 2000, &error, NULL) == 0 && error == 0)
			gone = wait_gone(sb, 10000);
		if (!gone) {
			if (!force)
				lc_note(r, "%s: the VMM did not shut down: sending SIGTERM",
					sb->id);
			kill(sb->pid, SIGTERM);
			gone = wait_gone(sb, 5000);
		}
		if (!gone) {
			lc_note(r, "%s: the VMM ignored SIGTERM: sending SIGKILL", sb->id);
			kill(sb->pid, SIGKILL);
			if (!wait_gone(sb, 5000))
				return -ETIMEDOUT;
		}
	}
	/* No VMM, no network: the proxy and the namespace go with it. */
	if (sb->network) {
		proxy_stop(sb);
		net_teardown(sb);
	}
	cgroup_remove(sb, r); /* its processes are gone */
	if ((err = sandbox_path(sb, "stopped", path, sizeof(path))) < 0 ||
	    (err = write_file_atomic(path, "", 0, 0600)) < 0)
		return err;
	for (size_t i = 0; i < sizeof(leftovers) / sizeof(leftovers[0]); i++)
		if (sandbox_path(sb, leftovers[i], path, sizeof(path)) == 0)
			unlink(path);
	sb->pid = 0;
	return 0;
}
