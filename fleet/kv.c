/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The fleet's records beside placement (fleet.h, "kv.c"): buckets of small values (a name's
 * box, an API key's hash), read from their stream's leader, and watchers that follow a bucket
 * on a thread of their own, so that every host keeps a copy it reads without a round trip.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <nats/nats.h>

#include "fleet.h"
#include "fleet_int.h"

/* no answer: asked again, 100 ms apart, for up to FLEET_RETRY_MS */
#define KV_RETRY_MS FLEET_RETRY_MS

/* After a try that had no answer: whether to try again (after a pause) before until. */
static bool kv_again(uint64_t until)
{
	if (fleet_now_ms() >= until)
		return false;
	nats_Sleep(100);
	return true;
}

bool fleet_key_ok(const char *k)
{
	size_t n = strnlen(k, FLEET_KEY_MAX + 1);

	if (n == 0 || n > FLEET_KEY_MAX || k[0] == '.' || k[n - 1] == '.')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((k[i] >= 'a' && k[i] <= 'z') || (k[i] >= 'A' && k[i] <= 'Z') ||
		      (k[i] >= '0' && k[i] <= '9') || strchr("-_=/.", k[i])) ||
		    (k[i] == '.' && k[i + 1] == '.'))
			return false;
	return true;
}

int fleet_kv_open(struct fleet *f, const char *name, size_t val_max, struct fleet_kv *b)
{
	natsStatus s = NATS_OK;

	b->kv = NULL;
	if (val_max < 64 || val_max > FLEET_VAL_MAX)
		return fleet_fail(f, -EINVAL, "fleet: a bucket's values are 64 to %d bytes",
				  FLEET_VAL_MAX);
	for (uint64_t until = fleet_now_ms() + KV_RETRY_MS;;) {
		s = fleet_bucket(f, name, 0, (int32_t)(val_max + 512), &b->kv);
		if (s == NATS_OK)
			return 0;
		if (!kv_again(until))
			break;
	}
	return fleet_fail(f, -EIO, "fleet: the bucket %s: %s", name, natsStatus_GetText(s));
}

void fleet_kv_close(struct fleet_kv *b)
{
	if (b->kv)
		kvStore_Destroy((kvStore *)b->kv);
	b->kv = NULL;
}

static int kv_args(struct fleet *f, const char *key, const char *val)
{
	if (!fleet_key_ok(key))
		return fleet_fail(f, -EINVAL, "fleet: not a record key");
	if (val && strlen(val) > FLEET_VAL_MAX)
		return fleet_fail(f, -EMSGSIZE, "fleet: a record's value is at most %d bytes",
				  FLEET_VAL_MAX);
	return 0;
}

int fleet_kv_get(struct fleet *f, void *kv, const char *key, char *val, size_t cap, uint64_t *rev)
{
	kvEntry *e = NULL;
	natsStatus s = NATS_OK;
	int err = kv_args(f, key, NULL), len;

	if (err < 0)
		return err;
	for (uint64_t until = fleet_now_ms() + KV_RETRY_MS;;) {
		s = kvStore_Get(&e, (kvStore *)kv, key);
		if (s == NATS_OK || s == NATS_NOT_FOUND)
			break;
		if (!kv_again(until))
			break;
	}
	if (s == NATS_NOT_FOUND)
		return -ENOENT;
	if (s != NATS_OK)
		return fleet_fail(f, -EIO, "fleet: %s: %s", key, natsStatus_GetText(s));
	len = kvEntry_ValueLen(e);
	if (rev) /* (a value too long for cap has its revision too) */
		*rev = kvEntry_Revision(e);
	if (len < 0 || (size_t)len >= cap) {
		kvEntry_Destroy(e);
		return fleet_fail(f, -EMSGSIZE, "fleet: %s: a value over %zu bytes", key, cap);
	}
	memcpy(val, kvEntry_Value(e), (size_t)len);
	val[len] = 0;
	kvEntry_Destroy(e);
	return 0;
}

