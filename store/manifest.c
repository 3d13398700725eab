/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A snapshot's files as lists of chunks (store.h), and the manifest that lists them, stored
 * as PREFIX/m/<id>:
 *
 *   "SBMF" | version 1 | 0 0 0 | 12-byte random nonce | AES-256-GCM ciphertext | 16-byte tag
 *
 * under the workspace's manifest key, the head, the prefix and the id as additional data (a
 * manifest moved to another id or workspace does not open). Its plaintext:
 *
 *   sandbox-manifest 1
 *   generation G         (the caller's count: a replayed older copy is refused by it)
 *   chunk_size N
 *   file NAME SIZE NCHUNKS NEXTENTS
 *   OFFSET LENGTH                                                  (NEXTENTS lines: its data)
 *   <64 hex digits: a chunk's SHA-256, or 0: a chunk of zeros>   (NCHUNKS lines)
 *   ...                                                           (more files)
 *   recipe HASH BASE PATCH     (a chunk stored as a patch: chunk_patch.c; ascending by HASH,
 *   ...                         each a chunk of a file above; BASE never one of these)
 *   end
 *
 * Parsed only after the tag checks, and strictly even then: every count is the one its size
 * implies, every line is exactly its form.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "store.h"

#define MF_HEAD	  8
#define MF_NONCE  12
#define MF_TAG	  16
#define MF_ID_MAX 64

static const uint8_t mf_head[MF_HEAD] = {'S', 'B', 'M', 'F', 1, 0, 0, 0};
static const uint8_t zero_hash[CHUNK_HASH_LEN];

static bool mf_name_ok(const char *n, size_t max)
{
	size_t len = strnlen(n, max + 1);

	if (len == 0 || len > max || strcmp(n, ".") == 0 || strcmp(n, "..") == 0)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!((n[i] >= 'a' && n[i] <= 'z') || (n[i] >= 'A' && n[i] <= 'Z') ||
		      (n[i] >= '0' && n[i] <= '9') || n[i] == '.' || n[i] == '_' || n[i] == '-'))
			return false;
	return true;
}

int manifest_init(struct manifest *m, uint32_t chunk_size)
{
	memset(m, 0, sizeof(*m));
	if (chunk_size < MANIFEST_CHUNK_MIN || chunk_size > CHUNK_SIZE_MAX ||
	    (chunk_size & (chunk_size - 1)))
		return -EINVAL;
	m->chunk_size = chunk_size;
	return 0;
}

void manifest_free(struct manifest *m)
{
	for (unsigned i = 0; i < m->nfiles; i++) {
		free(m->file[i].hash);
		free(m->file[i].extent);
	}
	m->nfiles = 0;
	free(m->recipe);
	m->recipe = NULL;
	m->nrecipes = m->recipe_cap = 0;
}

uint64_t manifest_bytes(const struct manifest *m)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < m->nfiles; i++)
		n += m->file[i].size;
	return n;
}

uint64_t manifest_data_bytes(const struct manifest *m)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < m->nfiles; i++)
		for (uint64_t e = 0; e < m->file[i].nextents; e++)
			n += m->file[i].extent[e][1];
	return n;
}

const struct manifest_file *manifest_find(const struct manifest *m, const char *name)
{
	for (unsigned i = 0; i < m->nfiles; i++)
		if (strcmp(m->file[i].name, name) == 0)
			return &m->file[i];
	return NULL;
}

static bool mf_all_zero(const uint8_t *p, size_t n)
{
	return n == 0 || (p[0] == 0 && memcmp(p, p + 1, n - 1) == 0);
}

/* The most a manifest's plaintext may hold, sealed into one object we read whole. */
#define MF_TEXT_MAX	(S3_OBJECT_MAX - MF_HEAD - MF_NONCE - MF_TAG)
/* Its bytes for a file of n chunks: the file line and one line a chunk at most. */
#define MF_FILE_TEXT(n) (128u + (n) * (2u * CHUNK_HASH_LEN + 1u))
#define MF_EXTENT_TEXT	42u /* "OFF LEN\n", both at most 20 digits */
#define MF_RECIPE_TEXT	(7u + 3u * (2u * CHUNK_HASH_LEN + 1u)) /* "recipe H B P\n" */

static bool mf_zero(const uint8_t h[CHUNK_HASH_LEN])
{
	return memcmp(h, zero_hash, CHUNK_HASH_LEN) == 0;
}

