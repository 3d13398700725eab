/* SPDX-License-Identifier: Apache-2.0 */
/*
 * API keys, workspaces' quotas and secrets (docs/api.md, "Keys and tenants").
 *
 * A key is 256 random bits shown once as "sk-<id>-<secret hex>"; service/keys/<id> keeps its
 * workspace and the SHA-256 of the secret, never the secret. A check hashes what the client
 * sent and compares in constant time. Secrets are AES-256-GCM under service/server.key, the
 * workspace and name bound in as associated data, so a file moved to another name or
 * workspace does not decrypt.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

#include "hostutil.h"
#include "sandboxd.h"

#define KEYS_SETTLED_MS 2000

static struct sd_key keys[SD_KEYS_MAX];
static unsigned nkeys;

/* The key of that id, else NULL. */
static struct sd_key *key_find(const char *id)
{
	for (unsigned i = 0; i < nkeys; i++)
		if (strcmp(keys[i].id, id) == 0)
			return &keys[i];
	return NULL;
}

const char *sd_dir(void)
{
	static char dir[4096];

	if (!dir[0]) {
		const char *home = getenv("SANDBOX_HOME");

		snprintf(dir, sizeof(dir), "%s/service", home && *home ? home : "/var/lib/sandbox");
	}
	return dir;
}

int sd_dir_init(void)
{
	static const char *const subs[] = {"",	     "/keys",	   "/quota",	  "/secrets",
					   "/boxes", "/snapshots", "/registries", "/usage",
					   "/tmp"};
	char p[4200];

	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
		snprintf(p, sizeof(p), "%s%s", sd_dir(), subs[i]);
		if (mkdir(p, 0700) < 0 && errno != EEXIST)
			return -errno;
	}
	return 0;
}

/* A workspace's name: the lifecycle layer's rule for names (valid_name; 63 at most, as
 * SD_WORKSPACE_MAX). */
bool valid_workspace(const char *s)
{
	return valid_name(s);
}

static void hex(const uint8_t *b, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
}

static int nibble(char c)
{
	return c >= '0' && c <= '9'   ? c - '0'
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10
				      : -1;
}

/* n bytes from 2n hex digits (every request's key: no sscanf, 13% of a GET's CPU) */
static bool unhex(const char *s, uint8_t *out, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int hi = nibble(s[2 * i]), lo = hi < 0 ? -1 : nibble(s[2 * i + 1]);

		if (lo < 0)
			return false;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return s[2 * n] == 0 || s[2 * n] == '\n';
}

static bool is_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

static int key_parse(const char *id, const char *text, struct sd_key *k)
{
	memset(k, 0, sizeof(*k));
	memcpy(k->id, id, SD_KEY_ID_LEN);
	k->id[SD_KEY_ID_LEN] = 0;
	char ws[SD_WORKSPACE_MAX + 2], h[80];
	unsigned long long created;
	int revoked;

	if (sscanf(text, "workspace %64s\nhash %70s\ncreated %llu\nrevoked %d", ws, h, &created,
		   &revoked) != 4 ||
	    !valid_workspace(ws) || strlen(h) != 64 || !unhex(h, k->hash, 32))
		return -EBADMSG;
	snprintf(k->workspace, sizeof(k->workspace), "%.63s", ws);
	k->created = created;
	k->revoked = revoked != 0;
	return 0;
}

static int key_write(const struct sd_key *k)
{
	char path[4200], h[65], text[256];

	hex(k->hash, 32, h);
	int n = snprintf(text, sizeof(text),
			 "workspace %s\nhash %s\ncreated %" PRIu64 "\nrevoked %d\n", k->workspace,
			 h, k->created, k->revoked);

	snprintf(path, sizeof(path), "%s/keys/%s", sd_dir(), k->id);
	return write_file_atomic(path, text, (size_t)n, 0600);
}