int fleet_kv_create(struct fleet *f, void *kv, const char *key, const char *val, uint64_t *rev)
{
	uint64_t r = 0;
	size_t vl = val ? strlen(val) : 0;
	char *now = malloc(vl + 2);
	int err = kv_args(f, key, val);

	if (err < 0 || !now) {
		free(now);
		return err < 0 ? err : -ENOMEM;
	}
	for (uint64_t until = fleet_now_ms() + KV_RETRY_MS;;) {
		natsStatus s = kvStore_CreateString(&r, (kvStore *)kv, key, val);

		if (s == NATS_OK) {
			if (rev)
				*rev = r;
			free(now);
			return 0;
		}
		/* "wrong last sequence" (it holds a value), or no answer: the leader's read tells;
		 * a create that did land before its answer was lost reads as ours (our value: the
		 * values these buckets hold name what claimed them, a box id) */
		err = fleet_kv_get(f, kv, key, now, vl + 2, &r);
		if (err == 0 && strcmp(now, val) == 0) {
			if (rev)
				*rev = r;
			free(now);
			return 0;
		}
		if (err == 0 || err == -EMSGSIZE) {
			free(now);
			return -EEXIST;
		}
		if (err != -ENOENT) {
			free(now);
			return err;
		}
		if (!kv_again(until))
			break;
	}
	free(now);
	return fleet_fail(f, -EIO, "fleet: %s: the bucket did not answer", key);
}

int fleet_kv_put(struct fleet *f, void *kv, const char *key, const char *val)
{
	uint64_t r;
	natsStatus s = NATS_OK;
	int err = kv_args(f, key, val);

	if (err < 0)
		return err;
	for (uint64_t until = fleet_now_ms() + KV_RETRY_MS;;) {
		s = kvStore_PutString(&r, (kvStore *)kv, key, val);
		if (s == NATS_OK)
			return 0;
		if (!kv_again(until))
			break;
	}
	return fleet_fail(f, -EIO, "fleet: %s: %s", key, natsStatus_GetText(s));
}

int fleet_kv_update(struct fleet *f, void *kv, const char *key, const char *val, uint64_t rev)
{
	uint64_t r;
	char now[8];
	uint64_t now_rev = 0;
	int err = kv_args(f, key, val);

	if (err < 0)
		return err;
	if (kvStore_UpdateString(&r, (kvStore *)kv, key, val, rev) == NATS_OK)
		return 0;
	/* it moved on (another writer), or no answer: the leader's read tells */
	err = fleet_kv_get(f, kv, key, now, sizeof(now), &now_rev);
	if ((err == 0 || err == -EMSGSIZE) && now_rev != rev)
		return -ESTALE;
	return fleet_fail(f, -EIO, "fleet: %s: the bucket did not answer", key);
}

int fleet_kv_delete(struct fleet *f, void *kv, const char *key)
{
	natsStatus s = NATS_OK;
	int err = kv_args(f, key, NULL);

	if (err < 0)
		return err;
	for (uint64_t until = fleet_now_ms() + KV_RETRY_MS;;) {
		s = kvStore_Delete((kvStore *)kv, key);
		if (s == NATS_OK)
			return 0;
		if (!kv_again(until))
			break;
	}
	return fleet_fail(f, -EIO, "fleet: %s: %s", key, natsStatus_GetText(s));
}

