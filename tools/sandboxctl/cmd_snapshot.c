/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Snapshots (docs/snapshots.md): snapshot ID NAME, restore NAME, fork ID [-n N], suspend ID
 * (and resume of a suspended sandbox), snapshots [--json], snapshot rm NAME.
 *
 * A snapshot is made in a temporary directory beside its final place, sealed (meta.yaml, mac)
 * and renamed into place: one that exists is whole. The VMM writes state and memory there
 * and freezes the sandbox's top disk layer, going on over root.<n+1>.layer; hard links of
 * the frozen layers go into the snapshot, so removing the sandbox leaves it whole.
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

#define SNAPSHOT_TIMEOUT_MS 300000 /* the VMM writes RAM and fsyncs within this */
#define FORK_MAX	    64	   /* children of one fork (docs/snapshots.md) */
#define RESTORE_TIMEOUT_S   60

/* The layer after `top`: root.layer -> root.1.layer -> root.2.layer ... */
static int next_top(const char *top, char *out, size_t len)
{
	unsigned long n = 0;

	if (strcmp(top, "root.layer") != 0)
		n = strtoul(top + 5, NULL, 10);
	if (n >= 1000000)
		return -ELOOP;
	return path_fmt(out, len, "root.%lu.layer", n + 1);
}

static int stray_refused(const struct sandbox *sb)
{
	errmsg("%s: its directory holds %s, a layer above its top %s that is not one its VMM "
	       "could have made: check it, then chown it to root to keep it or remove it",
	       sb->id, sb->stray_top, sb->top);
	return -EPERM;
}

int snapshot_adopt_stray_top(struct sandbox *sb)
{
	struct disk_header h;
	char path[4200], next[32];
	int fd, err;

	if (!sb->stray_top[0])
		return 0;
	/* Only the one a snapshot of the top would have made, over the top, by name. */
	if ((err = next_top(sb->top, next, sizeof(next))) < 0 || strcmp(next, sb->stray_top) != 0 ||
	    (err = sandbox_path(sb, sb->stray_top, path, sizeof(path))) < 0)
		return stray_refused(sb);
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return stray_refused(sb);
	err = pread(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h) ? 0 : -EIO;
	close(fd);
	if (err < 0 || memcmp(h.magic, DISK_MAGIC, DISK_MAGIC_LEN) != 0 ||
	    le32toh(h.parent_kind) != DISK_PARENT_LAYER ||
	    le32toh(h.parent_path_len) != strlen(sb->top) ||
	    memcmp(h.parent_path, sb->top, strlen(sb->top)) != 0 ||
	    (err = sandbox_jail_adopt(sb, path)) < 0)
		return stray_refused(sb);
	snprintf(sb->top, sizeof(sb->top), "%s", sb->stray_top);
	sb->stray_top[0] = '\0';
	return 0;
}

static int snapshots_root(char *out, size_t len)
{
	int err = path_fmt(out, len, "%s/snapshots", state_home());

	/* 0700 root, every time: a jailed VMM given a staging directory's fd here must not be
	 * able to walk up out of it. */
	if (!err && chmod(out, 0700) < 0 && errno != ENOENT)
		err = -errno;
	if (!err && mkdir(out, 0700) < 0 && errno != EEXIST)
		err = -errno;
	return err;
}

static void fsync_path(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd >= 0) {
		(void)fsync(fd);
		close(fd);
	}
}

/* Remove the temporary directories of sandboxctls that died mid-snapshot ("+tmp-NAME-PID"
 * whose PID is gone): no snapshot is there, only what one left half made. */
