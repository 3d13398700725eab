/* SPDX-License-Identifier: Apache-2.0 */
/* sandboxctl rm [-f] ID...: remove sandboxes, leaving no process, socket or directory. */
#include <stdio.h>
#include <string.h>

#include "sandboxctl.h"

int cmd_rm(int argc, char **argv)
{
	bool force = false;
	int i = 1, status = EXIT_OK;

	for (; i < argc && argv[i][0] == '-'; i++) {
		if (strcmp(argv[i], "-f") == 0 || strcmp(argv[i], "--force") == 0) {
			force = true;
		} else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			return ctl_help("rm");
		} else if (strcmp(argv[i], "--") == 0) {
			i++;
			break;
		} else {
			errmsg("rm: unknown option '%s'", argv[i]);
			return EXIT_USAGE;
		}
	}
	if (i == argc) {
		return ctl_usage("rm");
	}
	for (; i < argc; i++) {
		struct lc_report r = CTL_REPORT;
		struct sandbox sb;
		int s, err;

		if ((s = sandbox_resolve(argv[i], &sb))) {
			status = s;
			continue;
		}
		if ((err = sandbox_rm(&sb, force, &r)) < 0)
			status = ctl_failed(&r, err);
	}
	return status;
}
