/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Disk chains: opening a top layer and the parents it names, checking each link; reads
 * through the topmost layer holding each cluster; copy-on-write into the top; snapshot (a
 * new empty top) and commit (merging the top into its parent). One layer file is
 * disk_layer.c; the format is docs/disk-format.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "disk.h"

#define DISK_OPEN_NOLOCK_ 0x100u /* disk_inspect: look, take no locks */
#define DISK_OPEN_COMMIT_ 0x200u /* disk_commit: the parent of the top is writable too */

struct disk {
	struct disk_layer *layers; /* [0] is the top */
	unsigned nlayers;
	uint64_t virtual_len;
	uint32_t cluster_len;
	bool read_only;
	uint8_t *cluster_buf;	   /* one cluster: copy-up and commit */
	uint8_t *zero_buf;	   /* one cluster of zeros */
	unsigned writes_in_flight; /* disk_write_begin without its disk_write_end */
	int failed;		   /* -EIO once an asynchronous write failed: see disk_write_end */
	disk_fetch_fn fetch;	   /* lazy lower layers (disk_set_fetch), or NULL */
	void *fetch_arg;
};

uint64_t disk_size(const struct disk *d)
{
	return d->virtual_len;
}

bool disk_read_only(const struct disk *d)
{
	return d->read_only;
}

unsigned disk_layer_count(const struct disk *d)
{
	return d->nlayers;
}

uint32_t disk_cluster_len(const struct disk *d)
{
	return d->cluster_len;
}

void disk_close(struct disk *d)
{
	if (!d)
		return;
	for (unsigned i = 0; i < d->nlayers; i++)
		disk_layer_close(&d->layers[i]);
	free(d->layers);
	free(d->cluster_buf);
	free(d->zero_buf);
	free(d);
}

static const char *kind_name(const struct disk_layer *l)
{
	return l->raw ? "raw image" : "layer";
}

/* Say what changed in `parent` since `child` recorded it. */
static int link_stale(const struct disk_layer *child, const struct disk_layer *parent,
		      struct disk_error *err)
{
	const struct disk_header *h = &child->hdr;
	char what[160];

	if (parent->virtual_len != h->parent_len)
		snprintf(what, sizeof(what), "its size is %llu bytes, was %llu",
			 (unsigned long long)parent->virtual_len,
			 (unsigned long long)h->parent_len);
	else if (parent->raw && parent->mtime_ns != h->parent_mtime_ns)
		snprintf(what, sizeof(what), "modified: mtime %llu.%09llu, was %llu.%09llu",
			 (unsigned long long)(parent->mtime_ns / 1000000000ull),
			 (unsigned long long)(parent->mtime_ns % 1000000000ull),
			 (unsigned long long)(h->parent_mtime_ns / 1000000000ull),
			 (unsigned long long)(h->parent_mtime_ns % 1000000000ull));
	else if (parent->raw)
		snprintf(what, sizeof(what), "its first or last 64 KiB differs");
	else if (memcmp(parent->hdr.layer_id, h->parent_layer_id, DISK_ID_LEN))
		snprintf(what, sizeof(what), "it is another layer");
	else if (parent->hdr.generation != h->parent_generation)
		snprintf(what, sizeof(what), "written since: generation %llu, was %llu",
			 (unsigned long long)parent->hdr.generation,
			 (unsigned long long)h->parent_generation);
	else
		snprintf(what, sizeof(what), "a layer below it changed");
	return disk_fail(err, -ESTALE, "%s: its parent %s changed since it was created (%s)",
			 child->path, parent->path, what);
}

/* Check that `parent` is what `child` was created above. `committing`: a commit into
 * `parent` may have started, so its next identity is accepted as well. */
static int link_check(const struct disk_layer *child, struct disk_layer *parent, bool committing,
		      struct disk_error *err)
{
	const struct disk_header *h = &child->hdr;
	uint8_t id[DISK_HASH_LEN];
	int r = disk_layer_identity(parent, id);

