/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A workspace's chunks in the store (store.h): PREFIX/c/<name>, each sealed (chunk.c). A put
 * skips a chunk the store has (known from this handle's earlier puts, gets and listing, else
 * asked by a HEAD; after a whole listing, not asked: one not listed is uploaded); a get checks what
 * came against the hash it was asked for, and names the chunk when it is missing or not what its
 * name says.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store.h"

#define CHUNK_SET_MAX (1u << 24) /* hashes one handle remembers: 512 MiB of them at most */

/* An open-addressing set of chunks' object ids (HMACs under the workspace's name key: a tenant
 * who chooses a chunk's bytes cannot choose its slot, so no probe chain can be ground). */
struct chunk_set {
	uint8_t (*slot)[CHUNK_HASH_LEN];
	uint8_t *used;
	size_t cap, n;
};

int chunk_store_fail(struct chunk_store *cs, int ret, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cs->err, sizeof(cs->err), fmt, ap);
	va_end(ap);
	return ret;
}

static size_t set_index(const struct chunk_set *s, const uint8_t h[CHUNK_HASH_LEN])
{
	uint64_t v;

	memcpy(&v, h, sizeof(v));
	return (size_t)(v & (s->cap - 1));
}

static bool set_has(const struct chunk_set *s, const uint8_t h[CHUNK_HASH_LEN])
{
	if (!s->cap)
		return false;
	for (size_t i = set_index(s, h);; i = (i + 1) & (s->cap - 1)) {
		if (!s->used[i])
			return false;
		if (memcmp(s->slot[i], h, CHUNK_HASH_LEN) == 0)
			return true;
	}
}

/* Add h (a full set simply forgets: it is a cache of what a HEAD would say). */
static void set_add(struct chunk_set *s, const uint8_t h[CHUNK_HASH_LEN])
{
	if (set_has(s, h))
		return;
	if ((s->n + 1) * 4 > s->cap * 3) { /* over 3/4: twice the room */
		size_t cap = s->cap ? s->cap * 2 : 1024;
		struct chunk_set bigger = {.cap = cap};

		if (cap > CHUNK_SET_MAX)
			return;
		bigger.slot = calloc(cap, CHUNK_HASH_LEN);
		bigger.used = calloc(cap, 1);
		if (!bigger.slot || !bigger.used) {
			free(bigger.slot);
			free(bigger.used);
			return;
		}
		for (size_t i = 0; i < s->cap; i++)
			if (s->used[i])
				set_add(&bigger, s->slot[i]);
		free(s->slot);
		free(s->used);
		*s = bigger;
	}
	size_t i = set_index(s, h);

	while (s->used[i])
		i = (i + 1) & (s->cap - 1);
	memcpy(s->slot[i], h, CHUNK_HASH_LEN);
	s->used[i] = 1;
	s->n++;
}

int chunk_store_open(struct chunk_store *cs, struct s3 *s3, const char *prefix,
		     const uint8_t secret[32])
{
	memset(cs, 0, sizeof(*cs));
	if (strlen(prefix) + 70 > S3_KEY_MAX || strlen(prefix) >= sizeof(cs->prefix) ||
	    !s3_key_ok(prefix))
		return chunk_store_fail(cs, -EINVAL, "not a store prefix: %.80s", prefix);
	cs->known = calloc(1, sizeof(*cs->known));
	if (!cs->known)
		return chunk_store_fail(cs, -ENOMEM, "out of memory");
	cs->s3 = s3;
	snprintf(cs->prefix, sizeof(cs->prefix), "%s", prefix);
	chunk_keys_derive(secret, &cs->keys);
	return 0;
}

int chunk_store_local(struct chunk_store *cs)
{
	memset(cs, 0, sizeof(*cs));
	cs->known = calloc(1, sizeof(*cs->known));
	return cs->known ? 0 : chunk_store_fail(cs, -ENOMEM, "out of memory");
}

void chunk_store_close(struct chunk_store *cs)
{
	if (cs->known) {
		free(cs->known->slot);
		free(cs->known->used);
		free(cs->known);
	}
	cs->known = NULL;
	chunk_keys_wipe(&cs->keys);
}

/* PREFIX/c/<name> of the chunk of hash, and its object id (the known set's key). */
void chunk_store_key(const struct chunk_store *cs, const uint8_t hash[CHUNK_HASH_LEN],
		     char out[S3_KEY_MAX + 1], uint8_t oid[CHUNK_HASH_LEN])
{
	char name[2 * CHUNK_HASH_LEN + 1];

	chunk_object_id(&cs->keys, hash, oid);
	chunk_hex(oid, name);
	snprintf(out, S3_KEY_MAX + 1, "%s/c/%s", cs->prefix, name);
}

