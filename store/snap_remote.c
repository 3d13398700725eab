/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A host's snapshot to and from the fleet's object store (store.h; docs/fleet.md): every file
 * of $SANDBOX_HOME/snapshots/<name> (its state, memory, disk layers, proxy files and
 * meta.yaml; not its MAC, which is the host's) as one manifest. A pull fetches them into a
 * directory beside the snapshots that no listing takes (+pull-), every chunk checked, makes
 * the snapshot this host's (snap_adopt: its MAC under this host's key, the files being
 * authenticated by the sealed manifest), checks it as any snapshot (snap_open) and for what a
 * snapshot from elsewhere may not hold (snap_pull_check), and only then renames it into
 * place: a pull that fails or is killed leaves no snapshot to restore (a killed one leaves its
 * +pull- directory, to be swept).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client.h"
#include "snap_remote.h"

#define SNAP_PUSH_LIST_PAGES 16 /* a push learns up to 16,000 of the store's chunks */

/* Whether a file of a snapshot directory goes to the store. */
static bool snap_file_pushed(const char *n)
{
	return strcmp(n, "state.fdt") == 0 || strcmp(n, "memory") == 0 ||
	       strcmp(n, "meta.yaml") == 0 || snap_valid_layer_name(n) || snap_valid_net_file(n);
}

int snap_push(const char *name, struct chunk_store *cs, const char *id, uint64_t generation,
	      const struct manifest *parent, uint32_t chunk_size, char *err, size_t err_len)
{
	char dir[4200], path[4600];
	struct snap_meta m;
	struct manifest mf;
	struct dirent *e;
	DIR *d;
	int r;

	if (!valid_name(name) || (r = snap_dir(name, dir, sizeof(dir))) < 0) {
		snprintf(err, err_len, "not a snapshot name: %.80s", name);
		return -EINVAL;
	}
	/* authenticated here first: what goes up is this host's snapshot as it sealed it */
	if ((r = snap_open(dir, &m, err, err_len)) < 0)
		return r;
	if (m.ndisks) {
		snprintf(err, err_len,
			 "snapshot %s has extra disks (host paths): it cannot move to another host",
			 name);
		return -EXDEV;
	}
	if ((r = manifest_init(&mf, chunk_size)) < 0) {
		snprintf(err, err_len, "a chunk size of %u bytes", chunk_size);
		return r;
	}
	mf.generation = generation;
	mf.parent = parent;
	/* what the store holds, by listing (a HEAD a chunk is the slow way: S3 answers either
	 * in one round trip); one that cannot list leaves the HEADs */
	if (chunk_store_learn(cs, SNAP_PUSH_LIST_PAGES) < 0)
		cs->err[0] = 0;
	if (!(d = opendir(dir))) {
		r = -errno;
		snprintf(err, err_len, "%s: %s", dir, strerror(errno));
		manifest_free(&mf);
		return r;
	}
	while ((e = readdir(d)) && r == 0) {
		if (!snap_file_pushed(e->d_name))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if ((r = manifest_add_file(&mf, cs, e->d_name, path)) < 0)
			snprintf(err, err_len, "%s", cs->err);
	}
	closedir(d);
	if (r == 0 && (r = manifest_put(&mf, cs, id)) < 0)
		snprintf(err, err_len, "%s", cs->err);
	manifest_free(&mf);
	return r;
}

/* rm -r of a pull's hidden directory (files only: a snapshot has no subdirectory). */
static void snap_pull_remove(const char *dir)
{
	char path[4600];
	struct dirent *e;
	DIR *d = opendir(dir);

	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.' &&
		    (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		unlink(path);
	}
	if (d)
		closedir(d);
	rmdir(dir);
}

/* The names of the files a pull fetched. */
struct pulled {
	char name[MANIFEST_FILES_MAX][MANIFEST_NAME_MAX + 1];
	unsigned n;
};

static bool pulled_has(const struct pulled *p, const char *name)
{
	for (unsigned i = 0; i < p->n; i++)
		if (strcmp(p->name[i], name) == 0)
			return true;
	return false;
}