	if (r < 0)
		return disk_fail(err, r, "%s: reading it: %s", parent->path, strerror(-r));
	if (memcmp(id, h->parent_identity, DISK_HASH_LEN) &&
	    !(committing && (h->flags & DISK_FLAG_COMMITTING) &&
	      !memcmp(id, h->commit_identity, DISK_HASH_LEN))) {
		/* A raw parent's identity by content (v3) where its identity file vouches for it;
		 * its child may have recorded v2 (made before that file, or where there is none),
		 * or v1 (made before 2026-12). */
		if (!parent->raw)
			return link_stale(child, parent, err);
		r = disk_layer_raw_identity_v2(parent, id);
		if (r == 0 && memcmp(id, h->parent_identity, DISK_HASH_LEN))
			r = disk_layer_raw_identity_v1(parent, id);
		if (r < 0)
			return disk_fail(err, r, "%s: reading it: %s", parent->path, strerror(-r));
		if (memcmp(id, h->parent_identity, DISK_HASH_LEN))
			return link_stale(child, parent, err);
	}
	if (!parent->raw && parent->cluster_len != child->cluster_len)
		return disk_fail(err, -EINVAL, "%s: cluster size %u differs from its parent's (%u)",
				 child->path, child->cluster_len, parent->cluster_len);
	/* A child may be larger (a grown disk: what lies beyond its parent reads as zeros),
	 * never smaller. */
	if (child->virtual_len < parent->virtual_len)
		return disk_fail(err, -EINVAL,
				 "%s: virtual size %llu is smaller than its parent's (%llu, %s)",
				 child->path, (unsigned long long)child->virtual_len,
				 (unsigned long long)parent->virtual_len, kind_name(parent));
	return 0;
}

static int chain_open(struct disk *d, const char *path, unsigned flags, struct disk_error *err)
{
	unsigned lflags = flags & DISK_OPEN_NOLOCK_ ? DISK_LAYER_NOLOCK : 0;
	bool commit = flags & DISK_OPEN_COMMIT_;
	char next[PATH_MAX];
	int r;

	if (flags & DISK_OPEN_RAW) {
		r = disk_layer_open(&d->layers[0], path, lflags | DISK_LAYER_RAW, err);
		d->nlayers = r < 0 ? 0 : 1;
		return r;
	}
	snprintf(next, sizeof(next), "%s", path);
	for (unsigned i = 0;; i++) {
		struct disk_layer *l = &d->layers[i], *child = i ? l - 1 : NULL;
		unsigned f = lflags;

		if (i == DISK_MAX_LAYERS)
			return disk_fail(err, -ELOOP, "%s: a chain of more than %u layers",
					 d->layers[0].path, DISK_MAX_LAYERS);
		if (child && child->hdr.parent_kind == DISK_PARENT_RAW)
			f |= DISK_LAYER_RAW; /* never written, not even by a commit */
		else if ((i == 0 && !(flags & DISK_OPEN_RDONLY)) || (i == 1 && commit))
			f |= DISK_LAYER_WRITABLE;
		r = disk_layer_open(l, next, f, err);
		if (r < 0)
			return r;
		d->nlayers = i + 1;
		if (child) {
			r = link_check(child, l, commit && i == 1, err);
			if (r < 0)
				return r;
		}
		if (l->raw || l->hdr.parent_kind == DISK_PARENT_NONE)
			return 0;
		if ((l->hdr.flags & DISK_FLAG_COMMITTING) && !(commit && i == 0))
			return disk_fail(err, -EUCLEAN,
					 "%s: a commit into its parent was interrupted; run "
					 "`sandbox-disk commit %s` again",
					 l->path, l->path);
		r = disk_layer_parent_path(l->path, &l->hdr, next, sizeof(next));
		if (r < 0)
			return disk_fail(err, r, "%s: parent path too long", l->path);
	}
}

static int disk_open_flags(const char *path, unsigned flags, struct disk **out,
			   struct disk_error *err)
{
	struct disk *d = calloc(1, sizeof(*d));
	int r;

	*out = NULL;
	if (d)
		d->layers = calloc(DISK_MAX_LAYERS, sizeof(*d->layers));
	if (!d || !d->layers) {
		r = disk_fail(err, -ENOMEM, "%s: out of memory", path);
		goto out;
	}
	r = chain_open(d, path, flags, err);
	if (r < 0)
		goto out;
	d->read_only = flags & (DISK_OPEN_RDONLY | DISK_OPEN_RAW);
	d->virtual_len = d->layers[0].virtual_len;
	d->cluster_len = d->layers[0].raw ? DISK_CLUSTER_DEFAULT : d->layers[0].cluster_len;
	d->cluster_buf = malloc(d->cluster_len);
	d->zero_buf = calloc(1, d->cluster_len);
	if (!d->cluster_buf || !d->zero_buf) {
		r = disk_fail(err, -ENOMEM, "%s: out of memory", path);
		goto out;
	}
	*out = d;
	return 0;
out:
	disk_close(d);
	return r;
}

