/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The snapshot's state file as a flattened device tree (libfdt): a writer that grows its
 * buffer as properties arrive, and a reader for which the file is hostile input. The reader
 * checks the whole tree once (fdt_check_full) and then every property against the exact
 * length its reader expects, so no caller ever sees a short or oversized value. Errors name
 * the node and property: "/vcpu@1/regs: 12 bytes, want 144".
 */
#include <endian.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libfdt.h>

#include "vmm.h"

#define SNAPW_INITIAL (64u << 10)

int snapw_init(struct snap_writer *w)
{
	memset(w, 0, sizeof(*w));
	w->cap = SNAPW_INITIAL;
	w->buf = malloc(w->cap);
	if (!w->buf)
		return -ENOMEM;
	if (fdt_create(w->buf, (int)w->cap) < 0 || fdt_finish_reservemap(w->buf) < 0 ||
	    fdt_begin_node(w->buf, "") < 0) {
		free(w->buf);
		w->buf = NULL;
		return -EINVAL;
	}
	return 0;
}

void snapw_free(struct snap_writer *w)
{
	free(w->buf);
	w->buf = NULL;
}

/* Double the buffer; false (and w->err) when it cannot grow. */
static bool snapw_grow(struct snap_writer *w, size_t need)
{
	size_t cap = w->cap;
	void *n;

	while (cap < w->cap + need + 1024)
		cap *= 2;
	if (cap > SNAP_STATE_MAX || !(n = malloc(cap)) || fdt_resize(w->buf, n, (int)cap) < 0) {
		w->err = -E2BIG;
		return false;
	}
	free(w->buf);
	w->buf = n;
	w->cap = cap;
	return true;
}

/* Run one sequential-write call, growing the buffer once when it is full. */
#define SNAPW_CALL(w, need, call)                                                                  \
	do {                                                                                       \
		int r_;                                                                            \
		if ((w)->err)                                                                      \
			return;                                                                    \
		r_ = (call);                                                                       \
		if (r_ == -FDT_ERR_NOSPACE && snapw_grow((w), (need)))                             \
			r_ = (call);                                                               \
		if (r_ < 0)                                                                        \
			(w)->err = r_ == -FDT_ERR_NOSPACE ? -E2BIG : -EINVAL;                      \
	} while (0)

void snapw_begin(struct snap_writer *w, const char *name)
{
	SNAPW_CALL(w, strlen(name) + 16, fdt_begin_node(w->buf, name));
}

void snapw_begin_index(struct snap_writer *w, const char *name, unsigned index)
{
	char n[64];

	snprintf(n, sizeof(n), "%s@%u", name, index);
	snapw_begin(w, n);
}

void snapw_end(struct snap_writer *w)
{
	SNAPW_CALL(w, 16, fdt_end_node(w->buf));
}

void snapw_prop(struct snap_writer *w, const char *name, const void *val, size_t len)
{
	if (len > SNAP_STATE_MAX) {
		w->err = -E2BIG;
		return;
	}
	SNAPW_CALL(w, len + strlen(name) + 32, fdt_property(w->buf, name, val, (int)len));
}

/* Integers are stored little-endian like the rest of our formats (FDT's own cells are
 * big-endian, but nothing here is read by a device-tree consumer). */
void snapw_u32(struct snap_writer *w, const char *name, uint32_t v)
{
	uint32_t le = htole32(v);

	snapw_prop(w, name, &le, sizeof(le));
}

void snapw_u64(struct snap_writer *w, const char *name, uint64_t v)
{
	uint64_t le = htole64(v);

	snapw_prop(w, name, &le, sizeof(le));
}

int snapw_finish(struct snap_writer *w, const void **buf, size_t *len)
{
	int r;

	snapw_end(w); /* the root node */
	if (w->err)
		return w->err;
	r = fdt_finish(w->buf);
	if (r == -FDT_ERR_NOSPACE && snapw_grow(w, 64))
		r = fdt_finish(w->buf);
	if (r < 0)
		return w->err ? w->err : -EINVAL;
	*buf = w->buf;
	*len = fdt_totalsize(w->buf);
	return 0;
}

/* ---- the reader ---- */