int keys_load(void)
{
	char path[4200];
	DIR *d;

	snprintf(path, sizeof(path), "%s/keys", sd_dir());
	d = opendir(path);
	if (!d)
		return -errno;
	/* read whole into another set, then taken. A file that cannot be read now (a key
	 * unknown, or a revoke not seen) keeps what the last read had of that key; one gone
	 * since the listing is gone. */
	static struct sd_key loaded[SD_KEYS_MAX];
	unsigned n = 0;
	struct dirent *e;

	while ((e = readdir(d)) && n < SD_KEYS_MAX) {
		if (strlen(e->d_name) != SD_KEY_ID_LEN || !is_hex(e->d_name, SD_KEY_ID_LEN))
			continue;
		char file[4300], *text = NULL;
		size_t len;
		int err;

		snprintf(file, sizeof(file), "%s/%s", path, e->d_name);
		if ((err = read_file(file, 4096, &text, &len)) < 0) {
			const struct sd_key *was = key_find(e->d_name);

			if (was)
				loaded[n++] = *was;
			if (err != -ENOENT)
				sd_log("%s: cannot be read (%s): %s", file, strerror(-err),
				       was ? "kept as it was" : "not a key here");
			continue;
		}
		if (key_parse(e->d_name, text, &loaded[n]) == 0)
			n++;
		else
			sd_log("%s: not a key file, ignored", file);
		free(text);
	}
	closedir(d);
	memcpy(keys, loaded, n * sizeof(keys[0]));
	nkeys = n;
	return 0;
}

int keys_create(const char *workspace, char text[SD_KEY_TEXT_LEN + 1], char id[SD_KEY_ID_LEN + 1])
{
	uint8_t rid[SD_KEY_ID_LEN / 2], secret[32];
	struct sd_key k = {0};
	char sh[65];

	if (!valid_workspace(workspace))
		return -EINVAL;
	if (getrandom(rid, sizeof(rid), 0) != sizeof(rid) ||
	    getrandom(secret, sizeof(secret), 0) != sizeof(secret))
		return -EIO;
	hex(rid, sizeof(rid), k.id);
	snprintf(k.workspace, sizeof(k.workspace), "%s", workspace);
	SHA256(secret, sizeof(secret), k.hash);
	k.created = (uint64_t)time(NULL);
	int err = key_write(&k);

	if (err < 0)
		return err;
	hex(secret, sizeof(secret), sh);
	OPENSSL_cleanse(secret, sizeof(secret));
	snprintf(text, SD_KEY_TEXT_LEN + 1, "sk-%s-%s", k.id, sh);
	OPENSSL_cleanse(sh, sizeof(sh));
	snprintf(id, SD_KEY_ID_LEN + 1, "%s", k.id);
	return 0;
}

int keys_mirror(const char *id, const char *text)
{
	struct sd_key k;
	char path[4200], *old = NULL;
	size_t len;

	if (strlen(id) != SD_KEY_ID_LEN || !is_hex(id, SD_KEY_ID_LEN) ||
	    key_parse(id, text, &k) < 0)
		return -EBADMSG;
	snprintf(path, sizeof(path), "%s/keys/%s", sd_dir(), id);
	if (read_file(path, 4096, &old, &len) == 0) {
		struct sd_key was;
		bool same = key_parse(id, old, &was) == 0 && was.revoked == k.revoked &&
			    memcmp(was.hash, k.hash, 32) == 0 &&
			    strcmp(was.workspace, k.workspace) == 0;

		free(old);
		/* a key revoked here stays revoked, whatever a record says */
		if (same || was.revoked)
			return 0;
	}
	return key_write(&k);
}

int keys_text(const char *id, char *out, size_t len)
{
	const struct sd_key *k = key_find(id);
	char h[65];

	if (!k)
		return -ENOENT;
	hex(k->hash, 32, h);
	snprintf(out, len, "workspace %s\nhash %s\ncreated %" PRIu64 "\nrevoked %d\n", k->workspace,
		 h, k->created, k->revoked);
	return 0;
}

int keys_revoke(const char *id)
{
	struct sd_key *k = key_find(id);

	if (!k)
		return -ENOENT;
	k->revoked = true;
	return key_write(k);
}

const struct sd_key *keys_check(const char *text)
{
	uint8_t secret[32], h[32];

	if (strlen(text) != SD_KEY_TEXT_LEN || strncmp(text, "sk-", 3) != 0 ||
	    text[3 + SD_KEY_ID_LEN] != '-' || !is_hex(text + 3, SD_KEY_ID_LEN) ||
	    !is_hex(text + 4 + SD_KEY_ID_LEN, 64) || !unhex(text + 4 + SD_KEY_ID_LEN, secret, 32))
		return NULL;
	SHA256(secret, sizeof(secret), h);
	OPENSSL_cleanse(secret, sizeof(secret));
	for (unsigned i = 0; i < nkeys; i++)
		if (memcmp(keys[i].id, text + 3, SD_KEY_ID_LEN) == 0)
			return CRYPTO_memcmp(keys[i].hash, h, 32) == 0 && !keys[i].revoked
				       ? &keys[i]
				       : NULL;
	return NULL;
}

