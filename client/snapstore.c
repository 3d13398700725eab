/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Snapshots on the host (docs/snapshots.md): $SANDBOX_HOME/snapshots/<name>/ holds the VMM's
 * `state.fdt` and `memory`, hard links of the sandbox's frozen disk layers (same names: a
 * layer's parent path is relative to its directory, and both trees sit two levels below
 * $SANDBOX_HOME), `meta.yaml` and `mac`. The MAC is an HMAC-SHA256, keyed by the host's
 * $SANDBOX_HOME/snapshot.key, over meta.yaml then state.fdt: a snapshot is checked before a
 * byte of either is parsed, and meta.yaml carries the SHA-256 of the state, of each layer and
 * proxy file, and the memory file's page digest (snap_memory.c, snap_net.c).
 */
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "client.h"

#define META_MAX   (64u << 10)
#define STATE_MAX  (64u << 20) /* the VMM's SNAP_STATE_MAX */
#define LAYER_READ (1u << 20)

static int snap_fail(char *err, size_t len, int ret, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int snap_fail(char *err, size_t len, int ret, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
	return ret;
}

int snap_dir(const char *name, char *out, size_t len)
{
	return path_fmt(out, len, "%s/snapshots/%s", state_home(), name);
}

/* ---- the key ---- */

int snap_key(uint8_t key[SNAP_KEY_LEN])
{
	char path[4200];
	char *buf = NULL;
	size_t len;
	struct stat st;
	int err;

	if ((err = path_fmt(path, sizeof(path), "%s/snapshot.key", state_home())) < 0)
		return err;
	err = read_file(path, 64, &buf, &len);
	if (err == -ENOENT) {
		/* First use: a random key, written atomically (two racing makers: the rename of
		 * one wins, and both then read the same file below). */
		uint8_t fresh[SNAP_KEY_LEN];

		if (getrandom(fresh, sizeof(fresh), 0) != (ssize_t)sizeof(fresh))
			return -EIO;
		if ((err = write_file_atomic(path, fresh, sizeof(fresh), 0600)) < 0)
			return err;
		OPENSSL_cleanse(fresh, sizeof(fresh));
		err = read_file(path, 64, &buf, &len);
	}
	if (err < 0)
		return err;
	if (len != SNAP_KEY_LEN || stat(path, &st) < 0 || (st.st_mode & 077)) {
		OPENSSL_cleanse(buf, len);
		free(buf);
		return -EPERM; /* a key others can read, or not ours */
	}
	memcpy(key, buf, SNAP_KEY_LEN);
	OPENSSL_cleanse(buf, len);
	free(buf);
	return 0;
}

/* ---- digests ---- */

static void hex(const uint8_t *b, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
}

int snap_file_sha256(const char *path, char out[SNAP_HEX_LEN + 1])
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	uint8_t md[32], *buf = malloc(LAYER_READ);
	unsigned mdlen = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC), err = 0;
	off_t data = 0, hole;

	if (!ctx || !buf || fd < 0 || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) {
		err = fd < 0 ? -errno : -ENOMEM;
		goto out;
	}
	/*
	 * Sparse files (an overlay of a 10 GiB disk holds a few MiB) are hashed by their data
	 * extents: each as its offset and length, then its bytes. Holes cost nothing, and a
	 * hole where data was (or the reverse) changes the digest.
	 */
	for (;;) {
		uint64_t hdr[2];

		data = lseek(fd, data, SEEK_DATA);
		if (data < 0) {
			if (errno != ENXIO)
				err = -errno;
			break;
		}
		hole = lseek(fd, data, SEEK_HOLE);
		if (hole < 0) {
			err = -errno;
			break;
		}
		hdr[0] = htole64((uint64_t)data);
		hdr[1] = htole64((uint64_t)(hole - data));
		EVP_DigestUpdate(ctx, hdr, sizeof(hdr));
		while (data < hole) {
			size_t want = (size_t)(hole - data) < LAYER_READ ? (size_t)(hole - data)
									 : LAYER_READ;
			ssize_t n = pread(fd, buf, want, data);

			if (n <= 0) {
				err = n < 0 ? -errno : -EIO;
				goto out;
			}
			EVP_DigestUpdate(ctx, buf, (size_t)n);
			data += n;
		}
	}
	if (!err && EVP_DigestFinal_ex(ctx, md, &mdlen) && mdlen == 32)
		hex(md, 32, out);
	else if (!err)
		err = -EIO;
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	EVP_MD_CTX_free(ctx);
	return err;
}

