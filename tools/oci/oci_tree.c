/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The staging tree of an import (oci.h): paths resolved beneath its root, the depth of every
 * directory in it, and its removal.
 *
 * Depth: symlinks an image plants let a short path reach far down (s -> /a/a/.../a, then
 * s/a/a/...), and what walks the tree later recurses (tree_usage, mke2fs -d). So every
 * directory the import makes goes through oci_tree_mkdir, which knows its parent's depth from
 * a map (device and inode to depth, filled as directories are made: nothing but the import
 * writes there and a directory never moves, so an inode's latest record is right) and refuses
 * one deeper than OCI_REAL_DEPTH before it exists. No /proc, no path length: nothing that can
 * fail open.
 *
 * Removal (oci_rmtree) cannot fail on depth, so that whatever an import or an older version
 * left is removed: it recurses, holding a descriptor per level, down to RM_LEVELS; below that
 * a directory's entries are moved up (renameat2 RENAME_NOREPLACE, fresh names) into the
 * deepest directory held and removed from there.
 *
 * The hash (SipHash-2-4 under a key from getrandom) also keys oci_layer.c's set of paths: an
 * archive cannot choose names that all land in one chain.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "oci.h"

#define RM_LEVELS 64 /* descriptors oci_rmtree holds, at most */

static inline uint64_t rotl(uint64_t x, int b)
{
	return (x << b) | (x >> (64 - b));
}

#define SIPROUND                                                                                   \
	do {                                                                                       \
		v0 += v1;                                                                          \
		v1 = rotl(v1, 13);                                                                 \
		v1 ^= v0;                                                                          \
		v0 = rotl(v0, 32);                                                                 \
		v2 += v3;                                                                          \
		v3 = rotl(v3, 16);                                                                 \
		v3 ^= v2;                                                                          \
		v0 += v3;                                                                          \
		v3 = rotl(v3, 21);                                                                 \
		v3 ^= v0;                                                                          \
		v2 += v1;                                                                          \
		v1 = rotl(v1, 17);                                                                 \
		v1 ^= v2;                                                                          \
		v2 = rotl(v2, 32);                                                                 \
	} while (0)

uint64_t oci_hash(const uint64_t key[2], const void *data, size_t len)
{
	uint64_t v0 = key[0] ^ 0x736f6d6570736575ull, v1 = key[1] ^ 0x646f72616e646f6dull;
	uint64_t v2 = key[0] ^ 0x6c7967656e657261ull, v3 = key[1] ^ 0x7465646279746573ull;
	const uint8_t *p = data;
	uint64_t b = (uint64_t)len << 56, m;
	size_t i;

	for (i = 0; i + 8 <= len; i += 8) {
		m = 0;
		for (int j = 7; j >= 0; j--)
			m = (m << 8) | p[i + j];
		v3 ^= m;
		SIPROUND;
		SIPROUND;
		v0 ^= m;
	}
	for (int j = 0; i + j < len; j++)
		b |= (uint64_t)p[i + j] << (8 * j);
	v3 ^= b;
	SIPROUND;
	SIPROUND;
	v0 ^= b;
	v2 ^= 0xff;
	for (int r = 0; r < 4; r++)
		SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

int oci_hash_key(uint64_t key[2])
{
	ssize_t n = getrandom(key, 2 * sizeof(uint64_t), 0);

	if (n == 2 * sizeof(uint64_t))
		return 0;
	return n < 0 ? -errno : -EIO;
}

/* The slot of `ino` in the map, or the empty one where it would go. */
static struct oci_tree_dir *dir_slot(const struct oci_tree *t, uint64_t ino)
{
	for (size_t i = oci_hash(t->key, &ino, sizeof(ino)) & (t->cap - 1);;
	     i = (i + 1) & (t->cap - 1))
		if (!t->dirs[i].depth1 || t->dirs[i].ino == ino)
			return &t->dirs[i];
}

static int dir_put(struct oci_tree *t, uint64_t ino, unsigned depth)
{
	struct oci_tree_dir *s;

	if (2 * (t->n + 1) > t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 1024;
		struct oci_tree_dir *old = t->dirs;
		size_t ocap = t->cap;

		if (!(t->dirs = calloc(cap, sizeof(*t->dirs)))) {
			t->dirs = old;
			return -ENOMEM;
		}
		t->cap = cap;
		for (size_t j = 0; j < ocap; j++)
			if (old[j].depth1)
				*dir_slot(t, old[j].ino) = old[j];
		free(old);
	}
	s = dir_slot(t, ino);
	if (!s->depth1)
		t->n++;
	s->ino = ino;
	s->depth1 = depth + 1;
	return 0;
}

int oci_tree_init(struct oci_tree *t, int rootfd)
{
	struct stat st;
	int err;

	*t = (struct oci_tree){.rootfd = rootfd};
	if (fstat(rootfd, &st) < 0)
		return -errno;
	t->dev = st.st_dev;
	if ((err = oci_hash_key(t->key)) < 0)
		return err;
	return dir_put(t, st.st_ino, 0);
}

void oci_tree_free(struct oci_tree *t)
{
	free(t->dirs);
	t->dirs = NULL;
	t->cap = t->n = 0;
}

int oci_tree_mkdir(struct oci_tree *t, int dirfd, const char *name, unsigned mode)
{
	struct oci_tree_dir *s;
	struct stat st;
	unsigned depth;

	if (fstat(dirfd, &st) < 0)
		return -errno;
	s = dir_slot(t, st.st_ino);
	if (st.st_dev != t->dev || !s->depth1)
		return -EXDEV; /* cannot happen: every directory there is one we made */
	depth = s->depth1;     /* the parent's depth, plus one */
	if (depth > OCI_REAL_DEPTH)
		return -ELOOP;
	if (mkdirat(dirfd, name, mode) < 0)
		return -errno;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	return dir_put(t, st.st_ino, depth);
}

int oci_openat_in_root(int rootfd, const char *path, int flags, unsigned mode)
{
	struct open_how how = {
		.flags = (uint64_t)(flags | O_CLOEXEC),
		.mode = (flags & O_CREAT) ? mode : 0,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
	};

	for (int tries = 0;; tries++) {
		long fd = syscall(SYS_openat2, rootfd, path[0] ? path : ".", &how, sizeof(how));

		if (fd >= 0)
			return (int)fd;
		/* EAGAIN: a rename raced the resolution; nobody else writes here, but retry */
		if (errno != EAGAIN || tries == 8)
			return -errno;
	}
}

int oci_open_dir(struct oci_tree *t, const char *path, bool create)
{
	char prefix[OCI_PATH_MAX + 1];
	const char *s = path;
	int cur, fd;

	fd = oci_openat_in_root(t->rootfd, path, O_DIRECTORY | O_RDONLY, 0);
	if (fd >= 0 || fd != -ENOENT || !create)
		return fd;
	if ((cur = oci_openat_in_root(t->rootfd, "", O_DIRECTORY | O_RDONLY, 0)) < 0)
		return cur;
	prefix[0] = '\0';
	while (*s) {
		size_t n = strcspn(s, "/"), plen = strlen(prefix);
		char comp[OCI_NAME_MAX + 1];

		if (n > OCI_NAME_MAX || plen + n + 2 > sizeof(prefix)) {
			close(cur);
			return -ENAMETOOLONG;
		}
		memcpy(comp, s, n);
		comp[n] = '\0';
		snprintf(prefix + plen, sizeof(prefix) - plen, "%s%s", plen ? "/" : "", comp);
		fd = oci_openat_in_root(t->rootfd, prefix, O_DIRECTORY | O_RDONLY, 0);
		if (fd == -ENOENT) {
			/* one name in the directory we hold: a symlink there is not followed; the
			 * depth is checked before the directory exists */
			if ((fd = oci_tree_mkdir(t, cur, comp, 0755)) < 0 && fd != -EEXIST) {
				close(cur);
				return fd;
			}
			fd = oci_openat_in_root(t->rootfd, prefix, O_DIRECTORY | O_RDONLY, 0);
		}
		close(cur);
		if (fd < 0)
			return fd;
		cur = fd;
		s += n;
		while (*s == '/')
			s++;
	}
	return cur;
}

/* Move the entries of the directory `sub` into `fd` under fresh names. */
static int lift(int fd, int sub, unsigned *seq)
{
	int dfd = dup(sub), err = 0;
	struct dirent *ent;
	bool moved = false;
	DIR *d;

	if (dfd < 0)
		return -errno;
	if (!(d = fdopendir(dfd))) {
		close(dfd);
		return -errno;
	}
	while (!err && (ent = readdir(d))) {
		char name[32];

		if (strcmp(ent->d_name, ".") == 0 || strcmp(ent->d_name, "..") == 0)
			continue;
		for (;;) {
			snprintf(name, sizeof(name), ".rmtree.%u", (*seq)++);
			if (renameat2(sub, ent->d_name, fd, name, RENAME_NOREPLACE) == 0) {
				moved = true;
				break;
			}
			if (errno != EEXIST) {
				err = -errno;
				break;
			}
		}
	}
	closedir(d);
	/* not empty, yet nothing to move: stop rather than go round for ever */
	return err ? err : moved ? 0 : -ENOTEMPTY;
}

static int rmtree_at(int dirfd, const char *name, unsigned depth, unsigned *seq)
{
	int fd, err = 0;
	DIR *d;
	struct dirent *ent;

	if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return -errno;
	if (unlinkat(dirfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
		return 0;
	if (errno != ENOTEMPTY && errno != EEXIST)
		return -errno;
	fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (depth >= RM_LEVELS) {
		/* no deeper: what it holds moves up into dirfd (a directory of the tree being
		 * removed, whose loop below goes round again), and it is removed empty */
		err = lift(dirfd, fd, seq);
		close(fd);
		return err;
	}
	if (!(d = fdopendir(fd))) {
		close(fd);
		return -errno;
	}
	/* round again until a pass sees nothing: entries removed or moved in while readdir
	 * runs may be missed by it */
	for (;;) {
		bool any = false;

		rewinddir(d);
		while (!err && (ent = readdir(d))) {
			if (strcmp(ent->d_name, ".") == 0 || strcmp(ent->d_name, "..") == 0)
				continue;
			any = true;
			err = rmtree_at(fd, ent->d_name, depth + 1, seq);
		}
		if (err || !any)
			break;
	}
	closedir(d);
	if (err)
		return err;
	return unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT ? -errno : 0;
}

int oci_rmtree(int dirfd, const char *name)
{
	unsigned seq = 0;

	return rmtree_at(dirfd, name, 0, &seq);
}