int fleet_kv_delete_rev(struct fleet *f, void *kv, const char *key, uint64_t rev)
{
	char subject[FLEET_KEY_MAX + 96];
	natsMsg *m = NULL;
	jsPubOptions po;
	jsErrCode jerr = 0;
	natsStatus s;
	int err = kv_args(f, key, NULL);

	if (err < 0)
		return err;
	/* a delete marker, as kvStore_Delete puts one, but only onto that revision */
	snprintf(subject, sizeof(subject), "$KV.%s.%s", kvStore_Bucket((kvStore *)kv), key);
	jsPubOptions_Init(&po);
	po.ExpectLastSubjectSeq = rev;
	s = natsMsg_Create(&m, subject, NULL, NULL, 0);
	if (s == NATS_OK)
		s = natsMsgHeader_Set(m, "KV-Operation", "DEL");
	for (uint64_t until = fleet_now_ms() + KV_RETRY_MS; s == NATS_OK;) {
		jerr = 0;
		s = js_PublishMsg(NULL, (jsCtx *)f->js, m, &po, &jerr);
		if (s != NATS_NO_RESPONDERS || !kv_again(until))
			break;
		s = NATS_OK;
	}
	natsMsg_Destroy(m);
	if (s == NATS_OK)
		return 0;
	if (jerr == JSStreamWrongLastSequenceErr)
		return -ESTALE;
	return fleet_fail(f, -EIO, "fleet: %s: %s", key, natsStatus_GetText(s));
}

/* ---- watchers ---- */

struct fleet_watch {
	kvStore *kv;
	fleet_watch_fn fn;
	void *arg;
	pthread_t thread;
	atomic_bool stop;
	kvWatcher *w;
	pthread_mutex_t lock; /* w, against fleet_watch_stop */
};

static void *watch_thread(void *arg)
{
	struct fleet_watch *fw = arg;

	while (!atomic_load(&fw->stop)) {
		kvWatcher *w = NULL;

		if (kvStore_WatchAll(&w, fw->kv, NULL) != NATS_OK) {
			nats_Sleep(200); /* the cluster is away: again */
			continue;
		}
		pthread_mutex_lock(&fw->lock);
		fw->w = w;
		pthread_mutex_unlock(&fw->lock);
		while (!atomic_load(&fw->stop)) {
			kvEntry *e = NULL;
			natsStatus s = kvWatcher_Next(&e, w, 1000);

			if (s == NATS_TIMEOUT)
				continue;
			if (s != NATS_OK)
				break; /* stopped, or the watcher failed: made anew */
			if (!e) {
				fw->fn(fw->arg, NULL, NULL, 0); /* the present values are all in */
				continue;
			}
			const char *key = kvEntry_Key(e);
			int len = kvEntry_ValueLen(e);

			if (kvEntry_Operation(e) != kvOp_Put)
				fw->fn(fw->arg, key, NULL, 0);
			else if (len >= 0 && len <= FLEET_VAL_MAX)
				fw->fn(fw->arg, key, kvEntry_ValueString(e), (size_t)len);
			kvEntry_Destroy(e);
		}
		pthread_mutex_lock(&fw->lock);
		fw->w = NULL;
		pthread_mutex_unlock(&fw->lock);
		kvWatcher_Destroy(w);
	}
	return NULL;
}

int fleet_watch_start(struct fleet *f, void *kv, fleet_watch_fn fn, void *arg,
		      struct fleet_watch **out)
{
	struct fleet_watch *fw = calloc(1, sizeof(*fw));

	if (!fw)
		return fleet_fail(f, -ENOMEM, "fleet: out of memory");
	fw->kv = kv;
	fw->fn = fn;
	fw->arg = arg;
	pthread_mutex_init(&fw->lock, NULL);
	if (pthread_create(&fw->thread, NULL, watch_thread, fw) != 0) {
		pthread_mutex_destroy(&fw->lock);
		free(fw);
		return fleet_fail(f, -EAGAIN, "fleet: cannot start a watcher");
	}
	*out = fw;
	return 0;
}

void fleet_watch_stop(struct fleet_watch *fw)
{
	if (!fw)
		return;
	atomic_store(&fw->stop, true);
	pthread_mutex_lock(&fw->lock);
	if (fw->w)
		kvWatcher_Stop(fw->w);
	pthread_mutex_unlock(&fw->lock);
	pthread_join(fw->thread, NULL);
	pthread_mutex_destroy(&fw->lock);
	free(fw);
}