/* r appended to m's recipes (a push's and a parse's): 0, or -ENOMEM. */
static int mf_recipe_append(struct manifest *m, const struct chunk_recipe *r)
{
	if (m->nrecipes == m->recipe_cap) {
		uint64_t cap = m->recipe_cap ? m->recipe_cap * 2 : 64;
		struct chunk_recipe *n = realloc(m->recipe, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		m->recipe = n;
		m->recipe_cap = cap;
	}
	m->recipe[m->nrecipes++] = *r;
	m->text_bytes += MF_RECIPE_TEXT;
	return 0;
}

/* The recipe h = b + p appended to m (sorted later: mf_recipes_sort): 0, or -errno. */
static int mf_recipe_add(struct manifest *m, struct chunk_store *cs,
			 const uint8_t h[CHUNK_HASH_LEN], const uint8_t b[CHUNK_HASH_LEN],
			 const uint8_t p[CHUNK_HASH_LEN])
{
	struct chunk_recipe r;

	if (m->text_bytes + MF_RECIPE_TEXT > MF_TEXT_MAX)
		return chunk_store_fail(cs, -E2BIG, "manifest: too many patched chunks");
	memcpy(r.hash, h, CHUNK_HASH_LEN);
	memcpy(r.base, b, CHUNK_HASH_LEN);
	memcpy(r.patch, p, CHUNK_HASH_LEN);
	if (mf_recipe_append(m, &r) < 0)
		return chunk_store_fail(cs, -ENOMEM, "manifest: out of memory");
	return 0;
}

/* m's files' chunks but zeros, ascending (a repeat kept), malloc'd: *k of them; NULL when out
 * of memory. What a recipe's chunk must be one of. */
static uint8_t (*mf_named(const struct manifest *m, uint64_t *k))[CHUNK_HASH_LEN]
{
	uint64_t total = 0;
	uint8_t(*named)[CHUNK_HASH_LEN];

	for (unsigned i = 0; i < m->nfiles; i++)
		total += m->file[i].nchunks;
	if (!(named = malloc((total ? total : 1) * CHUNK_HASH_LEN)))
		return NULL;
	*k = 0;
	for (unsigned i = 0; i < m->nfiles; i++)
		for (uint64_t c = 0; c < m->file[i].nchunks; c++)
			if (!mf_zero(m->file[i].hash[c]))
				memcpy(named[(*k)++], m->file[i].hash[c], CHUNK_HASH_LEN);
	qsort(named, *k, CHUNK_HASH_LEN, chunk_hash_cmp);
	return named;
}

int manifest_keep_listed_recipes(struct manifest *m)
{
	uint64_t k = 0, n = 0;
	uint8_t(*named)[CHUNK_HASH_LEN] = mf_named(m, &k);

	if (!named)
		return -ENOMEM;
	for (uint64_t i = 0; i < m->nrecipes; i++)
		if (bsearch(m->recipe[i].hash, named, k, CHUNK_HASH_LEN, chunk_hash_cmp))
			m->recipe[n++] = m->recipe[i];
		else
			m->text_bytes -= MF_RECIPE_TEXT;
	m->nrecipes = n;
	free(named);
	return 0;
}

/* m's recipes ascending by hash, each hash once (two for the same bytes: either makes them). */
static void mf_recipes_sort(struct manifest *m)
{
	uint64_t n = 0;

	qsort(m->recipe, m->nrecipes, sizeof(*m->recipe), chunk_hash_cmp);
	for (uint64_t i = 0; i < m->nrecipes; i++)
		if (!n || memcmp(m->recipe[n - 1].hash, m->recipe[i].hash, CHUNK_HASH_LEN) != 0)
			m->recipe[n++] = m->recipe[i];
		else
			m->text_bytes -= MF_RECIPE_TEXT;
	m->nrecipes = n;
}

/* A new file entry of size bytes, its hash list allocated, in *out: 0, or -errno with cs->err.
 * Refused before anything is read or stored when the manifest could not hold it. */
static int mf_new_file(struct manifest *m, struct chunk_store *cs, const char *name, uint64_t size,
		       struct manifest_file **out)
{
	struct manifest_file *f;
	uint64_t n;

	if (!mf_name_ok(name, MANIFEST_NAME_MAX) || manifest_find(m, name))
		return chunk_store_fail(cs, -EINVAL,
					"manifest: not a file name, or one it has: %.80s", name);
	if (m->nfiles >= MANIFEST_FILES_MAX || size > MANIFEST_FILE_MAX)
		return chunk_store_fail(cs, -E2BIG,
					"manifest: over %u files or a file over %llu bytes",
					MANIFEST_FILES_MAX, (unsigned long long)MANIFEST_FILE_MAX);
	n = (size + m->chunk_size - 1) / m->chunk_size;
	if (n > MF_TEXT_MAX / (2u * CHUNK_HASH_LEN + 1u) ||
	    m->text_bytes + MF_FILE_TEXT(n) > MF_TEXT_MAX)
		return chunk_store_fail(
			cs, -E2BIG,
			"manifest: %s's %llu chunks of %u bytes would make the manifest "
			"over %u bytes",
			name, (unsigned long long)n, m->chunk_size, MF_TEXT_MAX);
	f = &m->file[m->nfiles];
	memset(f, 0, sizeof(*f));
	snprintf(f->name, sizeof(f->name), "%s", name);
	f->size = size;
	f->nchunks = n;
	f->hash = calloc(n ? n : 1, CHUNK_HASH_LEN);
	if (!f->hash)
		return chunk_store_fail(cs, -ENOMEM, "manifest: out of memory");
	*out = f;
	return 0;
}

/* Count file f (just filled) in m. */
static void mf_commit_file(struct manifest *m, const struct manifest_file *f)
{
	m->text_bytes += MF_FILE_TEXT(f->nchunks) + f->nextents * MF_EXTENT_TEXT;
	m->nfiles++;
}

/* fd's data extents (SEEK_DATA, SEEK_HOLE) into f: -E2BIG past MANIFEST_EXTENTS_MAX or what
 * the manifest could hold. A filesystem without holes gives one extent. */
static int mf_extents(struct manifest *m, struct manifest_file *f, int fd, struct chunk_store *cs,
		      const char *path)
{
	uint64_t cap = 0, off = 0;

	while (off < f->size) {
		off_t d = lseek(fd, (off_t)off, SEEK_DATA), h;

		if (d < 0 && errno == ENXIO)
			break; /* holes to the end */
		if (d < 0) {   /* no SEEK_DATA here: all of it data */
			d = (off_t)off;
			h = (off_t)f->size;
		} else if ((h = lseek(fd, d, SEEK_HOLE)) < 0) {
			h = (off_t)f->size;
		}
		if ((uint64_t)h > f->size)
			h = (off_t)f->size;
		if (h <= d)
			break;
		if (f->nextents == MANIFEST_EXTENTS_MAX ||
		    m->text_bytes + MF_FILE_TEXT(f->nchunks) + (f->nextents + 1) * MF_EXTENT_TEXT >
			    MF_TEXT_MAX)
			return chunk_store_fail(cs, -E2BIG,
						"%s: too fragmented (over %u data extents)", path,
						MANIFEST_EXTENTS_MAX);
		if (f->nextents == cap) {
			uint64_t(*n)[2] =
				realloc(f->extent, (cap = cap ? cap * 2 : 16) * sizeof(*n));

			if (!n)
				return chunk_store_fail(cs, -ENOMEM, "out of memory");
			f->extent = n;
		}
		f->extent[f->nextents][0] = (uint64_t)d;
		f->extent[f->nextents][1] = (uint64_t)(h - d);
		f->nextents++;
		off = (uint64_t)h;
	}
	return 0;
}

/* Where a push makes patches: the parent's base chunk read from the cache, the patch built. */
struct mf_patching {
	const struct manifest_file *pf; /* the parent's file of that name */
	size_t file_text;		/* the manifest text of the file being added */
	uint8_t *base, *patch;		/* chunk_size bytes each */
};

/* Whether the store holds the chunk of hash whole: the handle's known set, else (a listing not
 * whole) a HEAD. 1, or 0 (not there, or not known: either way no recipe leans on it). */
static int mf_stored(struct chunk_store *cs, const uint8_t hash[CHUNK_HASH_LEN])
{
	char key[S3_KEY_MAX + 1];
	uint8_t oid[CHUNK_HASH_LEN];
	int r;

	chunk_store_key(cs, hash, key, oid);
	if (chunk_store_knows(cs, oid))
		return 1;
	if (cs->listed)
		return 0;
	r = chunk_has(cs, hash);
	cs->err[0] = 0; /* (a store that does not answer: the chunk goes up whole, and says) */
	return r == 1;
}

/*
 * Chunk i of a file (len bytes of buf, not all zeros) into the store, *hash its SHA-256: whole,
 * or as a patch of the parent's chunk i when that is worth it (mf_patching). What keeps every
 * manifest readable (mf_parse_recipes): a chunk becomes a recipe only when the store does not
 * hold it whole, and a recipe's base and patch are chunks it does hold, so no base is ever a
 * recipe's chunk. manifest_put parses what it writes once more before it writes it.
 */
static int mf_put_chunk(struct manifest *m, struct chunk_store *cs, struct chunk_par *par,
			struct mf_patching *pt, uint64_t i, const uint8_t *buf, size_t len,
			uint8_t hash[CHUNK_HASH_LEN])
{
	const struct manifest *pm = m->parent;
	const struct chunk_recipe *r;
	const uint8_t *base;
	char key[S3_KEY_MAX + 1];
	uint8_t oid[CHUNK_HASH_LEN], phash[CHUNK_HASH_LEN];
	size_t blen = 0, plen;
	int err;

	/* no parent, or no room left in the manifest for one more recipe: whole */
	if (!pt->base || m->text_bytes + pt->file_text + MF_RECIPE_TEXT > MF_TEXT_MAX)
		return chunk_par_put(par, buf, len, hash);
	chunk_hash(buf, len, hash); /* (once: the puts below are given it) */
	if (mf_stored(cs, hash))    /* stored whole already: skipped */
		return chunk_par_put_hashed(par, buf, len, hash);
	if ((r = chunk_recipe_find(pm->recipe, pm->nrecipes, hash))) { /* made as before */
		if (mf_stored(cs, r->base) && mf_stored(cs, r->patch))
			return mf_recipe_add(m, cs, r->hash, r->base, r->patch);
		return chunk_par_put_hashed(par, buf, len, hash);
	}
	if (!pt->pf || i >= pt->pf->nchunks || mf_zero(pt->pf->hash[i]) ||
	    memcmp(pt->pf->hash[i], hash, CHUNK_HASH_LEN) == 0)
		return chunk_par_put_hashed(par, buf, len, hash);
	/* a patch of what the parent's chunk is made of (a base, never a recipe: one level) */
	r = chunk_recipe_find(pm->recipe, pm->nrecipes, pt->pf->hash[i]);
	base = r ? r->base : pt->pf->hash[i];
	chunk_store_key(cs, base, key, oid);
	if (memcmp(base, hash, CHUNK_HASH_LEN) == 0 || !mf_stored(cs, base) ||
	    chunk_cache_get(cs->cache, oid, base, pt->base, m->chunk_size, &blen) != 1 ||
	    !(plen = chunk_patch_make(pt->base, blen, buf, len, pt->patch, m->chunk_size)))
		return chunk_par_put_hashed(par, buf, len, hash);
	if ((err = chunk_par_put(par, pt->patch, plen, phash)) < 0)
		return err;
	cs->patched++;
	return mf_recipe_add(m, cs, hash, base, phash);
}

int manifest_add_file(struct manifest *m, struct chunk_store *cs, const char *name,
		      const char *path)
{
	struct mf_patching pt = {0};
	uint64_t nrec0 = m->nrecipes;
	struct manifest_file *f;
	struct stat st, after;
	struct chunk_par *par = NULL;
	uint8_t *buf;
	int fd, err = 0;

	/* O_NONBLOCK: a FIFO or a device at path must not hold the open */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return chunk_store_fail(cs, -errno, "%s: %s", path, strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return chunk_store_fail(cs, -EINVAL, "%s: not a regular file", path);
	}
	if ((err = mf_new_file(m, cs, name, (uint64_t)st.st_size, &f)) < 0) {
		close(fd);
		return err;
	}
	buf = malloc(m->chunk_size);
	if (!buf || (err = mf_extents(m, f, fd, cs, path)) < 0 ||
	    !(par = chunk_par_open(cs, cs->transfers, 0, NULL, NULL))) {
		free(buf);
		free(f->hash);
		free(f->extent);
		close(fd);
		return !buf  ? chunk_store_fail(cs, -ENOMEM, "manifest: out of memory")
		       : err ? err
			     : -ENOMEM;
	}
	/* patches only against a store's chunks this host's cache holds */
	if (m->parent && cs->s3 && cs->cache && m->parent->chunk_size == m->chunk_size) {
		pt.pf = manifest_find(m->parent, name);
		pt.file_text = MF_FILE_TEXT(f->nchunks) + f->nextents * MF_EXTENT_TEXT;
		pt.base = malloc(m->chunk_size);
		pt.patch = malloc(m->chunk_size);
		if (!pt.base || !pt.patch) { /* none: whole chunks */
			free(pt.base);
			free(pt.patch);
			pt.base = pt.patch = NULL;
		}
	}
	for (uint64_t i = 0; i < f->nchunks && err == 0; i++) {
		uint64_t off = i * m->chunk_size;
		size_t want =
			f->size - off < m->chunk_size ? (size_t)(f->size - off) : m->chunk_size;
		size_t got = 0;

		while (got < want) {
			ssize_t n = pread(fd, buf + got, want - got, (off_t)(off + got));

			if (n <= 0) { /* the file shrank under us, or cannot be read */
				err = chunk_store_fail(cs, n < 0 ? -errno : -EIO,
						       "%s: read at %llu: %s", path,
						       (unsigned long long)(off + got),
						       n < 0 ? strerror(errno) : "the file shrank");
				break;
			}
			got += (size_t)n;
		}
		if (err == 0 && !mf_all_zero(buf, want))
			err = mf_put_chunk(m, cs, par, &pt, i, buf, want, f->hash[i]);
	}
	if (err == 0)
		err = chunk_par_wait(par); /* every chunk up before the file counts */
	chunk_par_close(par);
	free(buf);
	free(pt.base);
	free(pt.patch);
	/* the caller froze it (a snapshot's files are written once): a file that changed while
	 * it was read would be stored torn */
	if (err == 0 && (fstat(fd, &after) < 0 || after.st_size != st.st_size ||
			 after.st_mtim.tv_sec != st.st_mtim.tv_sec ||
			 after.st_mtim.tv_nsec != st.st_mtim.tv_nsec ||
			 after.st_ctim.tv_sec != st.st_ctim.tv_sec ||
			 after.st_ctim.tv_nsec != st.st_ctim.tv_nsec))
		err = chunk_store_fail(cs, -EAGAIN, "%s changed while it was read", path);
	close(fd);
	if (err < 0) { /* its recipes go with it (appended after the others: not yet sorted) */
		m->text_bytes -= (m->nrecipes - nrec0) * MF_RECIPE_TEXT;
		m->nrecipes = nrec0;
		free(f->hash);
		free(f->extent);
		return err;
	}
	mf_recipes_sort(m);
	mf_commit_file(m, f);
	return 0;
}

/* A fetch's file being written: each chunk that came, its data extents' part written. */
struct mf_fetch {
	const struct manifest *m;
	const struct manifest_file *f;
	struct chunk_store *cs;
	const char *tmp;
	int fd;
};

int manifest_write_chunk(const struct manifest *m, const struct manifest_file *f,
			 struct chunk_store *cs, uint64_t ci, const uint8_t *data, size_t len,
			 int fd, const char *path)
{
	uint64_t coff = ci * m->chunk_size, lo = 0, hi = f->nextents;
	size_t want = f->size - coff < m->chunk_size ? (size_t)(f->size - coff) : m->chunk_size;

	if (len != want) {
		char hex[2 * CHUNK_HASH_LEN + 1];

		chunk_hex(f->hash[ci], hex);
		return chunk_store_fail(cs, -EBADMSG, "chunk %s has %zu bytes where %s wants %zu",
					hex, len, f->name, want);
	}
	while (lo < hi) { /* the first extent that ends past the chunk's start */
		uint64_t mid = lo + (hi - lo) / 2;

		if (f->extent[mid][0] + f->extent[mid][1] <= coff)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (uint64_t e = lo; e < f->nextents && f->extent[e][0] < coff + want; e++) {
		uint64_t from = f->extent[e][0] > coff ? f->extent[e][0] - coff : 0;
		uint64_t upto = f->extent[e][0] + f->extent[e][1] - coff;

		if (upto > want)
			upto = want;
		while (from < upto) {
			ssize_t n = pwrite(fd, data + from, upto - from, (off_t)(coff + from));

			if (n < 0)
				return chunk_store_fail(cs, -errno, "%s: %s", path,
							strerror(errno));
			from += (uint64_t)n;
		}
	}
	return 0;
}

/* Chunk ci of the file came (len checked bytes): the parts of it in data extents to the file. */
static int mf_fetch_got(void *arg, uint64_t ci, const uint8_t *data, size_t len)
{
	struct mf_fetch *x = arg;

	return manifest_write_chunk(x->m, x->f, x->cs, ci, data, len, x->fd, x->tmp);
}

int manifest_fetch_file(const struct manifest *m, struct chunk_store *cs, const char *name,
			const char *path)
{
	const struct manifest_file *f = manifest_find(m, name);
	char tmp[4200], dir[4200], *slash;
	uint8_t *zeros = NULL, rnd[8];
	struct chunk_par *par = NULL;
	int fd, dfd, err = 0;

	if (!f)
		return chunk_store_fail(cs, -ENOENT, "the snapshot has no file %.80s", name);
	if (access(path, F_OK) == 0 || errno != ENOENT)
		return chunk_store_fail(cs, -EEXIST, "%s is there already", path);
	/* written under a name of its own, then renamed: a restore killed half-way leaves a
	 * .part file, never a file at path that looks whole */
	if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd) ||
	    (size_t)snprintf(tmp, sizeof(tmp), "%s.part-%02x%02x%02x%02x%02x%02x%02x%02x", path,
			     rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6],
			     rnd[7]) >= sizeof(tmp))
		return chunk_store_fail(cs, -ENAMETOOLONG, "%s: too long a path", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return chunk_store_fail(cs, -errno, "%s: %s", tmp, strerror(errno));

	struct mf_fetch x = {.m = m, .f = f, .cs = cs, .tmp = tmp, .fd = fd};
	const struct chunk_recipe *recipe0 = cs->recipe;
	uint64_t nrecipes0 = cs->nrecipes;

	chunk_store_recipes(cs, m); /* its patched chunks made as they come */

	if (ftruncate(fd, (off_t)f->size) < 0)
		err = chunk_store_fail(cs, -errno, "%s: %s", tmp, strerror(errno));
	else if (!(par = chunk_par_open(cs, cs->transfers, m->chunk_size, mf_fetch_got, &x)))
		err = -ENOMEM;
	/* every chunk a data extent covers, each asked for once (extents ascend), several in
	 * flight; the rest stays holes */
	uint64_t have = UINT64_MAX;

	for (uint64_t e = 0; e < f->nextents && err == 0; e++) {
		uint64_t pos = f->extent[e][0], end = pos + f->extent[e][1];

		for (uint64_t ci = pos / m->chunk_size; ci * m->chunk_size < end && err == 0;
		     ci++) {
			if (ci == have)
				continue;
			have = ci;
			if (memcmp(f->hash[ci], zero_hash, CHUNK_HASH_LEN) != 0) {
				err = chunk_par_get(par, f->hash[ci], ci);
				continue;
			}
			/* zeros the original held as data */
			if (!zeros && !(zeros = calloc(1, m->chunk_size)))
				err = chunk_store_fail(cs, -ENOMEM, "out of memory");
			else
				err = mf_fetch_got(&x, ci, zeros,
						   f->size - ci * m->chunk_size < m->chunk_size
							   ? (size_t)(f->size - ci * m->chunk_size)
							   : m->chunk_size);
		}
	}
	if (err == 0)
		err = chunk_par_wait(par);
	chunk_par_close(par);
	cs->recipe = recipe0;
	cs->nrecipes = nrecipes0;
	free(zeros);
	if (err == 0 && fsync(fd) < 0)
		err = chunk_store_fail(cs, -errno, "%s: %s", tmp, strerror(errno));
	close(fd);
	if (err == 0 && renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) < 0)
		err = chunk_store_fail(cs, -errno, "%s: %s", path, strerror(errno));
	if (err < 0) {
		unlink(tmp);
		return err;
	}
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash)
		*(slash == dir ? slash + 1 : slash) = 0;
	dfd = open(slash ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) { /* the rename itself durable */
		fsync(dfd);
		close(dfd);
	}
	return 0;
}

