/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Snapshots (docs/snapshots.md): snapshot ID NAME, restore NAME, fork ID [-n N], suspend ID
 * (and resume of a suspended sandbox), snapshots [--json], snapshot rm NAME.
 *
 * Taking one is the lifecycle's (client/snapshot.c, sandbox_snapshot).
 */
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "api_proto.h"
#include "disk.h"
#include "sandboxctl.h"

/* ---- snapshot ID NAME ---- */

int cmd_snapshot(int argc, char **argv)
{
	struct snap_take t = {.flags = 0};
	struct lc_report r = CTL_REPORT;
	struct sandbox sb;
	int status, err;

	if (argc >= 2 && strcmp(argv[1], "rm") == 0)
		return cmd_snapshots(argc, argv);
	if (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0))
		return ctl_help("snapshot");
	if (argc != 3)
		return ctl_usage("snapshot");
	if (!valid_name(argv[2])) {
		errmsg("snapshot name '%.80s': use [A-Za-z0-9][A-Za-z0-9._-]*, at most %d "
		       "characters (no '/')",
		       argv[2], NAME_MAX_LEN);
		return EXIT_USAGE;
	}
	if ((status = sandbox_resolve(argv[1], &sb)))
		return status;
	t.name = argv[2];
	if ((err = sandbox_snapshot(&sb, &t, &r)) < 0)
		return ctl_failed(&r, err);
	fprintf(stderr,
		"snapshot %s: paused %.1f ms, %llu MiB of memory written, %.1f "
		"ms\n",
		t.name, (double)t.out.pause_us / 1000.0,
		(unsigned long long)(t.out.memory_bytes >> 20), (double)t.out.total_us / 1000.0);
	return EXIT_OK;
}

/* ---- restore NAME [--name N] ---- */

int cmd_restore(int argc, char **argv)
{
	static const struct option opts[] = {
		{"name", required_argument, NULL, 'n'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *name = NULL;
	char dir[4200];
	struct lc_report r = CTL_REPORT;
	struct snap_meta m;
	struct sandbox sb;
	struct boot_src src;
	int c, err, status;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'n':
			if (!valid_name(optarg)) {
				errmsg("--name '%.80s': not a name", optarg);
				return EXIT_USAGE;
			}
			name = optarg;
			break;
		case 'h':
			return ctl_help("restore");
		default:
			return EXIT_USAGE;
		}
	}
	if (optind != argc - 1)
		return ctl_usage("restore");
	if (!valid_name(argv[optind])) {
		errmsg("'%.80s' is not a snapshot name", argv[optind]);
		return EXIT_USAGE;
	}
	if ((status = host_check_linux()) || (status = state_init() < 0 ? EXIT_ERR : 0))
		return status;
	if ((err = sandbox_snapshot_open(argv[optind], dir, sizeof(dir), &m, &r)) < 0)
		return ctl_failed(&r, err);
	if (!m.has_memory) {
		errmsg("snapshot '%s' has no memory file", argv[optind]);
		return EXIT_ERR;
	}
	src = (struct boot_src){.dir = dir};
	if ((err = sandbox_restore(dir, &m, name, NULL, &src, false, &sb, &r)) < 0)
		return ctl_failed(&r, err);
	printf("%s\n", sb.id);
	return EXIT_OK;
}

/* ---- fork ID [-n N] ---- */

int cmd_fork(int argc, char **argv)
{
	static const struct option opts[] = {
		{"count", required_argument, NULL, 'n'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	static struct sandbox children[FORK_MAX];
	bool ok[FORK_MAX];
	struct snap_take t;
	struct lc_report r = CTL_REPORT;
	struct sandbox parent;
	uint64_t n = 1, t0 = now_ms();
	unsigned started = 0;
	int c, err, status = EXIT_OK;

	optind = 1;
	while ((c = getopt_long(argc, argv, "hn:", opts, NULL)) != -1) {
		switch (c) {
		case 'n':
			if (!parse_u64(optarg, 1, FORK_MAX, &n)) {
				errmsg("-n %.32s: give 1 to %d children", optarg, FORK_MAX);
				return EXIT_USAGE;
			}
			break;
		case 'h':
			return ctl_help("fork");
		default:
			return EXIT_USAGE;
		}
	}
	if (optind != argc - 1)
		return ctl_usage("fork");
	if ((status = sandbox_resolve(argv[optind], &parent)))
		return status;
	err = sandbox_fork(&parent, (unsigned)n, children, ok, &started, &t, &r);
	if (err < 0 && !t.dir[0])
		return ctl_failed(&r,
				  err); /* no snapshot to fork from: the host, or the snapshot */
	for (unsigned i = 0; i < started; i++)
		if (ok[i])
			printf("%s\n", children[i].id);
	if (err < 0)
		status = ctl_failed(&r, err);
	fprintf(stderr, "fork: %u of %llu children in %llu ms, the parent paused %.2f ms\n",
		status == EXIT_OK ? started : 0, (unsigned long long)n,
		(unsigned long long)(now_ms() - t0), (double)t.out.pause_us / 1000.0);
	return status;
}

/* ---- suspend ID (resume: cmd_pause.c) ---- */

int cmd_suspend(int argc, char **argv)
{
	struct lc_report r = CTL_REPORT;
	struct snap_take t;
	struct sandbox sb;
	int status, err;

	if (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0))
		return ctl_help("suspend");
	if (argc != 2 || argv[1][0] == '-')
		return ctl_usage("suspend");
	if ((status = sandbox_resolve(argv[1], &sb)))
		return status;
	if ((err = sandbox_suspend(&sb, &t, &r)) < 0)
		return ctl_failed(&r, err);
	fprintf(stderr, "suspended %s: %llu MiB of memory written in %.1f ms\n", sb.id,
		(unsigned long long)(t.out.memory_bytes >> 20), (double)t.out.total_us / 1000.0);
	return EXIT_OK;
}

/* ---- snapshots [--json], snapshot rm [-f] NAME ---- */

struct list_ctx {
	bool json, all;
	unsigned n;
	const char *rm; /* snapshot rm: who depends on this one */
	unsigned users;
	bool quiet; /* count them without saying who */
};

uint64_t snapshot_dir_bytes(const char *dir)
{
	struct dirent *e;
	struct stat st;
	uint64_t sum = 0;
	DIR *d = opendir(dir);

	if (!d)
		return 0;
	while ((e = readdir(d)))
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISREG(st.st_mode))
			sum += (uint64_t)st.st_blocks * 512;
	closedir(d);
	return sum;
}