/*
 * The digest snap_file_sha256 gives a file without holes holding `len` bytes of `buf`: one
 * data extent (a file written whole has no hole for SEEK_HOLE to find). For the state,
 * which sandboxctl has in memory already: hashed as it was read and authenticated, not read
 * again.
 */
static int snap_buf_sha256(const void *buf, size_t len, char out[SNAP_HEX_LEN + 1])
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	uint64_t hdr[2] = {htole64(0), htole64((uint64_t)len)};
	uint8_t md[32];
	unsigned mdlen = 0;
	int err = -EIO;

	if (ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) &&
	    (!len ||
	     (EVP_DigestUpdate(ctx, hdr, sizeof(hdr)) && EVP_DigestUpdate(ctx, buf, len))) &&
	    EVP_DigestFinal_ex(ctx, md, &mdlen) && mdlen == 32) {
		hex(md, 32, out);
		err = 0;
	}
	EVP_MD_CTX_free(ctx);
	return err;
}

/* HMAC-SHA256 of a || b. */
static int snap_hmac(const uint8_t key[SNAP_KEY_LEN], const void *a, size_t alen, const void *b,
		     size_t blen, char out[SNAP_HEX_LEN + 1])
{
	uint8_t *buf = malloc(alen + blen + 1), md[32];
	size_t mdlen = 0;
	bool ok;

	if (!buf)
		return -ENOMEM;
	memcpy(buf, a, alen);
	memcpy(buf + alen, b, blen);
	ok = EVP_Q_mac(NULL, "HMAC", NULL, "SHA256", NULL, key, SNAP_KEY_LEN, buf, alen + blen, md,
		       sizeof(md), &mdlen) != NULL &&
	     mdlen == 32;
	free(buf);
	if (!ok)
		return -EIO;
	hex(md, 32, out);
	return 0;
}

/* ---- meta.yaml ---- */

static int meta_format(const struct snap_meta *m, char *buf, size_t len)
{
	size_t n = 0;
	int r;

#define META_PUT(...)                                                                              \
	do {                                                                                       \
		r = snprintf(buf + n, len - n, __VA_ARGS__);                                       \
		if (r < 0 || (size_t)r >= len - n)                                                 \
			return -E2BIG;                                                             \
		n += (size_t)r;                                                                    \
	} while (0)
	META_PUT("# A sandbox snapshot (docs/snapshots.md). Authenticated by `mac`: edit "
		 "nothing.\n");
	META_PUT("format: %u\n", m->format);
	META_PUT("name: %s\n", m->name);
	META_PUT("parent: \"%s\"\n", m->parent);
	META_PUT("sandbox: \"%s\"\n", m->sandbox);
	META_PUT("image: %s\n", m->image);
	META_PUT("created: %llu\n", (unsigned long long)m->created);
	META_PUT("cpus: %u\n", m->cpus);
	META_PUT("memory_mib: %llu\n", (unsigned long long)m->memory_mib);
	META_PUT("memory_bytes: %llu\n", (unsigned long long)m->memory_bytes);
	META_PUT("state_bytes: %llu\n", (unsigned long long)m->state_bytes);
	META_PUT("state_sha256: %s\n", m->state_sha256);
	META_PUT("root_layer: %s\n", m->root_layer);
	META_PUT("network: %s\n", m->network ? "proxy" : "none");
	META_PUT("memory_sha256: %s\n", m->memory_sha256[0] ? m->memory_sha256 : "none");
	META_PUT("net_files:\n");
	for (unsigned i = 0; i < m->nnet; i++)
		META_PUT("  - {net: %s, sha256: %s}\n", m->net[i].file, m->net[i].sha256);
	META_PUT("layers:\n");
	for (unsigned i = 0; i < m->nlayers; i++)
		META_PUT("  - {file: %s, sha256: %s}\n", m->layers[i].file, m->layers[i].sha256);
	META_PUT("disks:\n");
	for (unsigned i = 0; i < m->ndisks; i++)
		META_PUT("  - {path: \"%s\", ro: true}\n", m->disks[i]);
#undef META_PUT
	return (int)n;
}