static void remove_stale_tmp(const char *root)
{
	char path[4200];
	struct dirent *e;
	DIR *d = opendir(root);

	if (!d)
		return;
	while ((e = readdir(d))) {
		const char *dash = strrchr(e->d_name, '-');
		char *end;
		long pid;

		if (strncmp(e->d_name, "+tmp-", 5) != 0 || !dash)
			continue;
		pid = strtol(dash + 1, &end, 10);
		if (*end || pid <= 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		if (path_fmt(path, sizeof(path), "%s/%s", root, e->d_name) == 0)
			remove_flat_dir(path);
	}
	closedir(d);
}

/* Hard links of the sandbox's frozen layers (every root*.layer but its new top), recorded in
 * the meta. */
static int link_layers(const struct sandbox *sb, const char *tmp, struct snap_meta *m)
{
	char from[4200], to[4200];
	DIR *d = opendir(sb->dir);
	struct dirent *e;
	int err = 0;

	if (!d)
		return -errno;
	while ((e = readdir(d)) && !err) {
		if (!snap_valid_layer_name(e->d_name) || strcmp(e->d_name, sb->top) == 0)
			continue;
		if (m->nlayers == SNAP_LAYERS_MAX) {
			err = -ELOOP;
			break;
		}
		if ((err = path_fmt(from, sizeof(from), "%s/%s", sb->dir, e->d_name)) < 0 ||
		    (err = path_fmt(to, sizeof(to), "%s/%s", tmp, e->d_name)) < 0)
			break;
		if (link(from, to) < 0) {
			err = -errno;
			break;
		}
		/* snap_valid_layer_name bounds the name to 30 bytes */
		memcpy(m->layers[m->nlayers++].file, e->d_name, strlen(e->d_name) + 1);
	}
	closedir(d);
	return err;
}

/* Take over what a jailed VMM wrote: its new top layer, and in `tmp` exactly the state and
 * (unless a fork's) the memory, each a plain file of its own; `tmp` becomes root's again. */
static int adopt_snapshot(const struct sandbox *sb, const char *tmp, const char *new_top)
{
	char path[4200];
	struct dirent *e;
	DIR *d;
	int err;

	if ((err = sandbox_jail_adopt(sb, new_top)) < 0)
		return err;
	if (chown(tmp, 0, 0) < 0 || chmod(tmp, 0700) < 0)
		return -errno;
	if (!(d = opendir(tmp)))
		return -errno;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (strcmp(e->d_name, "state.fdt") && strcmp(e->d_name, "memory")) {
			err = -EPERM;
			break;
		}
		if ((err = path_fmt(path, sizeof(path), "%s/%s", tmp, e->d_name)) < 0 ||
		    (err = sandbox_jail_adopt(sb, path)) < 0)
			break;
	}
	closedir(d);
	return err;
}

/* Is `path` on tmpfs or ramfs, where a file's bytes are memory charged to who wrote them? */
static bool on_tmpfs(const char *path)
{
	struct statfs fs;

	return statfs(path, &fs) == 0 && (fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC);
}

/* The bytes a file holds there, else 0. */
static uint64_t tmpfs_bytes(const char *path)
{
	struct stat st;

	return on_tmpfs(path) && stat(path, &st) == 0 ? (uint64_t)st.st_blocks * 512 : 0;
}

/*
 * The VMM's SNAPSHOT into `tmp`, with the sandbox's memory limit made room for what the
 * snapshot leaves charged to its cgroup (client/cgroup.c, cgroup_snap_begin): a fork's
 * frozen RAM, or what it wrote to tmpfs (the memory file; the frozen top layer's data,
 * after which the new top may grow as far again).
 */
