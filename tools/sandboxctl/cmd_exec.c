/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sandboxctl exec ID [options] [-- CMD...]: run a command in a sandbox (sandbox_exec,
 * client/exec.c, does the work; its output goes to ours), with the defaults of an imported
 * image's exec.conf (client/image_conf.c): its Env under --env, its WorkingDir under --cwd,
 * its User under --user; without CMD, its Entrypoint and Cmd.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "sandboxctl.h"

#define ENV_MAX 1024

/* Where the command's output goes: our stdout and stderr, each until a write to it fails
 * (then it is drained unwritten: the command decides when it ends). */
struct exec_out {
	bool stdout_ok, stderr_ok;
};

static void exec_output(void *arg, int stream, const void *data, size_t len)
{
	struct exec_out *w = arg;

	if (stream == 1 && w->stdout_ok && write_all(STDOUT_FILENO, data, len) < 0)
		w->stdout_ok = false;
	else if (stream == 2 && w->stderr_ok && write_all(STDERR_FILENO, data, len) < 0)
		w->stderr_ok = false;
}

/* sandbox_exec's result as exec's exit status: the command's, else its failure said and
 * 124 for a timeout, 126 for a command the agent could not start, as ctl_failed for the rest
 * (125: the sandbox or its agent cannot be reached). */
static int exec_status(const struct lc_report *r, int err)
{
	if (err >= 0)
		return err;
	if (err != -ETIMEDOUT && err != -ENOEXEC)
		return ctl_failed(r, err);
	errmsg("%s", r->error);
	return err == -ETIMEDOUT ? EXIT_TIMEOUT : EXIT_CMD_EXEC;
}

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

/* --user: "root", "UID" (GID the same) or "UID:GID", numbers below the agent's "keep". */
static int parse_user(const char *s, uint32_t *uid, uint32_t *gid)
{
	char u[32], *colon;

	if (strcmp(s, "root") == 0) {
		*uid = *gid = 0;
		return 0;
	}
	if (strlen(s) >= sizeof(u))
		return -EINVAL;
	snprintf(u, sizeof(u), "%s", s);
	if ((colon = strchr(u, ':')))
		*colon++ = '\0';
	if (!image_conf_id(u, uid) || !image_conf_id(colon ? colon : u, gid))
		return -EINVAL;
	return 0;
}

int cmd_exec(int argc, char **argv)
{
	static const struct option opts[] = {
		{"interactive", no_argument, NULL, 'i'},   {"tty", no_argument, NULL, 't'},
		{"env", required_argument, NULL, 'e'},	   {"cwd", required_argument, NULL, 'w'},
		{"timeout", required_argument, NULL, 'T'}, {"user", required_argument, NULL, 'u'},
		{"help", no_argument, NULL, 'h'},	   {NULL, 0, NULL, 0},
	};
	static char *env[ENV_MAX];
	struct exec_out out = {.stdout_ok = true, .stderr_ok = true};
	struct exec_opts o = {.env = env, .on_output = exec_output, .output_arg = &out};
	struct lc_report r = CTL_REPORT;
	struct image_conf conf;
	struct sandbox sb;
	char **args = NULL;
	uint64_t v;
	int c, status, err;

	while ((c = getopt_long(argc, argv, "ite:w:u:h", opts, NULL)) != -1) {
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
		case 'u':
			if (parse_user(optarg, &o.uid, &o.gid) < 0) {
				errmsg("--user %s: give UID[:GID] (numbers) or root", optarg);
				return EXIT_USAGE;
			}
			o.user_set = true;
			break;
		case 'T':
			if (!parse_u64(optarg, 1, 7 * 24 * 3600, &v)) {
				errmsg("--timeout %s: give seconds, at least 1", optarg);
				return EXIT_USAGE;
			}
			o.timeout_s = (unsigned)v;
			break;
		case 'h':
			return ctl_help("exec");
		default:
			return ctl_usage("exec");
		}
	}
	if (argc - optind < 1) {
		errmsg("exec: give a sandbox and a command (sandboxctl exec ID -- CMD...)");
		return EXIT_USAGE;
	}
	if ((status = sandbox_resolve_running(argv[optind], &sb)))
		return status;
	if ((err = image_conf_load(sb.image, &conf)) < 0) {
		errmsg("image %s: cannot read its exec.conf: %s", sb.image,
		       err == -EBADMSG ? "it does not parse" : strerror(-err));
		return EXIT_ERR;
	}
	o.image = &conf;
	o.argv = argv + optind + 1;
	o.argc = argc - optind - 1;
	if (o.argc == 0) {
		/* as docker run with no command: the entrypoint, then the cmd */
		if (conf.nentrypoint + conf.ncmd == 0) {
			errmsg("exec: give a command: the image %s has no Entrypoint or Cmd "
			       "(sandboxctl exec ID -- CMD...)",
			       sb.image);
			image_conf_free(&conf);
			return EXIT_USAGE;
		}
		if (!(args = calloc(conf.nentrypoint + conf.ncmd + 1, sizeof(*args)))) {
			image_conf_free(&conf);
			return EXIT_ERR;
		}
		for (unsigned i = 0; i < conf.nentrypoint; i++)
			args[o.argc++] = conf.entrypoint[i];
		for (unsigned i = 0; i < conf.ncmd; i++)
			args[o.argc++] = conf.cmd[i];
		o.argv = args;
	}
	status = exec_status(&r, sandbox_exec(&sb, &o, &r));
	free(args);
	image_conf_free(&conf);
	return status;
}
