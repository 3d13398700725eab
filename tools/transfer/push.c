/* SPDX-License-Identifier: Apache-2.0 */
/*
 * push: a local sandbox to a service (transfer.h). Its snapshot (memory and disk, taken live)
 * without its proxy's files (the service's network is the service's: the policy and the
 * credentials stay here), sealed again as such; its files as a manifest of chunks (hashed
 * here, nothing stored); the service says which chunks it lacks, gets only those, then makes
 * the sandbox from the manifest, stopped, and starts it at our request: its processes go on
 * there. The local sandbox is then removed (--keep: kept, a copy).
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <pthread.h>

#include "client.h"
#include "store.h"
#include "transfer.h"

#define PUSH_CHUNK (256u << 10)

static void note(void *ctx, const char *line)
{
	(void)ctx;
	fprintf(stderr, "sandbox-transfer: %s\n", line);
}

/* The hashes the service lacks, sorted for bsearch. */
struct missing {
	uint8_t (*h)[CHUNK_HASH_LEN];
	bool *sent;
	size_t n;
};

static int missing_parse(json_t *o, struct missing *ms)
{
	json_t *arr = json_object_get(o, "missing");
	size_t i;
	json_t *v;

	if (!json_is_array(arr))
		return -1;
	ms->n = json_array_size(arr);
	if (!(ms->h = calloc(ms->n ? ms->n : 1, CHUNK_HASH_LEN)) ||
	    !(ms->sent = calloc(ms->n ? ms->n : 1, sizeof(bool))))
		return -1;
	json_array_foreach(arr, i, v)
	{
		const char *hex = json_string_value(v);

		if (!hex || strlen(hex) != 2 * CHUNK_HASH_LEN || chunk_unhex(hex, ms->h[i]) < 0)
			return -1;
	}
	qsort(ms->h, ms->n, CHUNK_HASH_LEN, chunk_hash_cmp);
	return 0;
}

/* The snapshot in dir made fit to leave: its proxy files removed and meta.yaml sealed again
 * without them (the sandbox still has a NIC: the service gives it its own policy). */
static int strip_net(const char *dir, struct snap_meta *m, char *err, size_t len)
{
	char path[4300];

	for (unsigned i = 0; i < m->nnet; i++) {
		if (path_fmt(path, sizeof(path), "%s/%s", dir, m->net[i].file) == 0)
			unlink(path);
	}
	return snap_seal_bare(dir, m, err, len);
}

/* The chunks to send (file, chunk), handed out to TRANSFER_CONNS threads, each on a
 * connection of its own: the first failure (said) stops them all. */
struct send_item {
	unsigned file;
	uint64_t chunk;
};

struct sender {
	const struct svc *a; /* cloned by each thread */
	const char *dir;
	const struct manifest *mf;
	struct send_item *item;
	size_t n, next;
	bool failed;
	long sent;
	uint64_t bytes;
	pthread_mutex_t mu;
};