/* ---- the manifest object ---- */

/* The plaintext of m, malloc'd, *len bytes. */
char *manifest_encode(const struct manifest *m, size_t *len)
{
	size_t cap = 128, n = 0; /* the head's lines at most: 20-digit numbers */
	char *out;

	for (unsigned i = 0; i < m->nfiles; i++)
		cap += MF_FILE_TEXT(m->file[i].nchunks) + m->file[i].nextents * MF_EXTENT_TEXT;
	cap += m->nrecipes * MF_RECIPE_TEXT;
	if (cap > S3_OBJECT_MAX - MF_HEAD - MF_NONCE - MF_TAG || !(out = malloc(cap)))
		return NULL;
	n += (size_t)snprintf(out + n, cap - n,
			      "sandbox-manifest 1\ngeneration %llu\nchunk_size %u\n",
			      (unsigned long long)m->generation, m->chunk_size);
	for (unsigned i = 0; i < m->nfiles; i++) {
		const struct manifest_file *f = &m->file[i];

		n += (size_t)snprintf(out + n, cap - n, "file %s %llu %llu %llu\n", f->name,
				      (unsigned long long)f->size, (unsigned long long)f->nchunks,
				      (unsigned long long)f->nextents);
		for (uint64_t e = 0; e < f->nextents; e++)
			n += (size_t)snprintf(out + n, cap - n, "%llu %llu\n",
					      (unsigned long long)f->extent[e][0],
					      (unsigned long long)f->extent[e][1]);
		for (uint64_t c = 0; c < f->nchunks; c++) {
			if (memcmp(f->hash[c], zero_hash, CHUNK_HASH_LEN) == 0) {
				memcpy(out + n, "0\n", 2);
				n += 2;
			} else {
				chunk_hex(f->hash[c], out + n);
				n += 2 * CHUNK_HASH_LEN;
				out[n++] = '\n';
			}
		}
	}
	for (uint64_t r = 0; r < m->nrecipes; r++) {
		memcpy(out + n, "recipe ", 7);
		n += 7;
		chunk_hex(m->recipe[r].hash, out + n);
		n += 2 * CHUNK_HASH_LEN;
		out[n++] = ' ';
		chunk_hex(m->recipe[r].base, out + n);
		n += 2 * CHUNK_HASH_LEN;
		out[n++] = ' ';
		chunk_hex(m->recipe[r].patch, out + n);
		n += 2 * CHUNK_HASH_LEN;
		out[n++] = '\n';
	}
	n += (size_t)snprintf(out + n, cap - n, "end\n");
	*len = n;
	return out;
}

