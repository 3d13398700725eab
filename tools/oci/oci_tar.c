/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A tar reader for imported images (oci.h): the archive docker save writes and every layer.
 * Hostile input, so strict: each header's checksum is checked, only ustar headers (POSIX
 * "ustar\0" "00" or GNU "ustar  \0") are taken, numbers are octal or GNU base-256 within
 * their bounds, pax extended headers ('x': path, linkpath, size, uid, gid, mtime,
 * SCHILY.xattr.*; 'g' read and ignored) and GNU long names ('L', 'K') are bounded
 * (OCI_PAX_MAX) and apply to the next entry only, sparse files and other types are refused.
 * A stream that ends inside a header or an entry's data is truncated, an error. The entry's
 * path comes out as the archive gives it: the caller normalises it (oci_path_norm).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oci.h"

#define BLOCK 512u

volatile int oci_interrupted;

/* The ustar header's fields, as offsets and lengths. */
#define H_NAME	   0, 100
#define H_MODE	   100, 8
#define H_UID	   108, 8
#define H_GID	   116, 8
#define H_SIZE	   124, 12
#define H_MTIME	   136, 12
#define H_CHKSUM   148
#define H_TYPE	   156
#define H_LINK	   157, 100
#define H_MAGIC	   257
#define H_DEVMAJOR 329, 8
#define H_DEVMINOR 337, 8
#define H_PREFIX   345, 155

void oci_tar_init(struct oci_tar *t, oci_read_fn read, oci_skip_fn skip, void *arg,
		  struct oci_msg *m)
{
	memset(t, 0, sizeof(*t));
	t->read = read;
	t->skip = skip;
	t->arg = arg;
	t->msg = m;
}

void oci_tar_entry_clear(struct oci_tar_entry *e)
{
	for (unsigned i = 0; i < e->nxattrs; i++)
		free(e->xattrs[i].value);
	e->nxattrs = 0;
}

/* Exactly `len` bytes, or -EBADMSG (truncated) at the end of the stream. */
static int read_full(struct oci_tar *t, void *buf, size_t len, const char *what)
{
	size_t have = 0, got;
	int err;

	while (have < len) {
		if ((err = t->read(t->arg, (char *)buf + have, len - have, &got)) < 0)
			return err;
		if (got == 0)
			return oci_fail(t->msg, -EBADMSG,
					"truncated: the archive ends inside %s (at byte %llu)",
					what, (unsigned long long)(t->pos + have));
		have += got;
	}
	t->pos += len;
	return 0;
}

static int skip_bytes(struct oci_tar *t, uint64_t len, const char *what)
{
	static char buf[65536];
	int err;

	if (t->skip) {
		if ((err = t->skip(t->arg, len)) < 0)
			return err == -EBADMSG
				       ? oci_fail(t->msg, err,
						  "truncated: the archive ends inside %s", what)
				       : err;
		t->pos += len;
		return 0;
	}
	while (len) {
		size_t n = len < sizeof(buf) ? (size_t)len : sizeof(buf);

		if ((err = read_full(t, buf, n, what)) < 0)
			return err;
		len -= n;
	}
	return 0;
}

/* A numeric field: octal (leading spaces, ending at a space or NUL), or base-256 (GNU). */
static bool parse_num(const unsigned char *h, size_t off, size_t len, uint64_t max, uint64_t *out)
{
	const unsigned char *f = h + off;
	uint64_t v = 0;
	size_t i = 0;

	if (f[0] & 0x80) {
		if (f[0] != 0x80)
			return false; /* negative, or more bits than we take */
		for (i = 1; i < len; i++) {
			if (v > (UINT64_MAX >> 8))
				return false;
			v = v << 8 | f[i];
		}
		if (v > max)
			return false;
		*out = v;
		return true;
	}
	while (i < len && f[i] == ' ')
		i++;
	if (i == len || f[i] < '0' || f[i] > '7')
		return false;
	for (; i < len && f[i] >= '0' && f[i] <= '7'; i++) {
		if (v > (max >> 3))
			return false;
		v = v << 3 | (uint64_t)(f[i] - '0');
	}
	if (v > max)
		return false;
	for (; i < len; i++)
		if (f[i] != ' ' && f[i] != '\0')
			return false;
	*out = v;
	return true;
}

