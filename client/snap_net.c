/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A networked snapshot's proxy files (docs/snapshots.md, "Authentication"): copied from the
 * sandbox into the snapshot (snap_net_save); at the seal, the SHA-256 of each goes into
 * meta.yaml (so the
 * MAC covers it); at a restore each file meta.yaml names is read once, checked against its
 * digest, and the sandbox's copy written from those checked bytes. A file meta.yaml does not
 * name is never copied. What the files hold is network.md's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/evp.h>

#include "client.h"

#define NET_FILE_MAX (16u << 20)

/* In the snapshot, and where the sandbox's proxy reads it; `needed`: a restore without it is
 * refused (the DNS map is the proxy's cache, made anew when absent). */
static const struct {
	const char *in_snapshot, *in_sandbox;
	bool needed;
} net_files[] = {
	{"net.policy.yaml", "policy.yaml", true}, {"net.credentials", "credentials", true},
	{"net.ca.pem", "ca.pem", true},		  {"net.ca.key", "ca.key", true},
	{"net.dns.map", "proxy/dns.map", false},
};
#define NET_FILES (sizeof(net_files) / sizeof(net_files[0]))
_Static_assert(NET_FILES <= SNAP_NET_FILES_MAX, "meta.yaml holds every net file");

bool snap_valid_net_file(const char *s)
{
	for (size_t i = 0; i < NET_FILES; i++)
		if (strcmp(s, net_files[i].in_snapshot) == 0)
			return true;
	return false;
}

static int sha256_hex(const void *buf, size_t len, char out[SNAP_HEX_LEN + 1])
{
	uint8_t md[32];
	unsigned mdlen = 0;

	if (!EVP_Digest(buf, len, md, &mdlen, EVP_sha256(), NULL) || mdlen != 32)
		return -EIO;
	for (unsigned i = 0; i < 32; i++)
		sprintf(out + 2 * i, "%02x", md[i]);
	return 0;
}

int snap_net_check(const char *dir, const struct snap_meta *m, char *err, size_t err_len)
{
	char path[4200], got[SNAP_HEX_LEN + 1], *buf = NULL;
	size_t len;
	int r;

	for (unsigned i = 0; i < m->nnet; i++) {
		if ((r = path_fmt(path, sizeof(path), "%s/%s", dir, m->net[i].file)) < 0)
			return r;
		r = read_file(path, NET_FILE_MAX, &buf, &len);
		if (r == 0)
			r = sha256_hex(buf, len, got);
		free(buf);
		buf = NULL;
		if (r < 0) {
			snprintf(err, err_len, "%s: %s", path, strerror(-r));
			return r;
		}
		if (strcmp(got, m->net[i].sha256) != 0) {
			snprintf(err, err_len, "%s: not the proxy file the snapshot recorded",
				 path);
			return -EBADMSG;
		}
	}
	return 0;
}

int snap_net_seal(const char *dir, struct snap_meta *m, char *err, size_t err_len)
{
	char path[4200], *buf = NULL;
	size_t len;
	int r;

	m->nnet = 0;
	if (!m->network)
		return 0;
	for (size_t i = 0; i < NET_FILES; i++) {
		if ((r = path_fmt(path, sizeof(path), "%s/%s", dir, net_files[i].in_snapshot)) < 0)
			return r;
		r = read_file(path, NET_FILE_MAX, &buf, &len);
		if (r == -ENOENT && !net_files[i].needed)
			continue;
		if (r == 0)
			r = sha256_hex(buf, len, m->net[m->nnet].sha256);
		free(buf);
		buf = NULL;
		if (r < 0) {
			snprintf(err, err_len, "hashing %s: %s", path, strerror(-r));
			return r;
		}
		snprintf(m->net[m->nnet++].file, sizeof(m->net[0].file), "%s",
			 net_files[i].in_snapshot);
	}
	return 0;
}

int snap_net_save(const struct sandbox *sb, const char *dir)
{
	char from[4200], to[4200], *buf = NULL;
	size_t len;
	int r;

	for (size_t i = 0; i < NET_FILES; i++) {
		if ((r = sandbox_path(sb, net_files[i].in_sandbox, from, sizeof(from))) < 0 ||
		    (r = path_fmt(to, sizeof(to), "%s/%s", dir, net_files[i].in_snapshot)) < 0)
			return r;
		r = read_file(from, NET_FILE_MAX, &buf, &len);
		if (r == -ENOENT && !net_files[i].needed)
			continue;
		if (r == 0)
			r = write_file_atomic(to, buf, len, 0600);
		free(buf);
		buf = NULL;
		if (r < 0)
			return r;
	}
	return 0;
}

/* The entry of meta.yaml for `file`, or NULL. */
static const char *net_digest(const struct snap_meta *m, const char *file)
{
	for (unsigned i = 0; i < m->nnet; i++)
		if (strcmp(m->net[i].file, file) == 0)
			return m->net[i].sha256;
	return NULL;
}

int snap_net_restore(const char *dir, const struct snap_meta *m, const struct sandbox *sb,
		     char *err, size_t err_len)
{
	char from[4200], to[4200], got[SNAP_HEX_LEN + 1], *buf = NULL;
	size_t len;
	int r;

	/* The proxy's own directory, root's until its next start makes it the proxy's. */
	if ((r = sandbox_path(sb, "proxy", to, sizeof(to))) < 0)
		return r;
	if (mkdir(to, 0700) < 0 && errno != EEXIST) {
		r = -errno;
		snprintf(err, err_len, "%s: %s", to, strerror(errno));
		return r;
	}
	for (size_t i = 0; i < NET_FILES; i++) {
		const char *want = net_digest(m, net_files[i].in_snapshot);

		if (!want) {
			if (!net_files[i].needed)
				continue;
			snprintf(err, err_len, "%s: meta.yaml has no digest of %s", dir,
				 net_files[i].in_snapshot);
			return -EBADMSG;
		}
		if ((r = path_fmt(from, sizeof(from), "%s/%s", dir, net_files[i].in_snapshot)) <
			    0 ||
		    (r = sandbox_path(sb, net_files[i].in_sandbox, to, sizeof(to))) < 0)
			return r;
		/* Read once; what is checked is what is written. */
		if ((r = read_file(from, NET_FILE_MAX, &buf, &len)) < 0) {
			snprintf(err, err_len, "%s: %s", from, strerror(-r));
			return r;
		}
		if ((r = sha256_hex(buf, len, got)) == 0 && strcmp(got, want) != 0) {
			snprintf(err, err_len, "%s: changed since the MAC", from);
			r = -EBADMSG;
		}
		if (r == 0 && (r = write_file_atomic(to, buf, len, 0600)) < 0)
			snprintf(err, err_len, "%s: %s", to, strerror(-r));
		free(buf);
		buf = NULL;
		if (r < 0)
			return r;
	}
	return 0;
}
