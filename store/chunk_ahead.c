/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Read-ahead of a lazy restore's chunks into the host's chunk cache (store.h): `width`
 * workers, each on a connection of its own, fetch the chunks of a list (a memory file's) that
 * nobody asked for yet, starting after the last one asked for (a guest that faults on a page
 * goes on to its neighbours), so that the pager's fetch of a chunk finds it in the cache
 * instead of waiting a round trip to the store. The pager asks first (chunk_ahead_claim): a
 * chunk a worker is fetching is waited for, not fetched twice; one nobody took is the
 * pager's, and no worker takes it after.
 *
 * Given the chunks the snapshot's last run touched (snap_touched.c), the workers fetch those
 * first, in order, and nothing else until chunk_ahead_release (the box answered): what the
 * guest will likely need before its first answer then comes from several connections at
 * once, and no other fetch competes with it for the store.
 *
 * The workers keep at most AHEAD_WINDOW bytes fetched and not yet taken (a cache evicts what
 * is over its bound: a memory larger than it must not push out what the pager is about to
 * take). A chunk a worker fails on is left to the pager, whose own fetch meets the failure
 * and names it; after AHEAD_FAILS failures the read-ahead stops. Stopping it ends the
 * requests under way at once (s3's abort flag), so a restore that ends early is not held up.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"

#define AHEAD_WINDOW (64ull << 20) /* fetched ahead and not taken yet, at most */
#define AHEAD_FAILS  3

enum { AHEAD_NONE, AHEAD_BUSY, AHEAD_CACHED, AHEAD_MINE };

struct chunk_ahead {
	struct chunk_store *cs; /* the caller's: its keys and cache, read only here */
	const uint8_t (*hash)[CHUNK_HASH_LEN];
	uint64_t n, cursor;
	size_t cap;
	uint8_t *state;	   /* AHEAD_*, a byte a chunk */
	uint8_t *hot;	   /* NULL, or a byte a chunk: 1 to fetch first */
	uint64_t hot_next; /* the hot chunks before it were taken */
	bool held;	   /* only hot chunks until chunk_ahead_release */
	uint32_t *from;	   /* bytes a worker fetched of it from the store (0: none, or a hit) */
	unsigned started, fails;
	bool stop;
	int abort;	      /* (__atomic) the workers' requests end */
	uint64_t fetched;     /* chunks the workers put in the cache */
	uint64_t window;      /* bytes fetched ahead and not taken */
	uint64_t store_bytes; /* of the memory, from the store by the workers */
	uint64_t taken_bytes; /* of those, taken by the caller */
	pthread_mutex_t mu;
	pthread_cond_t changed;
	pthread_t thread[CHUNK_PAR_MAX];
	struct s3 s3[CHUNK_PAR_MAX];
	struct chunk_store wcs[CHUNK_PAR_MAX]; /* each worker's handle (its own connection) */
};

static const uint8_t ahead_zero[CHUNK_HASH_LEN];

#define AHEAD_HELD UINT64_MAX

/* The next chunk to fetch, taken: the next hot one, else (unless held: AHEAD_HELD) the next
 * from the cursor on (wrapping); n when none is left. Locked. */
static uint64_t ahead_pick(struct chunk_ahead *a)
{
	for (; a->hot && a->hot_next < a->n; a->hot_next++)
		if (a->hot[a->hot_next] && a->state[a->hot_next] == AHEAD_NONE) {
			a->state[a->hot_next] = AHEAD_BUSY;
			return a->hot_next++;
		}
	if (a->held)
		return AHEAD_HELD;
	for (uint64_t k = 0; k < a->n; k++) {
		uint64_t i = (a->cursor + k) % a->n;

		if (a->state[i] == AHEAD_NONE) {
			a->state[i] = AHEAD_BUSY;
			a->cursor = i + 1;
			return i;
		}
	}
	return a->n;
}

struct ahead_worker {
	struct chunk_ahead *a;
	unsigned w;
};

static void *ahead_main(void *arg)
{
	struct chunk_ahead *a = ((struct ahead_worker *)arg)->a;
	struct chunk_store *cs = &a->wcs[((struct ahead_worker *)arg)->w];
	uint8_t *buf = malloc(a->cap);
	size_t len;

	free(arg);
	pthread_mutex_lock(&a->mu);
	while (buf && !a->stop && a->fails < AHEAD_FAILS) {
		uint64_t i, got0;
		int err;

		if (a->window + a->cap > AHEAD_WINDOW) { /* far enough ahead: until some is taken */
			pthread_cond_wait(&a->changed, &a->mu);
			continue;
		}
		if ((i = ahead_pick(a)) == AHEAD_HELD) {
			pthread_cond_wait(&a->changed, &a->mu);
			continue;
		}
		if (i == a->n)
			break;
		a->window += a->cap;
		pthread_mutex_unlock(&a->mu);
		got0 = cs->got_bytes;
		err = chunk_get(cs, a->hash[i], buf, a->cap, &len); /* puts it in the cache */
		pthread_mutex_lock(&a->mu);
		if (err < 0) {
			a->window -= a->cap;
			a->state[i] = AHEAD_MINE; /* the pager's: it fetches it and says why */
			a->fails++;
		} else {
			a->state[i] = AHEAD_CACHED;
			a->fetched++;
			a->from[i] = (uint32_t)(cs->got_bytes - got0); /* 0: a cache hit */
			a->store_bytes += a->from[i];
		}
		pthread_cond_broadcast(&a->changed);
	}
	pthread_mutex_unlock(&a->mu);
	free(buf);
	return NULL;
}

struct chunk_ahead *chunk_ahead_start(struct chunk_store *cs, const uint8_t (*hash)[CHUNK_HASH_LEN],
				      uint64_t n, size_t cap, unsigned width, const uint8_t *hot)
{
	struct chunk_ahead *a;

	if (!cs->s3 || !cs->cache || width == 0 || n == 0)
		return NULL; /* nowhere to put what comes ahead, or nothing to fetch */
	if (width > CHUNK_PAR_MAX)
		width = CHUNK_PAR_MAX;
	if (!(a = calloc(1, sizeof(*a))) || !(a->state = calloc(n, 1)) ||
	    !(a->from = calloc(n, sizeof(*a->from))) || (hot && !(a->hot = malloc(n)))) {
		if (a) {
			free(a->state);
			free(a->from);
		}
		free(a);
		return NULL;
	}
	a->cs = cs;
	a->hash = hash;
	a->n = n;
	a->cap = cap > CHUNK_SIZE_MAX ? CHUNK_SIZE_MAX : cap;
	if (hot) {
		memcpy(a->hot, hot, n);
		a->held = true;
	}
	for (uint64_t i = 0; i < n; i++) /* zeros: nothing to fetch */
		if (memcmp(hash[i], ahead_zero, CHUNK_HASH_LEN) == 0)
			a->state[i] = AHEAD_MINE;
	pthread_mutex_init(&a->mu, NULL);
	pthread_cond_init(&a->changed, NULL);
	for (unsigned w = 0; w < width; w++) {
		struct ahead_worker *aw = malloc(sizeof(*aw));

		if (!aw)
			break;
		*aw = (struct ahead_worker){.a = a, .w = w};
		/* a handle of the caller's chunks on a connection of its own: the same prefix,
		 * keys and cache, no known set shared */
		if (s3_open(&a->s3[w], &cs->s3->conf) < 0 || chunk_store_local(&a->wcs[w]) < 0) {
			free(aw);
			s3_close(&a->s3[w]);
			break;
		}
		a->s3[w].abort = &a->abort;
		a->wcs[w].s3 = &a->s3[w];
		memcpy(a->wcs[w].prefix, cs->prefix, sizeof(cs->prefix));
		a->wcs[w].keys = cs->keys;
		a->wcs[w].cache = cs->cache;
		a->wcs[w].recipe = cs->recipe; /* (the caller's manifest outlives it) */
		a->wcs[w].nrecipes = cs->nrecipes;
		if (pthread_create(&a->thread[w], NULL, ahead_main, aw) != 0) {
			free(aw);
			chunk_store_close(&a->wcs[w]);
			s3_close(&a->s3[w]);
			break;
		}
		a->started++;
	}
	if (!a->started) {
		(void)chunk_ahead_stop(a);
		return NULL;
	}
	return a;
}

int chunk_ahead_claim(struct chunk_ahead *a, uint64_t i)
{
	int r;

	if (!a || i >= a->n)
		return 0;
	pthread_mutex_lock(&a->mu);
	a->cursor = i + 1; /* the guest goes on from here */
	while (a->state[i] == AHEAD_BUSY)
		pthread_cond_wait(&a->changed, &a->mu);
	r = a->state[i] == AHEAD_CACHED;
	if (r) { /* taken: room in the window again */
		a->window -= a->cap;
		a->taken_bytes += a->from[i];
		pthread_cond_broadcast(&a->changed);
	}
	a->state[i] = AHEAD_MINE;
	pthread_mutex_unlock(&a->mu);
	return r;
}

void chunk_ahead_release(struct chunk_ahead *a)
{
	if (!a)
		return;
	pthread_mutex_lock(&a->mu);
	a->held = false;
	pthread_cond_broadcast(&a->changed);
	pthread_mutex_unlock(&a->mu);
}

uint64_t chunk_ahead_fetched(struct chunk_ahead *a)
{
	uint64_t n;

	if (!a)
		return 0;
	pthread_mutex_lock(&a->mu);
	n = a->fetched;
	pthread_mutex_unlock(&a->mu);
	return n;
}

uint64_t chunk_ahead_unused_bytes(struct chunk_ahead *a)
{
	uint64_t n;

	if (!a)
		return 0;
	pthread_mutex_lock(&a->mu);
	n = a->store_bytes - a->taken_bytes;
	pthread_mutex_unlock(&a->mu);
	return n;
}

uint64_t chunk_ahead_stop(struct chunk_ahead *a)
{
	uint64_t fetched;

	if (!a)
		return 0;
	pthread_mutex_lock(&a->mu);
	a->stop = true;
	__atomic_store_n(&a->abort, 1, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&a->changed);
	pthread_mutex_unlock(&a->mu);
	for (unsigned w = 0; w < a->started; w++) {
		pthread_join(a->thread[w], NULL);
		chunk_store_close(&a->wcs[w]);
		s3_close(&a->s3[w]);
	}
	fetched = a->fetched;
	pthread_mutex_destroy(&a->mu);
	pthread_cond_destroy(&a->changed);
	free(a->state);
	free(a->from);
	free(a->hot);
	free(a);
	return fetched;
}