static bool is_hex64(const char *s)
{
	if (strlen(s) != SNAP_HEX_LEN)
		return false;
	for (; *s; s++)
		if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
			return false;
	return true;
}

/* Strip one pair of double quotes; NULL when unbalanced. */
static char *unquote(char *v)
{
	size_t n = strlen(v);

	if (n && v[0] == '"') {
		if (n < 2 || v[n - 1] != '"')
			return NULL;
		v[n - 1] = '\0';
		return v + 1;
	}
	return v;
}

/*
 * The exact format meta_format writes, and nothing else: a MAC-checked file still gets a
 * strict parser (a newer sandboxctl's key is an error here, not silently dropped).
 */
static int meta_parse(char *buf, struct snap_meta *m, char *err, size_t err_len)
{
	char *save = NULL;
	unsigned line_no = 0, seen = 0;
	enum { NONE, LAYERS, DISKS, NET } list = NONE;
	uint64_t v;

	memset(m, 0, sizeof(*m));
	for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char key[32], val[DISK_PATH_MAX + 8], val2[128];

		line_no++;
		if (line[0] == '#')
			continue;
		if (strncmp(line, "  - {file: ", 11) == 0 && list == LAYERS) {
			if (m->nlayers == SNAP_LAYERS_MAX ||
			    sscanf(line, "  - {file: %63[^,], sha256: %64[0-9a-f]}", val, val2) !=
				    2 ||
			    !snap_valid_layer_name(val) || !is_hex64(val2))
				goto bad;
			snprintf(m->layers[m->nlayers].file, sizeof(m->layers[0].file), "%s", val);
			snprintf(m->layers[m->nlayers++].sha256, SNAP_HEX_LEN + 1, "%s", val2);
			continue;
		}
		if (strncmp(line, "  - {net: ", 10) == 0 && list == NET) {
			if (m->nnet == SNAP_NET_FILES_MAX ||
			    sscanf(line, "  - {net: %23[^,], sha256: %64[0-9a-f]}", val, val2) !=
				    2 ||
			    !snap_valid_net_file(val) || !is_hex64(val2))
				goto bad;
			for (unsigned i = 0; i < m->nnet; i++)
				if (strcmp(m->net[i].file, val) == 0)
					goto bad; /* twice */
			snprintf(m->net[m->nnet].file, sizeof(m->net[0].file), "%s", val);
			snprintf(m->net[m->nnet++].sha256, SNAP_HEX_LEN + 1, "%s", val2);
			continue;
		}
		if (strncmp(line, "  - {path: \"", 12) == 0 && list == DISKS) {
			size_t n = strlen(line);

			if (m->ndisks == EXTRA_DISKS_MAX || n < 24 ||
			    strcmp(line + n - 12, "\", ro: true}") != 0 ||
			    n - 24 >= DISK_PATH_MAX || line[12] != '/')
				goto bad;
			memcpy(m->disks[m->ndisks], line + 12, n - 24);
			m->disks[m->ndisks++][n - 24] = '\0';
			continue;
		}
		if (sscanf(line, "%31[a-z_0-9]: %1031[^\n]", key, val) != 2) {
			if (sscanf(line, "%31[a-z_0-9]:%c", key, val) == 1 &&
			    (strcmp(key, "layers") == 0 || strcmp(key, "disks") == 0 ||
			     strcmp(key, "net_files") == 0)) {
				list = key[0] == 'l' ? LAYERS : key[0] == 'd' ? DISKS : NET;
				seen |= key[0] == 'l'	? 1u << 12
					: key[0] == 'd' ? 1u << 13
							: 1u << 14;
				continue;
			}
			goto bad;
		}
		list = NONE;
		char *u = unquote(val);
		if (!u)
			goto bad;
#define META_NUM(k, bit, min, max, dst)                                                            \
	if (strcmp(key, k) == 0) {                                                                 \
		if (!parse_u64(u, min, max, &v))                                                   \
			goto bad;                                                                  \
		dst = v;                                                                           \
		seen |= 1u << (bit);                                                               \
		continue;                                                                          \
	}
#define META_STR(k, bit, check, dst)                                                               \
	if (strcmp(key, k) == 0) {                                                                 \
		if (strlen(u) >= sizeof(dst) || !(check))                                          \
			goto bad;                                                                  \
		snprintf(dst, sizeof(dst), "%s", u);                                               \
		seen |= 1u << (bit);                                                               \
		continue;                                                                          \
	}
		META_NUM("format", 0, 1, 1000000, m->format)
		META_STR("name", 1, valid_name(u) || (*u == '.' && valid_name(u + 1)), m->name)
		META_STR("parent", 2, !*u || valid_name(u) || (*u == '.' && valid_name(u + 1)),
			 m->parent)
		META_STR("sandbox", 3, !*u || strlen(u) == ID_LEN, m->sandbox)
		META_STR("image", 4, valid_name(u), m->image)
		META_NUM("created", 5, 0, UINT64_MAX, m->created)
		META_NUM("cpus", 6, 1, 32, m->cpus)
		META_NUM("memory_mib", 7, 1, 1u << 20, m->memory_mib)
		META_NUM("memory_bytes", 8, 1, 1ull << 40, m->memory_bytes)
		META_NUM("state_bytes", 9, 64, STATE_MAX, m->state_bytes)
		META_STR("state_sha256", 10, is_hex64(u), m->state_sha256)
		META_STR("root_layer", 11, snap_valid_layer_name(u), m->root_layer)
		if (strcmp(key, "memory_sha256") == 0) {
			if (strcmp(u, "none") != 0 && !is_hex64(u))
				goto bad;
			snprintf(m->memory_sha256, sizeof(m->memory_sha256), "%s",
				 strcmp(u, "none") == 0 ? "" : u);
			seen |= 1u << 15;
			continue;
		}
		if (strcmp(key, "network") == 0) {
			if (strcmp(u, "proxy") != 0 && strcmp(u, "none") != 0)
				goto bad;
			m->network = u[0] == 'p';
			continue;
		}
#undef META_NUM
#undef META_STR
		goto bad;
	}
	/* The format first: an older one lacks keys this one needs, and says so plainly. */
	if ((seen & 1u) && m->format != SNAP_META_FORMAT)
		return snap_fail(err, err_len, -EPROTONOSUPPORT,
				 "snapshot format %u, this sandboxctl reads format %u%s", m->format,
				 SNAP_META_FORMAT,
				 m->format < SNAP_META_FORMAT
					 ? " (an older sandboxctl's, whose MAC did not cover the "
					   "memory and the proxy's files: take the snapshot again)"
					 : "");
	if (seen != (1u << 16) - 1)
		return snap_fail(err, err_len, -EBADMSG, "meta.yaml: a key is missing");
	return 0;
