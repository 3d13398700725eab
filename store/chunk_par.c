/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A workspace's chunk transfers several at once (store.h): up to `width` uploads or
 * downloads in flight, each worker thread on a connection of its own (an S3 request is a
 * round trip: one at a time, a push of 80 chunks waits 80 of them end to end).
 *
 * The caller's thread does what touches shared state: reading its files, hashing, the set of
 * known chunks, the host's cache, the counters and the callback of a fetched chunk. Workers
 * only seal, open and send, each into its own job slot. The first failure ends the run: later
 * calls return it (cs->err says which chunk), and chunk_par_close waits for what is in flight.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"

enum { JOB_FREE, JOB_QUEUED, JOB_RUNNING, JOB_DONE };

struct par_job {
	int state;
	bool get;
	uint8_t hash[CHUNK_HASH_LEN], oid[CHUNK_HASH_LEN];
	char key[S3_KEY_MAX + 1];
	const struct chunk_recipe *recipe; /* a get of a patched chunk: its base and patch */
	uint8_t *data;			   /* a put's plaintext (a copy), a get's result */
	size_t len, cap;
	uint64_t tag;
	/* the worker's answer */
	int err;
	bool there;    /* a put the store had already (HEAD) */
	uint64_t wire; /* sealed bytes sent or received */
	char msg[STORE_ERR_MAX];
};

struct chunk_par {
	struct chunk_store *cs;
	unsigned width, started;
	size_t get_cap; /* the most a fetched chunk may hold */
	chunk_par_got_fn got;
	void *got_arg;
	int err; /* the first failure; 0 while all went well */
	pthread_mutex_t mu;
	pthread_cond_t work, done;
	bool stop;
	pthread_t thread[CHUNK_PAR_MAX];
	struct s3 s3[CHUNK_PAR_MAX];
	struct par_job job[CHUNK_PAR_MAX];
};

/* A recipe's part on a worker's connection (chunk_part_fn). */
struct par_part {
	struct chunk_par *p;
	unsigned i;
	struct s3 *s;
	uint64_t wire;
};

static int par_part(void *arg, const uint8_t hash[CHUNK_HASH_LEN], uint8_t *out, size_t cap,
		    size_t *len, char *msg, size_t msg_len)
{
	struct par_part *x = arg;
	struct chunk_store *cs = x->p->cs;
	char key[S3_KEY_MAX + 1];
	uint8_t oid[CHUNK_HASH_LEN];
	uint64_t wire = 0;
	int r;

	if (!cs->s3) {
		r = chunk_xfer_fetch(cs->fetch, cs->fetch_args[x->i], hash, out, cap, len, msg,
				     msg_len);
		wire = r < 0 ? 0 : *len;
	} else {
		chunk_store_key(cs, hash, key, oid); /* (reads the handle's keys only) */
		r = chunk_xfer_get(x->s, &cs->keys, key, hash, out, cap, len, &wire, msg, msg_len);
	}
	x->wire += wire;
	return r;
}

/* j's transfer on worker i's connection s (its fetch arg, for a handle of no store): its
 * answer in j. */
static void par_run(struct chunk_par *p, unsigned i, struct s3 *s, struct par_job *j)
{
	struct chunk_store *cs = p->cs;
	int r;

	if (j->get && j->recipe) {
		struct par_part x = {.p = p, .i = i, .s = s};

		r = chunk_rebuild(j->recipe, par_part, &x, j->data, p->get_cap, &j->len, j->msg,
				  sizeof(j->msg));
		j->wire = x.wire;
	} else if (j->get && !cs->s3) {
		r = chunk_xfer_fetch(cs->fetch, cs->fetch_args[i], j->hash, j->data, p->get_cap,
				     &j->len, j->msg, sizeof(j->msg));
		j->wire = r < 0 ? 0 : j->len;
	} else if (j->get) {
		r = chunk_xfer_get(s, &cs->keys, j->key, j->hash, j->data, p->get_cap, &j->len,
				   &j->wire, j->msg, sizeof(j->msg));
	} else {
		r = chunk_xfer_put(s, &cs->keys, cs->listed, j->key, j->hash, j->data, j->len,
				   &j->wire, j->msg, sizeof(j->msg));
		j->there = r == 1;
	}
	j->err = r < 0 ? r : 0;
}