static int snapshot_api_limited(struct sandbox *sb, struct snap_take *t, const char *tmp,
				int tmp_fd, const char *const *tops, char *msg, size_t msg_len)
{
	bool live = t->flags & API_SNAPSHOT_LIVE;
	char path[4300], top[4200];
	struct cgroup_snap cg;
	uint64_t extra = 0;
	int err, e;

	if (!live && !on_tmpfs(tmp) && !on_tmpfs(sb->dir))
		return api_snapshot(sb, t->flags, tmp, tmp_fd, tops, 1, SNAPSHOT_TIMEOUT_MS,
				    &t->out, msg, msg_len);
	if ((err = cgroup_snap_begin(sb, &cg)) < 0) {
		snprintf(msg, msg_len, "cannot raise its memory limit for it: %s", strerror(-err));
		if (cgroup_snap_end(sb, &cg, false, 0) < 0)
			errmsg("%s: cannot set its memory limit back", sb->id);
		return err;
	}
	/* the top layer about to be frozen */
	if (sandbox_path(sb, sb->top, top, sizeof(top)) < 0)
		top[0] = '\0';
	err = api_snapshot(sb, t->flags, tmp, tmp_fd, tops, 1, SNAPSHOT_TIMEOUT_MS, &t->out, msg,
			   msg_len);
	if (err == 0 && !live && path_fmt(path, sizeof(path), "%s/memory", tmp) == 0)
		extra = tmpfs_bytes(path) + (top[0] ? tmpfs_bytes(top) : 0);
	if ((e = cgroup_snap_end(sb, &cg, err == 0 && live, extra)) < 0)
		errmsg("warning: %s: cannot set its memory limit after the snapshot: %s", sb->id,
		       strerror(-e));
	return err;
}