static int list_one(const char *name, void *opaque)
{
	struct list_ctx *l = opaque;
	char dir[4200], msg[640], when[32];
	struct snap_meta m;
	time_t t;

	if (name[0] == '.' && !l->all)
		return 0;
	if (snap_dir(name, dir, sizeof(dir)) < 0)
		return 0;
	if (snap_open(dir, &m, msg, sizeof(msg)) < 0) {
		if (l->json)
			printf("%s{\"name\":\"%s\",\"error\":\"unreadable\"}", l->n++ ? "," : "",
			       name);
		else /* the message may quote the snapshot's files */
			printf("%-24s %s\n", name, printable_copy(msg, msg, sizeof(msg)));
		return 0;
	}
	t = (time_t)m.created;
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", gmtime(&t));
	if (l->json)
		printf("%s{\"name\":\"%s\",\"sandbox\":\"%s\",\"parent\":\"%s\",\"image\":"
		       "\"%s\","
		       "\"cpus\":%u,\"memory_mib\":%llu,\"created\":%llu,\"disk_bytes\":%"
		       "llu}",
		       l->n ? "," : "", m.name, m.sandbox, m.parent, m.image, m.cpus,
		       (unsigned long long)m.memory_mib, (unsigned long long)m.created,
		       (unsigned long long)snapshot_dir_bytes(dir));
	else
		printf("%-24s %-12s %-10s %4u %7llu %9llu  %s\n", m.name, m.sandbox, m.image,
		       m.cpus, (unsigned long long)m.memory_mib,
		       (unsigned long long)(snapshot_dir_bytes(dir) >> 20), when);
	l->n++;
	return 0;
}

static int count_sandbox_users(const struct sandbox *sb, void *opaque)
{
	struct list_ctx *l = opaque;

	if (strcmp(sb->base, l->rm) == 0) {
		if (!l->quiet)
			errmsg("sandbox %s (%s) runs from snapshot '%s'", sb->id, sb->name, l->rm);
		l->users++;
	}
	return 0;
}

static int count_snapshot_users(const char *name, void *opaque)
{
	struct list_ctx *l = opaque;
	char dir[4200], msg[640];
	struct snap_meta m;

	if (snap_dir(name, dir, sizeof(dir)) == 0 && snap_open(dir, &m, msg, sizeof(msg)) == 0 &&
	    strcmp(m.parent, l->rm) == 0) {
		if (!l->quiet)
			errmsg("snapshot '%s' was taken of a sandbox restored from '%s'", name,
			       l->rm);
		l->users++;
	}
	return 0;
}

unsigned snapshot_users(const char *name)
{
	struct list_ctx l = {.rm = name, .quiet = true};

	sandbox_foreach(count_sandbox_users, &l, &ctl_report);
	snap_foreach(count_snapshot_users, &l);
	return l.users;
}

static int snapshot_rm(int argc, char **argv)
{
	struct list_ctx l = {0};
	bool force = argc == 4 && strcmp(argv[2], "-f") == 0;
	const char *name = argv[argc - 1];
	char dir[4200];
	struct stat st;

	if (argc != 3 + force)
		return ctl_usage("snapshot rm");
	if (!valid_name(name) || snap_dir(name, dir, sizeof(dir)) < 0) {
		errmsg("'%.80s' is not a snapshot name", name);
		return EXIT_USAGE;
	}
	if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		errmsg("no snapshot '%s'", name);
		return EXIT_ERR;
	}
	l.rm = name;
	sandbox_foreach(count_sandbox_users, &l, &ctl_report);
	snap_foreach(count_snapshot_users, &l);
	if (l.users && !force) {
		errmsg("snapshot '%s' is in use (above): not removed (-f removes it, and "
		       "with it "
		       "the disk layers they stand on: they will not start or restore "
		       "again)",
		       name);
		return EXIT_ERR;
	}
	remove_flat_dir(dir);
	return EXIT_OK;
}

int cmd_snapshots(int argc, char **argv)
{
	struct list_ctx l = {0};

	if (strcmp(argv[0], "snapshot") == 0)
		return snapshot_rm(argc, argv);
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			l.json = true;
		else if (strcmp(argv[i], "--all") == 0 || strcmp(argv[i], "-a") == 0)
			l.all = true;
		else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
			return ctl_help("snapshots");
		else
			return ctl_usage("snapshots");
	}
	if (l.json)
		printf("[");
	else
		printf("%-24s %-12s %-10s %4s %7s %9s  %s\n", "NAME", "SANDBOX", "IMAGE", "CPUS",
		       "MEM_MIB", "DISK_MIB", "CREATED (UTC)");
	if (snap_foreach(list_one, &l) < 0) {
		errmsg("cannot list %s/snapshots: %m", state_home());
		return EXIT_ERR;
	}
	if (l.json)
		printf("]\n");
	return EXIT_OK;
}