bool chunk_store_knows(const struct chunk_store *cs, const uint8_t oid[CHUNK_HASH_LEN])
{
	return set_has(cs->known, oid);
}

void chunk_store_learned(struct chunk_store *cs, const uint8_t oid[CHUNK_HASH_LEN])
{
	set_add(cs->known, oid);
}

struct learn {
	struct chunk_store *cs;
	size_t skip; /* strlen("PREFIX/c/") */
};

static int learn_key(const struct s3_entry *e, void *arg)
{
	struct learn *l = arg;
	const char *name = e->key + l->skip;
	uint8_t oid[CHUNK_HASH_LEN];

	if (strlen(name) != 2 * CHUNK_HASH_LEN || chunk_unhex(name, oid) < 0)
		return 0; /* not a chunk's name (a part left by an upload?): not known */
	set_add(l->cs->known, oid);
	return 0;
}

int chunk_store_learn(struct chunk_store *cs, unsigned max_pages)
{
	char prefix[S3_KEY_MAX + 1], marker[S3_KEY_MAX + 1] = "";
	struct learn l = {.cs = cs};
	bool more = true;
	int n;

	snprintf(prefix, sizeof(prefix), "%s/c/", cs->prefix);
	l.skip = strlen(prefix);
	cs->listed = false;
	for (unsigned page = 0; more && page < max_pages; page++)
		if ((n = s3_list(cs->s3, prefix, marker, 0, learn_key, &l, &more)) < 0)
			return chunk_store_fail(cs, n, "%s", cs->s3->err);
	cs->listed = !more;
	return 0;
}

int chunk_has(struct chunk_store *cs, const uint8_t hash[CHUNK_HASH_LEN])
{
	char key[S3_KEY_MAX + 1], hex[2 * CHUNK_HASH_LEN + 1];
	uint8_t oid[CHUNK_HASH_LEN];
	int err;

	if (!cs->s3)
		return chunk_store_fail(cs, -EINVAL, "no store to ask");
	chunk_store_key(cs, hash, key, oid);
	if (set_has(cs->known, oid))
		return 1;
	if (cs->listed) /* not in a whole listing of the store's chunks: not there */
		return 0;
	if ((err = s3_head(cs->s3, key, NULL)) == 0) {
		set_add(cs->known, oid);
		return 1;
	}
	chunk_hex(hash, hex);
	return err == -ENOENT ? 0 : chunk_store_fail(cs, err, "chunk %s: %s", hex, cs->s3->err);
}

static int put_hashed(struct chunk_store *cs, const void *data, size_t len,
		      const uint8_t hash[CHUNK_HASH_LEN]);

int chunk_put(struct chunk_store *cs, const void *data, size_t len, uint8_t hash[CHUNK_HASH_LEN])
{
	if (len > CHUNK_SIZE_MAX)
		return chunk_store_fail(cs, -EFBIG, "a chunk of %zu bytes (at most %u)", len,
					CHUNK_SIZE_MAX);
	chunk_hash(data, len, hash);
	return cs->s3 ? put_hashed(cs, data, len, hash) : 0; /* no store: hashed only */
}

int chunk_put_hashed(struct chunk_store *cs, const void *data, size_t len,
		     const uint8_t hash[CHUNK_HASH_LEN])
{
	char hex[2 * CHUNK_HASH_LEN + 1];
	uint8_t check[CHUNK_HASH_LEN];

	if (len > CHUNK_SIZE_MAX)
		return chunk_store_fail(cs, -EFBIG, "a chunk of %zu bytes (at most %u)", len,
					CHUNK_SIZE_MAX);
	chunk_hash(data, len, check);
	if (memcmp(check, hash, CHUNK_HASH_LEN) != 0) {
		chunk_hex(hash, hex);
		return chunk_store_fail(cs, -EBADMSG,
					"the bytes given as chunk %s are not of that SHA-256", hex);
	}
	return cs->s3 ? put_hashed(cs, data, len, hash) : 0;
}