struct par_worker {
	struct chunk_par *p;
	unsigned i;
};

static void *par_main(void *arg)
{
	struct chunk_par *p = ((struct par_worker *)arg)->p;
	struct s3 *s = &p->s3[((struct par_worker *)arg)->i];

	free(arg);
	pthread_mutex_lock(&p->mu);
	for (;;) {
		struct par_job *j = NULL;

		for (unsigned i = 0; i < p->width && !j; i++)
			if (p->job[i].state == JOB_QUEUED)
				j = &p->job[i];
		if (!j) {
			if (p->stop)
				break;
			pthread_cond_wait(&p->work, &p->mu);
			continue;
		}
		j->state = JOB_RUNNING;
		pthread_mutex_unlock(&p->mu);
		par_run(p, (unsigned)(s - p->s3), s, j);
		pthread_mutex_lock(&p->mu);
		j->state = JOB_DONE;
		pthread_cond_signal(&p->done);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

struct chunk_par *chunk_par_open(struct chunk_store *cs, unsigned width, size_t get_cap,
				 chunk_par_got_fn got, void *got_arg)
{
	struct chunk_par *p;

	if (width < 1)
		width = 1;
	if (width > CHUNK_PAR_MAX)
		width = CHUNK_PAR_MAX;
	if (!cs->s3) /* a fetch callback (a client through the API): as many as it has args */
		width = cs->nfetch_args < width ? (cs->nfetch_args ? cs->nfetch_args : 1) : width;
	if (get_cap > CHUNK_SIZE_MAX)
		get_cap = CHUNK_SIZE_MAX;
	if (!(p = calloc(1, sizeof(*p)))) {
		chunk_store_fail(cs, -ENOMEM, "out of memory");
		return NULL;
	}
	p->cs = cs;
	p->width = width;
	p->get_cap = get_cap;
	p->got = got;
	p->got_arg = got_arg;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->work, NULL);
	pthread_cond_init(&p->done, NULL);
	if (width == 1)
		return p; /* no workers: every call does its transfer itself */
	for (unsigned i = 0; i < width; i++) {
		struct par_worker *w = malloc(sizeof(*w));

		if (!w)
			break;
		*w = (struct par_worker){.p = p, .i = i};
		if ((cs->s3 && s3_open(&p->s3[i], &cs->s3->conf) < 0) ||
		    pthread_create(&p->thread[i], NULL, par_main, w) != 0) {
			free(w);
			s3_close(&p->s3[i]);
			break;
		}
		p->started++;
	}
	/* fewer workers than asked (no memory, no thread): as many as there are, or none (one
	 * at a time in the caller's thread, as before) */
	pthread_mutex_lock(&p->mu);
	p->width = p->started ? p->started : 1;
	pthread_mutex_unlock(&p->mu);
	return p;
}

/* A finished job's effects, in the caller's thread (workers do not touch a finished job). */
static void par_finish(struct chunk_par *p, struct par_job *j)
{
	struct chunk_store *cs = p->cs;
	int err;

	if (j->err) {
		if (!p->err) {
			p->err = j->err;
			snprintf(cs->err, sizeof(cs->err), "%s", j->msg);
		}
		return;
	}
	if (!j->recipe) /* (a patched chunk is not itself stored: a push must not skip it) */
		chunk_store_learned(cs, j->oid);
	if (cs->cache) /* a cache that cannot keep it: a later miss */
		(void)chunk_cache_put(cs->cache, j->oid, j->data, j->len);
	if (!j->get) {
		if (j->there) {
			cs->skip_chunks++;
			cs->skip_bytes += j->len + CHUNK_SEAL_EXTRA;
		} else {
			cs->put_chunks++;
			cs->put_bytes += j->wire;
		}
		return;
	}
	cs->got_chunks++;
	cs->got_bytes += j->wire;
	if (!p->err && p->got && (err = p->got(p->got_arg, j->tag, j->data, j->len)) < 0)
		p->err = err; /* the callback said why in cs->err */
}

/* Finish the jobs that are done; then, with want, wait for a free slot (NULL once a job
 * failed), else for every job to end (NULL). */
static struct par_job *par_reap(struct chunk_par *p, bool want)
{
	pthread_mutex_lock(&p->mu);
	for (;;) {
		struct par_job *done = NULL, *free_j = NULL;
		bool busy = false;

		for (unsigned i = 0; i < p->width; i++) {
			struct par_job *j = &p->job[i];

			if (j->state == JOB_DONE)
				done = j;
			else if (j->state == JOB_FREE)
				free_j = j;
			else
				busy = true;
		}
		if (done) {
			pthread_mutex_unlock(&p->mu);
			par_finish(p, done);
			pthread_mutex_lock(&p->mu);
			done->state = JOB_FREE;
			continue;
		}
		if ((want && (p->err || free_j)) || (!want && !busy)) {
			pthread_mutex_unlock(&p->mu);
			return want && !p->err ? free_j : NULL;
		}
		pthread_cond_wait(&p->done, &p->mu);
	}
}

/* j (a free slot, filled) to the workers. */
static void par_queue(struct chunk_par *p, struct par_job *j)
{
	pthread_mutex_lock(&p->mu);
	j->state = JOB_QUEUED;
	pthread_cond_signal(&p->work);
	pthread_mutex_unlock(&p->mu);
}

/* Room for len bytes in j's buffer. */
static int par_room(struct chunk_par *p, struct par_job *j, size_t len)
{
	uint8_t *b;

	if (j->cap >= len)
		return 0;
	if (!(b = realloc(j->data, len)))
		return p->err = chunk_store_fail(p->cs, -ENOMEM, "out of memory");
	j->data = b;
	j->cap = len;
	return 0;
}

static void par_fill(struct par_job *j, bool get, const uint8_t hash[CHUNK_HASH_LEN],
		     const uint8_t oid[CHUNK_HASH_LEN], const char *key, uint64_t tag)
{
	j->get = get;
	j->recipe = NULL;
	memcpy(j->hash, hash, CHUNK_HASH_LEN);
	memcpy(j->oid, oid, CHUNK_HASH_LEN);
	snprintf(j->key, sizeof(j->key), "%s", key);
	j->tag = tag;
	j->err = 0;
	j->there = false;
	j->wire = 0;
	j->msg[0] = 0;
}

int chunk_par_put(struct chunk_par *p, const void *data, size_t len, uint8_t hash[CHUNK_HASH_LEN])
{
	if (p->err)
		return p->err;
	if (len > CHUNK_SIZE_MAX)
		return p->err = chunk_store_fail(p->cs, -EFBIG, "a chunk of %zu bytes (at most %u)",
						 len, CHUNK_SIZE_MAX);
	chunk_hash(data, len, hash);
	return chunk_par_put_hashed(p, data, len, hash);
}

int chunk_par_put_hashed(struct chunk_par *p, const void *data, size_t len,
			 const uint8_t hash[CHUNK_HASH_LEN])
{
	struct chunk_store *cs = p->cs;
	char key[S3_KEY_MAX + 1];
	uint8_t oid[CHUNK_HASH_LEN];
	struct par_job *j;

	if (p->err)
		return p->err;
	if (len > CHUNK_SIZE_MAX)
		return p->err = chunk_store_fail(cs, -EFBIG, "a chunk of %zu bytes (at most %u)",
						 len, CHUNK_SIZE_MAX);
	if (!cs->s3) /* no store: a put only hashes */
		return 0;
	if (!p->started) { /* one at a time, here */
		int err = chunk_put_hashed(cs, data, len, hash);

		return err < 0 ? (p->err = err) : 0;
	}
	chunk_store_key(cs, hash, key, oid);
	/* known, or on its way up already (the same bytes twice in a push): nothing to send */
	bool there = chunk_store_knows(cs, oid);

	pthread_mutex_lock(&p->mu);
	for (unsigned i = 0; i < p->width && !there; i++)
		there = p->job[i].state != JOB_FREE && !p->job[i].get &&
			memcmp(p->job[i].oid, oid, CHUNK_HASH_LEN) == 0;
	pthread_mutex_unlock(&p->mu);
	if (there) {
		cs->skip_chunks++;
		cs->skip_bytes += len + CHUNK_SEAL_EXTRA;
		return 0;
	}
	if (!(j = par_reap(p, true)) || par_room(p, j, len) < 0)
		return p->err;
	par_fill(j, false, hash, oid, key, 0);
	memcpy(j->data, data, len);
	j->len = len;
	par_queue(p, j);
	return 0;
}

int chunk_par_get(struct chunk_par *p, const uint8_t hash[CHUNK_HASH_LEN], uint64_t tag)
{
	struct chunk_store *cs = p->cs;
	char key[S3_KEY_MAX + 1];
	uint8_t oid[CHUNK_HASH_LEN];
	struct par_job *j;
	int err;

	if (p->err)
		return p->err;
	if (!p->started) { /* in this thread, into the first slot's buffer */
		j = &p->job[0];
		if (par_room(p, j, p->get_cap) < 0)
			return p->err;
		if ((err = chunk_get(cs, hash, j->data, p->get_cap, &j->len)) < 0 ||
		    (p->got && (err = p->got(p->got_arg, tag, j->data, j->len)) < 0))
			return p->err = err;
		return 0;
	}
	chunk_store_key(cs, hash, key, oid);
	/* the same bytes on their way already (a file whose chunks repeat): once they are in,
	 * the cache has them, as one at a time would (no cache: fetched again either way) */
	bool again = false;

	pthread_mutex_lock(&p->mu);
	for (unsigned i = 0; i < p->width && !again; i++)
		again = p->job[i].state != JOB_FREE && p->job[i].get &&
			memcmp(p->job[i].oid, oid, CHUNK_HASH_LEN) == 0;
	pthread_mutex_unlock(&p->mu);
	if (again && cs->cache && (err = chunk_par_wait(p)) < 0)
		return err;
	if (!(j = par_reap(p, true)) || par_room(p, j, p->get_cap) < 0)
		return p->err;
	if (cs->cache && chunk_cache_get(cs->cache, oid, hash, j->data, p->get_cap, &j->len) == 1) {
		cs->cache_hits++; /* the slot stays free */
		if (p->got && (err = p->got(p->got_arg, tag, j->data, j->len)) < 0)
			return p->err = err;
		return 0;
	}
	par_fill(j, true, hash, oid, key, tag);
	j->recipe = chunk_recipe_find(cs->recipe, cs->nrecipes, hash);
	par_queue(p, j);
	return 0;
}

int chunk_par_wait(struct chunk_par *p)
{
	if (p->started)
		(void)par_reap(p, false);
	return p->err;
}

void chunk_par_close(struct chunk_par *p)
{
	if (!p)
		return;
	if (p->started) {
		/* what is queued and not started is dropped; what runs is waited for, and what
		 * it fetched given to nobody (the caller is done with it) */
		p->got = NULL;
		/* and the caller's first failure (a read of its file, say) not overwritten by a
		 * later one of what runs */
		if (!p->err)
			p->err = -ECANCELED;
		pthread_mutex_lock(&p->mu);
		for (unsigned i = 0; i < p->width; i++)
			if (p->job[i].state == JOB_QUEUED)
				p->job[i].state = JOB_FREE;
		pthread_mutex_unlock(&p->mu);
		(void)par_reap(p, false);
		pthread_mutex_lock(&p->mu);
		p->stop = true;
		pthread_cond_broadcast(&p->work);
		pthread_mutex_unlock(&p->mu);
		for (unsigned i = 0; i < p->started; i++) {
			pthread_join(p->thread[i], NULL);
			if (p->cs->s3) {
				p->cs->s3->requests += p->s3[i].requests;
				p->cs->s3->bytes_up += p->s3[i].bytes_up;
				p->cs->s3->bytes_down += p->s3[i].bytes_down;
			}
			s3_close(&p->s3[i]);
		}
	}
	for (unsigned i = 0; i < CHUNK_PAR_MAX; i++)
		free(p->job[i].data);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->work);
	pthread_cond_destroy(&p->done);
	free(p);
}
