/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A workspace's chunks that no manifest names any more, collected (store.h, store_gc; the
 * protocol that keeps a push safe from it is the caller's: docs/fleet.md, "The collector").
 *
 * Mark: every manifest under PREFIX/m/ read and opened (a manifest that does not open stops
 * the collection: nothing is deleted while in doubt), the object ids of its chunks kept,
 * sorted. Sweep: the listing of PREFIX/c/ with each object's LastModified; an object no
 * manifest names, older than the cutoff, is deleted (one without a time, or not a chunk's
 * name, is kept). What is kept is counted: the workspace's stored bytes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"

#define GC_IDS_MAX (1u << 24) /* chunk ids the mark keeps at most (16 Mi: 512 MiB of them) */

struct mark {
	struct chunk_store *cs;
	char (*ids)[MANIFEST_NAME_MAX + 1]; /* the manifests' ids, from the listing */
	unsigned nids, cap_ids;
	uint8_t (*live)[CHUNK_HASH_LEN];
	size_t nlive, cap_live;
	int (*go_on)(void *arg);
	void *arg;
	size_t skip; /* strlen("PREFIX/m/") */
};

static int manifest_key(const struct s3_entry *e, void *arg)
{
	struct mark *m = arg;
	const char *id = e->key + m->skip;

	if (!*id || strlen(id) > MANIFEST_NAME_MAX || strchr(id, '/'))
		return chunk_store_fail(m->cs, -EBADMSG, "the store holds a manifest named %.80s",
					id);
	if (m->nids == m->cap_ids) {
		unsigned cap = m->cap_ids ? 2 * m->cap_ids : 64;
		void *n = cap > (1u << 20) ? NULL : realloc(m->ids, cap * sizeof(*m->ids));

		if (!n)
			return chunk_store_fail(m->cs, -ENOMEM, "%s",
						"too many manifests to collect");
		m->ids = n;
		m->cap_ids = cap;
	}
	snprintf(m->ids[m->nids++], MANIFEST_NAME_MAX + 1, "%s", id);
	return 0;
}

/* Whether the caller lets the collection go on: 0, or -ECANCELED said in cs->err. */
static int gc_go_on(struct mark *m)
{
	if (!m->go_on || m->go_on(m->arg) == 0)
		return 0;
	return chunk_store_fail(m->cs, -ECANCELED, "%s",
				"the collection stopped: its lock was lost, or a push of the "
				"workspace began (it yields to pushes)");
}

/* Sorted, each id once (generations of a box share most of their chunks). */
static void live_dedup(struct mark *m)
{
	size_t k = 0;

	if (!m->nlive)
		return;
	qsort(m->live, m->nlive, sizeof(*m->live), chunk_hash_cmp);
	for (size_t i = 1; i < m->nlive; i++)
		if (chunk_hash_cmp(m->live[i], m->live[k]))
			memcpy(m->live[++k], m->live[i], CHUNK_HASH_LEN);
	m->nlive = k + 1;
}

static int live_add(struct mark *m, const uint8_t hash[CHUNK_HASH_LEN])
{
	if (m->nlive == m->cap_live) {
		live_dedup(m);			       /* room made by the repeats first */
		if (m->nlive * 4 >= m->cap_live * 3) { /* little came of it (or none yet): more */
			size_t cap = m->cap_live ? 2 * m->cap_live : 4096;
			void *n =
				cap > GC_IDS_MAX ? NULL : realloc(m->live, cap * sizeof(*m->live));

			if (!n)
				return chunk_store_fail(m->cs, -ENOMEM, "%s",
							"too many chunks to collect");
			m->live = n;
			m->cap_live = cap;
		}
	}
	chunk_object_id(&m->cs->keys, hash, m->live[m->nlive++]);
	return 0;
}

/* Every manifest's chunks into m->live, sorted. */
static int mark(struct mark *m, struct store_gc_report *rep)
{
	char prefix[S3_KEY_MAX + 1], marker[S3_KEY_MAX + 1] = "";
	bool more = true;
	int r = 0;

	snprintf(prefix, sizeof(prefix), "%s/m/", m->cs->prefix);
	m->skip = strlen(prefix);
	while (more && r >= 0) {
		if ((r = s3_list(m->cs->s3, prefix, marker, 0, manifest_key, m, &more)) < 0 &&
		    !m->cs->err[0])
			snprintf(m->cs->err, sizeof(m->cs->err), "%s", m->cs->s3->err);
		if (r >= 0)
			r = gc_go_on(m);
	}
	for (unsigned i = 0; i < m->nids && r >= 0; i++) {
		struct manifest mf;

		if (i % 64 == 63 && (r = gc_go_on(m)) < 0)
			break;
		if ((r = manifest_get(&mf, m->cs, m->ids[i], 0)) == -ENOENT) {
			r = 0; /* deleted since the listing (a failed import's): names nothing */
			continue;
		}
		if (r < 0) {
			char why[STORE_ERR_MAX];

			snprintf(why, sizeof(why), "%s", m->cs->err);
			snprintf(m->cs->err, sizeof(m->cs->err),
				 "manifest %.64s does not open (%.300s): nothing collected",
				 m->ids[i], why);
			break;
		}
		rep->manifests++;
		/* what it needs stored: a patched chunk is its base and its patch, as for a pull */
		size_t n = 0;
		uint8_t(*need)[CHUNK_HASH_LEN] = manifest_stored_hashes(&mf, &n);

		if (!need)
			r = chunk_store_fail(m->cs, -ENOMEM, "out of memory");
		for (size_t k = 0; k < n && r >= 0; k++)
			r = live_add(m, need[k]);
		free(need);
		manifest_free(&mf);
	}
	if (r >= 0)
		live_dedup(m);
	return r < 0 ? r : 0;
}