/* A NUL-padded string field into out (len + 1 bytes). */
static void field_str(const unsigned char *h, size_t off, size_t len, char *out)
{
	size_t n = strnlen((const char *)h + off, len);

	memcpy(out, h + off, n);
	out[n] = '\0';
}

static bool checksum_ok(const unsigned char *h)
{
	uint64_t want;
	unsigned long u = 0;
	long s = 0;

	if (!parse_num(h, H_CHKSUM, 8, 0xffffff, &want))
		return false;
	for (unsigned i = 0; i < BLOCK; i++) {
		unsigned char c = i >= H_CHKSUM && i < H_CHKSUM + 8 ? ' ' : h[i];

		u += c;
		s += (signed char)c;
	}
	return u == want || (s >= 0 && (uint64_t)s == want); /* old tars summed signed chars */
}

/* A decimal in the pax value [s, s+len), up to max; with frac, ".N" is allowed. */
static bool pax_num(const char *s, size_t len, uint64_t max, uint64_t *out, uint32_t *frac)
{
	uint64_t v = 0;
	size_t i = 0;

	if (len == 0)
		return false;
	for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
		if (v > (max - (uint64_t)(s[i] - '0')) / 10)
			return false;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (i == 0)
		return false;
	if (frac) {
		uint32_t ns = 0, scale = 100000000;

		*frac = 0;
		if (i < len && s[i] == '.') {
			for (i++; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
				ns += (uint32_t)(s[i] - '0') * scale;
				scale /= 10;
			}
			*frac = ns;
		}
	}
	if (i != len)
		return false;
	*out = v;
	return true;
}

/* What a pax header or a GNU long name set for the next entry. */
struct pending {
	char *path, *link;
	bool has_size, has_uid, has_gid, has_mtime;
	uint64_t size, uid, gid, mtime;
	uint32_t mtime_nsec;
};

static void pending_clear(struct pending *p)
{
	free(p->path);
	free(p->link);
	memset(p, 0, sizeof(*p));
}

static int set_str(char **dst, const char *s, size_t len)
{
	char *c;

	if (memchr(s, '\0', len) || len > OCI_PATH_MAX)
		return -EINVAL;
	if (!(c = strndup(s, len)))
		return -ENOMEM;
	free(*dst);
	*dst = c;
	return 0;
}

static int pax_parse(struct oci_tar *t, const char *buf, size_t len, struct pending *p,
		     struct oci_tar_entry *e)
{
	size_t off = 0;

