/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Where a snapshot's disk layers may point (client.h, snap_layers_check, snap_layers_rebase).
 * A layer file names its parent by a path (disk-format.md), which the VMM opens as it finds
 * it: a snapshot made elsewhere (a client's push, a service's pull, the store) could name any
 * file of the host that restores it: another sandbox's disk, a key. So before such a snapshot
 * is this host's, each of its layers must name as its parent one of the snapshot's own layers
 * (a bare name, resolved beside it), or the root file system of the image the snapshot says
 * it came from as this host has it, or none.
 *
 * A snapshot sent from another machine names its image's file as that machine had it: a
 * rebase points such layers at this host's file of that image (an absolute path: the same
 * from a snapshot's directory and a sandbox's). The layer still records its parent's identity
 * (size and a hash of its ends), which every open checks: an image of that name but other
 * content here is refused then, naming the layer.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "disk.h"
#include "client.h"

static bool is_layer_of(const struct snap_meta *m, const char *name)
{
	for (unsigned i = 0; i < m->nlayers; i++)
		if (strcmp(m->layers[i].file, name) == 0)
			return true;
	return false;
}

/* This host's file of m's image, canonical, into out (PATH_MAX). */
static int image_root(const struct snap_meta *m, char *out, char *err, size_t err_len)
{
	char path[4200];

	if (!m->image[0] || !valid_name(m->image)) {
		snprintf(err, err_len, "the snapshot names no image it came from");
		return -EBADMSG;
	}
	if (path_fmt(path, sizeof(path), "%s/images/%s/rootfs", state_home(), m->image) < 0 ||
	    !realpath(path, out)) {
		snprintf(err, err_len, "the snapshot's image %.64s is not installed here",
			 m->image);
		return -ENOENT;
	}
	return 0;
}

/* Layer f's header (on-disk order) into h, its fd (read-write when rw) in *fd. */
static int read_header(const char *dir, const char *f, bool rw, struct disk_header *h, int *fd,
		       char *err, size_t err_len)
{
	char path[4200];
	int r = path_fmt(path, sizeof(path), "%s/%s", dir, f);

	if (r < 0)
		return r;
	*fd = open(path, (rw ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (*fd < 0 || pread(*fd, h, sizeof(*h), 0) != (ssize_t)sizeof(*h) ||
	    memcmp(h->magic, DISK_MAGIC, DISK_MAGIC_LEN) != 0 ||
	    le32toh(h->parent_path_len) > DISK_PARENT_PATH_MAX ||
	    memchr(h->parent_path, 0, le32toh(h->parent_path_len))) {
		if (*fd >= 0)
			close(*fd);
		*fd = -1;
		snprintf(err, err_len, "layer %s is not a layer file", f);
		return -EBADMSG;
	}
	return 0;
}

int snap_layers_check(const char *dir, const struct snap_meta *m, char *err, size_t err_len)
{
	char root[PATH_MAX] = "", at[PATH_MAX], path[4200 + DISK_PARENT_PATH_MAX];
	int r;

	for (unsigned i = 0; i < m->nlayers; i++) {
		const char *f = m->layers[i].file;
		char parent[DISK_PARENT_PATH_MAX + 1];
		struct disk_header h;
		int fd;

		if ((r = read_header(dir, f, false, &h, &fd, err, err_len)) < 0)
			return r;
		close(fd);
		uint32_t kind = le32toh(h.parent_kind), len = le32toh(h.parent_path_len);

		memcpy(parent, h.parent_path, len);
		parent[len] = 0;
		bool ok = kind == DISK_PARENT_NONE && len == 0;

		if (kind == DISK_PARENT_LAYER)
			ok = !strchr(parent, '/') && strcmp(parent, f) != 0 &&
			     is_layer_of(m, parent);
		if (kind == DISK_PARENT_RAW) { /* the very file of its image here */
			if (!root[0] && (r = image_root(m, root, err, err_len)) < 0)
				return r;
			snprintf(path, sizeof(path), "%s%s%s", parent[0] == '/' ? "" : dir,
				 parent[0] == '/' ? "" : "/", parent);
			ok = realpath(path, at) && strcmp(at, root) == 0;
		}
		if (!ok) {
			snprintf(err, err_len,
				 "layer %s names a parent outside the snapshot and its image "
				 "(%.200s): "
				 "refused",
				 f, parent);
			return -EPERM;
		}
	}
	return 0;
}

int snap_layers_rebase(const char *dir, const struct snap_meta *m, bool *changed, char *err,
		       size_t err_len)
{
	char root[PATH_MAX] = "";
	size_t rl = 0;
	int r;

	*changed = false;
	for (unsigned i = 0; i < m->nlayers; i++) {
		struct disk_header h;
		int fd;

		if ((r = read_header(dir, m->layers[i].file, true, &h, &fd, err, err_len)) < 0)
			return r;
		if (le32toh(h.parent_kind) == DISK_PARENT_RAW && !root[0]) {
			if ((r = image_root(m, root, err, err_len)) < 0 ||
			    (rl = strlen(root)) >= DISK_PARENT_PATH_MAX) {
				close(fd);
				if (r == 0)
					snprintf(err, err_len,
						 "the path of image %.64s is too long", m->image);
				return r < 0 ? r : -ENAMETOOLONG;
			}
		}
		if (le32toh(h.parent_kind) != DISK_PARENT_RAW ||
		    (le32toh(h.parent_path_len) == rl && memcmp(h.parent_path, root, rl) == 0)) {
			close(fd);
			continue;
		}
		memset(h.parent_path, 0, sizeof(h.parent_path));
		memcpy(h.parent_path, root, rl);
		h.parent_path_len = htole32((uint32_t)rl);
		disk_header_seal(&h);
		r = pwrite(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h) && fsync(fd) == 0 ? 0 : -EIO;
		close(fd);
		if (r < 0) {
			snprintf(err, err_len, "layer %s: its header cannot be written",
				 m->layers[i].file);
			return r;
		}
		*changed = true;
	}
	return 0;
}