int snapshot_take(struct sandbox *sb, struct snap_take *t)
{
	char root[4200], tmp[4200], new_top[4200], next[32], old_top[32], msg[API_ERROR_MSG_MAX];
	const char *tops[1];
	struct stat st;
	int err, tmp_fd;

	for (unsigned i = 0; i < sb->ndisks; i++)
		if (!sb->disks[i].ro) {
			errmsg("%s: its extra disk %s is writable: snapshots of writable extra "
			       "disks are not supported (give it :ro)",
			       sb->id, sb->disks[i].path);
			return EXIT_ERR;
		}
	if (snapshot_adopt_stray_top(sb) < 0)
		return EXIT_ERR;
	if (!sandbox_vmm_alive(sb)) {
		errmsg("%s is %s: only a running or paused sandbox can be snapshotted", sb->id,
		       sandbox_state_name(sandbox_state(sb, NULL)));
		return EXIT_SANDBOX;
	}
	if ((err = snapshots_root(root, sizeof(root))) < 0 ||
	    (err = path_fmt(t->dir, sizeof(t->dir), "%s/%s", root, t->name)) < 0 ||
	    (err = path_fmt(tmp, sizeof(tmp), "%s/+tmp-%s-%d", root, t->name, (int)getpid())) < 0 ||
	    (err = next_top(sb->top, next, sizeof(next))) < 0 ||
	    (err = sandbox_path(sb, next, new_top, sizeof(new_top))) < 0) {
		errmsg("%s: %s", sb->id, strerror(-err));
		return EXIT_ERR;
	}
	if (lstat(t->dir, &st) == 0) {
		errmsg("a snapshot named '%s' exists already (snapshot rm it first)", t->name);
		return EXIT_ERR;
	}
	remove_stale_tmp(root);
	remove_flat_dir(tmp); /* a leftover of a crashed sandboxctl of this pid */
	if (mkdir(tmp, 0700) < 0) {
		errmsg("cannot make %s: %m", tmp);
		return EXIT_ERR;
	}
	if (jail_enabled() && chown(tmp, sandbox_uid(sb->id), sandbox_uid(sb->id)) < 0) {
		errmsg("cannot give %s to the jailed VMM: %m", tmp);
		goto fail_rm;
	}
	snprintf(old_top, sizeof(old_top), "%s", sb->top);
	tops[0] = new_top;
	/* The directory goes to the VMM as an fd: jailed, it cannot open the store. */
	tmp_fd = open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (tmp_fd < 0) {
		errmsg("cannot open %s: %m", tmp);
		goto fail_rm;
	}
	err = snapshot_api_limited(sb, t, tmp, tmp_fd, tops, msg, sizeof(msg));
	close(tmp_fd);
	if (err < 0) {
		errmsg("%s: the snapshot failed: %s", sb->id, msg[0] ? msg : strerror(-err));
		goto fail_rm;
	}
	/* The VMM goes on over the new top now (sandbox_find_top finds it there, once it is
	 * root's). */
	if (jail_enabled() && (err = adopt_snapshot(sb, tmp, new_top)) < 0) {
		errmsg("%s: the jailed VMM's snapshot files are not what it should have "
		       "made "
		       "(%s): refused",
		       sb->id, strerror(-err));
		goto fail_rm;
	}
	snprintf(sb->top, sizeof(sb->top), "%s", next);
	memset(&t->meta, 0, sizeof(t->meta));
	t->meta.format = SNAP_META_FORMAT;
	snprintf(t->meta.name, sizeof(t->meta.name), "%s", t->name);
	snprintf(t->meta.parent, sizeof(t->meta.parent), "%s", sb->base);
	snprintf(t->meta.sandbox, sizeof(t->meta.sandbox), "%s", sb->id);
	snprintf(t->meta.image, sizeof(t->meta.image), "%s", sb->image);
	t->meta.created = (uint64_t)time(NULL);
	t->meta.cpus = sb->cpus;
	t->meta.memory_mib = sb->memory_mib;
	t->meta.memory_bytes = sb->memory_mib << 20;
	snprintf(t->meta.root_layer, sizeof(t->meta.root_layer), "%s", old_top);
	t->meta.network = sb->network;
	if (sb->network && (err = proxy_files_save(sb, tmp)) < 0) {
		errmsg("%s: cannot keep its proxy's files in the snapshot: %s", sb->id,
		       strerror(-err));
		goto fail_rm;
	}
	for (unsigned i = 0; i < sb->ndisks; i++)
		snprintf(t->meta.disks[t->meta.ndisks++], DISK_PATH_MAX, "%s", sb->disks[i].path);
	if ((err = link_layers(sb, tmp, &t->meta)) < 0) {
		if (err == -ELOOP)
			errmsg("%s: its disk has more than %d frozen layers (one per "
			       "snapshot): "
			       "no more snapshots of it (restore one into a new sandbox)",
			       sb->id, SNAP_LAYERS_MAX);
		else
			errmsg("%s: cannot link its disk layers into the snapshot: %s", sb->id,
			       strerror(-err));
		goto fail_rm;
	}
	if ((err = snap_seal(tmp, &t->meta, msg, sizeof(msg))) < 0) {
		errmsg("%s: %s", sb->id, msg);
		goto fail_rm;
	}
	fsync_path(tmp);
	/* The commit: a directory rename never replaces a non-empty one, so a snapshot made
	 * meanwhile under this name is refused here, not overwritten. */
	if (rename(tmp, t->dir) < 0) {
		errmsg("cannot put the snapshot in place as %s: %m", t->dir);
		goto fail_rm;
	}
	fsync_path(root);
	return EXIT_OK;
fail_rm:
	remove_flat_dir(tmp);
	return EXIT_ERR;
}

/* snapshot_restore_into, with the proxy's files made from `o` (a create) or taken from the
 * snapshot (NULL). */
static int restore_into(const char *dir, const struct snap_meta *m, const char *name,
			const char *console, const struct boot_src *src, bool no_wait,
			const struct create_opts *o, struct sandbox *sb);

int snapshot_restore_into(const char *dir, const struct snap_meta *m, const char *name,
			  const char *console, const struct boot_src *src, bool no_wait,
			  struct sandbox *sb)
{
	return restore_into(dir, m, name, console, src, no_wait, NULL, sb);
}

int snapshot_restore_create(const char *dir, const struct snap_meta *m, const struct create_opts *o,
			    const struct boot_src *src, struct sandbox *sb)
{
	return restore_into(dir, m, o->name, o->console, src, false, o, sb);
}

