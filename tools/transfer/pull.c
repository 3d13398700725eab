/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pull: a service's sandbox here (transfer.h). Stopped there first (its memory and disks go
 * into the service's store), its manifest and chunks fetched through the API, every chunk
 * checked against its SHA-256, the snapshot made this host's and checked as one from
 * elsewhere (the service is not trusted with our host's files: only snapshot files, its
 * layers' parents its own or its image's, no extra disks), then restored here with this
 * host's default network policy: its processes go on here. The service's sandbox is then
 * deleted (--keep: kept, stopped).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "store.h"
#include "transfer.h"

static void note(void *ctx, const char *line)
{
	(void)ctx;
	fprintf(stderr, "sandbox-transfer: %s\n", line);
}

int transfer_wait_status(struct svc *a, const char *ref, const char *want, unsigned wait_s)
{
	char p[200];
	time_t until = time(NULL) + (time_t)wait_s;

	snprintf(p, sizeof(p), "/boxes/%s/status", ref);
	for (;;) {
		struct svc_answer ans;
		json_t *o = NULL;
		const char *st = NULL;

		if (svc_call(a, "GET", p, NULL, 0, NULL, 1 << 16, &ans) == 0 && ans.status == 200)
			st = json_string_value(json_object_get(o = svc_json(&ans), "status"));
		if (st && strcmp(st, want) == 0) {
			json_decref(o);
			svc_answer_free(&ans);
			return 0;
		}
		if ((st && strcmp(st, "failed") == 0) || ans.status == 404 || ans.status == 401 ||
		    time(NULL) >= until) {
			const char *m = json_string_value(json_object_get(o, "status_message"));

			fprintf(stderr, "sandbox-transfer: %s is %s, not %s%s%s\n", ref,
				st	       ? st
				: ans.error[0] ? ans.error
					       : "unknown",
				want, m ? ": " : "", m ? m : "");
			json_decref(o);
			svc_answer_free(&ans);
			return -1;
		}
		json_decref(o);
		svc_answer_free(&ans);
		sleep(1);
	}
}

static int fetch_chunk(void *arg, const uint8_t hash[CHUNK_HASH_LEN], uint8_t *out, size_t cap,
		       size_t *len, char *err, size_t err_len)
{
	struct svc *a = arg;
	struct svc_answer ans;
	char hex[2 * CHUNK_HASH_LEN + 1], p[128];

	chunk_hex(hash, hex);
	snprintf(p, sizeof(p), "/chunks/%s", hex);
	if (svc_call(a, "GET", p, NULL, 0, NULL, cap, &ans) < 0 || ans.status != 200) {
		snprintf(err, err_len, "chunk %s: %s", hex, ans.error);
		svc_answer_free(&ans);
		return -EIO;
	}
	memcpy(out, ans.body, ans.len);
	*len = ans.len;
	svc_answer_free(&ans);
	return 0;
}

/* Room here for what the manifest would write (its data extents: a hostile service could
 * name terabytes of zeros), and no more than 128 GiB of it. */
static int room_for(const struct manifest *mf)
{
	uint64_t data = manifest_data_bytes(mf);
	struct statvfs sv;

	if (data > (128ull << 30) || (statvfs(state_home(), &sv) == 0 &&
				      data + (1ull << 30) > (uint64_t)sv.f_bavail * sv.f_frsize)) {
		fprintf(stderr, "sandbox-transfer: no room here for %llu MiB of the sandbox\n",
			(unsigned long long)(data >> 20));
		return -1;
	}
	return 0;
}

/* The fetched snapshot in tmp made this host's, without the service's proxy files, and
 * checked as one from elsewhere. */
static int adopt(const char *tmp, struct snap_meta *m, char *err, size_t len)
{
	int e;

	bool moved;

	if ((e = snap_adopt(tmp, err, len)) < 0 || (e = snap_open(tmp, m, err, len)) < 0 ||
	    (e = snap_layers_rebase(tmp, m, &moved, err, len)) < 0) /* on our image's file */
		return e;
	/* (the service kept its proxy files: its policy and credentials are not ours) */
	if ((e = snap_seal_bare(tmp, m, err, len)) < 0 || (e = snap_open(tmp, m, err, len)) < 0)
		return e;
	if (m->ndisks || !m->has_memory || m->name[0] == '.' || !m->cpus || m->cpus > 32 ||
	    m->memory_mib > 65536) {
		snprintf(err, len,
			 "the snapshot has extra disks, no memory, a hidden name, or vCPUs or "
			 "memory past this host's bounds (32, 64 GiB)");
		return -EBADMSG;
	}
	return snap_layers_check(tmp, m, err, len);
}