bad:
	return snap_fail(err, err_len, -EBADMSG, "meta.yaml:%u: not what sandboxctl writes",
			 line_no);
}

/* ---- sealing and opening ---- */

static int read_state(const char *dir, char **buf, size_t *len)
{
	char path[4200];
	int err;

	if ((err = path_fmt(path, sizeof(path), "%s/state.fdt", dir)) < 0)
		return err;
	return read_file(path, STATE_MAX, buf, len);
}

/* meta.yaml and state.fdt of dir, as they are (malloc'd): what the MAC covers. */
static int snap_read_signed(const char *dir, char **meta, size_t *meta_len, char **state,
			    size_t *state_len, char *err, size_t err_len)
{
	char path[4200];
	int r;

	if ((r = path_fmt(path, sizeof(path), "%s/meta.yaml", dir)) < 0 ||
	    (r = read_file(path, META_MAX, meta, meta_len)) < 0)
		return snap_fail(err, err_len, r, "%s: %s", path,
				 r == -ENOENT ? "no such snapshot (no meta.yaml)" : strerror(-r));
	if ((r = read_state(dir, state, state_len)) < 0)
		return snap_fail(err, err_len, r, "%s/state.fdt: %s", dir, strerror(-r));
	return 0;
}

/* dir/mac: the HMAC under key of meta then state. */
static int snap_write_mac(const uint8_t key[SNAP_KEY_LEN], const char *dir, const char *meta,
			  size_t meta_len, const char *state, size_t state_len, char *err,
			  size_t err_len)
{
	char path[4200], mac[SNAP_HEX_LEN + 2];
	int r;

	if ((r = snap_hmac(key, meta, meta_len, state, state_len, mac)) < 0)
		return snap_fail(err, err_len, r, "computing the MAC failed");
	strcat(mac, "\n");
	if ((r = path_fmt(path, sizeof(path), "%s/mac", dir)) < 0 ||
	    (r = write_file_atomic(path, mac, strlen(mac), 0600)) < 0)
		return snap_fail(err, err_len, r, "writing %s: %s", path, strerror(-r));
	return 0;
}

