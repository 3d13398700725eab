/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One layer of an imported image applied under the staging root (oci.h). The layer is
 * hostile and so is everything earlier layers left in the tree (a symlink planted to point
 * out of it), so no path is ever resolved by the host's rules:
 *
 * - an entry's path is normalised lexically first (oci_path_norm): ".." above the root is
 *   refused; names beginning ".wh." are whiteouts, refused anywhere but the last component;
 * - its parent directory is opened with openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS |
 *   RESOLVE_NO_XDEV) from a descriptor of the staging root: a symlink on the way is followed
 *   as the image's own root would follow it, inside the root (an absolute target starts at
 *   the root, ".." stops there), never out of it; missing parents are made (0755, root's), each
 * refused before it exists when it would lie too deep (oci_tree.c);
 * - everything on the entry itself is one name relative to that parent: unlinkat, mkdirat,
 *   openat(O_CREAT | O_EXCL | O_NOFOLLOW), symlinkat, linkat (without AT_SYMLINK_FOLLOW),
 *   mknodat (FIFOs), fchownat/utimensat with AT_SYMLINK_NOFOLLOW; an existing entry is
 *   removed first (a directory over a directory is kept), so nothing is written through an
 *   existing file, symlink or hard link;
 * - a symlink whose relative target climbs above the root from its own directory is refused
 *   (an absolute one stays inside the image: it is the guest's root that resolves it); a hard
 *   link's target must be a non-directory already in the tree, by a path inside it;
 * - device nodes are skipped with a warning (sandbox-init mounts devtmpfs on /dev); xattrs
 *   are kept for user.* and security.capability only (others would mean something to the
 *   host: trusted.*, security.selinux), the rest skipped with a warning.
 *
 * Whiteouts (the OCI image spec, "Whiteouts"): .wh.NAME removes NAME of the lower layers,
 * .wh..wh..opq removes every entry of the lower layers in its directory. "Lower" is told
 * apart by a set of the paths this layer made (and their parents), so the order of the
 * entries within a layer does not matter. Directory times are set at the layer's end, after
 * their contents were written.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "oci.h"

#define WARN_MAX 5 /* warnings of each kind printed per layer */

/* A path the layer made (or a parent of one), and for a directory entry its time, set at the
 * layer's end: one record per path, however often the layer names it. */
struct pathent {
	struct timespec ts;
	bool timed;
	bool opaque; /* a directory this layer made opaque already */
	char path[];
};
/* The records: a set, open addressing, its hash keyed (oci_hash) so an archive cannot choose
 * paths that all land in one chain; their bytes bounded (OCI_RECORDS_MAX). */
struct pathset {
	struct pathent **slot;
	size_t cap, n;
	uint64_t bytes;
	const uint64_t *key;
};

static size_t pathset_find(const struct pathset *ps, const char *s, size_t len)
{
	size_t i = oci_hash(ps->key, s, len) & (ps->cap - 1);

	while (ps->slot[i] && strcmp(ps->slot[i]->path, s) != 0)
		i = (i + 1) & (ps->cap - 1);
	return i;
}

static struct pathent *pathset_get(const struct pathset *ps, const char *s)
{
	return ps->cap ? ps->slot[pathset_find(ps, s, strlen(s))] : NULL;
}

static bool pathset_has(const struct pathset *ps, const char *s)
{
	return pathset_get(ps, s) != NULL;
}

/* The record of `path` (not in the set yet), made. */
static int pathset_put(struct pathset *ps, const char *path, struct pathent **out)
{
	size_t len = strlen(path), i;
	struct pathent *pe;

	/* the record and malloc's own overhead, about */
	ps->bytes += sizeof(*pe) + len + 1 + 16;
	if (ps->bytes > OCI_RECORDS_MAX)
		return -E2BIG;
	if (2 * (ps->n + 1) > ps->cap) {
		struct pathset grown = *ps;

		grown.cap = ps->cap ? ps->cap * 2 : 1024;
		if (!(grown.slot = calloc(grown.cap, sizeof(*grown.slot))))
			return -ENOMEM;
		for (size_t j = 0; j < ps->cap; j++)
			if (ps->slot[j])
				grown.slot[pathset_find(&grown, ps->slot[j]->path,
							strlen(ps->slot[j]->path))] = ps->slot[j];
		free(ps->slot);
		*ps = grown;
	}
	if (!(pe = calloc(1, sizeof(*pe) + len + 1)))
		return -ENOMEM;
	memcpy(pe->path, path, len + 1);
	i = pathset_find(ps, path, len);
	ps->slot[i] = pe;
	ps->n++;
	*out = pe;
	return 0;
}

/* Add `path` and each of its parents not in the set yet; *leaf is `path`'s record. */
static int pathset_add(struct pathset *ps, const char *path, struct pathent **leaf)
{
	char buf[OCI_PATH_MAX + 1];
	struct pathent *pe;
	int err;

	if ((*leaf = pathset_get(ps, path)))
		return 0;
	snprintf(buf, sizeof(buf), "%s", path);
	while (buf[0] && !pathset_has(ps, buf)) {
		char *slash;

		if ((err = pathset_put(ps, buf, &pe)) < 0)
			return err;
		if (!*leaf)
			*leaf = pe;
		slash = strrchr(buf, '/');
		if (!slash)
			break;
		*slash = '\0';
	}
	return 0;
}

static void pathset_free(struct pathset *ps)
{
	for (size_t i = 0; i < ps->cap; i++)
		free(ps->slot[i]);
	free(ps->slot);
}

struct apply {
	struct oci_tree *tree;
	int rootfd;
	const char *what;
	struct oci_msg *m;
	struct oci_layer_stats *st;
	struct pathset made;
	bool root_timed, root_opaque;
	struct timespec root_ts;
	unsigned warned_dev, warned_xattr;
};

/* Does the relative symlink target `target`, read from the directory `dir` (normalised),
 * stay inside the root? */
static bool link_inside(const char *dir, const char *target)
{
	size_t depth = 0;
	const char *s;

	if (target[0] == '/')
		return true;
	for (s = dir; *s; s++)
		if (*s == '/')
			depth++;
	if (dir[0])
		depth++;
	for (s = target; *s;) {
		size_t n = strcspn(s, "/");

		if (n == 2 && s[0] == '.' && s[1] == '.') {
			if (depth == 0)
				return false;
			depth--;
		} else if (n && !(n == 1 && s[0] == '.')) {
			depth++;
		}
		s += n;
		while (*s == '/')
			s++;
	}
	return true;
}

static int set_xattrs(struct apply *a, int fd, const struct oci_tar_entry *e, const char *path)
{
	for (unsigned i = 0; i < e->nxattrs; i++) {
		const struct oci_xattr *x = &e->xattrs[i];

		if (strncmp(x->name, "user.", 5) != 0 &&
		    strcmp(x->name, "security.capability") != 0) {
			if (a->warned_xattr++ < WARN_MAX)
				errmsg("warning: %s: %s: xattr %s skipped (only user.* and "
				       "security.capability are kept)",
				       a->what, path, x->name);
			continue;
		}
		if (fsetxattr(fd, x->name, x->value, x->len, 0) < 0) {
			if (errno != EOPNOTSUPP)
				return oci_fail(a->m, -errno, "%s: %s: cannot set xattr %s: %s",
						a->what, path, x->name, strerror(errno));
			/* $SANDBOX_HOME's file system keeps none: the image goes without */
			if (a->warned_xattr++ < WARN_MAX)
				errmsg("warning: %s: %s: xattr %s skipped (%s)", a->what, path,
				       x->name, strerror(errno));
		}
	}
	return 0;
}

/* Owner, mode, xattrs and times of what `fd` is (a file or a directory we made). */
static int set_meta_fd(struct apply *a, int fd, const struct oci_tar_entry *e, const char *path,
		       bool times)
{
	struct timespec ts[2] = {{e->mtime, e->mtime_nsec}, {e->mtime, e->mtime_nsec}};
	int err;

	/* the owner first: chown clears setuid and setgid */
	if (fchown(fd, e->uid, e->gid) < 0 || fchmod(fd, e->mode) < 0)
		return oci_fail(a->m, -errno, "%s: %s: %s", a->what, path, strerror(errno));
	if ((err = set_xattrs(a, fd, e, path)) < 0)
		return err;
	if (times && futimens(fd, ts) < 0)
		return oci_fail(a->m, -errno, "%s: %s: %s", a->what, path, strerror(errno));
	return 0;
}

/* `path` (made or merged by this entry) as a directory whose time is set at the layer's end:
 * a later entry of the same directory replaces the time, not adds one. */
static int defer_dirtime(struct apply *a, const char *path, const struct oci_tar_entry *e)
{
	struct pathent *pe;
	int err;

	if (!path[0]) {
		a->root_timed = true;
		a->root_ts = (struct timespec){e->mtime, e->mtime_nsec};
		return 0;
	}
	if ((err = pathset_add(&a->made, path, &pe)) < 0)
		return err;
	pe->timed = true;
	pe->ts = (struct timespec){e->mtime, e->mtime_nsec};
	return 0;
}

/* A file's data into the new file `fd`, leaving holes where whole 4 KiB blocks are zero. */
static int write_data(struct apply *a, struct oci_tar *t, int fd, const struct oci_tar_entry *e)
{
	static uint8_t buf[1 << 16];
	static const uint8_t zero[4096];
	uint64_t off = 0;
	size_t got;
	int err;

	for (;;) {
		if (oci_interrupted)
			return oci_fail(a->m, -EINTR, "interrupted");
		if ((err = oci_tar_data(t, buf, sizeof(buf), &got)) < 0)
			return err;
		if (got == 0)
			break;
		for (size_t i = 0; i < got; i += sizeof(zero)) {
			size_t n = got - i < sizeof(zero) ? got - i : sizeof(zero);

			if (n == sizeof(zero) && memcmp(buf + i, zero, n) == 0)
				continue;
			if (pwrite(fd, buf + i, n, (off_t)(off + i)) != (ssize_t)n)
				return oci_fail(a->m, errno ? -errno : -EIO,
						"%s: %s: cannot write: %s", a->what, e->path,
						strerror(errno ? errno : EIO));
		}
		off += got;
	}
	if (ftruncate(fd, (off_t)off) < 0)
		return oci_fail(a->m, -errno, "%s: %s: %s", a->what, e->path, strerror(errno));
	a->st->bytes += off;
	return 0;
}

/* An entry's directory could not be opened or made (oci_open_dir, oci_tree_mkdir). */
static int dir_fail(struct apply *a, int err, const char *path)
{
	if (err == -ELOOP)
		return oci_fail(a->m, err,
				"%s: %s: lies too deep in the tree (more than %u directories down, "
				"symlinks followed), or too many symlinks on its way",
				a->what, path, OCI_REAL_DEPTH);
	return oci_fail(a->m, err, "%s: %s: cannot open its directory inside the root: %s", a->what,
			path, err == -ENOTDIR ? "a parent is not a directory" : strerror(-err));
}

/* The whiteouts: `base` (".wh.NAME") in the directory `dir`. */
static int whiteout(struct apply *a, const char *dir, const char *base, const char *path)
{
	char full[OCI_PATH_MAX + 1];
	const char *name = base + 4;
	int dfd, err = 0;

	if (strcmp(base, ".wh..wh..opq") == 0) {
		struct pathent *pe = dir[0] ? pathset_get(&a->made, dir) : NULL;
		DIR *d;
		struct dirent *ent;

		/* once is enough: what the directory holds since is this layer's (a re-read per
		 * repeat made a layer of N entries and M repeats cost N x M) */
		if (dir[0] ? pe && pe->opaque : a->root_opaque)
			return 0;
		if ((dfd = oci_open_dir(a->tree, dir, true)) < 0)
			return dir_fail(a, dfd, path);
		if (!(d = fdopendir(dfd))) {
			close(dfd);
			return -ENOMEM;
		}
		while (!err && (ent = readdir(d))) {
			if (strcmp(ent->d_name, ".") == 0 || strcmp(ent->d_name, "..") == 0)
				continue;
			if (path_fmt(full, sizeof(full), "%s%s%s", dir, dir[0] ? "/" : "",
				     ent->d_name) < 0)
				continue; /* longer than any path this layer can have made */
			if (!pathset_has(&a->made, full))
				err = oci_rmtree(dfd, ent->d_name);
		}
		closedir(d);
		if (err < 0)
			return oci_fail(a->m, err, "%s: %s: %s", a->what, path, strerror(-err));
		/* the directory is this layer's now (its opaque marker says the layer has it) */
		if (!dir[0])
			a->root_opaque = true;
		else if ((err = pathset_add(&a->made, dir, &pe)) == 0)
			pe->opaque = true;
		return err;
	}
	if (strncmp(base, ".wh..wh.", 8) == 0)
		return 0; /* aufs' own (.wh..wh.plnk, .wh..wh.aufs): nothing to apply */
	if (!name[0] || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return oci_fail(a->m, -EBADMSG, "%s: %s: a whiteout of nothing", a->what, path);
	if (path_fmt(full, sizeof(full), "%s%s%s", dir, dir[0] ? "/" : "", name) < 0)
		return oci_fail(a->m, -ENAMETOOLONG, "%s: %s: too long", a->what, path);
	if (pathset_has(&a->made, full))
		return 0; /* only the lower layers' */
	dfd = oci_open_dir(a->tree, dir, false);
	if (dfd == -ENOENT || dfd == -ENOTDIR)
		return 0;
	if (dfd < 0)
		return oci_fail(a->m, dfd, "%s: %s: cannot open its directory: %s", a->what, path,
				strerror(-dfd));
	err = oci_rmtree(dfd, name);
	close(dfd);
	return err < 0 ? oci_fail(a->m, err, "%s: %s: %s", a->what, path, strerror(-err)) : 0;
}

static int hard_link(struct apply *a, int dfd, const char *base, const struct oci_tar_entry *e)
{
	char target[OCI_PATH_MAX + 1], *tbase, tdir[OCI_PATH_MAX + 1];
	struct stat st;
	int tfd, err;

	err = oci_path_norm(e->link, target, sizeof(target));
	if (err == -EPERM)
		return oci_fail(a->m, -EPERM, "%s: %s: a hard link to %s, outside the root",
				a->what, e->path, e->link);
	if (err < 0 || !target[0])
		return oci_fail(a->m, -EBADMSG, "%s: %s: a hard link to %s: a bad target", a->what,
				e->path, e->link);
	snprintf(tdir, sizeof(tdir), "%s", target);
	tbase = strrchr(tdir, '/');
	if (tbase) {
		*tbase++ = '\0';
	} else {
		tbase = target;
		tdir[0] = '\0';
	}
	tfd = oci_open_dir(a->tree, tdir, false);
	if (tfd < 0 || fstatat(tfd, tbase, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (tfd >= 0)
			close(tfd);
		return oci_fail(a->m, -ENOENT,
				"%s: %s: a hard link to %s, which is not in the image", a->what,
				e->path, e->link);
	}
	if (S_ISDIR(st.st_mode)) {
		close(tfd);
		return oci_fail(a->m, -EPERM, "%s: %s: a hard link to the directory %s", a->what,
				e->path, e->link);
	}
	err = linkat(tfd, tbase, dfd, base, 0) < 0 ? -errno : 0;
	close(tfd);
	if (err < 0)
		return oci_fail(a->m, err, "%s: %s: cannot link to %s: %s", a->what, e->path,
				e->link, strerror(-err));
	return 0;
}

static int apply_entry(struct apply *a, struct oci_tar *t, const struct oci_tar_entry *e)
{
	char path[OCI_PATH_MAX + 1], dir[OCI_PATH_MAX + 1], *base;
	struct timespec ts[2] = {{e->mtime, e->mtime_nsec}, {e->mtime, e->mtime_nsec}};
	struct pathent *pe;
	struct stat st;
	int dfd, fd, err;

	err = oci_path_norm(e->path, path, sizeof(path));
	if (err == -EPERM)
		return oci_fail(a->m, -EPERM, "%s: %s: the path leaves the root (..)", a->what,
				e->path);
	if (err < 0)
		return oci_fail(
			a->m, -ENAMETOOLONG,
			"%s: %.200s...: a path too long (at most %u components of %u bytes)",
			a->what, e->path, OCI_DEPTH_MAX, OCI_NAME_MAX);
	if (!path[0]) { /* the root itself */
		if (e->type != '5')
			return oci_fail(a->m, -EBADMSG, "%s: %s: the root is not a directory",
					a->what, e->path);
		if ((err = set_meta_fd(a, a->rootfd, e, "/", false)) < 0)
			return err;
		return defer_dirtime(a, "", e);
	}
	snprintf(dir, sizeof(dir), "%s", path);
	base = strrchr(dir, '/');
	if (base) {
		*base++ = '\0';
	} else {
		base = path;
		dir[0] = '\0';
	}
	if (strstr(dir, ".wh.") && (strncmp(dir, ".wh.", 4) == 0 || strstr(dir, "/.wh.")))
		return oci_fail(a->m, -EBADMSG, "%s: %s: a whiteout in the middle of a path",
				a->what, e->path);
	if (strncmp(base, ".wh.", 4) == 0)
		return whiteout(a, dir, base, e->path);

	dfd = oci_open_dir(a->tree, dir, true);
	if (dfd < 0)
		return dir_fail(a, dfd, e->path);
	if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    !(e->type == '5' && S_ISDIR(st.st_mode)) && (err = oci_rmtree(dfd, base)) < 0) {
		close(dfd);
		return oci_fail(a->m, err, "%s: %s: cannot replace what a lower layer left: %s",
				a->what, e->path, strerror(-err));
	}
	err = 0;
	switch (e->type) {
	case '0':
		fd = openat(dfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0) {
			err = oci_fail(a->m, -errno, "%s: %s: %s", a->what, e->path,
				       strerror(errno));
			break;
		}
		err = write_data(a, t, fd, e);
		if (!err)
			err = set_meta_fd(a, fd, e, e->path, true);
		close(fd);
		a->st->files++;
		break;
	case '5':
		if ((err = oci_tree_mkdir(a->tree, dfd, base, 0700)) < 0 && err != -EEXIST) {
			err = err == -ELOOP ? dir_fail(a, err, e->path)
					    : oci_fail(a->m, err, "%s: %s: %s", a->what, e->path,
						       strerror(-err));
			break;
		}
		fd = openat(dfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0) {
			err = oci_fail(a->m, -errno, "%s: %s: %s", a->what, e->path,
				       strerror(errno));
			break;
		}
		err = set_meta_fd(a, fd, e, e->path, false);
		close(fd);
		if (!err)
			err = defer_dirtime(a, path, e);
		break;
	case '2':
		if (!link_inside(dir, e->link)) {
			err = oci_fail(a->m, -EPERM,
				       "%s: %s: a symlink to %s, which leaves the root from %s/",
				       a->what, e->path, e->link, dir[0] ? dir : "");
			break;
		}
		if (symlinkat(e->link, dfd, base) < 0 ||
		    fchownat(dfd, base, e->uid, e->gid, AT_SYMLINK_NOFOLLOW) < 0 ||
		    utimensat(dfd, base, ts, AT_SYMLINK_NOFOLLOW) < 0)
			err = oci_fail(a->m, -errno, "%s: %s: %s", a->what, e->path,
				       strerror(errno));
		break;
	case '1':
		err = hard_link(a, dfd, base, e);
		break;
	case '6':
		/* we just made it and nobody else writes here: fchmodat follows nothing */
		if (mknodat(dfd, base, S_IFIFO | 0600, 0) < 0 ||
		    fchownat(dfd, base, e->uid, e->gid, AT_SYMLINK_NOFOLLOW) < 0 ||
		    fchmodat(dfd, base, e->mode, 0) < 0 ||
		    utimensat(dfd, base, ts, AT_SYMLINK_NOFOLLOW) < 0)
			err = oci_fail(a->m, -errno, "%s: %s: %s", a->what, e->path,
				       strerror(errno));
		break;
	case '3':
	case '4':
		a->st->skipped_devices++;
		if (a->warned_dev++ < WARN_MAX)
			errmsg("warning: %s: %s: a %s device (%u, %u): skipped (the guest's /dev "
			       "is devtmpfs)",
			       a->what, e->path, e->type == '3' ? "character" : "block",
			       e->devmajor, e->devminor);
		close(dfd);
		return 0;
	}
	close(dfd);
	if (err < 0)
		return err;
	return pathset_add(&a->made, path, &pe);
}

int oci_layer_apply(struct oci_tree *tree, struct oci_tar *t, const char *what,
		    struct oci_layer_stats *st, struct oci_msg *m)
{
	struct apply a = {.tree = tree, .rootfd = tree->rootfd, .what = what, .m = m, .st = st};
	struct oci_tar_entry *e = calloc(1, sizeof(*e));
	int rootfd = tree->rootfd;
	int err;

	if (!e)
		return -ENOMEM;
	a.made.key = tree->key;
	while ((err = oci_tar_next(t, e)) > 0) {
		st->entries++;
		err = apply_entry(&a, t, e);
		oci_tar_entry_clear(e);
		if (err == -ENOMEM)
			err = oci_fail(m, err, "%s: out of memory", what);
		if (err == -E2BIG && !m->text[0]) /* pathset_put's bound */
			err = oci_fail(m, -EFBIG,
				       "%s: more than %u MiB of paths to keep for one layer (those "
				       "it makes and their parents, each once)",
				       what, OCI_RECORDS_MAX >> 20);
		if (err < 0)
			break;
	}
	if (err < 0 && !m->text[0])
		oci_fail(m, err, "%s: %s", what, strerror(-err));
	else if (err < 0 && strncmp(m->text, what, strlen(what)) != 0) {
		/* the tar reader's message: say which layer */
		char text[sizeof(m->text)];

		memcpy(text, m->text, sizeof(text));
		snprintf(m->text, sizeof(m->text), "%.200s: %.800s", what, text);
	}
	for (size_t i = 0; err == 0 && i < a.made.cap; i++) {
		struct pathent *pe = a.made.slot[i];
		struct timespec ts[2];
		int fd;

		if (!pe || !pe->timed)
			continue;
		ts[0] = ts[1] = pe->ts;
		fd = oci_openat_in_root(rootfd, pe->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
		if (fd >= 0) {
			(void)futimens(fd, ts); /* a time is not worth failing for */
			close(fd);
		}
	}
	if (err == 0 && a.root_timed) {
		struct timespec ts[2] = {a.root_ts, a.root_ts};

		(void)futimens(rootfd, ts);
	}
	if (a.warned_dev > WARN_MAX)
		errmsg("warning: %s: %u more device nodes skipped", what, a.warned_dev - WARN_MAX);
	pathset_free(&a.made);
	free(e);
	return err < 0 ? err : 0;
}
