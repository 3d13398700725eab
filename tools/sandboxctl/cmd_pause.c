/* SPDX-License-Identifier: Apache-2.0 */
/* sandboxctl pause ID / resume ID: park the sandbox's vCPUs (no CPU used) or run them. */
#include <stdio.h>
#include <string.h>

#include "sandboxctl.h"

int cmd_pause(int argc, char **argv)
{
	bool pause = strcmp(argv[0], "pause") == 0;
	struct lc_report r = CTL_REPORT;
	struct sandbox sb;
	int err, status;

	if (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0))
		return ctl_help(pause ? "pause" : "resume");
	if (argc != 2)
		return ctl_usage(pause ? "pause" : "resume");
	if ((status = sandbox_resolve(argv[1], &sb)))
		return status;
	if (!pause && sandbox_state(&sb, NULL) == SB_SUSPENDED)
		err = sandbox_resume_suspended(&sb, &r);
	else
		err = sandbox_pause(&sb, pause, &r);
	return err < 0 ? ctl_failed(&r, err) : EXIT_OK;
}