struct sweep {
	struct mark *m;
	struct store_gc_report *rep;
	int64_t older_than;
	bool dry_run;
	size_t skip; /* strlen("PREFIX/c/") */
	/* the doomed of one listing page: deleted after it (a delete during a listing would
	 * move the pages under it) */
	char (*doomed)[S3_KEY_MAX + 1];
	uint64_t *doomed_size;
	unsigned ndoomed;
};

static int sweep_key(const struct s3_entry *e, void *arg)
{
	struct sweep *s = arg;
	uint8_t oid[CHUNK_HASH_LEN];
	const char *name = e->key + s->skip;
	bool chunk = strlen(name) == 2 * CHUNK_HASH_LEN && chunk_unhex(name, oid) == 0;

	s->rep->chunks++;
	if (!chunk || (s->m->nlive && bsearch(oid, s->m->live, s->m->nlive, sizeof(*s->m->live),
					      chunk_hash_cmp))) {
		s->rep->kept++; /* named by a manifest (or not a chunk's name: not ours to judge) */
		s->rep->kept_bytes += e->size;
		return 0;
	}
	if (e->modified < 0 || e->modified >= s->older_than) {
		s->rep->young++; /* a transfer's, or a push's whose manifest is still to come */
		s->rep->kept++;
		s->rep->kept_bytes += e->size;
		return 0;
	}
	snprintf(s->doomed[s->ndoomed], S3_KEY_MAX + 1, "%s", e->key);
	s->doomed_size[s->ndoomed++] = e->size;
	return 0;
}

int store_gc(struct chunk_store *cs, int64_t older_than, bool dry_run, struct store_gc_report *rep,
	     int (*go_on)(void *arg), void *arg)
{
	struct mark m = {.cs = cs, .go_on = go_on, .arg = arg};
	struct sweep s = {.m = &m, .rep = rep, .older_than = older_than, .dry_run = dry_run};
	char prefix[S3_KEY_MAX + 1], marker[S3_KEY_MAX + 1] = "";
	bool more = true;
	int r;

	memset(rep, 0, sizeof(*rep));
	cs->err[0] = 0;
	if (!cs->s3)
		return chunk_store_fail(cs, -EINVAL, "%s", "no store to collect");
	if ((r = mark(&m, rep)) < 0)
		goto out;
	s.doomed = malloc(S3_LIST_KEYS * sizeof(*s.doomed));
	s.doomed_size = malloc(S3_LIST_KEYS * sizeof(*s.doomed_size));
	if (!s.doomed || !s.doomed_size) {
		r = chunk_store_fail(cs, -ENOMEM, "%s", "out of memory");
		goto out;
	}
	snprintf(prefix, sizeof(prefix), "%s/c/", cs->prefix);
	s.skip = strlen(prefix);
	while (more) {
		s.ndoomed = 0;
		if ((r = s3_list(cs->s3, prefix, marker, 0, sweep_key, &s, &more)) < 0) {
			chunk_store_fail(cs, r, "%s", cs->s3->err);
			goto out;
		}
		if (!rep->manifests && s.ndoomed) {
			/* every chunk named by nothing: a store whose manifests all went is
			 * possible, a listing that lost them too; not judged here */
			r = chunk_store_fail(
				cs, -EBADMSG, "%s",
				"the store lists chunks but no manifest: nothing collected");
			goto out;
		}
		for (unsigned i = 0; i < s.ndoomed; i++) {
			if ((r = gc_go_on(&m)) < 0) /* before every delete: one timeout at most */
				goto out;
			if (!dry_run && (r = s3_delete(cs->s3, s.doomed[i])) < 0) {
				chunk_store_fail(cs, r, "%s", cs->s3->err);
				goto out;
			}
			rep->deleted++;
			rep->deleted_bytes += s.doomed_size[i];
		}
		if ((r = gc_go_on(&m)) < 0)
			goto out;
	}
	r = 0;
out:
	free(s.doomed);
	free(s.doomed_size);
	free(m.ids);
	free(m.live);
	return r;
}