bool keys_refresh(void)
{
	static struct timespec seen, pending;
	static uint64_t pending_since_ms;
	char path[4200];
	struct stat st;
	uint64_t now = now_ms();

	snprintf(path, sizeof(path), "%s/keys", sd_dir());
	if (stat(path, &st) < 0)
		return false;
	/* every create and revoke renames a file into the directory: its mtime moves */
	if (st.st_mtim.tv_sec == seen.tv_sec && st.st_mtim.tv_nsec == seen.tv_nsec)
		return false;
	/* A change is read again at each call for KEYS_SETTLED_MS after this host first saw it
	 * (its own clock's time, never the file's: one ahead would hold it for ever): a rename
	 * sets the directory's time before its new name shows (tmpfs moves the name after), and
	 * the kernel's clock for file times is coarse, so a rename read half done, or a second
	 * one within the same tick, would leave a key (the fleet's watcher writes them as they
	 * come) unknown here until the next change. */
	if (st.st_mtim.tv_sec != pending.tv_sec || st.st_mtim.tv_nsec != pending.tv_nsec) {
		pending = st.st_mtim;
		pending_since_ms = now;
	}
	if (keys_load() < 0)
		return false; /* (read again next time) */
	if (now - pending_since_ms >= KEYS_SETTLED_MS)
		seen = st.st_mtim;
	return true;
}

void keys_foreach(void (*fn)(const struct sd_key *k, void *arg), void *arg)
{
	for (unsigned i = 0; i < nkeys; i++)
		fn(&keys[i], arg);
}

/* ---- quotas ---- */

int quota_parse(const char *text, struct sd_quota *q)
{
	unsigned long long v[6] = {0};
	int n = sscanf(text,
		       "sandboxes %llu\nvcpus %llu\nmemory_mib %llu\ndisk_gib %llu\nsnapshots "
		       "%llu\ncheckpoint_s %llu",
		       &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]);

	/* (a workspace's record from before checkpoints has five lines: none) */
	if (n != 5 && n != 6)
		return -EBADMSG;
	/* (a record any host may put: an interval past a year is none, not an overflow) */
	*q = (struct sd_quota){v[0], v[1], v[2], v[3], v[4], v[5] > 31536000 ? 0 : v[5]};
	return 0;
}

int quota_text(const struct sd_quota *q, char *out, size_t len)
{
	int n = snprintf(
		out, len,
		"sandboxes %" PRIu64 "\nvcpus %" PRIu64 "\nmemory_mib %" PRIu64
		"\ndisk_gib %" PRIu64 "\nsnapshots %" PRIu64 "\ncheckpoint_s %" PRIu64 "\n",
		q->sandboxes, q->vcpus, q->memory_mib, q->disk_gib, q->snapshots, q->checkpoint_s);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : n;
}

int quota_load(const char *workspace, struct sd_quota *q)
{
	char path[4200], *text = NULL;
	size_t len;

	memset(q, 0, sizeof(*q));
	if (!valid_workspace(workspace))
		return -EINVAL;
	snprintf(path, sizeof(path), "%s/quota/%s", sd_dir(), workspace);
	int err = read_file(path, 4096, &text, &len);

	if (err == -ENOENT)
		return 0;
	if (err < 0)
		return err;
	err = quota_parse(text, q);
	free(text);
	return err;
}

int quota_save(const char *workspace, const struct sd_quota *q)
{
	char path[4200], text[256];
	int n;

	if (!valid_workspace(workspace))
		return -EINVAL;
	if ((n = quota_text(q, text, sizeof(text))) < 0)
		return n;
	snprintf(path, sizeof(path), "%s/quota/%s", sd_dir(), workspace);
	return write_file_atomic(path, text, (size_t)n, 0600);
}

/* ---- secrets ---- */

#define SECRET_MAX (64u << 10)

static int server_key(uint8_t key[32])
{
	char path[4200], *text = NULL;
	size_t len;

	snprintf(path, sizeof(path), "%s/server.key", sd_dir());
	int err = read_file(path, 64, &text, &len);

	if (err == -ENOENT) {
		if (getrandom(key, 32, 0) != 32)
			return -EIO;
		int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

		if (fd < 0)
			return errno == EEXIST ? server_key(key) : -errno;
		err = write_all(fd, key, 32);
		if (close(fd) < 0 && err == 0)
			err = -errno;
		return err;
	}
	if (err < 0)
		return err;
	struct stat st;

	if (len != 32 || stat(path, &st) < 0 || (st.st_mode & 077)) {
		free(text);
		return -EPERM;
	}
	memcpy(key, text, 32);
	OPENSSL_cleanse(text, len);
	free(text);
	return 0;
}

