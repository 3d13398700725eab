/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The job cache (docs/jobspec.md, "The cache"): after the step a spec's `cache:` names, the
 * job's sandbox is snapshotted as ".job-<key>"; the next run whose key is the same restores
 * that snapshot instead of creating, copying its files and running those steps.
 *
 * The key is a SHA-256 of everything that state depends on: the ready snapshot's key of the
 * create (ready_name: the image's content hash, the VMM binary and state format, this host's
 * CPU, memory, vCPUs, disk size, kernel command line, network or none), the proxy's policy
 * words (secrets' hosts, headers and variable names; their values are not in the state),
 * the job's env, each of files:' entries with the names, modes and contents of everything
 * copied, and each step up to the cached one (name, script, env, workdir, timeout,
 * continue-on-error). Entries are framed by their lengths, so no two specs give one text.
 *
 * The snapshots are ordinary hidden snapshots (`snapshots --all` lists them); their
 * directories' mtimes say when each was last used, and job_cache_trim removes the least
 * recently used beyond the budget, never one a sandbox runs from.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "jobs.h"

#define CACHE_FILES_MAX 100000u /* as job_files.c copies at most */
#define CACHE_DEPTH	64u

struct key {
	EVP_MD_CTX *ctx;
	unsigned files;
	int err;
};

/* One field: its tag, its length, its bytes. */
static void key_put(struct key *k, const char *tag, const void *data, size_t len)
{
	char head[64];
	int n = snprintf(head, sizeof(head), "%s %zu:", tag, len);

	EVP_DigestUpdate(k->ctx, head, (size_t)n);
	EVP_DigestUpdate(k->ctx, data, len);
}

static void key_str(struct key *k, const char *tag, const char *s)
{
	key_put(k, tag, s ? s : "", s ? strlen(s) : 0);
}

static void key_num(struct key *k, const char *tag, uint64_t v)
{
	char buf[24];
	int n = snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);

	key_put(k, tag, buf, (size_t)n);
}

static void key_file(struct key *k, int dfd, const char *name, const struct stat *st)
{
	static char buf[1 << 16];
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	ssize_t n;

	uint64_t got = 0;

	key_num(k, "mode", st->st_mode & 07777);
	key_num(k, "size", (uint64_t)st->st_size);
	if (fd < 0) {
		k->err = -errno;
		return;
	}
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		EVP_DigestUpdate(k->ctx, buf, (size_t)n);
		got += (uint64_t)n;
	}
	if (n < 0)
		k->err = -errno;
	close(fd);
	/* what was read, not what stat said: a file that grew or shrank meanwhile is framed by
	 * its real length (and differs from its size, so it is keyed apart) */
	key_num(k, "read", got);
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A directory's entries in name order, as job_files.c copies them (its symlinks and others
 * skipped, so they are named but not read). */