/* AES-256-GCM under the manifest key, aad the head, the prefix (with its NUL) and the id. */
static int mf_gcm(const struct chunk_keys *k, const char *prefix, const char *id, int enc,
		  const uint8_t nonce[12], const uint8_t *in, size_t len, uint8_t *out,
		  uint8_t tag[MF_TAG])
{
	EVP_CIPHER_CTX *c;
	int n = 0, ok;

	if (len > S3_OBJECT_MAX || !(c = EVP_CIPHER_CTX_new()))
		return -EIO;
	ok = EVP_CipherInit_ex(c, EVP_aes_256_gcm(), NULL, NULL, NULL, enc) == 1 &&
	     EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_IVLEN, MF_NONCE, NULL) == 1 &&
	     EVP_CipherInit_ex(c, NULL, NULL, k->mac, nonce, enc) == 1 &&
	     EVP_CipherUpdate(c, NULL, &n, mf_head, MF_HEAD) == 1 &&
	     EVP_CipherUpdate(c, NULL, &n, (const uint8_t *)prefix, (int)strlen(prefix) + 1) == 1 &&
	     EVP_CipherUpdate(c, NULL, &n, (const uint8_t *)id, (int)strlen(id)) == 1 &&
	     EVP_CipherUpdate(c, out, &n, in, (int)len) == 1;
	if (ok && !enc)
		ok = EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, MF_TAG, tag) == 1;
	if (ok && EVP_CipherFinal_ex(c, out + n, &n) != 1) {
		EVP_CIPHER_CTX_free(c);
		return enc ? -EIO : -EBADMSG;
	}
	if (ok && enc)
		ok = EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, MF_TAG, tag) == 1;
	EVP_CIPHER_CTX_free(c);
	return ok ? 0 : -EIO;
}

