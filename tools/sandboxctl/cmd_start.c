/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sandboxctl start ID: boot a stopped (or dead) sandbox again, with its own root disk, so what
 * its guest wrote and synced before the stop is there again; print its id once the agent
 * answers.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sandboxctl.h"

int cmd_start(int argc, char **argv)
{
	static const struct option opts[] = {
		{"timeout", required_argument, NULL, 't'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct lc_report r = CTL_REPORT;
	struct sandbox sb;
	unsigned timeout_s = 60;
	uint64_t v;
	int c, status, err;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 't':
			if (!parse_u64(optarg, 1, 3600, &v)) {
				errmsg("--timeout %.64s: give 1-3600 seconds", optarg);
				return EXIT_USAGE;
			}
			timeout_s = (unsigned)v;
			break;
		case 'h':
			return ctl_help("start");
		default:
			return ctl_usage("start");
		}
	}
	if (optind != argc - 1) {
		return ctl_usage("start");
	}
	if ((status = sandbox_resolve(argv[optind], &sb)))
		return status;
	if ((err = sandbox_start(&sb, timeout_s, &r)) < 0)
		return ctl_failed(&r, err);
	printf("%s\n", sb.id);
	return EXIT_OK;
}