int snapr_fail(struct snap_reader *r, int err, const char *fmt, ...)
{
	va_list ap;

	if (!r->msg[0]) {
		va_start(ap, fmt);
		vsnprintf(r->msg, sizeof(r->msg), fmt, ap);
		va_end(ap);
	}
	return err;
}

int snapr_open(struct snap_reader *r, const void *buf, size_t len)
{
	int err;

	memset(r, 0, sizeof(*r));
	r->fdt = buf;
	if (len < 64 || len > SNAP_STATE_MAX)
		return snapr_fail(r, -EBADMSG, "%zu bytes: not a state file", len);
	if ((err = fdt_check_header(buf)) != 0)
		return snapr_fail(r, -EBADMSG, "not a device tree: %s", fdt_strerror(err));
	/* What fdt_create writes, and nothing older: libfdt 1.6.1's fdt_check_full dereferences
	 * NULL on some trees of versions before 16 (found by tests/fuzz/fuzz_snapstate.c). */
	if (fdt_version(buf) != 17 || fdt_last_comp_version(buf) != 16)
		return snapr_fail(r, -EBADMSG,
				  "device tree version %u (last compatible %u), want 17",
				  fdt_version(buf), fdt_last_comp_version(buf));
	if (fdt_totalsize(buf) != len)
		return snapr_fail(r, -EBADMSG, "the tree says %u bytes, the file has %zu",
				  fdt_totalsize(buf), len);
	if ((err = fdt_check_full(buf, len)) != 0)
		return snapr_fail(r, -EBADMSG, "a malformed device tree: %s", fdt_strerror(err));
	return 0;
}

/* "/vcpu@1" for messages (best effort). */
static const char *snapr_path(struct snap_reader *r, int node, char *buf, size_t len)
{
	if (fdt_get_path(r->fdt, node, buf, (int)len) < 0)
		snprintf(buf, len, "(node %d)", node);
	return buf;
}

int snapr_node(struct snap_reader *r, int parent, const char *name)
{
	char path[256];
	int off = fdt_subnode_offset(r->fdt, parent, name);

	if (off < 0)
		return snapr_fail(r, -ENOENT, "%s: no node %s", snapr_path(r, parent, path, 256),
				  name);
	return off;
}

int snapr_node_index(struct snap_reader *r, int parent, const char *name, unsigned index)
{
	char n[64];

	snprintf(n, sizeof(n), "%s@%u", name, index);
	return snapr_node(r, parent, n);
}

const void *snapr_var(struct snap_reader *r, int node, const char *name, size_t *len)
{
	char path[256];
	int n;
	const void *p = fdt_getprop(r->fdt, node, name, &n);

	if (!p || n < 0) {
		snapr_fail(r, -ENOENT, "%s: no property %s", snapr_path(r, node, path, 256), name);
		return NULL;
	}
	*len = (size_t)n;
	return p;
}

bool snapr_has(struct snap_reader *r, int node, const char *name)
{
	return fdt_getprop(r->fdt, node, name, NULL) != NULL;
}

int snapr_get(struct snap_reader *r, int node, const char *name, void *out, size_t len)
{
	char path[256];
	size_t n;
	const void *p = snapr_var(r, node, name, &n);

	if (!p)
		return -ENOENT;
	if (n != len)
		return snapr_fail(r, -EBADMSG, "%s/%s: %zu bytes, want %zu",
				  snapr_path(r, node, path, 256), name, n, len);
	memcpy(out, p, len);
	return 0;
}

int snapr_u32(struct snap_reader *r, int node, const char *name, uint32_t *v)
{
	uint32_t le;
	int err = snapr_get(r, node, name, &le, sizeof(le));

	if (!err)
		*v = le32toh(le);
	return err;
}

int snapr_u64(struct snap_reader *r, int node, const char *name, uint64_t *v)
{
	uint64_t le;
	int err = snapr_get(r, node, name, &le, sizeof(le));

	if (!err)
		*v = le64toh(le);
	return err;
}

int snapr_u32_max(struct snap_reader *r, int node, const char *name, uint32_t max, uint32_t *v)
{
	char path[256];
	int err = snapr_u32(r, node, name, v);

	if (!err && *v > max)
		return snapr_fail(r, -EBADMSG, "%s/%s: %u, at most %u",
				  snapr_path(r, node, path, 256), name, *v, max);
	return err;
}