int disk_open(const char *path, unsigned flags, struct disk **out, struct disk_error *err)
{
	return disk_open_flags(path, flags & (DISK_OPEN_RDONLY | DISK_OPEN_RAW), out, err);
}

static bool range_ok(const struct disk *d, uint64_t offset, uint64_t len)
{
	return len <= d->virtual_len && offset <= d->virtual_len - len;
}

/* disk_map over layers[from..]: what the disk reads as with the layers above `from` gone. */
static void map_from(const struct disk *d, unsigned from, uint64_t offset, uint64_t len,
		     struct disk_extent *ext, unsigned max, unsigned *n)
{
	unsigned k = 0;

	while (len) {
		uint64_t idx = offset / d->cluster_len;
		uint64_t chunk = (idx + 1) * d->cluster_len - offset;
		uint64_t file_offset = 0;
		int fd = -1;

		if (chunk > len)
			chunk = len;
		for (unsigned i = from; i < d->nlayers; i++) {
			const struct disk_layer *l = &d->layers[i];

			/* Layers only shrink going down: below one that ends here, all do. */
			if (offset >= l->virtual_len)
				break;
			if (disk_layer_has(l, idx)) {
				fd = l->fd;
				file_offset = l->raw ? offset : l->hdr.data_offset + offset;
				/* A grown disk: the rest of the cluster is beyond this layer. */
				if (chunk > l->virtual_len - offset)
					chunk = l->virtual_len - offset;
				break;
			}
		}
		if (k && ext[k - 1].fd == fd &&
		    (fd < 0 || ext[k - 1].file_offset + ext[k - 1].len == file_offset)) {
			ext[k - 1].len += chunk;
		} else {
			if (k == max)
				break;
			ext[k++] = (struct disk_extent){fd, file_offset, chunk};
		}
		offset += chunk;
		len -= chunk;
	}
	*n = k;
}

int disk_map(const struct disk *d, uint64_t offset, uint64_t len, struct disk_extent *ext,
	     unsigned max, unsigned *n)
{
	*n = 0;
	if (!range_ok(d, offset, len))
		return -EINVAL;
	map_from(d, 0, offset, len, ext, max, n);
	return 0;
}

int disk_set_fetch(struct disk *d, disk_fetch_fn fetch, void *arg)
{
	for (unsigned i = 1; i < d->nlayers; i++) {
		struct disk_layer *l = &d->layers[i];

		if (l->raw || l->writable || l->fetched)
			continue;
		if (!(l->fetched = calloc((size_t)(l->nclusters + 7) / 8 + 1, 1)))
			return -ENOMEM;
	}
	d->fetch = fetch;
	d->fetch_arg = arg;
	return 0;
}

int disk_fetch_extents(struct disk *d, const struct disk_extent *ext, unsigned n)
{
	if (!d->fetch)
		return 0;
	for (unsigned k = 0; k < n; k++) {
		for (unsigned i = 1; ext[k].fd >= 0 && i < d->nlayers; i++) {
			struct disk_layer *l = &d->layers[i];
			int r;

			if (l->fd != ext[k].fd || !l->fetched)
				continue;
			r = disk_layer_fetch(l, d->fetch, d->fetch_arg, ext[k].file_offset,
					     ext[k].len);
			if (r < 0)
				return r;
			break;
		}
	}
	return 0;
}

static int read_from(struct disk *d, unsigned from, uint64_t offset, uint8_t *buf, uint64_t len)
{
	struct disk_extent ext[16];
	unsigned n;
	int r;

	while (len) {
		map_from(d, from, offset, len, ext, 16, &n);
		if ((r = disk_fetch_extents(d, ext, n)) < 0)
			return r;
		for (unsigned i = 0; i < n; i++) {
			if (ext[i].fd < 0) {
				memset(buf, 0, ext[i].len);
			} else {
				r = disk_pread_full(ext[i].fd, buf, ext[i].len, ext[i].file_offset);
				if (r < 0)
					return r;
			}
			buf += ext[i].len;
			offset += ext[i].len;
			len -= ext[i].len;
		}
	}
	return 0;
}

