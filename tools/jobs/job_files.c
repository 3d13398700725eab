/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A job's files in and artifacts out (sandboxctl run; docs/jobspec.md), one file at a time
 * through copy_in/copy_out (client/copy.c), which bound each file's size and time.
 *
 * In: a spec's `src` is resolved (symlinks too) and must stay under the spec's directory;
 * a directory is walked without following symlinks (they are skipped, and said so), so no
 * file outside that directory reaches the guest.
 *
 * Out: the guest is hostile. A pattern is expanded here, one component at a time, from the
 * guest's directory listings (LIST): every name it gives is checked (not empty, no '/', not
 * "." or "..") and must match its component (fnmatch), so a match is always a path the spec
 * allows, and it lands under DIR at the same path (DIR/out/x for /out/x). Host directories
 * are made one component at a time, a symlink among them refused. Listings (each, and their
 * number), files and directories, depth and bytes are bounded (ART_*), so a guest's bind
 * mounts of a directory into itself cannot keep a run copying.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto.h"
#include "jobs.h"

#define FILES_MAX      100000u		  /* entries a job's files: may copy in */
#define FILES_DEPTH    64u		  /* directory levels below a src */
#define ART_LIST_MAX   100000u		  /* names one guest directory listing may give */
#define ART_FILES_MAX  10000u		  /* files and directories all artifacts may copy out */
#define ART_LISTS_MAX  10000u		  /* guest directory listings they may read */
#define ART_BYTES_MAX  (8ull << 30)	  /* what they may add up to */
#define ART_DEPTH      32u		  /* directory levels below a match */
#define ART_WAIT_MS    60000		  /* a listing's or a STAT's answer */
#define ART_FRAMES_MAX (2 * ART_LIST_MAX) /* frames one listing may read, its own or not */
#define ART_HELD_MAX   (16u << 20)	  /* bytes of names the listings being walked may hold */
#define ART_TIME_MS    600000		  /* the whole of the artifacts' copy */

/* ---- in ---- */

struct files_in {
	struct agent_conn *c;
	const struct job_run_opts *o;
	struct lc_report lc; /* a copy's failure: the first ends the walk */
	unsigned copied, skipped;
};

static int in_file(struct files_in *w, const char *host, const char *guest)
{
	int err;

	if (++w->copied > FILES_MAX) {
		errmsg("files: more than %u entries", FILES_MAX);
		return JOB_EXIT_ERR;
	}
	err = copy_in(w->c, host, guest, 0, &w->lc);
	return err < 0 ? w->o->failed(&w->lc, err) : JOB_EXIT_OK;
}

/* The directory `host` (its fd `dfd`, taken) into the guest's `guest`. */
static int in_dir(struct files_in *w, int dfd, const char *host, const char *guest, unsigned depth)
{
	char hpath[4096], gpath[4096];
	struct dirent *de;
	DIR *d;
	int status = JOB_EXIT_OK, err;

	if ((err = agent_mkdir_p(w->c, guest, 0755)) < 0) {
		errmsg("files: cannot make %s in the guest: %s", guest, strerror(-err));
		close(dfd);
		return err == -EIO ? JOB_EXIT_ERR : JOB_EXIT_SANDBOX;
	}
	if (!(d = fdopendir(dfd))) {
		errmsg("files: %s: %m", host);
		close(dfd);
		return JOB_EXIT_ERR;
	}
	while (status == JOB_EXIT_OK && (errno = 0, de = readdir(d))) {
		struct stat st;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (path_fmt(hpath, sizeof(hpath), "%s/%s", host, de->d_name) < 0 ||
		    path_fmt(gpath, sizeof(gpath), "%s/%s", strcmp(guest, "/") ? guest : "",
			     de->d_name) < 0 ||
		    strlen(gpath) >= JOB_PATH_MAX) {
			errmsg("files: a path under %s is too long", host);
			status = JOB_EXIT_ERR;
			break;
		}
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			errmsg("files: %s: %m", hpath);
			status = JOB_EXIT_ERR;
		} else if (S_ISDIR(st.st_mode)) {
			int sub = openat(dirfd(d), de->d_name,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			if (depth >= FILES_DEPTH) {
				errmsg("files: %s: deeper than %u levels", hpath, FILES_DEPTH);
				status = JOB_EXIT_ERR;
			} else if (sub < 0) {
				errmsg("files: %s: %m", hpath);
				status = JOB_EXIT_ERR;
			} else {
				status = in_dir(w, sub, hpath, gpath, depth + 1);
				sub = -1;
			}
			if (sub >= 0)
				close(sub);
		} else if (S_ISREG(st.st_mode)) {
			status = in_file(w, hpath, gpath);
		} else {
			fprintf(stderr, "    files: skipped %s (%s)\n", hpath,
				S_ISLNK(st.st_mode) ? "a symlink" : "not a file or directory");
			w->skipped++;
		}
	}
	if (status == JOB_EXIT_OK && errno) {
		errmsg("files: reading %s: %m", host);
		status = JOB_EXIT_ERR;
	}
	closedir(d);
	return status;
}

