/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sandboxctl stop ID: stop the sandbox's VM, keeping its directory and disk. Gracefully: the
 * agent syncs the guest's disks, then the VMM's API shuts the VM down; SIGTERM and SIGKILL
 * follow when either does not answer in time.
 */
#include <stdio.h>
#include <string.h>

#include "proto.h"
#include "sandboxctl.h"

static const char stop_usage[] = "usage: sandboxctl stop ID\n"
				 "\n"
				 "Stop the sandbox's VM: the guest syncs its disk, the VMM shuts\n"
				 "down (SIGTERM, then SIGKILL, when it does not within 10 s).\n"
				 "The sandbox stays (state stopped) until sandboxctl rm.\n";

/* Ask the agent to sync the guest's file systems; best effort. */
static void stop_sync_guest(const struct sandbox *sb)
{
	struct agent_conn c;
	struct proto_frame f;

	if (agent_connect(sb, 2000, &c) < 0)
		return;
	/* Best effort: whatever the answer, the VMM is stopped next. */
	(void)!agent_call(&c, PROTO_MSG_SYNC, NULL, 0, 5000, NULL, NULL, &f);
	agent_close(&c);
}

int cmd_stop(int argc, char **argv)
{
	struct sandbox sb;
	int err, status;

	if (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
		fputs(stop_usage, stdout);
		return EXIT_OK;
	}
	if (argc != 2) {
		fputs(stop_usage, stderr);
		return EXIT_USAGE;
	}
	if ((status = sandbox_resolve(argv[1], &sb)))
		return status;
	if (sandbox_vmm_alive(&sb) && sandbox_state(&sb, NULL) == SB_RUNNING)
		stop_sync_guest(&sb);
	if ((err = sandbox_stop_vmm(&sb, false, &ctl_report)) < 0) {
		errmsg("%s: cannot stop the VMM (pid %d): %s", sb.id, (int)sb.pid, strerror(-err));
		return EXIT_ERR;
	}
	return EXIT_OK;
}