static int seal_as(const char *dir, struct snap_meta *m, bool net, char *err, size_t err_len);

int snap_seal(const char *dir, struct snap_meta *m, char *err, size_t err_len)
{
	return seal_as(dir, m, true, err, err_len);
}

int snap_seal_bare(const char *dir, struct snap_meta *m, char *err, size_t err_len)
{
	m->nnet = 0;
	return seal_as(dir, m, false, err, err_len);
}

static int seal_as(const char *dir, struct snap_meta *m, bool net, char *err, size_t err_len)
{
	uint8_t key[SNAP_KEY_LEN];
	char path[4200], *meta = NULL, *state = NULL;
	size_t state_len;
	int n, r;

	if ((r = snap_key(key)) < 0)
		return snap_fail(err, err_len, r, "the snapshot key %s/snapshot.key: %s",
				 state_home(), strerror(-r));
	if ((r = read_state(dir, &state, &state_len)) < 0) {
		snap_fail(err, err_len, r, "%s/state.fdt: %s", dir, strerror(-r));
		goto out;
	}
	m->state_bytes = state_len;
	if ((r = snap_buf_sha256(state, state_len, m->state_sha256)) < 0) {
		snap_fail(err, err_len, r, "hashing the state: %s", strerror(-r));
		goto out;
	}
	for (unsigned i = 0; i < m->nlayers; i++) {
		if ((r = path_fmt(path, sizeof(path), "%s/%s", dir, m->layers[i].file)) < 0 ||
		    (r = snap_file_sha256(path, m->layers[i].sha256)) < 0) {
			snap_fail(err, err_len, r, "hashing %s: %s", path, strerror(-r));
			goto out;
		}
	}
	if (net && (r = snap_net_seal(dir, m, err, err_len)) < 0)
		goto out;
	/* The state read-only too; the memory file (when there is one) proven to have no
	 * writer left, made read-only, and recorded as checked. */
	if ((r = path_fmt(path, sizeof(path), "%s/state.fdt", dir)) < 0 ||
	    (chmod(path, 0400) < 0 && (r = -errno))) {
		snap_fail(err, err_len, r, "%s: %s", path, strerror(-r));
		goto out;
	}
	if (m->memory_sha256[0] && (r = snap_memory_seal(dir, m->memory_sha256, err, err_len)) < 0)
		goto out;
	meta = malloc(META_MAX);
	if (!meta) {
		r = -ENOMEM;
		goto out;
	}
	if ((n = meta_format(m, meta, META_MAX)) < 0) {
		r = snap_fail(err, err_len, n, "meta.yaml too large");
		goto out;
	}
	if ((r = path_fmt(path, sizeof(path), "%s/meta.yaml", dir)) < 0 ||
	    (r = write_file_atomic(path, meta, (size_t)n, 0600)) < 0) {
		snap_fail(err, err_len, r, "writing %s: %s", path, strerror(-r));
		goto out;
	}
	r = snap_write_mac(key, dir, meta, (size_t)n, state, state_len, err, err_len);
out:
	OPENSSL_cleanse(key, sizeof(key));
	free(meta);
	free(state);
	return r;
}

