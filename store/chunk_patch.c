/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A chunk stored as a patch of another (store.h, docs/fleet.md "Patched chunks"): a second
 * snapshot of a box changes a few pages here and there in most of its memory's chunks, and
 * uploading each whole chunk again made a second capture cost most of the first. A chunk whose
 * pages differ from the same chunk of the snapshot before in under half of its bytes goes up
 * as a patch (its changed pages) of that chunk (the base), and the manifest lists the recipe
 * H = B + P beside the chunk's own hash H. The patch is a chunk like any other: sealed, named
 * by its SHA-256. A restore fetches B and P, applies P and checks the result against H, so a
 * recipe proves nothing by itself: what comes out is the chunk the manifest names, or an error
 * naming it.
 *
 * A patch's bytes (little-endian):
 *   "SBPT" | u32 the chunk's length | u32 N pages | N x u32 page index, ascending | N pages
 * Pages are CHUNK_PATCH_PAGE bytes; the chunk's last page may be shorter (its length says).
 * A chunk and its base are of one length: a patch never cuts or grows its base (one that did
 * could be made to tell a prefix of a chunk one may not read).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"

#define PATCH_HEAD 12

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Bytes of page i of a chunk of len bytes. */
static size_t page_len(size_t len, size_t i)
{
	size_t off = i * CHUNK_PATCH_PAGE;

	return len - off < CHUNK_PATCH_PAGE ? len - off : CHUNK_PATCH_PAGE;
}

/* Whether page i of cur differs from the base's (both len bytes). */
static bool page_differs(const uint8_t *base, const uint8_t *cur, size_t len, size_t i)
{
	size_t off = i * CHUNK_PATCH_PAGE;

	return memcmp(base + off, cur + off, page_len(len, i)) != 0;
}

size_t chunk_patch_make(const uint8_t *base, size_t blen, const uint8_t *cur, size_t clen,
			uint8_t *out, size_t cap)
{
	size_t pages = (clen + CHUNK_PATCH_PAGE - 1) / CHUNK_PATCH_PAGE, n = 0, body = 0, at;

	/* a chunk and its base of one length (a file's chunk but its last): a patch never cuts or
	 * grows its base, so it can only ever tell what the chunk's own pages are */
	if (clen == 0 || clen > CHUNK_SIZE_MAX || blen != clen)
		return 0;
	for (size_t i = 0; i < pages; i++)
		if (page_differs(base, cur, clen, i)) {
			n++;
			body += page_len(clen, i);
		}
	at = PATCH_HEAD + 4 * n;
	/* worth it only under half the chunk: a restore then fetches two objects */
	if (at + body >= clen / 2 || at + body > cap)
		return 0;
	memcpy(out, "SBPT", 4);
	put32(out + 4, (uint32_t)clen);
	put32(out + 8, (uint32_t)n);
	for (size_t i = 0, k = 0; i < pages; i++) {
		if (!page_differs(base, cur, clen, i))
			continue;
		put32(out + PATCH_HEAD + 4 * k++, (uint32_t)i);
		memcpy(out + at, cur + i * CHUNK_PATCH_PAGE, page_len(clen, i));
		at += page_len(clen, i);
	}
	return at;
}

int chunk_patch_apply(uint8_t *buf, size_t blen, size_t cap, const uint8_t *patch, size_t plen,
		      size_t *len)
{
	uint32_t clen, n, prev = 0;
	size_t pages, at;

	if (plen < PATCH_HEAD || memcmp(patch, "SBPT", 4) != 0)
		return -EBADMSG;
	clen = get32(patch + 4);
	n = get32(patch + 8);
	pages = ((size_t)clen + CHUNK_PATCH_PAGE - 1) / CHUNK_PATCH_PAGE;
	if (clen == 0 || clen > CHUNK_SIZE_MAX || clen > cap || clen != blen || n > pages ||
	    (plen - PATCH_HEAD) / 4 < n)
		return -EBADMSG;
	at = PATCH_HEAD + 4 * (size_t)n;
	/* the pages' sizes first: the whole patch is checked before buf changes */
	for (uint32_t k = 0; k < n; k++) {
		uint32_t i = get32(patch + PATCH_HEAD + 4 * k);

		if (i >= pages || (k && i <= prev))
			return -EBADMSG;
		prev = i;
		at += page_len(clen, i);
		if (at > plen)
			return -EBADMSG;
	}
	if (at != plen)
		return -EBADMSG;
	at = PATCH_HEAD + 4 * (size_t)n;
	for (uint32_t k = 0; k < n; k++) {
		uint32_t i = get32(patch + PATCH_HEAD + 4 * k);

		memcpy(buf + (size_t)i * CHUNK_PATCH_PAGE, patch + at, page_len(clen, i));
		at += page_len(clen, i);
	}
	*len = clen;
	return 0;
}

const struct chunk_recipe *chunk_recipe_find(const struct chunk_recipe *r, uint64_t n,
					     const uint8_t hash[CHUNK_HASH_LEN])
{
	uint64_t lo = 0, hi = n;

	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		int c = memcmp(r[mid].hash, hash, CHUNK_HASH_LEN);

		if (c == 0)
			return &r[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

int chunk_rebuild(const struct chunk_recipe *r, chunk_part_fn get, void *arg, uint8_t *out,
		  size_t cap, size_t *len, char *msg, size_t msg_len)
{
	char h[2 * CHUNK_HASH_LEN + 1], b[2 * CHUNK_HASH_LEN + 1], p[2 * CHUNK_HASH_LEN + 1];
	uint8_t check[CHUNK_HASH_LEN], *patch = malloc(cap); /* (a patch is under its chunk) */
	size_t blen = 0, plen = 0;
	int err;

	*len = 0;
	if (!patch) {
		snprintf(msg, msg_len, "out of memory");
		return -ENOMEM;
	}
	/* each part is a chunk, checked against its own name by get (its message names it) */
	if ((err = get(arg, r->base, out, cap, &blen, msg, msg_len)) < 0 ||
	    (err = get(arg, r->patch, patch, cap, &plen, msg, msg_len)) < 0) {
		char part[STORE_ERR_MAX];

		free(patch);
		snprintf(part, sizeof(part), "%s", msg);
		chunk_hex(r->hash, h);
		snprintf(msg, msg_len, "chunk %s, stored as a patch: %s", h, part);
		*len = 0;
		return err;
	}
	err = chunk_patch_apply(out, blen, cap, patch, plen, len);
	free(patch);
	if (err == 0) {
		chunk_hash(out, *len, check);
		if (memcmp(check, r->hash, CHUNK_HASH_LEN) != 0)
			err = -EBADMSG;
	}
	if (err < 0) {
		chunk_hex(r->hash, h);
		chunk_hex(r->base, b);
		chunk_hex(r->patch, p);
		snprintf(msg, msg_len,
			 "chunk %s: its base %.16s... patched by %.16s... is not that chunk (a "
			 "patch that does not apply, or bytes not of its SHA-256)",
			 h, b, p);
		*len = 0;
		return -EBADMSG;
	}
	return 0;
}