/* A pulled snapshot m in dir holds what it may and only that: no extra disks (host paths),
 * no hidden name (a fork's or a ready snapshot's, the host's own), its root layer among its
 * layers, exactly the files meta.yaml lists, layers whose parents are its own or its image's
 * (snap_layers_check), and its proxy files' digests. */
static int snap_pull_check(const struct pulled *p, const char *dir, const struct snap_meta *m,
			   char *err, size_t err_len)
{
	unsigned want = 2 + (m->memory_sha256[0] ? 1 : 0) + m->nlayers + m->nnet;
	bool root = false;
	int r;

	if (m->ndisks) {
		snprintf(err, err_len, "the snapshot names extra disks (host paths): refused");
		return -EXDEV;
	}
	if (m->name[0] == '.') {
		snprintf(err, err_len, "the snapshot is a host's own (%.64s): refused", m->name);
		return -EBADMSG;
	}
	for (unsigned i = 0; i < m->nlayers; i++) {
		root |= strcmp(m->layers[i].file, m->root_layer) == 0;
		if (!pulled_has(p, m->layers[i].file))
			want = UINT32_MAX;
	}
	for (unsigned i = 0; i < m->nnet; i++)
		if (!pulled_has(p, m->net[i].file))
			want = UINT32_MAX;
	if (!root || want != p->n || !pulled_has(p, "meta.yaml") || !pulled_has(p, "state.fdt") ||
	    (m->memory_sha256[0] && !pulled_has(p, "memory"))) {
		snprintf(err, err_len,
			 "the snapshot's files are not exactly those its meta.yaml lists: refused");
		return -EBADMSG;
	}
	if ((r = snap_layers_check(dir, m, err, err_len)) < 0)
		return r;
	return snap_net_check(dir, m, err, err_len);
}

/* A pull into a new hidden directory (tmp, its path): every file but, for a lazy one, the
 * memory, checked; mf (the manifest, kept for a lazy one's pager) freed on failure. */
static int snap_pull_tmp(struct chunk_store *cs, const char *id, uint64_t min_generation, bool lazy,
			 bool rebase, char tmp[4300], struct manifest *mf, struct snap_meta *m,
			 char *err, size_t err_len)
{
	char path[4600];
	uint8_t rnd[6];
	struct pulled mf_names = {0};
	const struct manifest_file *mem;
	int r;

	if ((r = manifest_get(mf, cs, id, min_generation)) < 0) {
		snprintf(err, err_len, "%s", cs->err);
		return r;
	}
	if (!manifest_find(mf, "meta.yaml") || !manifest_find(mf, "state.fdt")) {
		manifest_free(mf);
		snprintf(err, err_len, "manifest %s is not a snapshot's (no meta.yaml or state)",
			 id);
		return -EBADMSG;
	}
	for (unsigned i = 0; i < mf->nfiles; i++)
		if (!snap_file_pushed(mf->file[i].name)) {
			snprintf(err, err_len, "manifest %s holds %.64s, no file of a snapshot", id,
				 mf->file[i].name);
			manifest_free(mf);
			return -EBADMSG;
		}
	if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd)) {
		manifest_free(mf);
		return -EIO;
	}
	/* beside its final place, under a name no snapshot listing takes ('+', as a snapshot
	 * being taken: snapshot.c's +tmp-); one a killed pull leaves holds no snapshot's name */
	snprintf(tmp, 4300, "%s/snapshots/+pull-%02x%02x%02x%02x%02x%02x", state_home(), rnd[0],
		 rnd[1], rnd[2], rnd[3], rnd[4], rnd[5]);
	snprintf(path, sizeof(path), "%s/snapshots", state_home());
	(void)mkdir(path, 0700);
	if (mkdir(tmp, 0700) < 0) {
		r = -errno;
		snprintf(err, err_len, "%s: %s", tmp, strerror(errno));
		manifest_free(mf);
		return r;
	}
	for (unsigned i = 0; i < mf->nfiles && r == 0; i++) {
		snprintf(mf_names.name[mf_names.n++], sizeof(mf_names.name[0]), "%s",
			 mf->file[i].name);
		if (lazy && strcmp(mf->file[i].name, "memory") == 0)
			continue; /* its pages come from the pager, each chunk checked there */
		snprintf(path, sizeof(path), "%s/%s", tmp, mf->file[i].name);
		/* a lazy restore's layers: their heads now, the rest as the VMM reads them */
		if (lazy && snap_valid_layer_name(mf->file[i].name) && snap_lazy_layers(mf))
			r = snap_lazy_disk_head(mf, cs, mf->file[i].name, path, err, err_len);
		else if ((r = manifest_fetch_file(mf, cs, mf->file[i].name, path)) < 0)
			snprintf(err, err_len, "%s", cs->err);
	}
	if (r == 0)
		r = snap_adopt(tmp, err, err_len);
	if (r == 0)
		r = lazy ? snap_open_lazy(tmp, m, err, err_len) : snap_open(tmp, m, err, err_len);
	/* one a client sent from another machine: its layers on this host's image file */
	bool moved = false;

	if (r == 0 && rebase && (r = snap_layers_rebase(tmp, m, &moved, err, err_len)) == 0 &&
	    moved && (r = snap_seal_bare(tmp, m, err, err_len)) == 0)
		r = snap_open(tmp, m, err, err_len);
	/* what this host's key now vouches for is only what meta.yaml lists, and all of it
	 * checked: no host paths, exactly its files, its proxy files' digests */
	if (r == 0)
		r = snap_pull_check(&mf_names, tmp, m, err, err_len);
	mem = manifest_find(mf, "memory");
	if (r == 0 && lazy && (!m->memory_sha256[0] || !mem || mem->size != m->memory_bytes)) {
		snprintf(err, err_len, "manifest %s has no memory of the snapshot's RAM to page",
			 id);
		r = -EBADMSG;
	}
	if (r < 0) {
		snap_pull_remove(tmp);
		manifest_free(mf);
	}
	return r;
}