int transfer_pull(struct svc *a, const struct transfer_opts *o)
{
	struct lc_report r = {.note = note};
	struct create_opts co = CREATE_OPTS_DEFAULT;
	struct svc_answer ans = {0};
	struct chunk_store cs;
	struct svc conn[TRANSFER_CONNS];
	void *conn_arg[TRANSFER_CONNS];
	unsigned nconn = 0;
	struct manifest mf = {0};
	struct snap_meta m;
	struct sandbox sb;
	struct boot_src src;
	char p[200], tmp[4300], dir[4300], snap[128], err[512] = "";
	uint8_t rnd[6];
	uint64_t t0 = (uint64_t)time(NULL);
	int rc = 1, e = 0;
	json_t *st = NULL;
	const char *status;

	if (state_init() < 0 || chunk_store_local(&cs) < 0)
		return 1;
	cs.fetch = fetch_chunk;
	cs.fetch_arg = a;
	/* TRANSFER_CONNS chunks fetched at once, each on a connection of its own */
	for (nconn = 0; nconn < TRANSFER_CONNS && svc_clone(&conn[nconn], a) == 0; nconn++)
		conn_arg[nconn] = &conn[nconn];
	cs.fetch_args = conn_arg;
	cs.nfetch_args = nconn;
	cs.transfers = TRANSFER_CONNS;
	/* stopped there first: its memory and disks into the service's store */
	snprintf(p, sizeof(p), "/boxes/%s/status", o->ref);
	if (svc_call(a, "GET", p, NULL, 0, NULL, 1 << 16, &ans) < 0 || ans.status != 200) {
		fprintf(stderr, "sandbox-transfer: %s\n", ans.error);
		goto out;
	}
	status = json_string_value(json_object_get(st = svc_json(&ans), "status"));
	svc_answer_free(&ans);
	if (!status || strcmp(status, "stopped") != 0) {
		snprintf(p, sizeof(p), "/boxes/%s/stop", o->ref);
		if (svc_call(a, "POST", p, "{}", 2, NULL, 1 << 16, &ans) < 0 ||
		    (ans.status != 204 && ans.status != 200)) {
			fprintf(stderr, "sandbox-transfer: %s\n", ans.error);
			goto out;
		}
		svc_answer_free(&ans);
		if (transfer_wait_status(a, o->ref, "stopped", o->wait_s) < 0)
			goto out;
	}
	snprintf(p, sizeof(p), "/boxes/%s/export", o->ref);
	if (svc_call(a, "GET", p, NULL, 0, NULL, 64u << 20, &ans) < 0 || ans.status != 200) {
		fprintf(stderr, "sandbox-transfer: %s\n", ans.error);
		goto out;
	}
	if (manifest_parse(ans.body, ans.len, &mf, &cs) < 0) {
		fprintf(stderr, "sandbox-transfer: the service's manifest: %s\n", cs.err);
		goto out;
	}
	if (room_for(&mf) < 0)
		goto out;
	svc_answer_free(&ans);
	/* fetched beside the snapshots under a name no listing takes, then renamed */
	if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
		goto out;
	snprintf(tmp, sizeof(tmp), "%s/snapshots/+pull-%02x%02x%02x%02x%02x%02x", state_home(),
		 rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5]);
	snprintf(dir, sizeof(dir), "%s/snapshots", state_home());
	(void)mkdir(dir, 0700);
	if (mkdir(tmp, 0700) < 0) {
		fprintf(stderr, "sandbox-transfer: %s: %s\n", tmp, strerror(errno));
		goto out;
	}
	for (unsigned i = 0; i < mf.nfiles && e == 0; i++) {
		const char *n = mf.file[i].name;

		if (strcmp(n, "state.fdt") != 0 && strcmp(n, "memory") != 0 &&
		    strcmp(n, "meta.yaml") != 0 && !snap_valid_layer_name(n)) {
			snprintf(err, sizeof(err), "the service's manifest holds %.64s", n);
			e = -EBADMSG;
			break;
		}
		if ((e = path_fmt(dir, sizeof(dir), "%s/%s", tmp, n)) < 0 ||
		    (e = manifest_fetch_file(&mf, &cs, n, dir)) < 0)
			snprintf(err, sizeof(err), "%s", cs.err);
	}
	if (e == 0)
		e = adopt(tmp, &m, err, sizeof(err));
	snprintf(snap, sizeof(snap), "pulled-%.60s-%02x%02x%02x", o->ref, rnd[0], rnd[1], rnd[2]);
	if (e == 0 && (snap_dir(snap, dir, sizeof(dir)) < 0 || rename(tmp, dir) < 0)) {
		snprintf(err, sizeof(err), "%.300s: %s", dir, strerror(errno));
		e = -EIO;
	}
	if (e < 0) {
		fprintf(stderr, "sandbox-transfer: %s: %s\n", o->ref, err);
		remove_flat_dir(tmp);
		goto out;
	}
	/* restored here with this host's default policy */
	co.name = o->name ? o->name : o->ref;
	co.cpus = m.cpus;
	co.memory_mib = m.memory_mib;
	src = (struct boot_src){.dir = dir};
	e = sandbox_restore_create(dir, &m, &co, &src, &sb, &r);
	remove_flat_dir(dir); /* (the sandbox holds its layers and memory now) */
	if (e < 0) {
		fprintf(stderr, "sandbox-transfer: %s: %s\n", o->ref, r.error);
		goto out;
	}
	printf("pulled %s as %s (%s): %llu chunks fetched (%llu KiB), running here in %llu s\n",
	       o->ref, sb.name[0] ? sb.name : sb.id, sb.id, (unsigned long long)cs.got_chunks,
	       (unsigned long long)(cs.got_bytes >> 10),
	       (unsigned long long)((uint64_t)time(NULL) - t0));
	rc = 0;
	if (!o->keep) {
		snprintf(p, sizeof(p), "/boxes/%s", o->ref);
		if (svc_call(a, "DELETE", p, NULL, 0, NULL, 1 << 16, &ans) < 0 || ans.status != 204)
			fprintf(stderr,
				"sandbox-transfer: pulled, but the service's %s stays: %s\n",
				o->ref, ans.error);
	}
out:
	json_decref(st);
	svc_answer_free(&ans);
	manifest_free(&mf);
	chunk_store_close(&cs);
	while (nconn)
		svc_close(&conn[--nconn]);
	return rc;
}
