/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A lazy restore's disk layers (docs/fleet.md, "Lazy restore"): the pull writes each layer
 * file at its size with only the chunks that hold its header and bitmap (what opening it
 * reads), and the rest comes as the VMM reads it: the pager asks lazy_disks_get for a range
 * of a layer's file before the VMM reads it there, and lazy_disks_next fills the rest, a chunk
 * at a time, once the box answered. Each chunk is fetched through the host's chunk cache and
 * checked against its hash in the sealed manifest (chunk_get); a chunk of zeros is a hole
 * already. Only the pager's thread uses a struct lazy_disks.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "disk.h"
#include "snap_remote.h"

static const uint8_t zero_hash[CHUNK_HASH_LEN];

/* The header (into h) and its data_offset: where the clusters start, the end of what opening
 * the layer reads. */
static int head_len(int fd, uint64_t size, struct disk_header *h, uint64_t *len)
{
	if (pread(fd, h, sizeof(*h), 0) != (ssize_t)sizeof(*h) ||
	    memcmp(h->magic, DISK_MAGIC, DISK_MAGIC_LEN) != 0)
		return -EBADMSG;
	*len = le64toh(h->data_offset);
	if (*len < DISK_HEADER_LEN)
		return -EBADMSG;
	if (*len > size)
		*len = size; /* (a layer without data: opening it says so) */
	return 0;
}

/* Chunk ci of disk d into its file: fetched (through the cache), checked, written. */
static int put_chunk(const struct manifest *mf, const struct manifest_file *f, int fd,
		     struct chunk_store *cs, uint64_t ci, uint8_t *buf, char *err, size_t err_len)
{
	size_t got = 0;
	int r;

	if (memcmp(f->hash[ci], zero_hash, CHUNK_HASH_LEN) == 0)
		return 0; /* zeros: a hole already */
	r = chunk_get_waited(cs, f->hash[ci], buf, mf->chunk_size, &got);
	if (r == 0)
		r = manifest_write_chunk(mf, f, cs, ci, buf, got, fd, f->name);
	if (r < 0)
		snprintf(err, err_len, "disk layer %s: %s", f->name, cs->err);
	return r;
}

bool snap_lazy_layers(const struct manifest *mf)
{
	unsigned n = 0;

	for (unsigned i = 0; i < mf->nfiles; i++)
		n += snap_valid_layer_name(mf->file[i].name);
	return n <= RESTORE_FLATTEN_AT;
}

int snap_lazy_disk_head(const struct manifest *mf, struct chunk_store *cs, const char *name,
			const char *path, char *err, size_t err_len)
{
	const struct manifest_file *f = manifest_find(mf, name);
	uint8_t *buf = malloc(mf->chunk_size);
	const struct chunk_recipe *recipe0 = cs->recipe;
	uint64_t len = 0, nrecipes0 = cs->nrecipes;
	struct disk_header h;
	int fd, r = 0;

	if (!f || !buf) {
		free(buf);
		snprintf(err, err_len, "the snapshot has no file %.80s", name);
		return f ? -ENOMEM : -ENOENT;
	}
	chunk_store_recipes(cs, mf); /* its patched chunks made as they come */
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 || ftruncate(fd, (off_t)f->size) < 0) {
		r = -errno;
		snprintf(err, err_len, "%s: %s", path, strerror(errno));
		goto out;
	}
	if (f->nchunks && (r = put_chunk(mf, f, fd, cs, 0, buf, err, err_len)) < 0)
		goto out;
	if ((r = head_len(fd, f->size, &h, &len)) < 0) {
		snprintf(err, err_len, "disk layer %s: not a layer file", name);
		goto out;
	}
	for (uint64_t ci = 1; ci * mf->chunk_size < len && r == 0; ci++)
		r = put_chunk(mf, f, fd, cs, ci, buf, err, err_len);
out:
	cs->recipe = recipe0;
	cs->nrecipes = nrecipes0;
	if (fd >= 0)
		close(fd);
	free(buf);
	return r;
}

