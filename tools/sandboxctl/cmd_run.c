/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sandboxctl run JOB.yaml: the job spec read (tools/jobspec/), then printed (--check) or run
 * in a fresh sandbox by the job runner (tools/jobs/: job_run), whose status is ours: the
 * first failing step's (docs/jobspec.md, "Running").
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "jobs.h"
#include "sandboxctl.h"

/* The runner's statuses are ours (docs/sandboxctl.md). */
_Static_assert(JOB_EXIT_ERR == EXIT_ERR && JOB_EXIT_USAGE == EXIT_USAGE &&
		       JOB_EXIT_TIMEOUT == EXIT_TIMEOUT && JOB_EXIT_SANDBOX == EXIT_SANDBOX &&
		       JOB_EXIT_CMD_EXEC == EXIT_CMD_EXEC,
	       "a job's statuses are sandboxctl's");

int cmd_run(int argc, char **argv)
{
	static const struct option opts[] = {
		{"keep", no_argument, NULL, 'k'},
		{"check", no_argument, NULL, 'c'},
		{"artifacts", required_argument, NULL, 'a'},
		{"no-cache", no_argument, NULL, 'n'},
		{"cache-max", required_argument, NULL, 'm'},
		{"json", no_argument, NULL, 'j'},
		{"junit", required_argument, NULL, 'u'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct job_run_opts o = {
		.artifacts = "artifacts",
		.cache_max_gib = JOB_CACHE_MAX_GIB,
		.report = CTL_REPORT,
		.failed = ctl_failed,
		.snap_bytes = snapshot_dir_bytes,
		.snap_users = snapshot_users,
	};
	struct jobspec js;
	char err[768];
	bool check = false;
	int c, status;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'k':
			o.keep = true;
			break;
		case 'c':
			check = true;
			break;
		case 'a':
			o.artifacts = optarg;
			break;
		case 'n':
			o.no_cache = true;
			break;
		case 'j':
			o.json = true;
			break;
		case 'u':
			o.junit = optarg;
			break;
		case 'm':
			if (!parse_u64(optarg, 0, 1u << 20, &o.cache_max_gib)) {
				errmsg("--cache-max %s: give GiB, 0 to 1048576", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'h':
			return ctl_help("run");
		default:
			return ctl_usage("run");
		}
	}
	if (optind + 1 != argc) {
		return ctl_usage("run");
	}
	if (jobspec_load(argv[optind], &js, err, sizeof(err)) < 0) {
		errmsg("%s", err);
		jobspec_free(&js);
		return EXIT_USAGE;
	}
	if (check) {
		jobspec_print(&js, stdout);
		jobspec_free(&js);
		return EXIT_OK;
	}
	o.spec = argv[optind];
	status = job_run(&js, &o);
	jobspec_free(&js);
	return status;
}