/* The guest directory that holds `path` (made if missing). */
static int in_parent(struct agent_conn *c, const char *path)
{
	char parent[4096];
	const char *slash = strrchr(path, '/');
	int err;

	if (slash == path)
		return JOB_EXIT_OK;
	snprintf(parent, sizeof(parent), "%.*s", (int)(slash - path), path);
	if ((err = agent_mkdir_p(c, parent, 0755)) < 0) {
		errmsg("files: cannot make %s in the guest: %s", parent, strerror(-err));
		return err == -EIO ? JOB_EXIT_ERR : JOB_EXIT_SANDBOX;
	}
	return JOB_EXIT_OK;
}

static int in_one(struct files_in *w, const char *base, const struct job_file *f)
{
	char path[8200], *real;
	size_t blen = strlen(base);
	struct stat st;
	int status;

	if (path_fmt(path, sizeof(path), "%s/%s", base, f->src) < 0) {
		errmsg("files: %s: the path is too long", f->src);
		return JOB_EXIT_USAGE;
	}
	if (!(real = realpath(path, NULL))) {
		errmsg("files: %s: %m", path);
		return JOB_EXIT_USAGE;
	}
	/* a symlink on the way may lead out of the spec's directory */
	if (strncmp(real, base, blen) != 0 ||
	    (real[blen] != '/' && real[blen] != '\0' && strcmp(base, "/") != 0)) {
		errmsg("files: %s leads out of the spec's directory %s (to %s)", f->src, base,
		       real);
		free(real);
		return JOB_EXIT_USAGE;
	}
	if (stat(real, &st) < 0) {
		errmsg("files: %s: %m", real);
		free(real);
		return JOB_EXIT_USAGE;
	}
	if (S_ISDIR(st.st_mode)) {
		int dfd = open(real, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		status = dfd < 0 ? JOB_EXIT_ERR : in_dir(w, dfd, real, f->dst, 0);
		if (dfd < 0)
			errmsg("files: %s: %m", real);
	} else if (S_ISREG(st.st_mode)) {
		status = in_parent(w->c, f->dst);
		if (status == JOB_EXIT_OK)
			status = in_file(w, real, f->dst);
	} else {
		errmsg("files: %s is not a file or a directory", real);
		status = JOB_EXIT_USAGE;
	}
	free(real);
	return status;
}

int job_files_in(const struct sandbox *sb, const struct jobspec *js, const struct job_run_opts *o)
{
	struct agent_conn c;
	struct files_in w = {.c = &c, .o = o, .lc = job_lc_report(o)};
	uint64_t t0 = now_ms();
	int status = JOB_EXIT_OK, err;

	if (!js->nfiles)
		return JOB_EXIT_OK;
	if ((err = agent_connect(sb, 10000, &c)) < 0) {
		errmsg("%s: cannot reach the guest agent: %s", sb->id, strerror(-err));
		return JOB_EXIT_SANDBOX;
	}
	for (unsigned i = 0; i < js->nfiles && status == JOB_EXIT_OK && !job_interrupted; i++) {
		fprintf(stderr, "==> files: %s -> %s\n", js->files[i].src, js->files[i].dst);
		status = in_one(&w, js->dir, &js->files[i]);
	}
	agent_close(&c);
	if (status == JOB_EXIT_OK && job_interrupted)
		status = 128 + job_interrupted;
	if (status == JOB_EXIT_OK)
		fprintf(stderr, "==> files: %u copied in%s in %.2f s\n", w.copied,
			w.skipped ? " (some skipped, above)" : "", (double)(now_ms() - t0) / 1e3);
	return status;
}

/* ---- out ---- */

struct art_out {
	struct agent_conn *c;
	const struct job_run_opts *o;
	struct lc_report lc; /* a copy's failure: the first ends the walk */
	struct job_report *r;
	const char *dir; /* the host directory they go under */
	unsigned files, lists;
	uint64_t left;	   /* bytes they may still add up to */
	size_t held;	   /* bytes of names held by the listings being walked */
	uint64_t deadline; /* now_ms() when the copy gives up */
	int status;
};

/* One entry of a guest listing. */
struct art_ent {
	char *name;
	uint32_t mode;
};

static void ents_free(struct art_out *w, struct art_ent *e, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		w->held -= strlen(e[i].name) + 1;
		free(e[i].name);
	}
	free(e);
}