	while (off < len) {
		size_t rlen = 0, i = off, klen;
		const char *key, *val, *eq;
		size_t vlen;
		int err = 0;

		while (i < len && buf[i] >= '0' && buf[i] <= '9' && i - off < 8)
			rlen = rlen * 10 + (size_t)(buf[i++] - '0');
		if (i == off || i >= len || buf[i] != ' ' || rlen <= i - off + 1 ||
		    rlen > len - off || buf[off + rlen - 1] != '\n')
			return oci_fail(t->msg, -EBADMSG,
					"a bad pax record at byte %zu of its header", off);
		key = buf + i + 1;
		eq = memchr(key, '=', (size_t)(buf + off + rlen - 1 - key));
		if (!eq)
			return oci_fail(t->msg, -EBADMSG, "a pax record without '='");
		klen = (size_t)(eq - key);
		val = eq + 1;
		vlen = (size_t)(buf + off + rlen - 1 - val);
#define KEY_IS(k) (klen == sizeof(k) - 1 && memcmp(key, k, klen) == 0)
		if (KEY_IS("path")) {
			err = set_str(&p->path, val, vlen);
		} else if (KEY_IS("linkpath")) {
			err = set_str(&p->link, val, vlen);
		} else if (KEY_IS("size")) {
			p->has_size = pax_num(val, vlen, OCI_UNPACKED_MAX, &p->size, NULL);
			err = p->has_size ? 0 : -EINVAL;
		} else if (KEY_IS("uid")) {
			p->has_uid = pax_num(val, vlen, 0xfffffffe, &p->uid, NULL);
			err = p->has_uid ? 0 : -EINVAL;
		} else if (KEY_IS("gid")) {
			p->has_gid = pax_num(val, vlen, 0xfffffffe, &p->gid, NULL);
			err = p->has_gid ? 0 : -EINVAL;
		} else if (KEY_IS("mtime")) {
			/* a negative time (before 1970) is taken as 0 */
			if (vlen && val[0] == '-') {
				p->has_mtime = true;
				p->mtime = 0;
			} else {
				p->has_mtime =
					pax_num(val, vlen, 1ull << 40, &p->mtime, &p->mtime_nsec);
				err = p->has_mtime ? 0 : -EINVAL;
			}
		} else if (klen > 12 && memcmp(key, "SCHILY.xattr.", 13) == 0 && e) {
			struct oci_xattr *x;

			if (e->nxattrs == OCI_XATTRS_MAX || klen - 13 >= sizeof(x->name) ||
			    klen == 13 || vlen > OCI_XATTR_VAL_MAX || memchr(key, '\0', klen))
				return oci_fail(t->msg, -EBADMSG,
						"a pax xattr too long, or too many (at most %u)",
						OCI_XATTRS_MAX);
			x = &e->xattrs[e->nxattrs];
			memcpy(x->name, key + 13, klen - 13);
			x->name[klen - 13] = '\0';
			if (!(x->value = malloc(vlen ? vlen : 1)))
				return -ENOMEM;
			memcpy(x->value, val, vlen);
			x->len = vlen;
			e->nxattrs++;
		} else if (klen > 11 && memcmp(key, "GNU.sparse.", 11) == 0) {
			return oci_fail(t->msg, -ENOTSUP,
					"a sparse file (pax GNU.sparse): not supported");
		}
#undef KEY_IS
		if (err == -ENOMEM)
			return err;
		if (err < 0)
			return oci_fail(t->msg, -EBADMSG, "a bad pax value for '%.*s'",
					(int)(klen < 40 ? klen : 40), key);
		off += rlen;
	}
	return 0;
}

/* Read an extended header's (or long name's) `size` bytes and its padding. */
static int read_ext(struct oci_tar *t, uint64_t size, char **out, const char *what)
{
	char *buf;
	int err;

	if (size > OCI_PAX_MAX)
		return oci_fail(t->msg, -EFBIG, "a %s of %llu bytes (at most %u)", what,
				(unsigned long long)size, OCI_PAX_MAX);
	if (!(buf = malloc(size + 1)))
		return -ENOMEM;
	if ((err = read_full(t, buf, size, what)) < 0 ||
	    (err = skip_bytes(t, (BLOCK - size % BLOCK) % BLOCK, what)) < 0) {
		free(buf);
		return err;
	}
	buf[size] = '\0';
	*out = buf;
	return 0;
}