static void key_dir(struct key *k, int dfd, unsigned depth)
{
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	DIR *d = fdopendir(dfd);

	if (!d) {
		k->err = -errno;
		close(dfd);
		return;
	}
	while (!k->err && (de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (n == cap) {
			char **g = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof(*names));

			if (!g) {
				k->err = -ENOMEM;
				break;
			}
			names = g;
		}
		if (!(names[n] = strdup(de->d_name)))
			k->err = -ENOMEM;
		else
			n++;
	}
	if (names)
		qsort(names, n, sizeof(*names), name_cmp);
	for (size_t i = 0; i < n && !k->err; i++) {
		struct stat st;

		if (++k->files > CACHE_FILES_MAX || depth > CACHE_DEPTH) {
			k->err = -E2BIG;
			break;
		}
		if (fstatat(dirfd(d), names[i], &st, AT_SYMLINK_NOFOLLOW) < 0) {
			k->err = -errno;
			break;
		}
		key_str(k, "name", names[i]);
		if (S_ISDIR(st.st_mode)) {
			int sub = openat(dirfd(d), names[i],
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			key_str(k, "dir", "");
			if (sub < 0)
				k->err = -errno;
			else
				key_dir(k, sub, depth + 1);
			key_str(k, "end", "");
		} else if (S_ISREG(st.st_mode)) {
			key_str(k, "file", "");
			key_file(k, dirfd(d), names[i], &st);
		} else {
			key_str(k, "skipped", "");
		}
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	closedir(d);
}

/* One files: entry, resolved as job_files.c resolves it. */
static void key_files_entry(struct key *k, const char *base, const struct job_file *f)
{
	char path[8200], *real;
	struct stat st;

	key_str(k, "src", f->src);
	key_str(k, "dst", f->dst);
	if (path_fmt(path, sizeof(path), "%s/%s", base, f->src) < 0 ||
	    !(real = realpath(path, NULL))) {
		k->err = -ENOENT;
		return;
	}
	if (stat(real, &st) < 0) {
		k->err = -errno;
	} else if (S_ISDIR(st.st_mode)) {
		int dfd = open(real, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		if (dfd < 0)
			k->err = -errno;
		else
			key_dir(k, dfd, 0);
	} else if (S_ISREG(st.st_mode)) {
		char *slash = strrchr(real, '/');
		int dfd;

		*slash = '\0';
		dfd = open(slash == real ? "/" : real, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd < 0) {
			k->err = -errno;
		} else {
			key_file(k, dfd, slash + 1, &st);
			close(dfd);
		}
	} else {
		k->err = -EINVAL;
	}
	free(real);
}

/* The cache snapshot's name (".job-<key>") for the state after js->cache_step of a job
 * created with `co` (the key: the top of this file). -errno when there is none to be had
 * (said: the job runs uncached). */
static int job_cache_name(const struct jobspec *js, const struct create_opts *co, char *out,
			  size_t len)
{
	char vmm[4200], ready[NAME_MAX_LEN + 2];
	struct key k = {0};
	uint8_t md[32];
	unsigned mdlen = 0;
	int err;

	if ((err = find_vmm(vmm, sizeof(vmm))) < 0 || !strchr(vmm, '/') ||
	    (err = ready_name(co, vmm, ready, sizeof(ready))) < 0) {
		errmsg("cache: cannot key the image '%s' and the VMM (%s): running uncached",
		       co->image, strerror(err < 0 ? -err : ENOENT));
		return err < 0 ? err : -ENOENT;
	}
	if (!(k.ctx = EVP_MD_CTX_new()) || !EVP_DigestInit_ex(k.ctx, EVP_sha256(), NULL)) {
		EVP_MD_CTX_free(k.ctx);
		return -ENOMEM;
	}
	key_str(&k, "job-cache", "1");
	key_str(&k, "ready", ready);
	key_num(&k, "network", !co->no_network);
	for (unsigned i = 0; i < co->nnet_opts; i++)
		key_str(&k, "policy", co->net_opts[i]);
	for (unsigned i = 0; i < js->nenv; i++)
		key_str(&k, "env", js->env[i]);
	for (unsigned i = 0; i < js->nfiles && !k.err; i++)
		key_files_entry(&k, js->dir, &js->files[i]);
	for (unsigned i = 0; i < js->cache_step && i < js->nsteps; i++) {
		const struct job_step *st = &js->steps[i];

		key_str(&k, "step", st->name);
		key_str(&k, "run", st->run);
		for (unsigned j = 0; j < st->nenv; j++)
			key_str(&k, "step-env", st->env[j]);
		key_str(&k, "workdir", st->workdir);
		key_num(&k, "timeout", st->timeout_s);
		key_num(&k, "continue-on-error", st->continue_on_error);
	}
	err = k.err;
	if (!err && (!EVP_DigestFinal_ex(k.ctx, md, &mdlen) || mdlen != 32))
		err = -EIO;
	EVP_MD_CTX_free(k.ctx);
	if (err) {
		errmsg("cache: cannot key the job's files (%s): running uncached", strerror(-err));
		return err;
	}
	return path_fmt(out, len,
			".job-%02x%02x%02x%02x%02x%02x%02x%02x%02x%02x%02x%02x%02x%02x%02x%02x",
			md[0], md[1], md[2], md[3], md[4], md[5], md[6], md[7], md[8], md[9],
			md[10], md[11], md[12], md[13], md[14], md[15]);
}

/* The snapshot `name` was used now (restored or made): the last to be evicted. */
static void job_cache_touch(const char *name)
{
	char dir[4200];

	if (snap_dir(name, dir, sizeof(dir)) == 0)
		(void)utimensat(AT_FDCWD, dir, NULL, AT_SYMLINK_NOFOLLOW);
}

struct cache_ent {
	char name[NAME_MAX_LEN + 2];
	struct timespec used;
	uint64_t bytes;
};

struct cache_list {
	struct cache_ent *e;
	size_t n, cap;
	uint64_t (*bytes)(const char *dir); /* job_run_opts.snap_bytes */
};

static int cache_collect(const char *name, void *opaque)
{
	struct cache_list *l = opaque;
	char dir[4200];
	struct stat st;

	if (strncmp(name, ".job-", 5) != 0 || snap_dir(name, dir, sizeof(dir)) < 0 ||
	    lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
		return 0;
	if (l->n == l->cap) {
		struct cache_ent *g =
			realloc(l->e, (l->cap = l->cap ? 2 * l->cap : 16) * sizeof(*g));

		if (!g)
			return -ENOMEM;
		l->e = g;
	}
	snprintf(l->e[l->n].name, sizeof(l->e[l->n].name), "%s", name);
	l->e[l->n].used = st.st_mtim;
	l->e[l->n].bytes = l->bytes(dir);
	l->n++;
	return 0;
}

static int used_cmp(const void *a, const void *b)
{
	const struct cache_ent *x = a, *y = b;

	if (x->used.tv_sec != y->used.tv_sec)
		return x->used.tv_sec < y->used.tv_sec ? -1 : 1;
	if (x->used.tv_nsec != y->used.tv_nsec)
		return x->used.tv_nsec < y->used.tv_nsec ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* Remove the least recently used job cache snapshots, none in use and never `keep`, until
 * they take at most `budget` bytes; says what it removed. */
static void job_cache_trim(uint64_t budget, const char *keep, const struct job_run_opts *o)
{
	struct cache_list l = {.bytes = o->snap_bytes};
	uint64_t total = 0;
	char dir[4200];

	if (snap_foreach(cache_collect, &l) < 0) {
		free(l.e);
		return;
	}
	for (size_t i = 0; i < l.n; i++)
		total += l.e[i].bytes;
	if (l.n)
		qsort(l.e, l.n, sizeof(*l.e), used_cmp);
	for (size_t i = 0; i < l.n && total > budget; i++) {
		if ((keep && strcmp(l.e[i].name, keep) == 0) || o->snap_users(l.e[i].name))
			continue;
		if (snap_dir(l.e[i].name, dir, sizeof(dir)) < 0)
			continue;
		remove_flat_dir(dir);
		total -= l.e[i].bytes;
		fprintf(stderr, "==> cache: evicted %s (%llu MiB, the least recently used)\n",
			l.e[i].name, (unsigned long long)(l.e[i].bytes >> 20));
	}
	free(l.e);
}

unsigned job_cache_restore(const struct jobspec *js, const struct create_opts *co,
			   struct sandbox *sb, char *cache, size_t len,
			   const struct job_run_opts *o, struct job_report *r)
{
	struct lc_report lc = job_lc_report(o);
	char name[128];
	uint64_t t0 = now_ms();
	int err;

	if (state_init() < 0 || job_cache_name(js, co, cache, len) < 0) {
		cache[0] = '\0';
		return 0;
	}
	printable_copy(js->steps[js->cache_step - 1].name, name, sizeof(name));
	if ((err = ready_restore(co, cache, sb, &lc)) < 0) {
		fprintf(stderr, "==> cache: no state after step %u (%s) for this spec yet\n",
			js->cache_step, name);
		memset(sb, 0, sizeof(*sb));
		return 0;
	}
	job_cache_touch(cache);
	report_event(r, "cache", ",\"action\":\"restored\",\"snapshot\":\"%s\",\"step\":%u", cache,
		     js->cache_step);
	fprintf(stderr,
		"==> cache: restored the state after step %u (%s) in %.2f s: steps 1-%u "
		"skipped\n",
		js->cache_step, name, (double)(now_ms() - t0) / 1e3, js->cache_step);
	return js->cache_step;
}

void job_cache_keep(struct sandbox *sb, const struct jobspec *js, const struct create_opts *co,
		    const char *cache, const struct job_run_opts *o, struct job_report *r)
{
	struct lc_report lc = job_lc_report(o);
	char again[NAME_MAX_LEN + 2];
	uint64_t t0 = now_ms();
	int status;

	/* Keyed again now: a file that changed since the key was made (while it was copied in,
	 * or the steps ran) would have the state stored under a key it does not match. */
	if (job_cache_name(js, co, again, sizeof(again)) < 0 || strcmp(again, cache) != 0) {
		errmsg("cache: the job's files changed while it ran: the state is not kept");
		return;
	}
	status = snapshot_take_once(sb, cache, &lc);
	if (status == -EBUSY) {
		fprintf(stderr, "==> cache: another run is keeping this state\n");
		return;
	}
	if (status < 0) {
		o->failed(&lc, status);
		errmsg("cache: could not keep the state after step %u: the next run runs it too",
		       js->cache_step);
		return;
	}
	job_cache_touch(cache);
	report_event(r, "cache", ",\"action\":\"kept\",\"snapshot\":\"%s\",\"step\":%u", cache,
		     js->cache_step);
	fprintf(stderr, "==> cache: kept the state after step %u as %s in %.2f s\n", js->cache_step,
		cache, (double)(now_ms() - t0) / 1e3);
	job_cache_trim(o->cache_max_gib << 30, cache, o);
}