/* The time the next wait for the guest may take (at most `cap` ms), 0 (after the error,
 * w->status set) when the copy's time is up or we were interrupted. */
static int art_wait(struct art_out *w, int cap)
{
	uint64_t t = now_ms();

	if (w->status != JOB_EXIT_OK)
		return 0;
	if (job_interrupted) {
		errmsg("artifacts: interrupted (%s): stopped", strsignal(job_interrupted));
		w->status = 128 + job_interrupted;
		return 0;
	}
	if (t >= w->deadline) {
		errmsg("artifacts: still copying after %d s: stopped", ART_TIME_MS / 1000);
		w->status = JOB_EXIT_ERR;
		return 0;
	}
	return w->deadline - t < (uint64_t)cap ? (int)(w->deadline - t) : cap;
}

static bool art_name_ok(const char *name, size_t len)
{
	if (len == 0 || len > 255 || memchr(name, '/', len) || memchr(name, '\0', len))
		return false;
	return !(len == 1 && name[0] == '.') && !(len == 2 && name[0] == '.' && name[1] == '.');
}

/* The guest directory `path`'s entries (names checked): their number, or -1 after the error
 * (w->status set). A directory that does not exist has none. */
static int art_list(struct art_out *w, const char *path, struct art_ent **out)
{
	struct art_ent *e = NULL;
	struct proto_frame f;
	unsigned n = 0, cap = 0;
	uint64_t id = ++w->c->next_id;
	unsigned frames = 0;
	int r;

	*out = NULL;
	if (++w->lists > ART_LISTS_MAX) {
		errmsg("artifacts: more than %u directory listings: stopped at %s", ART_LISTS_MAX,
		       path);
		w->status = JOB_EXIT_ERR;
		return -1;
	}
	if (agent_send(w->c, PROTO_MSG_LIST, id, path, (uint32_t)strlen(path) + 1) < 0)
		goto lost;
	for (;;) {
		int wait = art_wait(w, ART_WAIT_MS);

		if (wait == 0)
			goto stopped;
		if ((r = agent_recv(w->c, wait, &f)) < 0 || (r == 0 && art_wait(w, 1) > 0))
			goto lost;
		if (r == 0)
			goto stopped;
		if (++frames > ART_FRAMES_MAX) {
			errmsg("artifacts: the guest sent more than %u frames listing %s: stopped",
			       ART_FRAMES_MAX, path);
			goto bad;
		}
		if (f.hdr.id != id)
			continue;
		if (f.hdr.type == PROTO_MSG_END)
			break;
		if (f.hdr.type == PROTO_MSG_ERROR) {
			*out = e;
			return (int)n; /* not a directory, gone: nothing under it */
		}
		if (f.hdr.type != PROTO_MSG_DIRENT || f.hdr.len < sizeof(struct proto_stat))
			continue;
		const char *name = (const char *)f.payload + sizeof(struct proto_stat);
		size_t len = f.hdr.len - sizeof(struct proto_stat);

		if (!art_name_ok(name, len)) {
			errmsg("artifacts: the guest listed a bad name in %s: stopped", path);
			goto bad;
		}
		if (n == ART_LIST_MAX) {
			errmsg("artifacts: %s lists more than %u entries: stopped", path,
			       ART_LIST_MAX);
			goto bad;
		}
		if (n == cap) {
			struct art_ent *g = realloc(e, (cap = cap ? 2 * cap : 64) * sizeof(*e));

			if (!g)
				goto oom;
			e = g;
		}
		if (w->held + len + 1 > ART_HELD_MAX) {
			errmsg("artifacts: the listings hold more than %u MiB of names: stopped",
			       ART_HELD_MAX >> 20);
			goto bad;
		}
		if (!(e[n].name = strndup(name, len)))
			goto oom;
		w->held += len + 1;
		e[n].mode = proto_get_le32(f.payload + offsetof(struct proto_stat, mode));
		n++;
	}
	*out = e;
	return (int)n;
lost:
	errmsg("artifacts: lost the connection to the agent listing %s", path);
	ents_free(w, e, n);
	w->status = JOB_EXIT_SANDBOX;
	return -1;
stopped: /* said by art_wait */
	ents_free(w, e, n);
	return -1;
oom:
	errmsg("artifacts: out of memory");
bad:
	ents_free(w, e, n);
	w->status = JOB_EXIT_ERR;
	return -1;
}