static int restore_into(const char *dir, const struct snap_meta *m, const char *name,
			const char *console, const struct boot_src *src, bool no_wait,
			const struct create_opts *o, struct sandbox *sb)
{
	char top[4200], parent[4200];
	struct disk_error derr = {""};
	int err, status;

	memset(sb, 0, sizeof(*sb));
	snprintf(sb->image, sizeof(sb->image), "%s", m->image);
	snprintf(sb->base, sizeof(sb->base), "%s", m->name);
	snprintf(sb->top, sizeof(sb->top), "root.layer");
	sb->cpus = m->cpus;
	sb->memory_mib = m->memory_mib;
	sb->created = (uint64_t)time(NULL);
	for (unsigned i = 0; i < m->ndisks; i++) {
		snprintf(sb->disks[i].path, DISK_PATH_MAX, "%s", m->disks[i]);
		sb->disks[i].ro = true;
	}
	sb->ndisks = m->ndisks;
	sb->network = m->network;
	if (o) { /* a warm create: its lifetime and lifeline are the create's */
		sb->deadline = o->ttl_s ? sb->created + o->ttl_s : 0;
		sb->lifeline_fd = o->lifeline_fd;
	}
	if ((status = sandbox_make_dir(sb, name)) != EXIT_OK)
		return status;
	if (sb->network) {
		if (o)
			status = create_net_prepare(sb, o);
		else if ((err = proxy_files_load(dir, sb)) < 0) {
			errmsg("%s: the snapshot's proxy files: %s", sb->id, strerror(-err));
			status = EXIT_ERR;
		}
		if (status != EXIT_OK) {
			create_cleanup(sb);
			return status;
		}
	}
	if ((err = sandbox_path(sb, sb->top, top, sizeof(top))) < 0 ||
	    (err = path_fmt(parent, sizeof(parent), "%s/%s", dir, m->root_layer)) < 0 ||
	    (err = disk_create_overlay(top, parent, 0, &derr)) < 0) {
		errmsg("%s: cannot create the root disk over the snapshot's: %s", sb->id,
		       derr.msg[0] ? derr.msg : strerror(-err));
		create_cleanup(sb);
		return EXIT_ERR;
	}
	status = sandbox_start_vmm(sb, console, src, RESTORE_TIMEOUT_S, no_wait);
	if (status != EXIT_OK)
		create_cleanup(sb);
	return status;
}

int snapshot_open_checked(const char *name, char *dir, size_t dir_len, struct snap_meta *m)
{
	char msg[640];
	int err;

	if ((err = snap_dir(name, dir, dir_len)) < 0 ||
	    (err = snap_open(dir, m, msg, sizeof(msg))) < 0) {
		errmsg("snapshot '%s': %s", name, err == -ENOENT ? "no such snapshot" : msg);
		return EXIT_ERR;
	}
	return EXIT_OK;
}

/* ---- snapshot ID NAME ---- */

