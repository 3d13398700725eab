/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Pushes against a store's collector (fleet.h, "lease.c"; docs/fleet.md, "The collector").
 * A push decides which chunks to skip because the store has them; a chunk no manifest names
 * yet may be one a collection is about to delete. So a push holds a lease for its whole
 * length, a collection holds its workspace's lock, and neither acts beside the other:
 *
 *   push:       create push.<ws>.<nonce>, then read gc.<ws>: while a lock is there, wait
 *               (keeping the lease) for it to go
 *   collection: create gc.<ws>, then list push.<ws>.*: any there, and it lets its lock go,
 *               waits and tries again; none, and it collects, listing them again at least
 *               every second and before every delete it makes: one there, and it stops
 *
 * Each writes before it reads, so of a push and a collection starting at once at least one
 * sees the other; a collection yields to pushes (a lifecycle worker waits for a collection
 * at most a second and one store request, not for the whole of it). A lazy restore's lease
 * (a reader's) does not wait for a lock: the manifest it reads existed when the running
 * collection marked, and its lease stops the next one.
 *
 * (<ws>: the workspace's name in hex, as a name may hold dots.) Both records are renewed
 * every stale/24 ms (5 s of the default 120 s: fleet_conf's lease_stale_ms) by a thread of
 * their own (a push blocked in a transfer still holds its lease). One whose revision has not
 * moved for stale ms by the observer's own clock (never another host's) is taken for a dead
 * holder's and deleted on that revision. A holder acts (a manifest written, a chunk deleted)
 * only while its record was renewed within stale/4 ms (30 s), and every such act is bounded by
 * the store's request timeout (60 s): fresh + timeout < stale, so nothing is done on a record
 * another host may have judged dead. The holder's time of a write is taken before it is sent,
 * an observer's after its read came back, both on CLOCK_BOOTTIME (which a host's suspend does
 * not stop), so neither round trip eats the margin.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/random.h>

#include <nats/nats.h>

#include "fleet.h"
#include "fleet_int.h"

#define LEASE_POLL_MS	  500  /* how often a waiter reads what it waits for */
#define LEASE_RECHECK_MS  1000 /* a collection's listing of pushes, at least this often */
#define LEASE_WATCH_MS	  5000
#define LEASE_SEEN_MAX	  4096 /* pushes of one workspace a collection waits for at once */
#define LEASE_VAL_MAX	  160
#define LEASE_BUCKET_TTL  (3600ll * 1000) /* a deleted record's marker, kept this long */
#define LEASE_BUCKET_NAME "store_leases"

static unsigned lease_threads; /* renewing or ending (__atomic): fleet_lease_quiesce */

struct fleet_lease {
	struct fleet *f;
	void *kv;
	char key[FLEET_KEY_MAX + 1];
	char val[LEASE_VAL_MAX];
	char pushes[FLEET_KEY_MAX + 1]; /* a lock's: the pattern of its workspace's pushes */
	unsigned renew_ms, fresh_ms;
	uint64_t rev;		   /* (mu) */
	uint64_t renewed_ms;	   /* the last write that held, sent at (__atomic) */
	bool lost;		   /* a renewal found the record gone or another's (__atomic) */
	bool stop, keep, detached; /* (mu) */
	uint64_t checked_ms;	   /* a lock's last listing of pushes (its holder's thread) */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t thread;
};

static uint64_t lease_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int lease_say(char *err, size_t len, int ret, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int lease_say(char *err, size_t len, int ret, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
	return ret;
}

static unsigned lease_stale(const struct fleet *f)
{
	return f->conf.lease_stale_ms ? f->conf.lease_stale_ms : FLEET_LEASE_STALE_MS;
}

int fleet_ws_hex(const char *ws, char out[2 * FLEET_WS_MAX + 1])
{
	size_t n = strnlen(ws, FLEET_WS_MAX + 1);

	if (n == 0 || n > FLEET_WS_MAX)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", (unsigned char)ws[i]);
	return 0;
}

/* Delete key on its revision rev (never rev 0: that would be any revision); what fails (moved
 * on, no answer) goes stale by itself. */
static void drop_rev(struct fleet *f, void *kv, const char *key, uint64_t rev)
{
	if (rev == 0 || fleet_kv_delete_rev(f, kv, key, rev) < 0)
		return;
}

int fleet_lease_bucket(struct fleet *f, struct fleet_kv *b)
{
	natsStatus s = NATS_OK;

	for (uint64_t until = fleet_now_ms() + FLEET_RETRY_MS;;) {
		s = fleet_bucket(f, LEASE_BUCKET_NAME, LEASE_BUCKET_TTL, LEASE_VAL_MAX + 512,
				 &b->kv);
		if (s == NATS_OK)
			return 0;
		if (fleet_now_ms() >= until)
			break;
		nats_Sleep(100);
	}
	return fleet_fail(f, -EIO, "fleet: the bucket %s: %s", LEASE_BUCKET_NAME,
			  natsStatus_GetText(s));
}

/* One renewal of l (not under mu). */
static void lease_renew(struct fleet_lease *l, uint64_t rev)
{
	uint64_t r = 0, sent = lease_now();
	natsStatus s = kvStore_UpdateString(&r, (kvStore *)l->kv, l->key, l->val, rev);
	char now[LEASE_VAL_MAX];
	uint64_t now_rev = 0;
	int e;

	if (s == NATS_OK) {
		pthread_mutex_lock(&l->mu);
		l->rev = r;
		pthread_mutex_unlock(&l->mu);
		__atomic_store_n(&l->renewed_ms, sent, __ATOMIC_RELEASE);
		return;
	}
	/* no answer, or not on that revision: the leader's read tells */
	e = fleet_kv_get(l->f, l->kv, l->key, now, sizeof(now), &now_rev);
	if (e == 0 && strcmp(now, l->val) == 0) {
		if (now_rev != rev) { /* ours landed, its answer lost */
			pthread_mutex_lock(&l->mu);
			l->rev = now_rev;
			pthread_mutex_unlock(&l->mu);
			__atomic_store_n(&l->renewed_ms, sent, __ATOMIC_RELEASE);
		}
		return; /* (else it did not land: again at the next turn, going stale meanwhile) */
	}
	if (e == -ENOENT || e == 0 || e == -EMSGSIZE) /* gone, or another's: lost for good */
		__atomic_store_n(&l->lost, true, __ATOMIC_RELEASE);
}

static void lease_destroy(struct fleet_lease *l)
{
	pthread_mutex_destroy(&l->mu);
	pthread_cond_destroy(&l->cv);
	free(l);
}

/* The record renewed until stopped; then deleted (unless lost, or kept: an abandoned one). A
 * detached lease is freed here. */
static void *lease_main(void *arg)
{
	struct fleet_lease *l = arg;
	bool keep, detached;
	uint64_t rev;

	pthread_mutex_lock(&l->mu);
	for (;;) {
		struct timespec until;

		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_sec += l->renew_ms / 1000;
		until.tv_nsec += (long)(l->renew_ms % 1000) * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		while (!l->stop && pthread_cond_timedwait(&l->cv, &l->mu, &until) != ETIMEDOUT)
			;
		if (l->stop || __atomic_load_n(&l->lost, __ATOMIC_ACQUIRE))
			break;
		rev = l->rev;
		pthread_mutex_unlock(&l->mu);
		lease_renew(l, rev);
		pthread_mutex_lock(&l->mu);
	}
	while (!l->stop) /* lost: nothing to renew, waiting for its end */
		pthread_cond_wait(&l->cv, &l->mu);
	keep = l->keep;
	detached = l->detached;
	rev = l->rev;
	pthread_mutex_unlock(&l->mu);
	if (!keep && !__atomic_load_n(&l->lost, __ATOMIC_ACQUIRE))
		drop_rev(l->f, l->kv, l->key, rev); /* on its revision: never another's record */
	if (detached)
		lease_destroy(l);
	__atomic_sub_fetch(&lease_threads, 1, __ATOMIC_ACQ_REL);
	return NULL;
}

/* key made create-only with a value naming this host and a nonce, and renewed from now on. */
static int lease_make(struct fleet *f, void *kv, const char *key, struct fleet_lease **out)
{
	struct fleet_lease *l = calloc(1, sizeof(*l));
	uint8_t nonce[8];
	uint64_t sent;
	int err;

	*out = NULL;
	if (!l)
		return -ENOMEM;
	if (getrandom(nonce, sizeof(nonce), 0) != sizeof(nonce)) {
		free(l);
		return -EIO;
	}
	l->f = f;
	l->kv = kv;
	l->renew_ms = lease_stale(f) / 24;
	l->fresh_ms = lease_stale(f) / 4;
	snprintf(l->key, sizeof(l->key), "%s", key);
	snprintf(l->val, sizeof(l->val), "%.63s %02x%02x%02x%02x%02x%02x%02x%02x",
		 f->conf.host[0] ? f->conf.host : "-", nonce[0], nonce[1], nonce[2], nonce[3],
		 nonce[4], nonce[5], nonce[6], nonce[7]);
	sent = lease_now();
	if ((err = fleet_kv_create(f, kv, l->key, l->val, &l->rev)) < 0) {
		free(l);
		return err;
	}
	l->renewed_ms = sent;
	pthread_mutex_init(&l->mu, NULL);
	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&l->cv, &ca);
	pthread_condattr_destroy(&ca);
	__atomic_add_fetch(&lease_threads, 1, __ATOMIC_ACQ_REL);
	if (pthread_create(&l->thread, NULL, lease_main, l) != 0) {
		__atomic_sub_fetch(&lease_threads, 1, __ATOMIC_ACQ_REL);
		drop_rev(f, kv, l->key, l->rev);
		lease_destroy(l);
		return -EAGAIN;
	}
	*out = l;
	return 0;
}

static void lease_stop(struct fleet_lease *l, bool keep, bool detach)
{
	pthread_t t;

	pthread_mutex_lock(&l->mu);
	t = l->thread; /* (a detached lease may be freed by its thread once this unlocks) */
	l->stop = true;
	l->keep = keep;
	l->detached = detach;
	pthread_cond_signal(&l->cv);
	pthread_mutex_unlock(&l->mu);
	if (detach) {
		pthread_detach(t);
		return;
	}
	pthread_join(t, NULL);
	lease_destroy(l);
}

void fleet_lease_end(struct fleet_lease *l)
{
	if (l)
		lease_stop(l, false, false);
}

void fleet_lease_end_async(struct fleet_lease *l)
{
	if (l)
		lease_stop(l, false, true);
}

bool fleet_lease_quiesce(int wait_ms)
{
	uint64_t until = lease_now() + (uint64_t)(wait_ms > 0 ? wait_ms : 0);

	while (__atomic_load_n(&lease_threads, __ATOMIC_ACQUIRE)) {
		if (lease_now() >= until)
			return false;
		nats_Sleep(50);
	}
	return true;
}

void fleet_lease_abandon(struct fleet_lease *l)
{
	if (l)
		lease_stop(l, true, false);
}

bool fleet_lease_fresh(struct fleet_lease *l)
{
	uint64_t at = __atomic_load_n(&l->renewed_ms, __ATOMIC_ACQUIRE);

	return !__atomic_load_n(&l->lost, __ATOMIC_ACQUIRE) && lease_now() - at < l->fresh_ms;
}

/* Wait until key holds nothing: 0; a value whose revision stays for the stale time is
 * deleted on it. -ETIMEDOUT at until (lease_now's ms), -EIO when the bucket does not answer.
 * holder: the value last seen. */
static int await_gone(struct fleet *f, void *kv, const char *key, uint64_t until,
		      char holder[LEASE_VAL_MAX])
{
	uint64_t seen_rev = 0, seen_at = 0;

	for (;;) {
		uint64_t rev = 0;
		int e = fleet_kv_get(f, kv, key, holder, LEASE_VAL_MAX, &rev);
		uint64_t now = lease_now(); /* after the read: what it saw was there by now */

		if (e == -ENOENT)
			return 0;
		if (e < 0 && e != -EMSGSIZE)
			return -EIO;
		if (rev != seen_rev) {
			seen_rev = rev;
			seen_at = now;
		} else if (now - seen_at >= lease_stale(f)) {
			drop_rev(f, kv, key, rev); /* its holder is gone */
			continue;
		}
		if (now >= until)
			return -ETIMEDOUT;
		nats_Sleep(LEASE_POLL_MS);
	}
}

int fleet_lease_push(struct fleet *f, void *kv, const char *ws, bool reader, int wait_ms,
		     struct fleet_lease **out, char *err, size_t err_len)
{
	char key[FLEET_KEY_MAX + 1], lock[FLEET_KEY_MAX + 1], holder[LEASE_VAL_MAX] = "";
	char wsx[2 * FLEET_WS_MAX + 1];
	uint64_t until = lease_now() + (uint64_t)(wait_ms > 0 ? wait_ms : 0);
	uint8_t nonce[8];
	struct fleet_lease *l;
	int e;

	*out = NULL;
	if (fleet_ws_hex(ws, wsx) < 0)
		return lease_say(err, err_len, -EINVAL, "not a workspace's name: %.80s", ws);
	if (getrandom(nonce, sizeof(nonce), 0) != sizeof(nonce))
		return lease_say(err, err_len, -EIO, "no random bytes for a lease");
	snprintf(key, sizeof(key), "push.%s.%02x%02x%02x%02x%02x%02x%02x%02x", wsx, nonce[0],
		 nonce[1], nonce[2], nonce[3], nonce[4], nonce[5], nonce[6], nonce[7]);
	if ((e = lease_make(f, kv, key, &l)) < 0)
		return lease_say(err, err_len, e == -EEXIST ? -EIO : e, "the push's lease %s: %s",
				 key, e == -EEXIST ? "taken" : f->err);
	if (reader) {
		*out = l;
		return 0;
	}
	/* then the lock: none, and no collection starts without seeing this lease; one, and it
	 * stops at its next look, as it sees this lease */
	snprintf(lock, sizeof(lock), "gc.%s", wsx);
	if ((e = await_gone(f, kv, lock, until, holder)) == -ETIMEDOUT) {
		fleet_lease_end(l);
		return lease_say(err, err_len, -EBUSY,
				 "a collection of the workspace's chunks runs (%s): the push "
				 "waited %d ms",
				 holder, wait_ms);
	}
	if (e < 0) {
		fleet_lease_end(l);
		return lease_say(err, err_len, e, "the collector's lock %s: %s", lock, f->err);
	}
	*out = l;
	return 0;
}

struct lease_seen {
	char key[FLEET_KEY_MAX + 1];
	uint64_t rev, at;
	bool here; /* in the last listing */
};

/* The keys of pattern with their revisions into seen (each once; a new one, or a new
 * revision, seen at the time the listing ended); *n 0 means none. seen NULL: only counted. */
static int list_pushes(struct fleet *f, void *kv, const char *pattern, struct lease_seen *seen,
		       unsigned *n)
{
	kvWatchOptions o;
	kvWatcher *w = NULL;
	natsStatus s;
	unsigned count = 0;

	kvWatchOptions_Init(&o);
	o.IgnoreDeletes = true;
	o.MetaOnly = true;
	for (unsigned i = 0; seen && i < *n; i++)
		seen[i].here = false;
	if ((s = kvStore_Watch(&w, (kvStore *)kv, pattern, &o)) != NATS_OK)
		return fleet_fail(f, -EIO, "fleet: %s: %s", pattern, natsStatus_GetText(s));
	for (;;) {
		kvEntry *e = NULL;

		if ((s = kvWatcher_Next(&e, w, LEASE_WATCH_MS)) != NATS_OK) {
			kvWatcher_Destroy(w);
			return fleet_fail(f, -EIO, "fleet: %s: %s", pattern, natsStatus_GetText(s));
		}
		if (!e)
			break; /* every present value listed */
		const char *key = kvEntry_Key(e);
		uint64_t rev = kvEntry_Revision(e);
		unsigned i = 0;

		count++;
		while (seen && i < *n && strcmp(seen[i].key, key) != 0)
			i++;
		if (!seen || strlen(key) > FLEET_KEY_MAX) {
			kvEntry_Destroy(e);
			continue;
		}
		if (i == *n) {
			if (*n == LEASE_SEEN_MAX) {
				kvEntry_Destroy(e);
				continue; /* waited for next time round */
			}
			snprintf(seen[i].key, sizeof(seen[i].key), "%s", key);
			seen[i].rev = rev;
			seen[i].at = 0;
			(*n)++;
		} else if (seen[i].rev != rev) {
			seen[i].rev = rev;
			seen[i].at = 0;
		}
		seen[i].here = true;
		kvEntry_Destroy(e);
	}
	kvWatcher_Destroy(w);
	if (!seen) {
		*n = count;
		return 0;
	}
	/* the gone ones forgotten; the new ones seen now, after the listing */
	uint64_t now = lease_now();
	unsigned k = 0;

	for (unsigned i = 0; i < *n; i++)
		if (seen[i].here) {
			if (!seen[i].at)
				seen[i].at = now;
			seen[k++] = seen[i];
		}
	*n = k;
	return 0;
}

int fleet_lease_collect(struct fleet *f, void *kv, const char *ws, int wait_ms,
			struct fleet_lease **out, char *err, size_t err_len)
{
	char lock[FLEET_KEY_MAX + 1], pattern[FLEET_KEY_MAX + 1], holder[LEASE_VAL_MAX] = "";
	char wsx[2 * FLEET_WS_MAX + 1];
	uint64_t until = lease_now() + (uint64_t)(wait_ms > 0 ? wait_ms : 0);
	struct lease_seen *seen;
	struct fleet_lease *l = NULL;
	unsigned n = 0;
	int e;

	*out = NULL;
	if (fleet_ws_hex(ws, wsx) < 0)
		return lease_say(err, err_len, -EINVAL, "not a workspace's name: %.80s", ws);
	snprintf(lock, sizeof(lock), "gc.%s", wsx);
	snprintf(pattern, sizeof(pattern), "push.%s.*", wsx);
	if (!(seen = calloc(LEASE_SEEN_MAX, sizeof(*seen))))
		return lease_say(err, err_len, -ENOMEM, "out of memory");
	for (;;) {
		/* the lock: another collection's waited for (a dead one's goes stale) */
		while ((e = lease_make(f, kv, lock, &l)) == -EEXIST) {
			int w = await_gone(f, kv, lock, until, holder);

			if (w == -ETIMEDOUT) {
				e = lease_say(err, err_len, -EBUSY,
					      "another collection of the workspace runs (%s)",
					      holder);
				goto out;
			}
			if (w < 0) {
				e = lease_say(err, err_len, w, "the lock %s: %s", lock, f->err);
				goto out;
			}
		}
		if (e < 0) {
			lease_say(err, err_len, e, "the lock %s: %s", lock, f->err);
			goto out;
		}
		/* then the pushes: none, and it collects; some, and it lets them go on */
		if ((e = list_pushes(f, kv, pattern, seen, &n)) < 0) {
			lease_say(err, err_len, e, "%s", f->err);
			goto out;
		}
		if (n == 0) {
			snprintf(l->pushes, sizeof(l->pushes), "%s", pattern);
			l->checked_ms = lease_now();
			*out = l;
			free(seen);
			return 0;
		}
		fleet_lease_end(l);
		l = NULL;
		uint64_t now = lease_now();

		for (unsigned i = 0; i < n; i++)
			if (now - seen[i].at >= lease_stale(f))
				drop_rev(f, kv, seen[i].key, seen[i].rev); /* a dead push's */
		if (now >= until) {
			e = lease_say(err, err_len, -EBUSY,
				      "%u push%s of the workspace still run%s after %d ms", n,
				      n == 1 ? "" : "es", n == 1 ? "s" : "", wait_ms);
			goto out;
		}
		nats_Sleep(LEASE_POLL_MS);
	}
out:
	fleet_lease_end(l);
	free(seen);
	return e;
}

int fleet_lease_sweep_ok(struct fleet_lease *l)
{
	unsigned n = 0;

	if (!fleet_lease_fresh(l))
		return -ECANCELED;
	if (lease_now() - l->checked_ms < LEASE_RECHECK_MS)
		return 0;
	if (list_pushes(l->f, l->kv, l->pushes, NULL, &n) < 0)
		return -EIO;
	l->checked_ms = lease_now();
	return n ? -EAGAIN : 0;
}