/*
 * The host directory for the guest path `gpath` (its parents under w->dir, made one at a
 * time, a symlink refused): its host path in `out`.
 */
static int art_host_path(struct art_out *w, const char *gpath, char *out, size_t len)
{
	char *slash;

	if (path_fmt(out, len, "%s%s", w->dir, gpath) < 0 || strlen(out) >= 4096) {
		errmsg("artifacts: %s: the host path is too long", gpath);
		return -1;
	}
	for (slash = out + strlen(w->dir) + 1; (slash = strchr(slash, '/')); slash++) {
		struct stat st;

		*slash = '\0';
		if (mkdir(out, 0755) < 0 && errno != EEXIST) {
			errmsg("artifacts: %s: %m", out);
			return -1;
		}
		if (lstat(out, &st) < 0 || !S_ISDIR(st.st_mode)) {
			errmsg("artifacts: %s is not a directory of ours (a symlink?)", out);
			return -1;
		}
		*slash = '/';
	}
	return 0;
}

/* The guest's `gpath` (its mode from its listing or STAT) out. */
static void art_copy(struct art_out *w, const char *gpath, uint32_t mode, unsigned depth);

static void art_copy_dir(struct art_out *w, const char *gpath, unsigned depth)
{
	struct art_ent *e;
	char sub[4096];
	int n;

	if (depth > ART_DEPTH) {
		errmsg("artifacts: %s: deeper than %u levels: stopped", gpath, ART_DEPTH);
		w->status = JOB_EXIT_ERR;
		return;
	}
	if ((n = art_list(w, gpath, &e)) < 0)
		return;
	for (int i = 0; i < n && w->status == JOB_EXIT_OK; i++) {
		if (path_fmt(sub, sizeof(sub), "%s/%s", gpath, e[i].name) < 0 ||
		    strlen(sub) >= JOB_PATH_MAX) {
			errmsg("artifacts: a path under %s is too long", gpath);
			w->status = JOB_EXIT_ERR;
			break;
		}
		art_copy(w, sub, e[i].mode, depth + 1);
	}
	ents_free(w, e, (unsigned)(n > 0 ? n : 0));
}

static void art_copy(struct art_out *w, const char *gpath, uint32_t mode, unsigned depth)
{
	char host[8200], shown[4200];
	struct stat st;
	uint64_t before;
	int err, wait;

	if ((S_ISDIR(mode) || S_ISREG(mode)) && ++w->files > ART_FILES_MAX) {
		errmsg("artifacts: more than %u files and directories: stopped", ART_FILES_MAX);
		w->status = JOB_EXIT_ERR;
		return;
	}
	if (art_wait(w, 1) == 0)
		return;
	if (S_ISDIR(mode)) {
		if (art_host_path(w, gpath, host, sizeof(host)) < 0 ||
		    (mkdir(host, 0755) < 0 && errno != EEXIST)) {
			w->status = JOB_EXIT_ERR;
			return;
		}
		if (lstat(host, &st) < 0 || !S_ISDIR(st.st_mode)) {
			errmsg("artifacts: %s is not a directory of ours (a symlink?)", host);
			w->status = JOB_EXIT_ERR;
			return;
		}
		art_copy_dir(w, gpath, depth);
		return;
	}
	if (!S_ISREG(mode)) {
		fprintf(stderr, "    artifacts: skipped %s (%s)\n",
			printable_copy(gpath, shown, sizeof(shown)),
			S_ISLNK(mode) ? "a symlink" : "not a file or directory");
		return;
	}
	if (art_host_path(w, gpath, host, sizeof(host)) < 0) {
		w->status = JOB_EXIT_ERR;
		return;
	}
	/* Only a new file, or one that is a file: a symlink or a directory there (one committed
	 * in the checkout the directory is in) would take the copy elsewhere. */
	if (lstat(host, &st) == 0 && !S_ISREG(st.st_mode)) {
		errmsg("artifacts: %s is there already and not a file (a symlink?): not written",
		       host);
		w->status = JOB_EXIT_ERR;
		return;
	}
	if ((wait = art_wait(w, ART_TIME_MS)) == 0)
		return;
	before = w->left;
	err = copy_out(w->c, gpath, host, (unsigned)((wait + 999) / 1000), &w->left, &w->lc);
	if (err < 0) {
		w->status = w->o->failed(&w->lc, err);
		return;
	}
	fprintf(stderr, "==> artifact %s (%llu bytes)\n",
		printable_copy(gpath, shown, sizeof(shown)),
		(unsigned long long)(before - w->left));
	if (w->r)
		report_artifact(w->r, gpath, host, before - w->left);
}