int manifest_put(const struct manifest *m, struct chunk_store *cs, const char *id)
{
	char key[S3_KEY_MAX + 1];
	size_t len;
	char *text;
	uint8_t *obj;
	int err;

	if (!mf_name_ok(id, MF_ID_MAX))
		return chunk_store_fail(cs, -EINVAL, "not a snapshot id: %.80s", id);
	if (!(text = manifest_encode(m, &len)))
		return chunk_store_fail(cs, -E2BIG, "the manifest is too large");
	/* what a reader will parse, parsed here first: never a manifest no host can open */
	struct manifest check;

	if (manifest_parse(text, len, &check, cs) < 0) {
		OPENSSL_cleanse(text, len);
		free(text);
		return chunk_store_fail(
			cs, -EBADMSG, "manifest %s not written: it would not parse (its recipes?)",
			id);
	}
	manifest_free(&check);
	obj = malloc(MF_HEAD + MF_NONCE + len + MF_TAG);
	if (!obj) {
		free(text);
		return chunk_store_fail(cs, -ENOMEM, "out of memory");
	}
	memcpy(obj, mf_head, MF_HEAD);
	if (getrandom(obj + MF_HEAD, MF_NONCE, 0) != MF_NONCE)
		err = -EIO;
	else
		err = mf_gcm(&cs->keys, cs->prefix, id, 1, obj + MF_HEAD, (const uint8_t *)text,
			     len, obj + MF_HEAD + MF_NONCE, obj + MF_HEAD + MF_NONCE + len);
	OPENSSL_cleanse(text, len);
	free(text);
	snprintf(key, sizeof(key), "%s/m/%s", cs->prefix, id);
	/* the last moment its chunks are known to be there: the push's lease still held (a
	 * collection may have judged it dead and swept what it skipped) */
	if (err == 0 && cs->may_publish && !cs->may_publish(cs->may_publish_arg)) {
		free(obj);
		return chunk_store_fail(
			cs, -ESTALE,
			"manifest %s not written: the push's lease on the store was "
			"lost (a collection may have run)",
			id);
	}
	if (err == 0 && (err = s3_put(cs->s3, key, obj, MF_HEAD + MF_NONCE + len + MF_TAG)) < 0)
		chunk_store_fail(cs, err, "manifest %s: %s", id, cs->s3->err);
	else if (err < 0)
		chunk_store_fail(cs, err, "manifest %s: sealing failed", id);
	free(obj);
	return err;
}