int disk_read(struct disk *d, uint64_t offset, void *buf, uint64_t len)
{
	if (!range_ok(d, offset, len))
		return -EINVAL;
	return read_from(d, 0, offset, buf, len);
}

/*
 * Write `len` bytes of `buf` (NULL: zeros) at `offset`, all inside cluster `idx` of the top.
 * A cluster the top lacks is allocated whole: what the layers below hold, with the new bytes
 * over it (disk_layer_flush relies on allocation writing every byte of the cluster).
 */
static int write_in_cluster(struct disk *d, uint64_t idx, uint64_t offset, const uint8_t *buf,
			    uint64_t len)
{
	struct disk_layer *top = &d->layers[0];
	uint64_t start = idx * d->cluster_len, span = d->virtual_len - start;
	int r;

	if (span > d->cluster_len)
		span = d->cluster_len;
	if (disk_layer_has(top, idx))
		return disk_layer_pwrite(top, buf ? buf : d->zero_buf, len, offset);
	if (len == span) {
		r = disk_layer_pwrite(top, buf ? buf : d->zero_buf, len, offset);
	} else {
		r = read_from(d, 1, start, d->cluster_buf, span);
		if (r < 0)
			return r;
		if (buf)
			memcpy(d->cluster_buf + (offset - start), buf, len);
		else
			memset(d->cluster_buf + (offset - start), 0, len);
		r = disk_layer_pwrite(top, d->cluster_buf, span, start);
	}
	if (r < 0)
		return r;
	disk_layer_set(top, idx);
	return 0;
}

/* Make whole cluster `idx` of the top read as zeros: a hole where the filesystem can punch
 * one, else written zeros. */
static int zero_cluster(struct disk *d, uint64_t idx)
{
	struct disk_layer *top = &d->layers[0];
	uint64_t start = idx * d->cluster_len, span = d->virtual_len - start;
	uint64_t pos = top->hdr.data_offset + start;

	if (span > d->cluster_len)
		span = d->cluster_len;
	if (fallocate(top->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)pos,
		      (off_t)span) < 0)
		return write_in_cluster(d, idx, start, NULL, span);
	/* A punched range past the end of the file does not extend it; the bit needs the
	 * file to cover the cluster (disk_layer_open checks that). */
	if (pos + span > top->file_len) {
		if (ftruncate(top->fd, (off_t)(pos + span)) < 0)
			return -errno;
		top->file_len = pos + span;
	}
	top->unsynced = true;
	disk_layer_set(top, idx);
	return 0;
}

static int write_range(struct disk *d, uint64_t offset, const uint8_t *buf, uint64_t len,
		       bool punch)
{
	int r;

	if (d->read_only)
		return -EROFS;
	if (d->failed)
		return d->failed;
	if (!range_ok(d, offset, len))
		return -EINVAL;
	if (!len)
		return 0;
	r = disk_layer_begin_write(&d->layers[0]);
	if (r < 0)
		return r;
	while (len) {
		uint64_t idx = offset / d->cluster_len;
		uint64_t chunk = (idx + 1) * d->cluster_len - offset;

		if (chunk > len)
			chunk = len;
		if (punch && offset == idx * d->cluster_len &&
		    (chunk == d->cluster_len || offset + chunk == d->virtual_len))
			r = zero_cluster(d, idx);
		else
			r = write_in_cluster(d, idx, offset, buf, chunk);
		if (r < 0)
			return r;
		offset += chunk;
		len -= chunk;
		if (buf)
			buf += chunk;
	}
	return 0;
}

int disk_write(struct disk *d, uint64_t offset, const void *buf, uint64_t len)
{
	return write_range(d, offset, buf, len, false);
}

int disk_write_zeroes(struct disk *d, uint64_t offset, uint64_t len)
{
	return write_range(d, offset, NULL, len, true);
}

/*
 * Before the top holds cluster `idx` in part, it must hold all of it (the invariant
 * disk_layer_flush relies on): copy a cluster the top lacks up from the layers below, unless
 * [offset, end) will overwrite it whole. The bit is set by the caller.
 */
static int copy_up_edge(struct disk *d, uint64_t idx, uint64_t offset, uint64_t end)
{
	struct disk_layer *top = &d->layers[0];
	uint64_t start = idx * d->cluster_len, span = d->virtual_len - start;
	int r;

	if (span > d->cluster_len)
		span = d->cluster_len;
	if (disk_layer_has(top, idx) || (offset <= start && end >= start + span))
		return 0;
	r = read_from(d, 1, start, d->cluster_buf, span);
	return r < 0 ? r : disk_layer_pwrite(top, d->cluster_buf, span, start);
}

