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

static const char start_usage[] =
	"usage: sandboxctl start [--timeout SEC] ID\n"
	"\n"
	"Boot a stopped (or dead) sandbox again from its own root disk and print its id once\n"
	"the guest agent answers (within SEC seconds, default 60).\n";

int cmd_start(int argc, char **argv)
{
	static const struct option opts[] = {
		{"timeout", required_argument, NULL, 't'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	char marker[4200];
	struct lc_report r = CTL_REPORT;
	struct sandbox sb;
	enum sandbox_state st;
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
			fputs(start_usage, stdout);
			return EXIT_OK;
		default:
			fputs(start_usage, stderr);
			return EXIT_USAGE;
		}
	}
	if (optind != argc - 1) {
		fputs(start_usage, stderr);
		return EXIT_USAGE;
	}
	if ((status = sandbox_resolve(argv[optind], &sb)))
		return status;
	if ((status = host_check_linux()))
		return status;
	st = sandbox_state(&sb, NULL);
	if (st != SB_STOPPED && st != SB_DEAD) {
		errmsg("%s is %s: only a stopped or dead sandbox can be started", sb.id,
		       sandbox_state_name(st));
		return EXIT_ERR;
	}
	if (st == SB_DEAD && (err = sandbox_stop_vmm(&sb, true, &ctl_report)) < 0) {
		errmsg("%s: cannot clean up after its dead VMM: %s", sb.id, strerror(-err));
		return EXIT_ERR;
	}
	if ((err = sandbox_path(&sb, "stopped", marker, sizeof(marker))) < 0 ||
	    (unlink(marker) < 0 && errno != ENOENT)) {
		errmsg("%s: cannot clear its stopped marker: %s", sb.id,
		       strerror(err < 0 ? -err : errno));
		return EXIT_ERR;
	}
	if ((err = sandbox_start_vmm(&sb, NULL, NULL, timeout_s, false, &r)) < 0) {
		status = ctl_failed(&r, err);
		/* Leave it stopped, as it was, rather than half started. */
		if (sandbox_stop_vmm(&sb, true, &ctl_report) < 0)
			errmsg("%s: cannot stop the VMM (pid %d)", sb.id, (int)sb.pid);
		return status;
	}
	printf("%s\n", sb.id);
	return EXIT_OK;
}