/* Parse an unsigned decimal of at most 20 digits ending at *end (a space or newline). */
static int mf_number(const char **p, const char *end, char stop, uint64_t *out)
{
	uint64_t v = 0;
	const char *s = *p;
	int digits = 0;

	while (s < end && *s >= '0' && *s <= '9' && digits < 20) {
		uint64_t d = (uint64_t)(*s - '0');

		if (v > (UINT64_MAX - d) / 10)
			return -EBADMSG;
		v = v * 10 + d;
		s++;
		digits++;
	}
	if (digits == 0 || s >= end || *s != stop || (digits > 1 && (*p)[0] == '0'))
		return -EBADMSG;
	*p = s + 1;
	*out = v;
	return 0;
}

/* One hash of 64 hex digits, not zeros, then stop. */
static int mf_hash(const char **p, const char *end, char stop, uint8_t out[CHUNK_HASH_LEN])
{
	if (end - *p < 2 * CHUNK_HASH_LEN + 1 || (*p)[2 * CHUNK_HASH_LEN] != stop ||
	    chunk_unhex(*p, out) < 0 || mf_zero(out))
		return -EBADMSG;
	*p += 2 * CHUNK_HASH_LEN + 1;
	return 0;
}

/* The recipe lines (none or more) into m: strictly ascending, at most one a chunk, each of a
 * chunk a file lists, its base and patch other chunks and its base not one of them. */
