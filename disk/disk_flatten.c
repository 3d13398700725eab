/* SPDX-License-Identifier: Apache-2.0 */
/*
 * disk_flatten (disk.h): a chain of layers as one new layer over the chain's raw base (or over
 * nothing), holding every cluster any of the chain's layers holds, read through the chain. A
 * chain grows by one layer each snapshot and each restore from one; past DISK_MAX_LAYERS it no
 * longer opens, so whoever keeps a disk across many snapshots (a sandbox stopped into a
 * fleet's store and woken again, again and again) makes it one layer now and then. The chain
 * is only read: its files, their identities and every child of theirs stay as they were.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "disk.h"

#define FLATTEN_RUN (1u << 20) /* bytes read and written at once, at most */

/* Does any layer of the chain hold cluster idx? (A lower layer may be smaller.) */
static bool chain_holds(const struct disk_layer *ls, unsigned n, uint64_t idx)
{
	for (unsigned k = 0; k < n; k++)
		if (!ls[k].raw && idx < ls[k].nclusters && disk_layer_has(&ls[k], idx))
			return true;
	return false;
}

/* The chain's layer files, top first, into ls (*n of them), and its raw base's path into
 * base ("" when it has none). */
static int chain_layers(const char *top, struct disk_layer *ls, unsigned *n, char *base,
			size_t base_len, struct disk_error *err)
{
	char path[PATH_MAX], next[PATH_MAX];
	int r;

	*n = 0;
	base[0] = 0;
	snprintf(path, sizeof(path), "%s", top);
	for (;;) {
		if (*n == DISK_MAX_LAYERS)
			return disk_fail(err, -ELOOP, "%s: more than %d layers", top,
					 DISK_MAX_LAYERS);
		if ((r = disk_layer_open(&ls[*n], path, DISK_LAYER_NOLOCK, err)) < 0)
			return r;
		struct disk_layer *l = &ls[(*n)++];

		if (l->hdr.parent_kind == DISK_PARENT_NONE)
			return 0;
		if (disk_layer_parent_path(l->path, &l->hdr, next, sizeof(next)) < 0)
			return disk_fail(err, -ENAMETOOLONG, "%s: its parent's path is too long",
					 l->path);
		if (l->hdr.parent_kind == DISK_PARENT_RAW) {
			if ((size_t)snprintf(base, base_len, "%s", next) >= base_len)
				return disk_fail(err, -ENAMETOOLONG, "%s: path too long", next);
			return 0;
		}
		snprintf(path, sizeof(path), "%s", next);
	}
}

/* Write [off, off + len) of buf into o; over nothing, its clusters of zeros are left out:
 * they read as zeros anyway. */
static int write_run(struct disk *o, const uint8_t *buf, uint64_t off, uint64_t len, uint64_t cl,
		     bool over_raw)
{
	uint64_t a = 0;

	if (over_raw)
		return disk_write(o, off, buf, len);
	while (a < len) {
		uint64_t b = a;

		while (b < len && !disk_all_zero(buf + b, b + cl < len ? cl : len - b))
			b += cl;
		if (b > a) {
			uint64_t n = (b < len ? b : len) - a;
			int r = disk_write(o, off + a, buf + a, n);

			if (r < 0)
				return r;
		}
		a = b + cl; /* past the cluster of zeros that ended the run (or the end) */
	}
	return 0;
}

/* Copy every cluster the chain's layers hold from d into o, in runs of held clusters. */
static int copy_held(struct disk *d, struct disk *o, const struct disk_layer *ls, unsigned n,
		     bool over_raw, const char *out, struct disk_error *err)
{
	uint64_t vlen = disk_size(d), cl = ls[0].hdr.cluster_len, nclusters = (vlen + cl - 1) / cl;
	uint64_t run_max = FLATTEN_RUN > cl ? FLATTEN_RUN / cl : 1;
	uint8_t *buf = malloc(run_max * cl);
	int r = 0;

	if (!buf)
		return disk_fail(err, -ENOMEM, "out of memory");
	for (uint64_t i = 0; i < nclusters && r == 0; i++) {
		if (!chain_holds(ls, n, i))
			continue;
		uint64_t j = i + 1;

		while (j < nclusters && j - i < run_max && chain_holds(ls, n, j))
			j++;
		uint64_t off = i * cl, len = (j - i) * cl;

		if (off + len > vlen)
			len = vlen - off;
		if ((r = disk_read(d, off, buf, len)) < 0) {
			disk_fail(err, r, "%s: reading it: %s", ls[0].path, strerror(-r));
			break;
		}
		r = write_run(o, buf, off, len, cl, over_raw);
		if (r < 0)
			disk_fail(err, r, "%s: writing it: %s", out, strerror(-r));
		i = j - 1;
	}
	free(buf);
	return r;
}

/* fsync the directory `path` is in. */
static int sync_dir(const char *path, struct disk_error *err)
{
	char *copy = strdup(path);
	int fd = copy ? open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1, r = 0;

	if (fd < 0 || fsync(fd) < 0)
		r = disk_fail(err, copy ? -errno : -ENOMEM, "%s: syncing its directory", path);
	if (fd >= 0)
		close(fd);
	free(copy);
	return r;
}

int disk_flatten(const char *top, const char *out, struct disk_error *err)
{
	struct disk_layer *ls = calloc(DISK_MAX_LAYERS, sizeof(*ls));
	struct disk *d = NULL, *o = NULL;
	char base[PATH_MAX], tmp[PATH_MAX + 24];
	unsigned n = 0;
	int r;

	if (!ls)
		return disk_fail(err, -ENOMEM, "out of memory");
	/* the whole chain checked as a read opens it (identities, bitmaps), then its files */
	if ((r = disk_open(top, DISK_OPEN_RDONLY, &d, err)) < 0 ||
	    (r = chain_layers(top, ls, &n, base, sizeof(base), err)) < 0)
		goto out;
	/* made whole under a name of its own, then put in place: a crash never leaves an OUT
	 * that opens but lacks some of the chain's clusters */
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.flat-%d", out, (int)getpid()) >= sizeof(tmp)) {
		r = disk_fail(err, -ENAMETOOLONG, "%s: path too long", out);
		goto out;
	}
	unlink(tmp); /* (one this pid left, killed) */
	if (base[0])
		r = disk_create_overlay_len(tmp, base, ls[0].hdr.cluster_len, disk_size(d), err);
	else
		r = disk_create(tmp, disk_size(d), ls[0].hdr.cluster_len, err);
	if (r < 0)
		goto out;
	if ((r = disk_open(tmp, 0, &o, err)) == 0 &&
	    (r = copy_held(d, o, ls, n, base[0] != 0, out, err)) == 0 && (r = disk_flush(o)) < 0)
		disk_fail(err, r, "%s: flushing it: %s", out, strerror(-r));
	if (o)
		disk_close(o);
	if (r == 0 && renameat2(AT_FDCWD, tmp, AT_FDCWD, out, RENAME_NOREPLACE) < 0) {
		r = -errno;
		disk_fail(err, r, "%s: %s", out, r == -EEXIST ? "already exists" : strerror(-r));
	}
	if (r == 0)
		r = sync_dir(out, err);
	if (r < 0)
		unlink(tmp);
out:
	for (unsigned k = 0; k < n; k++)
		disk_layer_close(&ls[k]);
	free(ls);
	if (d)
		disk_close(d);
	return r;
}