int lazy_disks_open(struct lazy_disks *ld, const struct manifest *mf, const char *dir, char *err,
		    size_t err_len)
{
	bool lazy = snap_lazy_layers(mf); /* (else pulled whole: none to fill) */

	memset(ld, 0, sizeof(*ld));
	ld->mf = mf;
	if (!(ld->buf = malloc(mf->chunk_size)))
		return -ENOMEM;
	for (unsigned i = 0; i < mf->nfiles && lazy; i++) {
		const struct manifest_file *f = &mf->file[i];
		struct lazy_disk *d = &ld->d[ld->n];
		struct disk_header h;
		char path[4400];
		uint64_t head = 0;

		if (!snap_valid_layer_name(f->name))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, f->name);
		d->f = f;
		d->fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
		d->in = calloc(f->nchunks ? f->nchunks : 1, 1);
		if (d->fd < 0 || !d->in || head_len(d->fd, f->size, &h, &head) < 0) {
			snprintf(err, err_len, "%s: %s", path,
				 d->fd < 0 ? strerror(errno) : "not a layer file");
			if (d->fd >= 0)
				close(d->fd);
			free(d->in);
			lazy_disks_close(ld);
			return -EBADMSG;
		}
		memcpy(d->id, h.layer_id, sizeof(d->id));
		for (uint64_t ci = 0; ci < f->nchunks; ci++) {
			d->in[ci] = ci * mf->chunk_size < head ||
				    memcmp(f->hash[ci], zero_hash, CHUNK_HASH_LEN) == 0;
			d->left += !d->in[ci];
		}
		ld->n++;
	}
	return 0;
}

/* Chunk ci of d in: 0 when it was, 1 fetched now, or the failure. */
static int bring_in(struct lazy_disks *ld, struct lazy_disk *d, struct chunk_store *cs, uint64_t ci,
		    char *err, size_t err_len)
{
	int r;

	if (d->in[ci])
		return 0;
	if ((r = put_chunk(ld->mf, d->f, d->fd, cs, ci, ld->buf, err, err_len)) < 0)
		return r;
	d->in[ci] = 1;
	d->left--;
	return 1;
}

int lazy_disks_get(struct lazy_disks *ld, struct chunk_store *cs, const uint8_t id[16],
		   uint64_t off, uint64_t len, char *err, size_t err_len)
{
	uint32_t c = ld->mf->chunk_size;

	for (unsigned i = 0; i < ld->n; i++) {
		struct lazy_disk *d = &ld->d[i];

		if (memcmp(d->id, id, sizeof(d->id)) != 0)
			continue;
		if (off >= d->f->size || !len)
			return 0; /* past its end: the VMM reads zeros there, as a short file */
		if (len > d->f->size - off)
			len = d->f->size - off;
		for (uint64_t ci = off / c; ci <= (off + len - 1) / c; ci++) {
			int r = bring_in(ld, d, cs, ci, err, err_len);

			if (r < 0)
				return r;
			ld->want_chunks += (uint64_t)r;
		}
		return 0;
	}
	return 0; /* a layer not from the snapshot: in already */
}

int lazy_disks_next(struct lazy_disks *ld, struct chunk_store *cs, char *err, size_t err_len)
{
	for (; ld->next < ld->n; ld->next++, ld->next_chunk = 0) {
		struct lazy_disk *d = &ld->d[ld->next];

		for (; d->left && ld->next_chunk < d->f->nchunks; ld->next_chunk++) {
			int r = bring_in(ld, d, cs, ld->next_chunk, err, err_len);

			if (r < 0)
				return r;
			if (r == 1) {
				ld->fill_chunks++;
				return 1;
			}
		}
	}
	/* whole: on the disk before the caller says so (its mark goes then) */
	for (unsigned i = 0; i < ld->n && !ld->synced; i++)
		if (fsync(ld->d[i].fd) < 0) {
			snprintf(err, err_len, "disk layer %s: %s", ld->d[i].f->name,
				 strerror(errno));
			return -errno;
		}
	ld->synced = true;
	return 0;
}

void lazy_disks_close(struct lazy_disks *ld)
{
	for (unsigned i = 0; i < ld->n; i++) {
		if (ld->d[i].fd >= 0)
			close(ld->d[i].fd);
		free(ld->d[i].in);
	}
	free(ld->buf);
	memset(ld, 0, sizeof(*ld));
}