int disk_write_begin(struct disk *d, uint64_t offset, uint64_t len, int *fd, uint64_t *file_offset)
{
	struct disk_layer *top = &d->layers[0];
	uint64_t end = offset + len, first, last, pos;
	int r;

	if (d->read_only)
		return -EROFS;
	if (d->failed)
		return d->failed;
	if (!range_ok(d, offset, len) || !len)
		return -EINVAL;
	if ((r = disk_layer_begin_write(top)) < 0)
		return r;
	first = offset / d->cluster_len;
	last = (end - 1) / d->cluster_len;
	if ((r = copy_up_edge(d, first, offset, end)) < 0 ||
	    (last != first && (r = copy_up_edge(d, last, offset, end)) < 0))
		return r;
	/* The clusters in between are overwritten whole by the caller's write. Their bits are
	 * set now, in memory only: disk_flush refuses to run while this write is in flight, so
	 * no bit reaches the file before its data does. */
	for (uint64_t idx = first; idx <= last; idx++)
		disk_layer_set(top, idx);
	pos = top->hdr.data_offset + offset;
	top->unsynced = true;
	if (pos + len > top->file_len)
		top->file_len = pos + len;
	d->writes_in_flight++;
	*fd = top->fd;
	*file_offset = pos;
	return 0;
}

void disk_write_end(struct disk *d, int result)
{
	if (d->writes_in_flight)
		d->writes_in_flight--;
	/* The bits of the failed write's clusters are set, and its data may be anything: no
	 * later flush may publish them, so the disk refuses every write and flush from now on
	 * (reads go on). A host disk that fails a write is not one to keep writing to. */
	if (result < 0 && !d->failed)
		d->failed = -EIO;
}

int disk_flush(struct disk *d)
{
	if (d->read_only)
		return 0;
	if (d->failed)
		return d->failed;
	if (d->writes_in_flight)
		return -EBUSY;
	return disk_layer_flush(&d->layers[0]);
}

uint64_t disk_max_file_len(const struct disk *d)
{
	const struct disk_layer *top = &d->layers[0];

	if (d->read_only || top->raw)
		return 0;
	return top->hdr.data_offset + top->nclusters * (uint64_t)top->cluster_len;
}

int disk_rebase(struct disk *d, const char *root)
{
	size_t n = strlen(root);

	for (unsigned i = 0; i < d->nlayers; i++) {
		char *p = d->layers[i].path, *moved;

		if (!p || strncmp(p, root, n) != 0 || p[n] != '/')
			continue;
		if (!(moved = strdup(p + n)))
			return -ENOMEM;
		free(p);
		d->layers[i].path = moved;
	}
	return 0;
}

int disk_snapshot(struct disk *d, const char *path, struct disk_error *err)
{
	struct disk_layer *top = &d->layers[0], fresh;
	int r, fd = -1;

	if (d->read_only)
		return disk_fail(err, -EROFS, "%s: the disk is read-only", top->path);
	if (d->nlayers == DISK_MAX_LAYERS)
		return disk_fail(err, -ELOOP, "%s: a chain of %u layers is the most", top->path,
				 DISK_MAX_LAYERS);
	r = disk_layer_flush(top);
	if (r < 0)
		return disk_fail(err, r, "%s: flushing it: %s", top->path, strerror(-r));
	/* From here the old top is only read: other processes may share it. */
	if (flock(top->fd, LOCK_SH | LOCK_NB) < 0)
		return disk_fail(err, -errno, "%s: %s", top->path, strerror(errno));
	r = disk_layer_create_fd(path, d->virtual_len, d->cluster_len, top, &fd, err);
	if (r < 0)
		goto undo;
	r = disk_layer_open_fd(&fresh, fd, path, DISK_LAYER_WRITABLE, err);
	if (r < 0) {
		unlink(path);
		goto undo;
	}
	memmove(&d->layers[1], &d->layers[0], d->nlayers * sizeof(d->layers[0]));
	d->layers[0] = fresh;
	d->layers[1].writable = false;
	d->nlayers++;
	return 0;
undo:
	if (flock(top->fd, LOCK_EX | LOCK_NB) < 0)
		d->read_only = true; /* someone took it meanwhile: stop writing */
	return r;
}

