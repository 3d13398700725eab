/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sandboxctl create: a directory under $SANDBOX_HOME/sandboxes, an overlay above the image's
 * rootfs, and a detached sandbox-vmm (its own session, its output in console.log) serving
 * api.sock and vsock.sock; then wait until the guest agent answers a ping.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <linux/magic.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "disk.h"
#include "netpolicy.h"
#include "proto.h"
#include "sandboxctl.h"

/* create's own options, in getopt's order: the policy options (netpolicy.h's table) go after
 * --network, where its abbreviations and "ambiguous" lists expect them. */
static const struct option create_opts_head[] = {
	{"image", required_argument, NULL, 'i'},   {"cpus", required_argument, NULL, 'c'},
	{"memory", required_argument, NULL, 'm'},  {"disk-size", required_argument, NULL, 'd'},
	{"name", required_argument, NULL, 'n'},	   {"timeout", required_argument, NULL, 't'},
	{"console", required_argument, NULL, 'o'}, {"no-wait", no_argument, NULL, 'W'},
	{"disk", required_argument, NULL, 'D'},	   {"cold", no_argument, NULL, 'C'},
	{"network", required_argument, NULL, 'N'},
};
static const struct option create_opts_tail[] = {
	{"ttl", required_argument, NULL, 'L'},
	{"help", no_argument, NULL, 'h'},
	{NULL, 0, NULL, 0},
};
#define CREATE_HEAD_N (sizeof(create_opts_head) / sizeof(create_opts_head[0]))
#define CREATE_TAIL_N (sizeof(create_opts_tail) / sizeof(create_opts_tail[0]))

/* The whole getopt table: head, the policy options ('P' with a value, 'A' without: row
 * CREATE_HEAD_N + k is netpol_options[k]), tail. */
static void create_getopt_table(struct option *opts)
{
	memcpy(opts, create_opts_head, sizeof(create_opts_head));
	for (unsigned k = 0; k < NETPOL_NOPTS; k++)
		opts[CREATE_HEAD_N + k] = (struct option){
			netpol_options[k].flag + 2,
			netpol_options[k].has_value ? required_argument : no_argument,
			NULL,
			netpol_options[k].has_value ? 'P' : 'A',
		};
	memcpy(opts + CREATE_HEAD_N + NETPOL_NOPTS, create_opts_tail, sizeof(create_opts_tail));
}

int cmd_create(int argc, char **argv)
{
	struct option opts[CREATE_HEAD_N + NETPOL_NOPTS + CREATE_TAIL_N];
	struct create_opts o = CREATE_OPTS_DEFAULT;
	struct sandbox sb;
	uint64_t v;
	int c, status, li;
	/* Each policy option is two words for the proxy at most. */
	char **net_opts = calloc((size_t)argc * 2 + 1, sizeof(char *));
	bool policy_given = false;

	if (!net_opts) {
		errmsg("out of memory");
		return EXIT_ERR;
	}
	o.net_opts = net_opts;
	create_getopt_table(opts);
	while ((c = getopt_long(argc, argv, "h", opts, &li)) != -1) {
		switch (c) {
		case 'N':
			if (strcmp(optarg, "none") != 0 && strcmp(optarg, "proxy") != 0) {
				errmsg("--network %s: give none or proxy", optarg);
				free(net_opts);
				return EXIT_USAGE;
			}
			o.no_network = strcmp(optarg, "none") == 0;
			break;
		case 'P':
		case 'A':
			/* "--allow" and its word, in the table's spelling (a request's words). */
			o.net_opts[o.nnet_opts++] =
				(char *)netpol_options[li - (int)CREATE_HEAD_N].flag;
			if (c == 'P')
				o.net_opts[o.nnet_opts++] = optarg;
			policy_given = true;
			break;
		case 'i':
			if (!valid_name(optarg)) {
				errmsg("--image '%s': not an image name", optarg);
				return EXIT_USAGE;
			}
			o.image = optarg;
			break;
		case 'c':
			if (!parse_u64(optarg, 1, 32, &v)) {
				errmsg("--cpus %s: give 1 to 32", optarg);
				return EXIT_USAGE;
			}
			o.cpus = (unsigned)v;
			break;
		case 'm':
			if (!parse_u64(optarg, 64, 65536, &o.memory_mib)) {
				errmsg("--memory %s: give MiB from 64 to 65536", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'd':
			if (!parse_u64(optarg, 1, 16384, &o.disk_size_gib)) {
				errmsg("--disk-size %s: give GiB from 1 to 16384", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'n':
			if (!valid_name(optarg)) {
				errmsg("--name '%s': use [A-Za-z0-9][A-Za-z0-9._-]*, at most %d "
				       "characters",
				       optarg, NAME_MAX_LEN);
				return EXIT_USAGE;
			}
			o.name = optarg;
			break;
		case 't':
			if (!parse_u64(optarg, 1, 3600, &v)) {
				errmsg("--timeout %s: give seconds from 1 to 3600", optarg);
				return EXIT_USAGE;
			}
			o.timeout_s = (unsigned)v;
			break;
		case 'o':
			o.console = optarg;
			break;
		case 'L':
			if (!parse_duration(optarg, CREATE_TTL_MAX_S, &o.ttl_s)) {
				errmsg("--ttl %s: give a duration from 1s to 7d (90s, 10m, 2h)",
				       optarg);
				free(net_opts);
				return EXIT_USAGE;
			}
			break;
		case 'W':
			o.no_wait = true;
			break;
		case 'C':
			o.cold = true;
			break;
		case 'D': {
			size_t len = strlen(optarg);

			if (o.ndisks == EXTRA_DISKS_MAX) {
				errmsg("--disk %s: at most %d extra disks", optarg,
				       EXTRA_DISKS_MAX);
				return EXIT_USAGE;
			}
			o.disks_ro[o.ndisks] = len > 3 && strcmp(optarg + len - 3, ":ro") == 0;
			if (o.disks_ro[o.ndisks])
				optarg[len - 3] = '\0';
			o.disks[o.ndisks++] = optarg;
			break;
		}
		case 'h':
			return ctl_help("create");
		default:
			return ctl_usage("create");
		}
	}
	if (optind != argc) {
		errmsg("create: unexpected argument '%s'", argv[optind]);
		return EXIT_USAGE;
	}
	if (o.no_network && policy_given) {
		errmsg("create: a policy option with --network none: there is no network to "
		       "police");
		free(net_opts);
		return EXIT_USAGE;
	}
	{
		struct lc_report r = CTL_REPORT;
		int err = sandbox_create(&o, &sb, &r);

		status = err < 0 ? ctl_failed(&r, err) : EXIT_OK;
	}
	if (status == EXIT_OK)
		printf("%s\n", sb.id);
	free(net_opts);
	return status;
}