int cmd_snapshot(int argc, char **argv)
{
	struct snap_take t = {.flags = 0};
	struct sandbox sb;
	int status;

	if (argc >= 2 && strcmp(argv[1], "rm") == 0)
		return cmd_snapshots(argc, argv);
	if (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
		puts("usage: sandboxctl snapshot ID NAME\n"
		     "       sandboxctl snapshot rm [-f] NAME\n\n"
		     "Snapshot a running or paused sandbox (its memory, devices and disk) "
		     "as "
		     "NAME;\n"
		     "it runs on. rm removes one (refused while a sandbox or another "
		     "snapshot\n"
		     "depends on it, unless -f).");
		return EXIT_OK;
	}
	if (argc != 3) {
		fputs("usage: sandboxctl snapshot ID NAME\n", stderr);
		return EXIT_USAGE;
	}
	if (!valid_name(argv[2])) {
		errmsg("snapshot name '%.80s': use [A-Za-z0-9][A-Za-z0-9._-]*, at most %d "
		       "characters (no '/')",
		       argv[2], NAME_MAX_LEN);
		return EXIT_USAGE;
	}
	if ((status = sandbox_resolve(argv[1], &sb)))
		return status;
	t.name = argv[2];
	status = snapshot_take(&sb, &t);
	if (status == EXIT_OK)
		fprintf(stderr,
			"snapshot %s: paused %.1f ms, %llu MiB of memory written, %.1f "
			"ms\n",
			t.name, (double)t.out.pause_us / 1000.0,
			(unsigned long long)(t.out.memory_bytes >> 20),
			(double)t.out.total_us / 1000.0);
	return status;
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
	struct snap_meta m;
	struct sandbox sb;
	struct boot_src src;
	int c, status;

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
			puts("usage: sandboxctl restore [--name NAME] SNAPSHOT\n\n"
			     "A new sandbox from a snapshot, running from where it was "
			     "taken; "
			     "print "
			     "its\nid once its agent answers.");
			return EXIT_OK;
		default:
			return EXIT_USAGE;
		}
	}
	if (optind != argc - 1) {
		fputs("usage: sandboxctl restore [--name NAME] SNAPSHOT\n", stderr);
		return EXIT_USAGE;
	}
	if (!valid_name(argv[optind])) {
		errmsg("'%.80s' is not a snapshot name", argv[optind]);
		return EXIT_USAGE;
	}
	if ((status = host_check_linux()) || (status = state_init() < 0 ? EXIT_ERR : 0) ||
	    (status = snapshot_open_checked(argv[optind], dir, sizeof(dir), &m)))
		return status;
	if (!m.has_memory) {
		errmsg("snapshot '%s' has no memory file", argv[optind]);
		return EXIT_ERR;
	}
	src = (struct boot_src){.dir = dir};
	status = snapshot_restore_into(dir, &m, name, NULL, &src, false, &sb);
	if (status == EXIT_OK)
		printf("%s\n", sb.id);
	return status;
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
	char name[NAME_MAX_LEN + 2];
	struct snap_take t = {.flags = API_SNAPSHOT_LIVE};
	struct sandbox parent;
	struct boot_src src;
	uint64_t n = 1, t0 = now_ms();
	unsigned started = 0;
	int c, status = EXIT_OK;

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
			printf("usage: sandboxctl fork [-n N] ID\n\n"
			       "N (1-%d, default 1) copies of a running sandbox, each "
			       "going on "
			       "from "
			       "its\nstate now with its own disk layer and identity; the "
			       "parent "
			       "runs "
			       "on.\nPrints the children's ids, one per line.\n",
			       FORK_MAX);
			return EXIT_OK;
		default:
			return EXIT_USAGE;
		}
	}
	if (optind != argc - 1) {
		fputs("usage: sandboxctl fork [-n N] ID\n", stderr);
		return EXIT_USAGE;
	}
	if ((status = sandbox_resolve(argv[optind], &parent)) || (status = host_check_linux()))
		return status;
	snprintf(name, sizeof(name), ".fork-%s-%llu", parent.id, (unsigned long long)now_ms());
	t.name = name;
	if ((status = snapshot_take(&parent, &t)) != EXIT_OK)
		return status;
	/* The children map the parent's frozen RAM; their VMMs start together. */
	src = (struct boot_src){.dir = t.dir, .memory = t.out.memory_path};
	for (; started < n; started++)
		if ((status = snapshot_restore_into(t.dir, &t.meta, NULL, NULL, &src, true,
						    &children[started])))
			break;
	for (unsigned i = 0; i < started; i++) {
		int s = sandbox_wait_restored(&children[i], RESTORE_TIMEOUT_S);

		if (s != EXIT_OK) {
			create_cleanup(&children[i]);
			status = s;
			continue;
		}
		printf("%s\n", children[i].id);
	}
	fprintf(stderr, "fork: %u of %llu children in %llu ms, the parent paused %.2f ms\n",
		status == EXIT_OK ? started : 0, (unsigned long long)n,
		(unsigned long long)(now_ms() - t0), (double)t.out.pause_us / 1000.0);
	return status;
}

/* ---- suspend ID, resume of a suspended sandbox ---- */

