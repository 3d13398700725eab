/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Warm creates (docs/snapshots.md, "Ready snapshots"): `create` restores a ready snapshot of
 * the image, taken right after a boot of the same configuration reached its agent, instead
 * of booting. The snapshot's name is a key of everything that state depends on: the image's
 * hash (kernel, initrd, rootfs), the VMM binary and its state format, this host's CPU, the
 * memory, vCPUs, disk size and kernel command line. When none matches, create boots, and
 * then snapshots that fresh sandbox as the ready one (the first create of a key pays for it,
 * once: a lock makes racing creates take it once). Part of the lifecycle (client.h): what
 * goes wrong is a note in the caller's report, and the create boots instead.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "api_proto.h"
#include "client.h"

/* The lines of /proc/cpuinfo's first CPU that say what a guest may have seen of it. */
static void ready_cpu(EVP_MD_CTX *ctx)
{
	static const char *const keys[] = {"vendor_id", "cpu family", "model\t", "flags"};
	char *buf = NULL, *save = NULL;

	if (read_file("/proc/cpuinfo", 1 << 20, &buf, NULL) < 0)
		return;
	for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (line[0] == '\0')
			break; /* the first CPU's block ends */
		for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
			if (strncmp(line, keys[i], strlen(keys[i])) == 0)
				EVP_DigestUpdate(ctx, line, strlen(line));
	}
	free(buf);
}

int ready_name(const struct create_opts *o, const char *vmm, char *out, size_t len)
{
	char path[4200], *hash = NULL, line[512];
	uint8_t md[32];
	unsigned mdlen = 0;
	struct stat st;
	EVP_MD_CTX *ctx;
	int n, err;

	if (o->cold || o->ndisks || o->no_wait)
		return -ENOTSUP; /* docs/snapshots.md: the options that boot */
	if ((err = image_path(o->image, "hash", path, sizeof(path))) < 0 ||
	    (err = read_file(path, 128, &hash, NULL)) < 0)
		return err;
	if (stat(vmm, &st) < 0) {
		free(hash);
		return -errno;
	}
	ctx = EVP_MD_CTX_new();
	if (!ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) {
		EVP_MD_CTX_free(ctx);
		free(hash);
		return -ENOMEM;
	}
	n = snprintf(line, sizeof(line),
		     "ready 1\nimage %.64s\nvmm %llu %llu %llu %lld.%09ld\nstate %u meta %u\n"
		     "memory %llu cpus %u disk %llu\ncmdline %s\nnetwork %s\n",
		     hash, (unsigned long long)st.st_dev, (unsigned long long)st.st_ino,
		     (unsigned long long)st.st_size, (long long)st.st_mtim.tv_sec,
		     st.st_mtim.tv_nsec, 1u, SNAP_META_FORMAT, (unsigned long long)o->memory_mib,
		     o->cpus, (unsigned long long)o->disk_size_gib, GUEST_CMDLINE,
		     o->no_network ? "none" : "proxy " NET_GUEST_CMDLINE " " NET_GUEST_MAC);
	free(hash);
	EVP_DigestUpdate(ctx, line, (size_t)n);
	ready_cpu(ctx);
	err = EVP_DigestFinal_ex(ctx, md, &mdlen) && mdlen == 32 ? 0 : -EIO;
	EVP_MD_CTX_free(ctx);
	if (err)
		return err;
	return path_fmt(out, len, ".ready-%.24s-%02x%02x%02x%02x%02x%02x%02x%02x", o->image, md[0],
			md[1], md[2], md[3], md[4], md[5], md[6], md[7]);
}

int ready_restore(const struct create_opts *o, const char *name, struct sandbox *sb,
		  struct lc_report *r)
{
	char dir[4200], msg[640];
	struct snap_meta m;
	struct boot_src src;
	int err;

	if (snap_dir(name, dir, sizeof(dir)) < 0 || access(dir, F_OK) < 0)
		return -ENOENT;
	if (snap_open(dir, &m, msg, sizeof(msg)) < 0 ||
	    (!m.has_memory && snprintf(msg, sizeof(msg), "no memory file") > 0)) {
		lc_note(r, "the ready snapshot %s is unusable (%s): booting instead", name, msg);
		return -EBADMSG;
	}
	src = (struct boot_src){.dir = dir};
	if (m.network != !o->no_network) {
		lc_note(r,
			"the ready snapshot %s is unusable (its network is not this create's): "
			"booting instead",
			name);
		return -EBADMSG;
	}
	if ((err = sandbox_restore_create(dir, &m, o, &src, sb, r)) < 0) {
		lc_demote(r);
		lc_note(r, "restoring the ready snapshot %s failed: booting instead", name);
		return -EIO;
	}
	return 0;
}

int snapshot_take_once(struct sandbox *sb, const char *name, struct lc_report *r)
{
	char lock[4200], dir[4200];
	struct snap_take t = {.name = name};
	int fd, err = 0;

	if (path_fmt(lock, sizeof(lock), "%s/snapshots/%s.lock", state_home(), name) < 0 ||
	    snap_dir(name, dir, sizeof(dir)) < 0)
		return lc_fail(r, -ENAMETOOLONG, "%s: a snapshot name too long", name);
	fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return lc_fail(r, -errno, "%s: %s", lock, strerror(errno));
	/* Another sandboxctl is making it: this one goes on without. */
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		close(fd);
		return -EBUSY;
	}
	if (access(dir, F_OK) < 0)
		err = sandbox_snapshot(sb, &t, r);
	close(fd);
	return err;
}

void ready_make(struct sandbox *sb, const char *name, struct lc_report *r)
{
	char dir[4200];
	int err;

	if (snap_dir(name, dir, sizeof(dir)) == 0 && access(dir, F_OK) < 0 &&
	    (err = snapshot_take_once(sb, name, r)) < 0 && err != -EBUSY) {
		lc_demote(r);
		lc_note(r, "%s: could not make the ready snapshot %s (the next create boots too)",
			sb->id, name);
	}
}
