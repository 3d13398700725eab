/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sandboxctl cp FILE ID:PATH / cp ID:PATH FILE: one file in or out. The copy, its bounds and
 * its temporary files are the client library's (client/copy.c); this is the command line.
 */
#include <stdbool.h>
#include <string.h>

#include "sandboxctl.h"

/* "ID:PATH" -> the sandbox and PATH; false when `arg` is a local path. */
static bool split_remote(char *arg, char **path)
{
	char *colon = strchr(arg, ':');

	if (!colon || arg[0] == '/' || arg[0] == '.' || colon == arg)
		return false;
	*colon = '\0';
	*path = colon + 1;
	return true;
}

int cmd_cp(int argc, char **argv)
{
	char *rpath, *ref;
	bool in;
	struct agent_conn c;
	struct sandbox sb;
	struct lc_report r = CTL_REPORT;
	unsigned timeout_s = 0;
	uint64_t v;
	int status, err;

	if (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
		return ctl_help("cp");
	}
	if (argc >= 3 && strcmp(argv[1], "--timeout") == 0) {
		if (!parse_u64(argv[2], 1, 7 * 24 * 3600, &v)) {
			errmsg("cp: --timeout %s: give seconds, at least 1", argv[2]);
			return EXIT_USAGE;
		}
		timeout_s = (unsigned)v;
		argc -= 2;
		argv += 2;
	}
	if (argc != 3) {
		return ctl_usage("cp");
	}
	if (split_remote(argv[2], &rpath)) {
		in = true;
		ref = argv[2];
		if (split_remote(argv[1], &(char *){NULL})) {
			errmsg("cp: copy between the host and a sandbox, not two sandboxes");
			return EXIT_USAGE;
		}
	} else if (split_remote(argv[1], &rpath)) {
		in = false;
		ref = argv[1];
	} else {
		errmsg("cp: one side must be ID:PATH");
		return EXIT_USAGE;
	}
	if (!rpath[0]) {
		errmsg("cp: empty path in the sandbox");
		return EXIT_USAGE;
	}
	if ((status = sandbox_resolve_running(ref, &sb)))
		return status;
	if ((err = agent_connect(&sb, 10000, &c)) < 0) {
		errmsg("%s: cannot reach the guest agent: %s", sb.id, strerror(-err));
		return EXIT_SANDBOX;
	}
	err = in ? copy_in(&c, argv[1], rpath, timeout_s, &r)
		 : copy_out(&c, rpath, argv[2], timeout_s, NULL, &r);
	agent_close(&c);
	return err < 0 ? ctl_failed(&r, err) : EXIT_OK;
}