/* The upload of a chunk whose hash is right, unless the store has it. */
static int put_hashed(struct chunk_store *cs, const void *data, size_t len,
		      const uint8_t hash[CHUNK_HASH_LEN])
{
	char key[S3_KEY_MAX + 1];
	uint8_t oid[CHUNK_HASH_LEN];
	uint64_t wire;
	int there;

	chunk_store_key(cs, hash, key, oid);
	there = set_has(cs->known, oid)
			? 1
			: chunk_xfer_put(cs->s3, &cs->keys, cs->listed, key, hash, data, len, &wire,
					 cs->err, sizeof(cs->err));
	if (there < 0)
		return there;
	if (there) {
		cs->skip_chunks++;
		cs->skip_bytes += len + CHUNK_SEAL_EXTRA;
	} else {
		cs->put_chunks++;
		cs->put_bytes += wire;
	}
	if (!set_has(cs->known, oid)) {
		set_add(cs->known, oid);
		if (cs->cache) /* (a later pull here of what was pushed: no fetch) */
			(void)chunk_cache_put(cs->cache, oid, data, len);
	}
	return 0;
}

/* A stored chunk (not a recipe's): the cache, else the store or the handle's fetch. */
static int get_stored(struct chunk_store *cs, const uint8_t hash[CHUNK_HASH_LEN], uint8_t *out,
		      size_t cap, size_t *len)
{
	char key[S3_KEY_MAX + 1];
	uint8_t oid[CHUNK_HASH_LEN];
	uint64_t wire;
	int err;

	*len = 0;
	if (!cs->s3) { /* a handle of no store: the chunk from its fetch, checked */
		if ((err = chunk_xfer_fetch(cs->fetch, cs->fetch_arg, hash, out, cap, len, cs->err,
					    sizeof(cs->err))) < 0)
			return err;
		cs->got_chunks++;
		cs->got_bytes += *len;
		return 0;
	}
	chunk_store_key(cs, hash, key, oid);
	if (cs->cache && chunk_cache_get(cs->cache, oid, hash, out, cap, len) == 1) {
		cs->cache_hits++;
		return 0;
	}
	err = chunk_xfer_get(cs->s3, &cs->keys, key, hash, out, cap, len, &wire, cs->err,
			     sizeof(cs->err));
	if (wire) { /* what came counts, opened or not */
		cs->got_chunks++;
		cs->got_bytes += wire;
	}
	if (err < 0)
		return err;
	set_add(cs->known, oid);
	if (cs->cache)
		(void)chunk_cache_put(cs->cache, oid, out, *len); /* a cache that cannot: a miss */
	return 0;
}

/* A recipe's part (chunk_part_fn): a stored chunk, its message copied out. */
static int get_part(void *arg, const uint8_t hash[CHUNK_HASH_LEN], uint8_t *out, size_t cap,
		    size_t *len, char *msg, size_t msg_len)
{
	struct chunk_store *cs = arg;
	int err = get_stored(cs, hash, out, cap, len);

	if (err < 0)
		snprintf(msg, msg_len, "%s", cs->err);
	return err;
}

int chunk_get(struct chunk_store *cs, const uint8_t hash[CHUNK_HASH_LEN], uint8_t *out, size_t cap,
	      size_t *len)
{
	const struct chunk_recipe *r = chunk_recipe_find(cs->recipe, cs->nrecipes, hash);
	char key[S3_KEY_MAX + 1], msg[STORE_ERR_MAX];
	uint8_t oid[CHUNK_HASH_LEN];
	int err;

	if (!r)
		return get_stored(cs, hash, out, cap, len);
	/* made before and kept as itself; never learned as stored (a push would skip it) */
	chunk_store_key(cs, hash, key, oid);
	if (cs->s3 && cs->cache && chunk_cache_get(cs->cache, oid, hash, out, cap, len) == 1) {
		cs->cache_hits++;
		return 0;
	}
	if ((err = chunk_rebuild(r, get_part, cs, out, cap, len, msg, sizeof(msg))) < 0)
		return chunk_store_fail(cs, err, "%s", msg);
	if (cs->s3 && cs->cache)
		(void)chunk_cache_put(cs->cache, oid, out, *len);
	return 0;
}

int chunk_get_waited(struct chunk_store *cs, const uint8_t hash[CHUNK_HASH_LEN], uint8_t *out,
		     size_t cap, size_t *len)
{
	int r;

	for (unsigned try = 0;; try++) {
		r = chunk_get(cs, hash, out, cap, len);
		if (r == 0 || r == -ENOENT || r == -EBADMSG || try == 3)
			return r;
		usleep(200000u << try);
	}
}

void chunk_store_recipes(struct chunk_store *cs, const struct manifest *m)
{
	cs->recipe = m ? m->recipe : NULL;
	cs->nrecipes = m ? m->nrecipes : 0;
}
