/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A host's snapshot to the fleet's object store and back on another host (store/snap_remote.c)
 * against a real S3 API (tests/fleet/store.sh starts Swift's):
 *
 *   snap-check ENDPOINT ACCESS SECRET REGION WORKDIR
 *
 * Host A and host B are two $SANDBOX_HOMEs under WORKDIR, each with its own snapshot key:
 * each side runs as this program again with its SANDBOX_HOME (the lifecycle layer reads it
 * once). A seals a snapshot (a state, an 8 MiB memory file, a root disk layer; no VM: the
 * snapshot format is the lifecycle layer's own) and pushes it; B pulls it (its files equal,
 * its MAC its own, snap_open's checks passed), refuses it over an existing name, takes it
 * under another, and refuses it with a corrupt chunk leaving nothing; A refuses to push a
 * snapshot whose layer changed after its seal. `ok NAME` per check.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "disk.h"
#include "fleet_check.h"
#include "snap_remote.h"
#include "store.h"

#define MEM_BYTES  (8u << 20)
#define CHUNK_SIZE (256u << 10)

static uint8_t secret[32]; /* the workspace's, from the parent */

static void fill(const char *path, size_t n, size_t random_part)
{
	uint8_t *b = calloc(1, n);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	if (!b || fd < 0 || getrandom(b, random_part, 0) != (ssize_t)random_part ||
	    write(fd, b, n) != (ssize_t)n || close(fd) < 0)
		exit(2);
	free(b);
}

static int open_store(char **argv, struct s3 *s3, struct chunk_store *cs)
{
	struct s3_conf c = {0};

	snprintf(c.endpoint, sizeof(c.endpoint), "%s", argv[1]);
	snprintf(c.access, sizeof(c.access), "%s", argv[2]);
	snprintf(c.secret, sizeof(c.secret), "%s", argv[3]);
	snprintf(c.region, sizeof(c.region), "%s", argv[4]);
	snprintf(c.bucket, sizeof(c.bucket), "sandbox-snaps");
	c.timeout_ms = 20000;
	if (s3_open(s3, &c) < 0 || s3_bucket_create(s3) < 0)
		return -1;
	return chunk_store_open(cs, s3, "ws/snap-test", secret);
}

/* Data in the layer at path: 3 MiB at 1 MiB, 64 KiB at 40 MiB (random bytes). */
static void layer_data(const char *path)
{
	struct disk_error derr = {{0}};
	struct disk *d;
	uint8_t *buf = malloc(3u << 20);

	check(buf && getrandom(buf, 3u << 20, 0) == 3u << 20 && disk_open(path, 0, &d, &derr) == 0,
	      "a-layer-open", "%s", derr.msg);
	check(disk_write(d, 1u << 20, buf, 3u << 20) == 0 &&
		      disk_write(d, 40u << 20, buf, 64u << 10) == 0 && disk_flush(d) == 0,
	      "a-layer-written", "-");
	disk_close(d);
	free(buf);
}

/* Whether [off, off + len) of files a and b are the same bytes. */
static bool same_range(const char *a, const char *b, uint64_t off, size_t len)
{
	uint8_t *x = malloc(len), *y = malloc(len);
	int fa = open(a, O_RDONLY), fb = open(b, O_RDONLY);
	bool same = x && y && fa >= 0 && fb >= 0 && pread(fa, x, len, (off_t)off) == (ssize_t)len &&
		    pread(fb, y, len, (off_t)off) == (ssize_t)len && memcmp(x, y, len) == 0;

	if (fa >= 0)
		close(fa);
	if (fb >= 0)
		close(fb);
	free(x);
	free(y);
	return same;
}

/* Host A: seal snapshot s1 and push it; refuse a changed one. */
static int host_a(char **argv)
{
	struct snap_meta m = {0};
	struct disk_error derr;
	struct s3 s3;
	struct chunk_store cs;
	char dir[4200], path[4400], err[512];
	int fd, r;

	check(open_store(argv, &s3, &cs) == 0, "a-store", "%s %s", s3.err, cs.err);
	check(snap_dir("s1", dir, sizeof(dir)) == 0, "a-dir", "-");
	snprintf(path, sizeof(path), "%s/snapshots", state_home());
	mkdir(path, 0700);
	check(mkdir(dir, 0700) == 0, "a-mkdir", "%s", strerror(errno));
	snprintf(path, sizeof(path), "%s/state.fdt", dir);
	fill(path, 4096, 4096);
	snprintf(path, sizeof(path), "%s/memory", dir);
	fill(path, MEM_BYTES, 2u << 20);
	fd = open(path, O_RDONLY);
	check(fd >= 0 && snap_memory_digest(fd, MEM_BYTES, m.memory_sha256) == 0, "a-digest", "-");
	close(fd);
	snprintf(path, sizeof(path), "%s/root.layer", dir);
	check(disk_create(path, 64u << 20, 0, &derr) == 0, "a-layer", "%s", derr.msg);
	layer_data(path);
	m.format = SNAP_META_FORMAT;
	snprintf(m.name, sizeof(m.name), "s1");
	snprintf(m.image, sizeof(m.image), "busybox");
	m.created = (uint64_t)time(NULL);
	m.cpus = 1;
	m.memory_mib = MEM_BYTES >> 20;
	m.memory_bytes = MEM_BYTES;
	snprintf(m.root_layer, sizeof(m.root_layer), "root.layer");
	snprintf(m.layers[0].file, sizeof(m.layers[0].file), "root.layer");
	m.nlayers = 1;
	r = snap_seal(dir, &m, err, sizeof(err));
	check(r == 0 && snap_open(dir, &m, err, sizeof(err)) == 0, "a-sealed", "%d %s", r, err);
	r = snap_push("s1", &cs, "snap-s1", 1, NULL, CHUNK_SIZE, err, sizeof(err));
	check(r == 0, "a-pushed", "%d %s", r, err);
	printf("pushed: %llu chunks (%llu bytes) up, zero chunks not stored\n",
	       (unsigned long long)cs.put_chunks, (unsigned long long)cs.put_bytes);
	/* manifests a pusher of this code would not make (as a hostile or older one could):
	 * the same snapshot with an extra disk (a host path) sealed in, and with a file its
	 * meta.yaml does not list; and names that are paths */
	struct manifest mf;
	const char *names[] = {"state.fdt", "memory", "root.layer", "meta.yaml"};

	check(snap_push("../escaped", &cs, "x", 1, NULL, CHUNK_SIZE, err, sizeof(err)) == -EINVAL,
	      "a-path-name-refused", "%s", err);
	check(manifest_init(&mf, CHUNK_SIZE) == 0, "a-mf", "-");
	mf.generation = 1;
	for (size_t i = 0; i < 4; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		check(manifest_add_file(&mf, &cs, names[i], path) == 0, "a-mf-add", "%s", cs.err);
	}
	snprintf(path, sizeof(path), "%s/root.layer", dir);
	check(manifest_add_file(&mf, &cs, "root.9.layer", path) == 0, "a-mf-extra", "%s", cs.err);
	check(manifest_put(&mf, &cs, "snap-extra-file") == 0, "a-mf-put", "%s", cs.err);
	manifest_free(&mf);
	snprintf(m.disks[0], sizeof(m.disks[0]), "/etc/shadow");
	m.ndisks = 1;
	r = snap_seal(dir, &m, err, sizeof(err));
	check(r == 0, "a-disk-sealed", "%s", err);
	check(manifest_init(&mf, CHUNK_SIZE) == 0, "a-mf2", "-");
	mf.generation = 1;
	for (size_t i = 0; i < 4; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		check(manifest_add_file(&mf, &cs, names[i], path) == 0, "a-mf2-add", "%s", cs.err);
	}
	check(manifest_put(&mf, &cs, "snap-disk") == 0, "a-mf2-put", "%s", cs.err);
	manifest_free(&mf);
	r = snap_push("s1", &cs, "snap-disk-2", 1, NULL, CHUNK_SIZE, err, sizeof(err));
	check(r == -EXDEV, "a-disk-push-refused", "%d %s", r, err);
	m.ndisks = 0;
	check(snap_seal(dir, &m, err, sizeof(err)) == 0, "a-resealed", "%s", err);
	snprintf(path, sizeof(path), "%s/root.layer", dir);

	/* a layer changed after the seal: not this host's snapshot any more, refused (what was
	 * pushed kept aside for B's comparison) */
	char cmd[9000];

	snprintf(cmd, sizeof(cmd), "cp --sparse=always '%s' '%s/root.layer.pushed'", path,
		 state_home());
	check(system(cmd) == 0, "a-layer-kept", "-");
	fd = open(path, O_WRONLY);
	check(fd >= 0 && pwrite(fd, "x", 1, 100000) == 1 && close(fd) == 0, "a-layer-changed", "-");
	r = snap_push("s1", &cs, "snap-s1-bad", 1, NULL, CHUNK_SIZE, err, sizeof(err));
	check(r < 0, "a-changed-refused", "%d", r);
	printf("changed snapshot refused: %s\n", err);
	chunk_store_close(&cs);
	s3_close(&s3);
	return 0;
}

static bool same_file(const char *a, const char *b)
{
	char cmd[9000];

	snprintf(cmd, sizeof(cmd), "cmp -s '%s' '%s'", a, b);
	return system(cmd) == 0;
}

/* A lazy pull's layer (store/snap_lazy_disk.c): at its size with only its header and bitmap;
 * a range asked for comes equal to A's, once; then the fill makes the whole file A's. */
static void lazy_disk(struct chunk_store *cs, const char *a_home)
{
	char ldir[4300], a[4400], b[4400], err[512];
	uint8_t other[16] = {1};
	struct lazy_disks ld;
	struct manifest mf;
	struct snap_meta m;
	struct disk_layer_info info;
	struct disk_error derr = {{0}};
	uint64_t at, want0, rounds = 0;
	struct stat st;
	int r, fd;

	r = snap_pull_lazy(cs, "snap-s1", 1, ldir, &mf, &m, err, sizeof(err));
	check(r == 0, "b-lazy-pulled", "%d %s", r, err);
	snprintf(a, sizeof(a), "%s/root.layer.pushed", a_home);
	snprintf(b, sizeof(b), "%s/root.layer", ldir);
	check(stat(a, &st) == 0 && disk_inspect(b, &info, &derr) == 0 &&
		      info.file_len == (uint64_t)st.st_size,
	      "b-lazy-layer-head", "%s", derr.msg);
	fd = open(b, O_RDONLY);
	check(fd >= 0 && lseek(fd, (off_t)info.hdr.data_offset, SEEK_DATA) < 0 && errno == ENXIO,
	      "b-lazy-layer-no-data-yet", "-");
	close(fd);
	check(lazy_disks_open(&ld, &mf, ldir, err, sizeof(err)) == 0 && ld.n == 1,
	      "b-lazy-disks-open", "%s", err);
	at = info.hdr.data_offset + (2u << 20) + 12345;
	r = lazy_disks_get(&ld, cs, ld.d[0].id, at, 100000, err, sizeof(err));
	check(r == 0 && ld.want_chunks >= 1 && same_range(a, b, at, 100000), "b-lazy-range-equal",
	      "%d %s: %llu chunks", r, err, (unsigned long long)ld.want_chunks);
	want0 = ld.want_chunks;
	r = lazy_disks_get(&ld, cs, ld.d[0].id, at, 100000, err, sizeof(err));
	check(r == 0 && ld.want_chunks == want0, "b-lazy-range-once", "%d", r);
	r = lazy_disks_get(&ld, cs, other, at, 100000, err, sizeof(err));
	check(r == 0 && ld.want_chunks == want0, "b-lazy-other-layer-in", "%d", r);
	while ((r = lazy_disks_next(&ld, cs, err, sizeof(err))) == 1)
		rounds++;
	check(r == 0 && rounds == ld.fill_chunks && same_file(a, b), "b-lazy-filled-equal",
	      "%d %s: %llu chunks filled", r, err, (unsigned long long)rounds);
	printf("lazy layer: %llu chunks for a range, then %llu by the fill\n",
	       (unsigned long long)want0, (unsigned long long)rounds);
	lazy_disks_close(&ld);
	manifest_free(&mf);
	snap_pull_lazy_done(ldir);
}

/* Host B: pull it, compare with A's files, the refusals. */
static int host_b(char **argv, const char *a_home)
{
	struct s3 s3;
	struct chunk_store cs;
	struct snap_meta m;
	char dir[4200], a[4400], b[4400], err[512], key[S3_KEY_MAX + 1], name[65];
	const char *files[] = {"state.fdt", "memory", "root.layer", "meta.yaml"};
	struct manifest mf;
	int r;

	check(open_store(argv, &s3, &cs) == 0, "b-store", "%s %s", s3.err, cs.err);
	r = snap_pull(&cs, "snap-s1", 1, "s1", err, sizeof(err));
	check(r == 0, "b-pulled", "%d %s", r, err);
	check(snap_dir("s1", dir, sizeof(dir)) == 0 && snap_open(dir, &m, err, sizeof(err)) == 0,
	      "b-opens", "%s", err);
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		if (strcmp(files[i], "root.layer") == 0)
			snprintf(a, sizeof(a), "%s/root.layer.pushed", a_home);
		else
			snprintf(a, sizeof(a), "%s/snapshots/s1/%s", a_home, files[i]);
		snprintf(b, sizeof(b), "%s/%s", dir, files[i]);
		check(same_file(a, b), "b-file-equal", "%s", files[i]);
	}
	snprintf(a, sizeof(a), "%s/snapshots/s1/mac", a_home);
	snprintf(b, sizeof(b), "%s/mac", dir);
	check(!same_file(a, b), "b-mac-its-own", "the MAC is A's");
	r = snap_pull(&cs, "snap-s1", 1, "s1", err, sizeof(err));
	check(r == -EEXIST, "b-never-over", "%d %s", r, err);
	r = snap_pull(&cs, "snap-s1", 1, "s2", err, sizeof(err));
	check(r == 0 && snap_dir("s2", dir, sizeof(dir)) == 0 &&
		      snap_open(dir, &m, err, sizeof(err)) == 0 && strcmp(m.name, "s2") == 0,
	      "b-other-name", "%d %s", r, err);
	r = snap_pull(&cs, "snap-s1", 2, "s4", err, sizeof(err));
	check(r == -ESTALE, "b-older-generation-refused", "%d %s", r, err);
	r = snap_pull(&cs, "snap-s1", 1, "../escaped", err, sizeof(err));
	check(r == -EINVAL, "b-path-name-refused", "%d %s", r, err);
	r = snap_pull(&cs, "snap-s1", 1, ".ready-busybox-x", err, sizeof(err));
	check(r == -EINVAL, "b-hidden-name-refused", "%d %s", r, err);
	r = snap_pull(&cs, "snap-disk", 1, "s5", err, sizeof(err));
	check(r == -EXDEV, "b-extra-disk-refused", "%d %s", r, err);
	r = snap_pull(&cs, "snap-extra-file", 1, "s6", err, sizeof(err));
	check(r == -EBADMSG && strstr(err, "exactly"), "b-unlisted-file-refused", "%d %s", r, err);
	snprintf(b, sizeof(b), "ls -a '%s/snapshots' | grep -q -e '^s5$' -e '^s6$' -e '^+pull-'",
		 state_home());
	check(system(b) != 0, "b-refusals-leave-nothing", "-");
	lazy_disk(&cs, a_home);
	/* a chunk of the memory corrupted in the store: refused, named, nothing left */
	check(manifest_get(&mf, &cs, "snap-s1", 0) == 0, "b-manifest", "%s", cs.err);
	const struct manifest_file *f = manifest_find(&mf, "memory");

	check(f != NULL && f->nchunks > 2, "b-memory-listed", "-");
	chunk_object_name(&cs.keys, f->hash[1], name);
	snprintf(key, sizeof(key), "ws/snap-test/c/%s", name);
	uint8_t *obj;
	size_t n;

	check(s3_get(&s3, key, 0, 0, S3_OBJECT_MAX, &obj, &n) == 0, "b-chunk-read", "%s", s3.err);
	obj[n - 20] ^= 0x40;
	check(s3_put(&s3, key, obj, n) == 0, "b-chunk-corrupted", "%s", s3.err);
	free(obj);
	manifest_free(&mf);
	struct chunk_store fresh; /* nothing known: every chunk fetched */

	check(chunk_store_open(&fresh, &s3, "ws/snap-test", secret) == 0, "b-fresh", "-");
	r = snap_pull(&fresh, "snap-s1", 1, "s3", err, sizeof(err));
	snprintf(b, sizeof(b), "ls -a '%s/snapshots' | grep -q -e '^s3$' -e '^.pull-'",
		 state_home());
	check(r == -EBADMSG && strstr(err, "corrupt") && system(b) != 0, "b-corrupt-refused",
	      "%d %s", r, err);
	printf("corrupt chunk refused: %s\n", err);
	chunk_store_close(&fresh);
	chunk_store_close(&cs);
	s3_close(&s3);
	return 0;
}

/* Run this program as host `side` with SANDBOX_HOME=home; its exit status. */
static int run_side(char **argv, const char *side, const char *home, const char *a_home)
{
	char hex[65];
	pid_t pid;
	int st;

	chunk_hex(secret, hex);
	pid = fork();
	if (pid == 0) {
		setenv("SANDBOX_HOME", home, 1);
		execl("/proc/self/exe", argv[0], "--side", side, argv[1], argv[2], argv[3], argv[4],
		      hex, a_home, (char *)NULL);
		_exit(127);
	}
	return waitpid(pid, &st, 0) == pid && WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

int main(int argc, char **argv)
{
	char a_home[4200], b_home[4200];

	if (argc == 9 && strcmp(argv[1], "--side") == 0) {
		char *sub[6] = {argv[0], argv[3], argv[4], argv[5], argv[6], NULL};

		for (int i = 0; i < 32; i++)
			sscanf(argv[7] + 2 * i, "%2hhx", &secret[i]);
		return strcmp(argv[2], "a") == 0 ? host_a(sub) : host_b(sub, argv[8]);
	}
	if (argc != 6) {
		fprintf(stderr, "usage: snap-check ENDPOINT ACCESS SECRET REGION WORKDIR\n");
		return 2;
	}
	if (getrandom(secret, sizeof(secret), 0) != sizeof(secret))
		return 2;
	snprintf(a_home, sizeof(a_home), "%s/host-a", argv[5]);
	snprintf(b_home, sizeof(b_home), "%s/host-b", argv[5]);
	mkdir(a_home, 0700);
	mkdir(b_home, 0700);
	if (run_side(argv, "a", a_home, a_home) != 0 || run_side(argv, "b", b_home, a_home) != 0)
		return 1;
	printf("ok snapshot-moved\n");
	return 0;
}