int oci_tar_next(struct oci_tar *t, struct oci_tar_entry *e)
{
	struct pending p = {0};
	unsigned char h[BLOCK];
	int err;

	oci_tar_entry_clear(e);
	if (t->end)
		return 0;
	if (t->left + t->pad && (err = skip_bytes(t, t->left + t->pad, "an entry's data")) < 0)
		return err;
	t->left = t->pad = 0;
	for (;;) {
		uint64_t size, v;
		char type, *ext = NULL;
		bool zero = true;

		if (oci_interrupted)
			return oci_fail(t->msg, -EINTR, "interrupted");
		if ((err = read_full(t, h, BLOCK, "a header")) < 0)
			goto out;
		for (unsigned i = 0; i < BLOCK && zero; i++)
			zero = h[i] == 0;
		if (zero) {
			/* the end: a second zero block may follow, and padding; the caller reads
			 * what is left when it must (a layer's digest covers it) */
			if (p.path || p.link || e->nxattrs) {
				err = oci_fail(t->msg, -EBADMSG,
					       "an extended header with no entry after it");
				goto out;
			}
			t->end = true;
			err = 0;
			goto out;
		}
		if (!checksum_ok(h)) {
			err = oci_fail(t->msg, -EBADMSG, "a bad header checksum at byte %llu",
				       (unsigned long long)(t->pos - BLOCK));
			goto out;
		}
		if (memcmp(h + H_MAGIC,
			   "ustar\0"
			   "00",
			   8) != 0 &&
		    memcmp(h + H_MAGIC, "ustar  \0", 8) != 0) {
			err = oci_fail(t->msg, -EBADMSG, "not a ustar header at byte %llu",
				       (unsigned long long)(t->pos - BLOCK));
			goto out;
		}
		if (++t->count > OCI_ENTRIES_MAX) {
			err = oci_fail(t->msg, -EFBIG, "more than %u entries", OCI_ENTRIES_MAX);
			goto out;
		}
		type = (char)h[H_TYPE];
		if (!parse_num(h, H_SIZE, OCI_UNPACKED_MAX, &size)) {
			err = oci_fail(t->msg, -EBADMSG, "a bad size field at byte %llu",
				       (unsigned long long)(t->pos - BLOCK));
			goto out;
		}
		if (type == 'x' || type == 'g' || type == 'L' || type == 'K') {
			const char *what =
				type == 'x' || type == 'g' ? "pax header" : "GNU long name";

			if ((err = read_ext(t, size, &ext, what)) < 0)
				goto out;
			if (type == 'x')
				err = pax_parse(t, ext, size, &p, e);
			else if (type == 'L')
				err = set_str(&p.path, ext, strnlen(ext, size));
			else if (type == 'K')
				err = set_str(&p.link, ext, strnlen(ext, size));
			free(ext);
			if (err == -EINVAL)
				err = oci_fail(t->msg, -EBADMSG, "a bad GNU long name");
			if (err < 0)
				goto out;
			continue; /* 'g': global, ignored */
		}
		memset(e->path, 0, sizeof(e->path));
		if (p.path) {
			snprintf(e->path, sizeof(e->path), "%s", p.path);
		} else {
			char name[101], prefix[156];

			field_str(h, H_NAME, name);
			field_str(h, H_PREFIX, prefix);
			if (prefix[0] && h[H_MAGIC + 5] == '\0') /* POSIX ustar: a prefix */
				snprintf(e->path, sizeof(e->path), "%s/%s", prefix, name);
			else
				snprintf(e->path, sizeof(e->path), "%s", name);
		}
		if (p.link)
			snprintf(e->link, sizeof(e->link), "%s", p.link);
		else
			field_str(h, H_LINK, e->link);
		if (!e->path[0]) {
			err = oci_fail(t->msg, -EBADMSG, "an entry with no name at byte %llu",
				       (unsigned long long)(t->pos - BLOCK));
			goto out;
		}
		if (!parse_num(h, H_MODE, 07777777, &v)) {
			err = oci_fail(t->msg, -EBADMSG, "%s: a bad mode field", e->path);
			goto out;
		}
		e->mode = (uint32_t)v & 07777;
		if (p.has_uid)
			e->uid = (uint32_t)p.uid;
		else if (parse_num(h, H_UID, 0xfffffffe, &v))
			e->uid = (uint32_t)v;
		else {
			err = oci_fail(t->msg, -EBADMSG, "%s: a bad uid field", e->path);
			goto out;
		}
		if (p.has_gid)
			e->gid = (uint32_t)p.gid;
		else if (parse_num(h, H_GID, 0xfffffffe, &v))
			e->gid = (uint32_t)v;
		else {
			err = oci_fail(t->msg, -EBADMSG, "%s: a bad gid field", e->path);
			goto out;
		}
		e->mtime_nsec = 0;
		if (p.has_mtime) {
			e->mtime = (int64_t)p.mtime;
			e->mtime_nsec = p.mtime_nsec;
		} else if (parse_num(h, H_MTIME, 1ull << 40, &v)) {
			e->mtime = (int64_t)v;
		} else {
			e->mtime = 0; /* a time we cannot read says nothing that matters */
		}
		if (p.has_size)
			size = p.size;
		e->devmajor = e->devminor = 0;
		if (type == '3' || type == '4') {
			uint64_t minor;

			/* only named in a warning: a device is never made (oci_layer.c) */
			e->devmajor = parse_num(h, H_DEVMAJOR, 0xfffff, &v) ? (uint32_t)v : 0;
			e->devminor =
				parse_num(h, H_DEVMINOR, 0xfffff, &minor) ? (uint32_t)minor : 0;
		}
		switch (type) {
		case '\0':
		case '0':
		case '7':
			e->type = '0';
			break;
		case '1':
		case '2':
		case '3':
		case '4':
		case '5':
		case '6':
			e->type = type;
			if (size && type != '5') {
				/* a link's or a device's size says no data follows in practice,
				 * but the archive's layout must be followed: refuse */
				err = oci_fail(t->msg, -EBADMSG, "%s: a %s with data", e->path,
					       type == '1' || type == '2' ? "link"
									  : "special file");
				goto out;
			}
			break;
		case 'S':
			err = oci_fail(t->msg, -ENOTSUP, "%s: a GNU sparse file: not supported",
				       e->path);
			goto out;
		default:
			err = oci_fail(t->msg, -ENOTSUP, "%s: an entry of type '%c': not supported",
				       e->path, type >= 0x21 && type < 0x7f ? type : '?');
			goto out;
		}
		if ((e->type == '1' || e->type == '2') && !e->link[0]) {
			err = oci_fail(t->msg, -EBADMSG, "%s: a link with no target", e->path);
			goto out;
		}
		e->size = e->type == '5' ? 0 : size;
		t->left = e->size;
		/* a directory's "size" is skipped as data, as GNU tar does */
		t->pad = (e->type == '5' ? size : 0) + (BLOCK - size % BLOCK) % BLOCK;
		e->offset = t->pos;
		err = 1;
		goto out;
	}
out:
	pending_clear(&p);
	if (err <= 0)
		oci_tar_entry_clear(e);
	return err;
}