/* Chunk it of s's manifest read from its file and PUT on a: its size, or -1 said. */
static long send_one(struct sender *s, struct svc *a, const struct send_item *it, uint8_t *buf)
{
	const struct manifest_file *f = &s->mf->file[it->file];
	uint64_t off = it->chunk * s->mf->chunk_size;
	size_t want =
		f->size - off < s->mf->chunk_size ? (size_t)(f->size - off) : s->mf->chunk_size;
	char path[4300], hex[2 * CHUNK_HASH_LEN + 1], p[128];
	struct svc_answer ans;
	ssize_t got = -1;
	int fd = -1;

	if (path_fmt(path, sizeof(path), "%s/%s", s->dir, f->name) < 0 ||
	    (fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0 ||
	    (got = pread(fd, buf, want, (off_t)off)) != (ssize_t)want) {
		fprintf(stderr, "sandbox-transfer: %s: %s\n", path,
			fd < 0 || got < 0 ? strerror(errno) : "a short read");
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	chunk_hex(f->hash[it->chunk], hex);
	snprintf(p, sizeof(p), "/chunks/%s", hex);
	if (svc_call(a, "PUT", p, buf, want, "application/octet-stream", 1 << 16, &ans) < 0 ||
	    ans.status != 204) {
		fprintf(stderr, "sandbox-transfer: chunk %s: %s\n", hex, ans.error);
		svc_answer_free(&ans);
		return -1;
	}
	svc_answer_free(&ans);
	return (long)want;
}

static void *send_main(void *arg)
{
	struct sender *s = arg;
	uint8_t *buf = malloc(s->mf->chunk_size);
	struct svc a;

	if (!buf || svc_clone(&a, s->a) < 0) {
		if (buf)
			svc_close(&a); /* (the key's copy wiped) */
		fprintf(stderr, "sandbox-transfer: out of memory\n");
		pthread_mutex_lock(&s->mu);
		s->failed = true;
		pthread_mutex_unlock(&s->mu);
		free(buf);
		return NULL;
	}
	for (;;) {
		struct send_item it;
		long r;

		pthread_mutex_lock(&s->mu);
		if (s->failed || s->next == s->n) {
			pthread_mutex_unlock(&s->mu);
			break;
		}
		it = s->item[s->next++];
		pthread_mutex_unlock(&s->mu);
		r = send_one(s, &a, &it, buf);
		pthread_mutex_lock(&s->mu);
		if (r < 0) {
			s->failed = true;
		} else {
			s->sent++;
			s->bytes += (uint64_t)r;
		}
		pthread_mutex_unlock(&s->mu);
	}
	svc_close(&a);
	free(buf);
	return NULL;
}

/* Upload each chunk of mf the service lacks (each once), reading it from dir's files: the
 * count sent, or -1 said. */
static long send_chunks(struct svc *a, const char *dir, const struct manifest *mf,
			struct missing *ms, uint64_t *bytes)
{
	struct sender s = {.a = a, .dir = dir, .mf = mf};
	pthread_t t[TRANSFER_CONNS];
	unsigned nt = 0;
	size_t cap = 0;

	for (unsigned i = 0; i < mf->nfiles; i++) {
		const struct manifest_file *f = &mf->file[i];

		for (uint64_t c = 0; c < f->nchunks; c++) {
			uint8_t(*hit)[CHUNK_HASH_LEN] =
				ms->n ? bsearch(f->hash[c], ms->h, ms->n, CHUNK_HASH_LEN,
						chunk_hash_cmp)
				      : NULL;

			if (!hit || ms->sent[hit - ms->h]) /* not asked for, or sent already */
				continue;
			ms->sent[hit - ms->h] = true;
			if (s.n == cap) {
				struct send_item *n =
					realloc(s.item, (cap = cap ? 2 * cap : 256) * sizeof(*n));

				if (!n) {
					fprintf(stderr, "sandbox-transfer: out of memory\n");
					free(s.item);
					return -1;
				}
				s.item = n;
			}
			s.item[s.n++] = (struct send_item){.file = i, .chunk = c};
		}
	}
	pthread_mutex_init(&s.mu, NULL);
	while (nt < TRANSFER_CONNS && nt < s.n && pthread_create(&t[nt], NULL, send_main, &s) == 0)
		nt++;
	if (nt == 0 && s.n) /* no thread: in this one */
		send_main(&s);
	for (unsigned i = 0; i < nt; i++)
		pthread_join(t[i], NULL);
	pthread_mutex_destroy(&s.mu);
	free(s.item);
	*bytes += s.bytes;
	return s.failed ? -1 : s.sent;
}

int transfer_push(struct svc *a, const struct transfer_opts *o)
{
	struct lc_report r = {.note = note};
	struct sandbox sb;
	struct snap_take t = {.flags = 0};
	struct chunk_store cs;
	struct manifest mf;
	struct missing ms = {0};
	struct svc_answer ans = {0};
	char snap[96], dir[4200], err[512] = "", path[4300], q[200];
	char *text = NULL;
	size_t len = 0;
	uint64_t bytes = 0, total = 0, t0 = (uint64_t)time(NULL);
	long sent = -1;
	json_t *j = NULL;
	int rc = 1, e;

	if ((e = state_init()) < 0 || (e = sandbox_find(o->ref, &sb, &r)) < 0) {
		fprintf(stderr, "sandbox-transfer: no local sandbox '%s' in %s (%s)\n", o->ref,
			state_home(), strerror(-e));
		return 1;
	}
	snprintf(snap, sizeof(snap), "push-%s-%ld", sb.id, (long)getpid());
	t.name = snap;
	if ((e = sandbox_snapshot(&sb, &t, &r)) < 0) {
		fprintf(stderr, "sandbox-transfer: %s: %s\n", o->ref, r.error);
		return 1;
	}
	if (snap_dir(snap, dir, sizeof(dir)) < 0 || strip_net(dir, &t.meta, err, sizeof(err)) < 0 ||
	    snap_open(dir, &t.meta, err, sizeof(err)) < 0 || chunk_store_local(&cs) < 0 ||
	    manifest_init(&mf, PUSH_CHUNK) < 0) {
		fprintf(stderr, "sandbox-transfer: snapshot %s: %s\n", snap, err);
		remove_flat_dir(dir);
		return 1;
	}
	/* its files, hashed: state, memory, layers, meta.yaml (not the host's MAC) */
	DIR *d = opendir(dir);
	struct dirent *de;

	e = d ? 0 : -errno;
	while (d && e == 0 && (de = readdir(d))) {
		const char *n = de->d_name;

		if (strcmp(n, "state.fdt") != 0 && strcmp(n, "memory") != 0 &&
		    strcmp(n, "meta.yaml") != 0 && !snap_valid_layer_name(n))
			continue;
		if ((e = path_fmt(path, sizeof(path), "%s/%s", dir, n)) == 0 &&
		    (e = manifest_add_file(&mf, &cs, n, path)) < 0)
			fprintf(stderr, "sandbox-transfer: %s\n", cs.err);
	}
	if (d)
		closedir(d);
	if (e < 0 || !(text = manifest_encode(&mf, &len)))
		goto out;
	total = manifest_bytes(&mf);
	/* what the service lacks, that only */
	if (svc_call(a, "POST", "/chunks/missing", text, len, "text/plain", 32u << 20, &ans) < 0 ||
	    ans.status != 200 || !(j = svc_json(&ans)) || missing_parse(j, &ms) < 0) {
		fprintf(stderr, "sandbox-transfer: %s\n",
			ans.error[0] ? ans.error
				     : "the service's list of missing chunks is garbled");
		goto out;
	}
	svc_answer_free(&ans);
	if ((sent = send_chunks(a, dir, &mf, &ms, &bytes)) < 0)
		goto out;
	snprintf(q, sizeof(q), "/imports?name=%s", o->name);
	if (svc_call(a, "POST", q, text, len, "text/plain", 1 << 20, &ans) < 0 ||
	    ans.status != 201) {
		fprintf(stderr, "sandbox-transfer: %s\n", ans.error);
		goto out;
	}
	svc_answer_free(&ans);
	snprintf(q, sizeof(q), "/boxes/%s/start", o->name);
	if (svc_call(a, "POST", q, "{}", 2, NULL, 1 << 20, &ans) < 0 || ans.status != 200) {
		fprintf(stderr, "sandbox-transfer: %s\n", ans.error);
		goto out;
	}
	svc_answer_free(&ans);
	if (transfer_wait_status(a, o->name, "ready", o->wait_s) < 0)
		goto out;
	printf("pushed %s as %s: %ld chunks sent (%llu KiB of %llu MiB), ready there in %llu s\n",
	       o->ref, o->name, sent, (unsigned long long)(bytes >> 10),
	       (unsigned long long)(total >> 20), (unsigned long long)((uint64_t)time(NULL) - t0));
	rc = 0;
	if (!o->keep && (e = sandbox_rm(&sb, true, &r)) < 0)
		fprintf(stderr, "sandbox-transfer: pushed, but the local %s stays: %s\n", o->ref,
			r.error);
out:
	svc_answer_free(&ans);
	json_decref(j);
	free(ms.h);
	free(ms.sent);
	free(text);
	manifest_free(&mf);
	chunk_store_close(&cs);
	remove_flat_dir(dir);
	return rc;
}