static int mf_parse_recipes(const char **pp, const char *end, struct manifest *m)
{
	const char *p = *pp;
	uint64_t k = 0;
	uint8_t(*named)[CHUNK_HASH_LEN];
	int err = 0;

	if (end - p < 7 || memcmp(p, "recipe ", 7) != 0)
		return 0;
	if (!(named = mf_named(m, &k)))
		return -ENOMEM;
	while (err == 0 && end - p >= 7 && memcmp(p, "recipe ", 7) == 0) {
		struct chunk_recipe r;

		p += 7;
		if (m->nrecipes >= k || m->text_bytes + MF_RECIPE_TEXT > MF_TEXT_MAX ||
		    mf_hash(&p, end, ' ', r.hash) < 0 || mf_hash(&p, end, ' ', r.base) < 0 ||
		    mf_hash(&p, end, '\n', r.patch) < 0 ||
		    !bsearch(r.hash, named, k, CHUNK_HASH_LEN, chunk_hash_cmp) ||
		    !memcmp(r.base, r.hash, CHUNK_HASH_LEN) ||
		    !memcmp(r.patch, r.hash, CHUNK_HASH_LEN) ||
		    !memcmp(r.patch, r.base, CHUNK_HASH_LEN) ||
		    (m->nrecipes &&
		     memcmp(m->recipe[m->nrecipes - 1].hash, r.hash, CHUNK_HASH_LEN) >= 0)) {
			err = -EBADMSG;
			break;
		}
		err = mf_recipe_append(m, &r);
	}
	for (uint64_t i = 0; i < m->nrecipes && err == 0; i++) /* one level: both parts stored */
		if (chunk_recipe_find(m->recipe, m->nrecipes, m->recipe[i].base) ||
		    chunk_recipe_find(m->recipe, m->nrecipes, m->recipe[i].patch))
			err = -EBADMSG;
	free(named);
	*pp = p;
	return err;
}

/* Parse text (len bytes) into m; -EBADMSG for anything that is not exactly the format. */
static int mf_parse(const char *text, size_t len, struct manifest *m, struct chunk_store *cs)
{
	const char *p = text, *end = text + len;
	static const char magic[] = "sandbox-manifest 1\ngeneration ";
	uint64_t cs_v, gen;

	if (len < sizeof(magic) - 1 || memcmp(p, magic, sizeof(magic) - 1) != 0)
		return -EBADMSG;
	p += sizeof(magic) - 1;
	if (mf_number(&p, end, '\n', &gen) < 0 || end - p < 11 || memcmp(p, "chunk_size ", 11) != 0)
		return -EBADMSG;
	p += 11;
	if (mf_number(&p, end, '\n', &cs_v) < 0 || cs_v > CHUNK_SIZE_MAX ||
	    manifest_init(m, (uint32_t)cs_v) < 0)
		return -EBADMSG;
	m->generation = gen;
	while (end - p >= 5 && memcmp(p, "file ", 5) == 0) {
		char name[MANIFEST_NAME_MAX + 1];
		const char *sp;
		uint64_t size, n;
		struct manifest_file *f;

		p += 5;
		sp = memchr(p, ' ', (size_t)(end - p));
		if (!sp || sp - p > MANIFEST_NAME_MAX || sp == p)
			return -EBADMSG;
		if (memchr(p, 0, (size_t)(sp - p)))
			return -EBADMSG; /* one text, one reading */
		memcpy(name, p, (size_t)(sp - p));
		name[sp - p] = 0;
		p = sp + 1;
		uint64_t ne, at = 0;

		if (mf_number(&p, end, ' ', &size) < 0 || mf_number(&p, end, ' ', &n) < 0 ||
		    mf_number(&p, end, '\n', &ne) < 0 || size > MANIFEST_FILE_MAX ||
		    n != (size + m->chunk_size - 1) / m->chunk_size ||
		    n > (uint64_t)(end - p) / 2 || ne > MANIFEST_EXTENTS_MAX ||
		    ne > (uint64_t)(end - p) / 4)
			return -EBADMSG;
		if (mf_new_file(m, cs, name, size, &f) < 0)
			return -EBADMSG;
		if (ne && !(f->extent = calloc(ne, sizeof(*f->extent)))) {
			free(f->hash);
			return -EBADMSG;
		}
		f->nextents = ne;
		mf_commit_file(m, f);		    /* freed by manifest_free from here */
		for (uint64_t e = 0; e < ne; e++) { /* ascending, apart, inside the file */
			uint64_t off, elen;

			if (mf_number(&p, end, ' ', &off) < 0 ||
			    mf_number(&p, end, '\n', &elen) < 0 || off < at || elen == 0 ||
			    off > size || elen > size - off)
				return -EBADMSG;
			f->extent[e][0] = off;
			f->extent[e][1] = elen;
			at = off + elen;
		}
		for (uint64_t c = 0; c < n; c++) {
			if (end - p >= 2 && p[0] == '0' && p[1] == '\n') {
				p += 2;
				continue;
			}
			if (end - p < 2 * CHUNK_HASH_LEN + 1 || p[2 * CHUNK_HASH_LEN] != '\n' ||
			    chunk_unhex(p, f->hash[c]) < 0 ||
			    memcmp(f->hash[c], zero_hash, CHUNK_HASH_LEN) == 0)
				return -EBADMSG;
			p += 2 * CHUNK_HASH_LEN + 1;
		}
	}
	if (mf_parse_recipes(&p, end, m) < 0)
		return -EBADMSG;
	if (end - p != 4 || memcmp(p, "end\n", 4) != 0)
		return -EBADMSG;
	return 0;
}

