/* SPDX-License-Identifier: Apache-2.0 */
/* sandboxctl rm [-f] ID...: remove sandboxes, leaving no process, socket or directory. */
#include <stdio.h>
#include <string.h>

#include "sandboxctl.h"

static const char rm_usage[] = "usage: sandboxctl rm [-f] ID...\n"
			       "\n"
			       "Remove sandboxes: their directory, disk and sockets. A running or\n"
			       "paused sandbox is refused unless -f (then its VMM is killed).\n";

int cmd_rm(int argc, char **argv)
{
	bool force = false;
	int i = 1, status = EXIT_OK;

	for (; i < argc && argv[i][0] == '-'; i++) {
		if (strcmp(argv[i], "-f") == 0 || strcmp(argv[i], "--force") == 0) {
			force = true;
		} else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			fputs(rm_usage, stdout);
			return EXIT_OK;
		} else if (strcmp(argv[i], "--") == 0) {
			i++;
			break;
		} else {
			errmsg("rm: unknown option '%s'", argv[i]);
			return EXIT_USAGE;
		}
	}
	if (i == argc) {
		fputs(rm_usage, stderr);
		return EXIT_USAGE;
	}
	for (; i < argc; i++) {
		struct sandbox sb;
		int s, err;

		if ((s = sandbox_resolve(argv[i], &sb))) {
			status = s;
			continue;
		}
		if (sandbox_vmm_alive(&sb)) {
			if (!force) {
				errmsg("%s is %s: stop it first, or rm -f", sb.id,
				       sandbox_state_name(sandbox_state(&sb, NULL)));
				status = EXIT_ERR;
				continue;
			}
			if ((err = sandbox_stop_vmm(&sb, true, &ctl_report)) < 0) {
				errmsg("%s: cannot kill the VMM (pid %d): %s", sb.id, (int)sb.pid,
				       strerror(-err));
				status = EXIT_ERR;
				continue;
			}
		}
		if (sb.network) { /* a dead VMM's proxy and namespace */
			proxy_stop(&sb);
			net_teardown(&sb);
		}
		cgroup_remove(&sb); /* a dead VMM's */
		remove_flat_dir(sb.dir);
		snapshots_gc(&sb);
	}
	return status;
}