int disk_create(const char *path, uint64_t virtual_len, uint32_t cluster_len,
		struct disk_error *err)
{
	return disk_layer_create(path, virtual_len,
				 cluster_len ? cluster_len : DISK_CLUSTER_DEFAULT, NULL, err);
}

int disk_create_overlay(const char *path, const char *parent_path, uint32_t cluster_len,
			struct disk_error *err)
{
	return disk_create_overlay_len(path, parent_path, cluster_len, 0, err);
}

int disk_create_overlay_len(const char *path, const char *parent_path, uint32_t cluster_len,
			    uint64_t virtual_len, struct disk_error *err)
{
	uint8_t magic[DISK_MAGIC_LEN] = {0};
	struct disk *parent = NULL;
	ssize_t got;
	int fd, r;

	fd = open(parent_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return disk_fail(err, -errno, "%s: %s", parent_path,
				 errno == ENOENT ? "no such file" : strerror(errno));
	got = pread(fd, magic, sizeof(magic), 0);
	r = got < 0 ? -errno : 0;
	close(fd);
	if (r < 0)
		return disk_fail(err, r, "%s: %s", parent_path, strerror(-r));
	/* A layer starts with the magic; anything else is taken for a raw image. */
	r = disk_open_flags(parent_path,
			    memcmp(magic, DISK_MAGIC, DISK_MAGIC_LEN) ? DISK_OPEN_RAW
								      : DISK_OPEN_RDONLY,
			    &parent, err);
	if (r < 0)
		return r;
	if (!cluster_len)
		cluster_len = parent->layers[0].raw ? DISK_CLUSTER_DEFAULT : parent->cluster_len;
	if (!virtual_len)
		virtual_len = parent->virtual_len;
	if (!parent->layers[0].raw && cluster_len != parent->cluster_len)
		r = disk_fail(err, -EINVAL, "%s: cluster size %u differs from its parent's (%u)",
			      path, cluster_len, parent->cluster_len);
	else if (virtual_len < parent->virtual_len)
		r = disk_fail(err, -EINVAL, "%s: %llu bytes is smaller than its parent (%llu)",
			      path, (unsigned long long)virtual_len,
			      (unsigned long long)parent->virtual_len);
	else
		r = disk_layer_create(path, virtual_len, cluster_len, &parent->layers[0], err);
	disk_close(parent);
	return r;
}

/* Empty the top after a commit: bitmap zeroed and durable before the data goes, so no bit
 * ever points past the end of the file. */
static int commit_empty_top(struct disk *d)
{
	struct disk_layer *top = &d->layers[0];
	uint64_t done;
	int r;

	memset(top->bitmap, 0, top->hdr.bitmap_len);
	memset(top->dirty, 0, top->hdr.bitmap_len / DISK_BITMAP_ALIGN);
	if (fallocate(top->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		      (off_t)top->hdr.bitmap_offset, (off_t)top->hdr.bitmap_len) < 0) {
		for (done = 0; done < top->hdr.bitmap_len; done += DISK_BITMAP_ALIGN) {
			r = disk_pwrite_full(top->fd, top->bitmap + done, DISK_BITMAP_ALIGN,
					     top->hdr.bitmap_offset + done);
			if (r < 0)
				return r;
		}
	}
	if (fdatasync(top->fd) < 0 || ftruncate(top->fd, (off_t)top->hdr.data_offset) < 0)
		return -errno;
	top->file_len = top->hdr.data_offset;
	return 0;
}

/*
 * The steps, each durable before the next, so that a crash anywhere leaves either the old
 * state or a top refused with -EUCLEAN that a new commit completes (copying a cluster again
 * is harmless: it holds the same bytes):
 * 1. the top says "committing" and records the identity the parent will have;
 * 2. the parent's generation is bumped (its other children are refused from here);
 * 3. every cluster of the top is written into the parent, which is flushed;
 * 4. the top is emptied, then points at the parent's new identity and drops the flag.
 */
static int commit_run(struct disk *d, struct disk_error *err)
{
	struct disk_layer *top = &d->layers[0], *parent = &d->layers[1];
	int r;

	parent->hdr.generation++;
	r = disk_layer_identity(parent, top->hdr.commit_identity);
	parent->hdr.generation--;
	if (r < 0)
		return disk_fail(err, r, "%s: %s", parent->path, strerror(-r));
	top->hdr.flags |= DISK_FLAG_COMMITTING;
	r = disk_layer_write_header(top);
	if (!r && fdatasync(top->fd) < 0)
		r = -errno;
	if (!r)
		r = disk_layer_begin_write(parent);
	for (uint64_t idx = 0; !r && idx < top->nclusters; idx++) {
		uint64_t start = idx * d->cluster_len, span = d->virtual_len - start;

		if (!top->bitmap[idx / 8]) {
			idx |= 7; /* skip a byte of clear bits */
			continue;
		}
		if (!disk_layer_has(top, idx))
			continue;
		if (span > d->cluster_len)
			span = d->cluster_len;
		r = disk_pread_full(top->fd, d->cluster_buf, span, top->hdr.data_offset + start);
		if (!r)
			r = disk_layer_pwrite(parent, d->cluster_buf, span, start);
		if (!r)
			disk_layer_set(parent, idx);
	}
	if (!r)
		r = disk_layer_flush(parent);
	if (!r)
		r = commit_empty_top(d);
	if (r < 0)
		return disk_fail(err, r, "%s: committing into %s: %s", top->path, parent->path,
				 strerror(-r));
	memcpy(top->hdr.parent_identity, top->hdr.commit_identity, DISK_HASH_LEN);
	memset(top->hdr.commit_identity, 0, DISK_HASH_LEN);
	top->hdr.parent_generation = parent->hdr.generation;
	top->hdr.flags &= ~DISK_FLAG_COMMITTING;
	r = disk_layer_write_header(top);
	if (!r && fdatasync(top->fd) < 0)
		r = -errno;
	if (r < 0)
		return disk_fail(err, r, "%s: %s", top->path, strerror(-r));
	return 0;
}

int disk_commit(const char *path, struct disk_error *err)
{
	struct disk *d;
	int r;

	r = disk_open_flags(path, DISK_OPEN_COMMIT_, &d, err);
	if (r < 0)
		return r;
	if (d->nlayers < 2)
		r = disk_fail(err, -EINVAL, "%s: has no parent to commit into", path);
	else if (d->layers[1].raw)
		r = disk_fail(err, -EINVAL,
			      "%s: its parent %s is a raw image, which is never written; commit "
			      "merges into a layer",
			      path, d->layers[1].path);
	else if (d->layers[1].virtual_len != d->virtual_len)
		r = disk_fail(err, -EINVAL,
			      "%s: it is larger than its parent %s (%llu bytes, %llu): a commit "
			      "cannot grow a layer",
			      path, d->layers[1].path, (unsigned long long)d->virtual_len,
			      (unsigned long long)d->layers[1].virtual_len);
	else
		r = commit_run(d, err);
	disk_close(d);
	return r;
}

int disk_inspect(const char *path, struct disk_layer_info *info, struct disk_error *err)
{
	struct disk_layer l;
	struct disk *d;
	struct stat st;
	int r;

	memset(info, 0, sizeof(*info));
	r = disk_layer_open(&l, path, DISK_LAYER_NOLOCK, err);
	if (r < 0)
		return r;
	info->hdr = l.hdr;
	info->file_len = l.file_len;
	if (fstat(l.fd, &st) == 0)
		info->file_alloc_len = (uint64_t)st.st_blocks * 512;
	for (uint64_t i = 0; i < l.hdr.bitmap_len; i++)
		info->allocated_clusters += (uint64_t)__builtin_popcount(l.bitmap[i]);
	r = disk_layer_identity(&l, info->identity);
	if (!r && l.hdr.parent_kind != DISK_PARENT_NONE)
		r = disk_layer_parent_path(l.path, &l.hdr, info->parent_path,
					   sizeof(info->parent_path));
	if (!r && info->parent_path[0]) {
		char *canon = realpath(info->parent_path, NULL);

		if (canon && strlen(canon) < sizeof(info->parent_path))
			strcpy(info->parent_path, canon);
		free(canon);
	}
	disk_layer_close(&l);
	if (r < 0)
		return disk_fail(err, r, "%s: %s", path, strerror(-r));
	info->chain_status =
		disk_open_flags(path, DISK_OPEN_RDONLY | DISK_OPEN_NOLOCK_, &d, &info->chain_error);
	if (!info->chain_status)
		disk_close(d);
	return 0;
}