int snap_adopt(const char *dir, char *err, size_t err_len)
{
	uint8_t key[SNAP_KEY_LEN];
	char *meta = NULL, *state = NULL;
	size_t meta_len, state_len;
	int r;

	if ((r = snap_key(key)) < 0)
		return snap_fail(err, err_len, r, "the snapshot key %s/snapshot.key: %s",
				 state_home(), strerror(-r));
	if ((r = snap_read_signed(dir, &meta, &meta_len, &state, &state_len, err, err_len)) == 0)
		r = snap_write_mac(key, dir, meta, meta_len, state, state_len, err, err_len);
	OPENSSL_cleanse(key, sizeof(key));
	free(meta);
	free(state);
	return r;
}

static int snap_open_as(const char *dir, struct snap_meta *m, bool lazy, char *err, size_t err_len);

int snap_open(const char *dir, struct snap_meta *m, char *err, size_t err_len)
{
	return snap_open_as(dir, m, false, err, err_len);
}

int snap_open_lazy(const char *dir, struct snap_meta *m, char *err, size_t err_len)
{
	return snap_open_as(dir, m, true, err, err_len);
}

static int snap_open_as(const char *dir, struct snap_meta *m, bool lazy, char *err, size_t err_len)
{
	uint8_t key[SNAP_KEY_LEN];
	char path[4200], want[SNAP_HEX_LEN + 1], got[SNAP_HEX_LEN + 1];
	char *meta = NULL, *state = NULL, *mac = NULL;
	size_t meta_len, state_len, mac_len;
	struct stat st;
	int r;

	if ((r = snap_key(key)) < 0)
		return snap_fail(err, err_len, r, "the snapshot key %s/snapshot.key: %s",
				 state_home(), strerror(-r));
	if ((r = snap_read_signed(dir, &meta, &meta_len, &state, &state_len, err, err_len)) < 0)
		goto out;
	if ((r = path_fmt(path, sizeof(path), "%s/mac", dir)) < 0 ||
	    (r = read_file(path, 128, &mac, &mac_len)) < 0) {
		snap_fail(err, err_len, r, "%s: %s", path, strerror(-r));
		goto out;
	}
	/* Authenticate first: nothing of meta or state is parsed before this. */
	if ((r = snap_hmac(key, meta, meta_len, state, state_len, want)) < 0)
		goto out;
	if (mac_len != SNAP_HEX_LEN + 1 || mac[SNAP_HEX_LEN] != '\n' ||
	    CRYPTO_memcmp(mac, want, SNAP_HEX_LEN) != 0) {
		r = snap_fail(err, err_len, -EBADMSG,
			      "%s: the MAC does not match: the snapshot was changed or made with "
			      "another host's key",
			      dir);
		goto out;
	}
	if ((r = meta_parse(meta, m, err, err_len)) < 0)
		goto out;
	if (m->format != SNAP_META_FORMAT) {
		r = snap_fail(err, err_len, -EPROTONOSUPPORT,
			      "%s: snapshot format %u, this sandboxctl reads format %u", dir,
			      m->format, SNAP_META_FORMAT);
		goto out;
	}
	if ((r = snap_buf_sha256(state, state_len, got)) < 0)
		goto out;
	if (strcmp(got, m->state_sha256) != 0 || state_len != m->state_bytes) {
		r = snap_fail(err, err_len, -EBADMSG, "%s: state.fdt changed since the MAC", dir);
		goto out;
	}
	/* The memory file's size here; its content when it is restored (snap_restore_open:
	 * hashing all of RAM is not for every listing). A fork's snapshot has none: its
	 * children map the parent's frozen RAM. */
	if ((r = path_fmt(path, sizeof(path), "%s/memory", dir)) < 0)
		goto out;
	if (!m->memory_sha256[0]) {
		/* none under the MAC: a memory file there is not the snapshot's */
	} else if (lazy && lstat(path, &st) < 0 && errno == ENOENT) {
		/* a lazy restore's: its memory comes from a pager, checked chunk by chunk */
	} else if (stat(path, &st) < 0) {
		r = snap_fail(err, err_len, -EBADMSG, "%s: the memory file is gone", dir);
		goto out;
	} else {
		if ((uint64_t)st.st_size != m->memory_bytes) {
			r = snap_fail(err, err_len, -EBADMSG,
				      "%s: the memory file is %llu bytes, the snapshot's RAM is "
				      "%llu",
				      dir, (unsigned long long)st.st_size,
				      (unsigned long long)m->memory_bytes);
			goto out;
		}
		m->has_memory = true;
	}
	/* A lazy restore's layers hold only their heads yet: each chunk is checked as it comes
	 * (store/snap_lazy_disk.c), against the sealed manifest. */
	for (unsigned i = 0; i < m->nlayers && !lazy; i++) {
		if ((r = path_fmt(path, sizeof(path), "%s/%s", dir, m->layers[i].file)) < 0 ||
		    (r = snap_file_sha256(path, got)) < 0) {
			snap_fail(err, err_len, r, "%s: %s", path, strerror(-r));
			goto out;
		}
		if (strcmp(got, m->layers[i].sha256) != 0) {
			r = snap_fail(err, err_len, -EBADMSG, "%s: the disk layer changed", path);
			goto out;
		}
	}
	r = 0;
out:
	OPENSSL_cleanse(key, sizeof(key));
	free(meta);
	free(state);
	free(mac);
	return r;
}