uint8_t (*manifest_stored_hashes(const struct manifest *m, size_t *n))[CHUNK_HASH_LEN]
{
	uint8_t(*u)[CHUNK_HASH_LEN];
	size_t total = 0, k = 0;

	for (unsigned i = 0; i < m->nfiles; i++)
		total += m->file[i].nchunks;
	if (!(u = malloc((2 * total + 1) * CHUNK_HASH_LEN))) /* a patched chunk gives two */
		return NULL;
	for (unsigned i = 0; i < m->nfiles; i++)
		for (uint64_t c = 0; c < m->file[i].nchunks; c++) {
			const uint8_t *h = m->file[i].hash[c];
			const struct chunk_recipe *r;

			if (mf_zero(h))
				continue;
			if (!(r = chunk_recipe_find(m->recipe, m->nrecipes, h))) {
				memcpy(u[k++], h, CHUNK_HASH_LEN);
				continue;
			}
			memcpy(u[k++], r->base, CHUNK_HASH_LEN);
			memcpy(u[k++], r->patch, CHUNK_HASH_LEN);
		}
	qsort(u, k, CHUNK_HASH_LEN, chunk_hash_cmp);
	*n = 0;
	for (size_t i = 0; i < k; i++)
		if (!*n || memcmp(u[*n - 1], u[i], CHUNK_HASH_LEN) != 0)
			memmove(u[(*n)++], u[i], CHUNK_HASH_LEN);
	return u;
}

int manifest_delete(struct chunk_store *cs, const char *id)
{
	char key[S3_KEY_MAX + 1];
	int err;

	if (!mf_name_ok(id, MF_ID_MAX))
		return chunk_store_fail(cs, -EINVAL, "not a snapshot id: %.80s", id);
	snprintf(key, sizeof(key), "%s/m/%s", cs->prefix, id);
	if ((err = s3_delete(cs->s3, key)) < 0)
		chunk_store_fail(cs, err, "manifest %s: %s", id, cs->s3->err);
	return err;
}

int manifest_parse(const char *text, size_t len, struct manifest *m, struct chunk_store *cs)
{
	int err;

	memset(m, 0, sizeof(*m));
	if (len > MF_TEXT_MAX)
		return chunk_store_fail(cs, -EBADMSG, "a manifest of over %u bytes", MF_TEXT_MAX);
	if ((err = mf_parse(text, len, m, cs)) < 0) {
		manifest_free(m);
		return chunk_store_fail(cs, -EBADMSG, "not a manifest: not exactly its format");
	}
	return 0;
}

int manifest_get(struct manifest *m, struct chunk_store *cs, const char *id,
		 uint64_t min_generation)
{
	char key[S3_KEY_MAX + 1];
	uint8_t *obj, *text;
	size_t len, n;
	int err;

	memset(m, 0, sizeof(*m));
	if (!mf_name_ok(id, MF_ID_MAX))
		return chunk_store_fail(cs, -EINVAL, "not a snapshot id: %.80s", id);
	snprintf(key, sizeof(key), "%s/m/%s", cs->prefix, id);
	err = s3_get(cs->s3, key, 0, 0, S3_OBJECT_MAX, &obj, &len);
	if (err < 0)
		return chunk_store_fail(cs, err, "manifest %s: %s", id, cs->s3->err);
	if (len < MF_HEAD + MF_NONCE + MF_TAG || memcmp(obj, mf_head, MF_HEAD) != 0) {
		free(obj);
		return chunk_store_fail(cs, -EBADMSG, "manifest %s is not a manifest of ours", id);
	}
	n = len - MF_HEAD - MF_NONCE - MF_TAG;
	text = malloc(n + 1);
	if (!text) {
		free(obj);
		return chunk_store_fail(cs, -ENOMEM, "out of memory");
	}
	err = mf_gcm(&cs->keys, cs->prefix, id, 0, obj + MF_HEAD, obj + MF_HEAD + MF_NONCE, n, text,
		     obj + MF_HEAD + MF_NONCE + n);
	free(obj);
	if (err < 0) {
		OPENSSL_cleanse(text, n);
		free(text);
		return chunk_store_fail(
			cs, -EBADMSG, "manifest %s does not open: not this workspace's, or altered",
			id);
	}
	err = manifest_parse((const char *)text, n, m, cs);
	OPENSSL_cleanse(text, n);
	free(text);
	if (err < 0)
		return chunk_store_fail(cs, -EBADMSG, "manifest %s opens but does not parse", id);
	if (m->generation < min_generation) {
		unsigned long long g = (unsigned long long)m->generation;

		manifest_free(m);
		return chunk_store_fail(
			cs, -ESTALE,
			"manifest %s is generation %llu, older than %llu: an old copy put "
			"back in the store",
			id, g, (unsigned long long)min_generation);
	}
	return 0;
}