static int pull_as(struct chunk_store *cs, const char *id, uint64_t min_generation,
		   const char *name, bool rebase, char *err, size_t err_len)
{
	char dir[4200], tmp[4300];
	struct manifest mf;
	struct snap_meta m;
	struct stat st;
	int r;

	/* a user's name: no hidden one (.fork-, .ready-: the host's own), no path */
	if (!valid_name(name) || (r = snap_dir(name, dir, sizeof(dir))) < 0) {
		snprintf(err, err_len, "not a snapshot name: %.80s", name);
		return -EINVAL;
	}
	if (lstat(dir, &st) == 0) {
		snprintf(err, err_len, "snapshot %s is there already", name);
		return -EEXIST;
	}
	if ((r = snap_pull_tmp(cs, id, min_generation, false, rebase, tmp, &mf, &m, err, err_len)) <
	    0)
		return r;
	manifest_free(&mf);
	if (strcmp(m.name, name) != 0) {
		/* meta.yaml names the snapshot; a pull may give it another name here only by
		 * sealing it again under that name (every file of it checked just above) */
		snprintf(m.name, sizeof(m.name), "%s", name);
		/* (one sealed bare, a client's: without proxy files still) */
		r = m.nnet ? snap_seal(tmp, &m, err, err_len)
			   : snap_seal_bare(tmp, &m, err, err_len);
	}
	if (r == 0 && renameat2(AT_FDCWD, tmp, AT_FDCWD, dir, RENAME_NOREPLACE) < 0) {
		r = errno == EEXIST || errno == ENOTEMPTY ? -EEXIST : -errno;
		snprintf(err, err_len, "%s: %s", dir, strerror(errno));
	}
	if (r < 0)
		snap_pull_remove(tmp);
	return r;
}

int snap_pull(struct chunk_store *cs, const char *id, uint64_t min_generation, const char *name,
	      char *err, size_t err_len)
{
	return pull_as(cs, id, min_generation, name, false, err, err_len);
}

int snap_pull_import(struct chunk_store *cs, const char *id, const char *name, char *err,
		     size_t err_len)
{
	return pull_as(cs, id, 1, name, true, err, err_len);
}

int snap_pull_lazy(struct chunk_store *cs, const char *id, uint64_t min_generation, char dir[4300],
		   struct manifest *mf, struct snap_meta *m, char *err, size_t err_len)
{
	return snap_pull_tmp(cs, id, min_generation, true, false, dir, mf, m, err, err_len);
}

void snap_pull_lazy_done(const char *dir)
{
	snap_pull_remove(dir);
}