int snap_restore_open(const char *dir, const struct snap_meta *m, bool memory, struct snap_fds *fds,
		      char *err, size_t err_len)
{
	char *state = NULL, got[SNAP_HEX_LEN + 1];
	size_t state_len;
	int r;

	fds->state_fd = fds->memory_fd = -1;
	/* Read once more, checked against the authenticated digest: these bytes, and no later
	 * content of the file, are what the VMM loads. */
	if ((r = read_state(dir, &state, &state_len)) < 0) {
		snap_fail(err, err_len, r, "%s/state.fdt: %s", dir, strerror(-r));
		goto fail;
	}
	if ((r = snap_buf_sha256(state, state_len, got)) < 0)
		goto fail;
	if (strcmp(got, m->state_sha256) != 0 || state_len != m->state_bytes) {
		r = snap_fail(err, err_len, -EBADMSG, "%s: state.fdt changed since the MAC", dir);
		goto fail;
	}
	if ((fds->state_fd = snap_state_memfd(state, state_len)) < 0) {
		r = snap_fail(err, err_len, fds->state_fd, "a sealed copy of the state: %s",
			      strerror(-fds->state_fd));
		goto fail;
	}
	if (memory) {
		if (!m->memory_sha256[0]) {
			r = snap_fail(err, err_len, -EBADMSG, "%s: the snapshot has no memory file",
				      dir);
			goto fail;
		}
		if ((r = snap_memory_open(dir, m, &fds->memory_fd, err, err_len)) < 0)
			goto fail;
	}
	free(state);
	return 0;
fail:
	free(state);
	snap_restore_close(fds);
	return r;
}

void snap_restore_close(struct snap_fds *fds)
{
	if (fds->state_fd >= 0)
		close(fds->state_fd);
	if (fds->memory_fd >= 0)
		close(fds->memory_fd);
	fds->state_fd = fds->memory_fd = -1;
}

int snap_foreach(int (*fn)(const char *name, void *opaque), void *opaque)
{
	char path[4200];
	struct dirent *e;
	DIR *d;
	int n = 0, r;

	if ((r = path_fmt(path, sizeof(path), "%s/snapshots", state_home())) < 0)
		return r;
	d = opendir(path);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((e = readdir(d))) {
		struct stat st;

		/* Names, and hidden ".name"s (a fork's); temporary "+tmp-" ones are not, nor
		 * the lock files beside ready and job snapshots (".ready-X.lock"). */
		if (!valid_name(e->d_name) && !(e->d_name[0] == '.' && valid_name(e->d_name + 1)))
			continue;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISDIR(st.st_mode))
			continue;
		if ((r = fn(e->d_name, opaque)) < 0) {
			closedir(d);
			return r;
		}
		n++;
	}
	closedir(d);
	return n;
}