static int suspend_name(const struct sandbox *sb, char *out, size_t len)
{
	return path_fmt(out, len, ".suspend-%s", sb->id);
}

int cmd_suspend(int argc, char **argv)
{
	char name[NAME_MAX_LEN + 2], marker[4200];
	struct snap_take t = {.flags = API_SNAPSHOT_STOP};
	struct sandbox sb;
	int status, err;

	if (argc != 2 || argv[1][0] == '-') {
		fputs("usage: sandboxctl suspend ID\n\nSnapshot a sandbox to disk and end "
		      "its VM: "
		      "it holds no memory and no CPU\nuntil `sandboxctl resume ID`.\n",
		      argc == 2 ? stdout : stderr);
		return argc == 2 ? EXIT_OK : EXIT_USAGE;
	}
	if ((status = sandbox_resolve(argv[1], &sb)))
		return status;
	if ((err = suspend_name(&sb, name, sizeof(name))) < 0)
		return EXIT_ERR;
	t.name = name;
	if ((status = snapshot_take(&sb, &t)) != EXIT_OK) {
		int32_t error;

		/* The VMM may have stayed paused for the snapshot that failed: run it
		 * again. */
		if (api_call(&sb, API_RESUME, 2000, &error, NULL) < 0)
			errmsg("%s: cannot resume it after the failed suspend", sb.id);
		return status;
	}
	/* The marker first: from here the snapshot is the sandbox. */
	if ((err = sandbox_path(&sb, "suspended", marker, sizeof(marker))) < 0 ||
	    (err = write_file_atomic(marker, name, strlen(name), 0600)) < 0) {
		errmsg("%s: cannot mark it suspended: %s", sb.id, strerror(-err));
		return EXIT_ERR;
	}
	if ((err = sandbox_stop_vmm(&sb, false)) < 0) {
		errmsg("%s: cannot end its VMM: %s", sb.id, strerror(-err));
		return EXIT_ERR;
	}
	if (sandbox_path(&sb, "stopped", marker, sizeof(marker)) == 0)
		unlink(marker);
	fprintf(stderr, "suspended %s: %llu MiB of memory written in %.1f ms\n", sb.id,
		(unsigned long long)(t.out.memory_bytes >> 20), (double)t.out.total_us / 1000.0);
	return EXIT_OK;
}

int sandbox_resume_suspended(struct sandbox *sb)
{
	char name[NAME_MAX_LEN + 2], dir[4200], marker[4200];
	struct snap_meta m;
	struct boot_src src;
	int status, err;

	if ((status = host_check_linux()))
		return status;
	if ((err = suspend_name(sb, name, sizeof(name))) < 0 ||
	    (status = snapshot_open_checked(name, dir, sizeof(dir), &m)))
		return status ? status : EXIT_ERR;
	/* The sandbox's own top layer is the empty one over the frozen one: the disk is as
	 * the snapshot saw it, and the VM goes on writing where it was. */
	src = (struct boot_src){.dir = dir};
	status = sandbox_start_vmm(sb, NULL, &src, RESTORE_TIMEOUT_S, false);
	if (status != EXIT_OK) {
		char top[4200], frozen[4200];
		struct disk_error derr = {""};

		if (sandbox_stop_vmm(sb, true) < 0)
			return status;
		if (sandbox_path(sb, "stopped", marker, sizeof(marker)) == 0)
			unlink(marker); /* still suspended: resume can be tried again */
		/* The guest ran meanwhile and may have written the top layer: an empty one
		 * again, or the next resume would put the snapshot's RAM over a newer disk.
		 */
		if (sandbox_path(sb, sb->top, top, sizeof(top)) < 0 ||
		    sandbox_path(sb, m.root_layer, frozen, sizeof(frozen)) < 0 || unlink(top) < 0 ||
		    disk_create_overlay(top, frozen, 0, &derr) < 0)
			errmsg("%s: cannot make its top layer empty again (%s): do not "
			       "resume it",
			       sb->id, derr.msg[0] ? derr.msg : strerror(errno));
		return status;
	}
	if (sandbox_path(sb, "suspended", marker, sizeof(marker)) == 0)
		unlink(marker);
	/* The VM maps the memory file privately: its pages stay until the VM ends. */
	remove_flat_dir(dir);
	return EXIT_OK;
}