static bool has_glob(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (s[i] == '*' || s[i] == '?' || s[i] == '[' || s[i] == '\\')
			return true;
	return false;
}

/*
 * The pattern's components from `rest` on (after the guest directory `dir`, "" for the
 * root) matched: each literal one is taken as it is, a glob one against dir's listing. What
 * the last one matches is copied. Returns the matches' number.
 */
static unsigned art_expand(struct art_out *w, const char *dir, const char *rest, unsigned depth)
{
	size_t len = strcspn(rest, "/");
	const char *next = rest[len] ? rest + len + 1 : NULL;
	char path[4096], comp[256];
	unsigned found = 0;
	struct art_ent *e;
	int n;

	if (len == 0 || len >= sizeof(comp) || depth > 128)
		return 0;
	memcpy(comp, rest, len);
	comp[len] = '\0';
	if (!has_glob(comp, len)) {
		struct proto_frame f;
		int err;

		if (path_fmt(path, sizeof(path), "%s/%s", dir, comp) < 0)
			return 0;
		if (next)
			return art_expand(w, path, next, depth + 1);
		if ((err = art_wait(w, ART_WAIT_MS)) == 0)
			return 0;
		err = agent_call(w->c, PROTO_MSG_STAT, path, (uint32_t)strlen(path) + 1,
				 (unsigned)err, NULL, NULL, &f);
		if (err < 0) {
			errmsg("artifacts: lost the connection to the agent (STAT %s)", path);
			w->status = JOB_EXIT_SANDBOX;
			return 0;
		}
		if (f.hdr.type != PROTO_MSG_STAT_REPLY || f.hdr.len < sizeof(struct proto_stat))
			return 0; /* not there */
		art_copy(w, path, proto_get_le32(f.payload + offsetof(struct proto_stat, mode)), 0);
		return 1;
	}
	if ((n = art_list(w, dir[0] ? dir : "/", &e)) < 0)
		return 0;
	for (int i = 0; i < n && w->status == JOB_EXIT_OK; i++) {
		/* FNM_PERIOD: a leading dot is matched only by a dot, as in sh */
		if (fnmatch(comp, e[i].name, FNM_PERIOD) != 0)
			continue;
		if (path_fmt(path, sizeof(path), "%s/%s", dir, e[i].name) < 0 ||
		    strlen(path) >= JOB_PATH_MAX)
			continue;
		if (!next) {
			art_copy(w, path, e[i].mode, 0);
			found++;
		} else if (S_ISDIR(e[i].mode)) {
			found += art_expand(w, path, next, depth + 1);
		}
	}
	ents_free(w, e, (unsigned)n);
	return found;
}

int job_artifacts_out(const struct sandbox *sb, const struct jobspec *js,
		      const struct job_run_opts *o, struct job_report *r)
{
	const char *dir = o->artifacts;
	struct agent_conn c;
	struct art_out w = {.c = &c,
			    .o = o,
			    .lc = job_lc_report(o),
			    .r = r,
			    .left = ART_BYTES_MAX,
			    .status = JOB_EXIT_OK};
	char real[PATH_MAX];
	struct stat st;
	uint64_t t0 = now_ms();
	int err;

	if (!js->nartifacts)
		return JOB_EXIT_OK;
	if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
		errmsg("artifacts: %s: %m", dir);
		return JOB_EXIT_ERR;
	}
	if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		errmsg("artifacts: %s is not a directory (a symlink is not taken)", dir);
		return JOB_EXIT_ERR;
	}
	if (!realpath(dir, real)) {
		errmsg("artifacts: %s: %m", dir);
		return JOB_EXIT_ERR;
	}
	w.dir = real;
	w.deadline = now_ms() + ART_TIME_MS;
	if ((err = agent_connect(sb, 10000, &c)) < 0) {
		errmsg("%s: cannot reach the guest agent for the artifacts: %s", sb->id,
		       strerror(-err));
		return JOB_EXIT_SANDBOX;
	}
	for (unsigned i = 0; i < js->nartifacts && w.status == JOB_EXIT_OK; i++) {
		const char *pat = js->artifacts[i];

		if (art_expand(&w, "", pat + 1, 0) == 0 && w.status == JOB_EXIT_OK)
			fprintf(stderr, "==> artifact %s: nothing matched\n", pat);
	}
	agent_close(&c);
	if (w.status == JOB_EXIT_OK)
		fprintf(stderr,
			"==> artifacts: %u files and directories (%llu bytes) in %s in %.2f s\n",
			w.files, (unsigned long long)(ART_BYTES_MAX - w.left), w.dir,
			(double)(now_ms() - t0) / 1e3);
	return w.status;
}
