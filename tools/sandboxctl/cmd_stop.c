/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sandboxctl stop ID: stop the sandbox's VM, keeping its directory and disk. Gracefully: the
 * agent syncs the guest's disks, then the VMM's API shuts the VM down; SIGTERM and SIGKILL
 * follow when either does not answer in time.
 */
#include <stdio.h>
#include <string.h>

#include "sandboxctl.h"

int cmd_stop(int argc, char **argv)
{
	struct lc_report r = CTL_REPORT;
	struct sandbox sb;
	int err, status;

	if (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
		return ctl_help("stop");
	}
	if (argc != 2) {
		return ctl_usage("stop");
	}
	if ((status = sandbox_resolve(argv[1], &sb)))
		return status;
	if ((err = sandbox_stop(&sb, &r)) < 0)
		return ctl_failed(&r, err);
	return EXIT_OK;
}