/* ---- snapshots [--json], snapshot rm [-f] NAME ---- */

struct list_ctx {
	bool json, all;
	unsigned n;
	const char *rm; /* snapshot rm: who depends on this one */
	unsigned users;
};

static uint64_t dir_bytes(const char *dir)
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
		       (unsigned long long)dir_bytes(dir));
	else
		printf("%-24s %-12s %-10s %4u %7llu %9llu  %s\n", m.name, m.sandbox, m.image,
		       m.cpus, (unsigned long long)m.memory_mib,
		       (unsigned long long)(dir_bytes(dir) >> 20), when);
	l->n++;
	return 0;
}

static int count_sandbox_users(const struct sandbox *sb, void *opaque)
{
	struct list_ctx *l = opaque;

	if (strcmp(sb->base, l->rm) == 0) {
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
		errmsg("snapshot '%s' was taken of a sandbox restored from '%s'", name, l->rm);
		l->users++;
	}
	return 0;
}

static int snapshot_rm(int argc, char **argv)
{
	struct list_ctx l = {0};
	bool force = argc == 4 && strcmp(argv[2], "-f") == 0;
	const char *name = argv[argc - 1];
	char dir[4200];
	struct stat st;

	if (argc != 3 + force) {
		fputs("usage: sandboxctl snapshot rm [-f] NAME\n", stderr);
		return EXIT_USAGE;
	}
	if (!valid_name(name) || snap_dir(name, dir, sizeof(dir)) < 0) {
		errmsg("'%.80s' is not a snapshot name", name);
		return EXIT_USAGE;
	}
	if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		errmsg("no snapshot '%s'", name);
		return EXIT_ERR;
	}
	l.rm = name;
	sandbox_foreach(count_sandbox_users, &l);
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
		else {
			fputs("usage: sandboxctl snapshots [--json] [--all]\n\nList "
			      "snapshots "
			      "(--all: also a fork's and a suspended sandbox's).\n",
			      strcmp(argv[i], "-h") && strcmp(argv[i], "--help") ? stderr : stdout);
			return strcmp(argv[i], "-h") && strcmp(argv[i], "--help") ? EXIT_USAGE
										  : EXIT_OK;
		}
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

/* ---- after rm ---- */

static int base_users(const struct sandbox *sb, void *opaque)
{
	struct list_ctx *l = opaque;

	l->users += strcmp(sb->base, l->rm) == 0;
	return 0;
}

static int snapshot_parent_users(const char *name, void *opaque)
{
	struct list_ctx *l = opaque;
	char dir[4200], msg[640];
	struct snap_meta m;

	if (snap_dir(name, dir, sizeof(dir)) == 0 && snap_open(dir, &m, msg, sizeof(msg)) == 0)
		l->users += strcmp(m.parent, l->rm) == 0;
	return 0;
}

void snapshots_gc(const struct sandbox *removed)
{
	char name[NAME_MAX_LEN + 2], dir[4200];
	struct list_ctx l = {0};

	if (suspend_name(removed, name, sizeof(name)) == 0 && snap_dir(name, dir, sizeof(dir)) == 0)
		remove_flat_dir(dir);
	if (strncmp(removed->base, ".fork-", 6) != 0)
		return; /* a named or a ready snapshot stays */
	l.rm = removed->base;
	sandbox_foreach(base_users, &l);
	/* A snapshot taken of a child goes through the fork's layers too. */
	snap_foreach(snapshot_parent_users, &l);
	if (!l.users && snap_dir(removed->base, dir, sizeof(dir)) == 0)
		remove_flat_dir(dir);
}