int oci_tar_data(struct oci_tar *t, void *buf, size_t len, size_t *got)
{
	size_t n = len < t->left ? len : (size_t)t->left;
	int err;

	*got = 0;
	if (n == 0)
		return 0;
	if ((err = read_full(t, buf, n, "an entry's data")) < 0)
		return err;
	t->left -= n;
	*got = n;
	return 0;
}

int oci_path_norm(const char *in, char *out, size_t out_len)
{
	size_t len = 0, depth = 0;
	const char *s = in;

	if (strlen(in) > OCI_PATH_MAX || out_len < 2)
		return -ENAMETOOLONG;
	out[0] = '\0';
	while (*s) {
		size_t n;

		while (*s == '/')
			s++;
		n = strcspn(s, "/");
		if (n == 0)
			break;
		if (n == 1 && s[0] == '.') {
			/* nothing */
		} else if (n == 2 && s[0] == '.' && s[1] == '.') {
			char *slash;

			if (depth == 0)
				return -EPERM;
			depth--;
			slash = strrchr(out, '/');
			len = slash ? (size_t)(slash - out) : 0;
			out[len] = '\0';
		} else {
			if (n > OCI_NAME_MAX || ++depth > OCI_DEPTH_MAX ||
			    len + (len ? 1 : 0) + n + 1 > out_len)
				return -ENAMETOOLONG;
			if (len)
				out[len++] = '/';
			memcpy(out + len, s, n);
			len += n;
			out[len] = '\0';
		}
		s += n;
	}
	return 0;
}
