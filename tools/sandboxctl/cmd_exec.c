/* SPDX-License-Identifier: Apache-2.0 */
/* sandboxctl exec ID [options] -- CMD...: run a command in a sandbox (exec.c does the work). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandboxctl.h"

#define ENV_MAX 1024

static const char exec_usage[] =
	"usage: sandboxctl exec ID [-i] [-t] [--env K=V]... [--cwd DIR] [--timeout SEC] -- CMD...\n"
	"\n"
	"Run CMD in the sandbox ID (id, unique id prefix or name), streaming its stdout and\n"
	"stderr to ours as it runs, and exit with its status.\n"
	"  -i, --interactive  forward our stdin to the command (EOF closes its stdin)\n"
	"  -t, --tty          run it on a pseudo-terminal (stdout carries both streams); with -i\n"
	"                     and a terminal on our stdin, ours goes raw and its size follows\n"
	"  -e, --env K=V      set a variable (repeatable); PATH, HOME and LANG have defaults\n"
	"  -w, --cwd DIR      its working directory (default /)\n"
	"  --timeout SEC      kill it (its whole process group) after SEC seconds: status 124\n"
	"SIGINT, SIGTERM, SIGHUP and SIGQUIT go to the command. A second SIGINT, SIGTERM or\n"
	"SIGHUP, or 5 s after a SIGTERM or SIGHUP the command did not end on, ends exec at once\n"
	"(the command is killed) with 128+N, as a shell does.\n"
	"Exit status: the command's; 128+N when signal N killed it; 124 timeout; 126 it could\n"
	"not be started (bad --cwd, ...); 127 not found; 125 the sandbox is unusable.\n";

int sandbox_resolve_running(const char *ref, struct sandbox *sb)
{
	enum sandbox_state st;
	int status;

	if ((status = sandbox_resolve(ref, sb)))
		return status;
	st = sandbox_state(sb, NULL);
	if (st != SB_RUNNING) {
		errmsg("%s is %s%s", sb->id, sandbox_state_name(st),
		       st == SB_PAUSED ? ": sandboxctl resume it first" : "");
		return EXIT_SANDBOX;
	}
	return 0;
}

int cmd_exec(int argc, char **argv)
{
	static const struct option opts[] = {
		{"interactive", no_argument, NULL, 'i'},
		{"tty", no_argument, NULL, 't'},
		{"env", required_argument, NULL, 'e'},
		{"cwd", required_argument, NULL, 'w'},
		{"timeout", required_argument, NULL, 'T'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	static char *env[ENV_MAX];
	struct exec_opts o = {.env = env};
	struct sandbox sb;
	uint64_t v;
	int c, status;

	while ((c = getopt_long(argc, argv, "ite:w:h", opts, NULL)) != -1) {
		switch (c) {
		case 'i':
			o.interactive = true;
			break;
		case 't':
			o.tty = true;
			break;
		case 'e':
			if (!strchr(optarg, '=') || optarg[0] == '=') {
				errmsg("--env %s: give NAME=VALUE", optarg);
				return EXIT_USAGE;
			}
			if (o.nenv == ENV_MAX) {
				errmsg("--env: at most %d variables", ENV_MAX);
				return EXIT_USAGE;
			}
			env[o.nenv++] = optarg;
			break;
		case 'w':
			o.cwd = optarg;
			break;
		case 'T':
			if (!parse_u64(optarg, 1, 7 * 24 * 3600, &v)) {
				errmsg("--timeout %s: give seconds, at least 1", optarg);
				return EXIT_USAGE;
			}
			o.timeout_s = (unsigned)v;
			break;
		case 'h':
			fputs(exec_usage, stdout);
			return EXIT_OK;
		default:
			fputs(exec_usage, stderr);
			return EXIT_USAGE;
		}
	}
	if (argc - optind < 2) {
		errmsg("exec: give a sandbox and a command (sandboxctl exec ID -- CMD...)");
		return EXIT_USAGE;
	}
	if ((status = sandbox_resolve_running(argv[optind], &sb)))
		return status;
	o.argv = argv + optind + 1;
	o.argc = argc - optind - 1;
	return exec_run(&sb, &o);
}