static bool valid_secret_name(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 128)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '_' ||
		      (i && (s[i] == '-' || s[i] == '.'))))
			return false;
	return true;
}

static int aad_set(EVP_CIPHER_CTX *c, const char *workspace, const char *name)
{
	int outl;

	return EVP_CipherUpdate(c, NULL, &outl, (const uint8_t *)workspace,
				(int)strlen(workspace) + 1) == 1 &&
			       EVP_CipherUpdate(c, NULL, &outl, (const uint8_t *)name,
						(int)strlen(name)) == 1
		       ? 0
		       : -EIO;
}

int secret_set(const char *workspace, const char *name, const void *val, size_t len)
{
	uint8_t key[32], *buf = NULL;
	char path[4400];
	int err, outl, fl;

	if (!valid_workspace(workspace) || !valid_secret_name(name) || len > SECRET_MAX)
		return -EINVAL;
	err = server_key(key);
	if (err < 0)
		return err;
	buf = malloc(12 + 16 + len + 16);
	EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();

	err = -EIO;
	if (!buf || !c || getrandom(buf, 12, 0) != 12)
		goto out;
	if (EVP_EncryptInit_ex(c, EVP_aes_256_gcm(), NULL, key, buf) != 1 ||
	    aad_set(c, workspace, name) < 0 ||
	    EVP_EncryptUpdate(c, buf + 28, &outl, val, (int)len) != 1 ||
	    EVP_EncryptFinal_ex(c, buf + 28 + outl, &fl) != 1 ||
	    EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, 16, buf + 12) != 1)
		goto out;
	snprintf(path, sizeof(path), "%s/secrets/%s", sd_dir(), workspace);
	if (mkdir(path, 0700) < 0 && errno != EEXIST) {
		err = -errno;
		goto out;
	}
	snprintf(path, sizeof(path), "%s/secrets/%s/%s", sd_dir(), workspace, name);
	err = write_file_atomic(path, buf, 28 + (size_t)outl + (size_t)fl, 0600);
out:
	OPENSSL_cleanse(key, sizeof(key));
	EVP_CIPHER_CTX_free(c);
	free(buf);
	return err;
}

int secret_get(const char *workspace, const char *name, char **val, size_t *len)
{
	uint8_t key[32];
	char path[4400], *data = NULL, *out = NULL;
	size_t dlen;
	int err, outl, fl;

	if (!valid_workspace(workspace) || !valid_secret_name(name))
		return -ENOENT;
	snprintf(path, sizeof(path), "%s/secrets/%s/%s", sd_dir(), workspace, name);
	err = read_file(path, SECRET_MAX + 64, &data, &dlen);
	if (err < 0)
		return err;
	if (dlen < 28) {
		free(data);
		return -EBADMSG;
	}
	err = server_key(key);
	if (err < 0) {
		free(data);
		return err;
	}
	EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();

	out = malloc(dlen - 28 + 16 + 1);
	err = -EBADMSG;
	if (!c || !out ||
	    EVP_DecryptInit_ex(c, EVP_aes_256_gcm(), NULL, key, (uint8_t *)data) != 1 ||
	    aad_set(c, workspace, name) < 0 ||
	    EVP_DecryptUpdate(c, (uint8_t *)out, &outl, (uint8_t *)data + 28, (int)(dlen - 28)) !=
		    1 ||
	    EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, 16, data + 12) != 1 ||
	    EVP_DecryptFinal_ex(c, (uint8_t *)out + outl, &fl) != 1) {
		free(out);
		out = NULL;
		goto done;
	}
	out[outl + fl] = 0;
	*val = out;
	*len = (size_t)(outl + fl);
	err = 0;
done:
	OPENSSL_cleanse(key, sizeof(key));
	OPENSSL_cleanse(data, dlen);
	EVP_CIPHER_CTX_free(c);
	free(data);
	return err;
}

bool keys_live_in(const char *id, const char *workspace)
{
	const struct sd_key *k = key_find(id);

	return k && !k->revoked && strcmp(k->workspace, workspace) == 0;
}

bool keys_live(const char *id)
{
	const struct sd_key *k = key_find(id);

	return k && !k->revoked;
}
