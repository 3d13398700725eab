/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One chunk's transfer (store.h), touching no handle: the S3 requests, the seal and the open,
 * and the message that names the chunk when it fails. A handle's serial calls (chunk_store.c)
 * and the workers of several at once (chunk_par.c) both go through here; what a transfer
 * means for a handle (its known set, counters and cache) is theirs.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"

static int xfer_fail(char *msg, size_t msg_len, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int xfer_fail(char *msg, size_t msg_len, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, msg_len, fmt, ap);
	va_end(ap);
	return err;
}

int chunk_xfer_put(struct s3 *s, const struct chunk_keys *k, bool listed, const char *key,
		   const uint8_t hash[CHUNK_HASH_LEN], const void *data, size_t len, uint64_t *wire,
		   char *msg, size_t msg_len)
{
	char hex[2 * CHUNK_HASH_LEN + 1];
	uint8_t *sealed;
	int err;

	*wire = 0;
	chunk_hex(hash, hex);
	/* not in a whole listing of the store's chunks: not there (no HEAD to ask) */
	err = listed ? -ENOENT : s3_head(s, key, NULL);
	if (err == 0)
		return 1;
	if (err != -ENOENT)
		return xfer_fail(msg, msg_len, err, "chunk %s: %s", hex, s->err);
	if (!(sealed = malloc(len + CHUNK_SEAL_EXTRA)))
		return xfer_fail(msg, msg_len, -ENOMEM, "chunk %s: out of memory", hex);
	if ((err = chunk_seal(k, hash, data, len, sealed)) < 0)
		err = xfer_fail(msg, msg_len, err, "chunk %s: sealing failed", hex);
	else if ((err = s3_put(s, key, sealed, len + CHUNK_SEAL_EXTRA)) < 0)
		err = xfer_fail(msg, msg_len, err, "chunk %s: %s", hex, s->err);
	else
		*wire = len + CHUNK_SEAL_EXTRA;
	free(sealed);
	return err < 0 ? err : 0;
}

int chunk_xfer_get(struct s3 *s, const struct chunk_keys *k, const char *key,
		   const uint8_t hash[CHUNK_HASH_LEN], uint8_t *out, size_t cap, size_t *len,
		   uint64_t *wire, char *msg, size_t msg_len)
{
	char hex[2 * CHUNK_HASH_LEN + 1];
	uint8_t *sealed;
	size_t sealed_len;
	int err;

	*len = 0;
	*wire = 0;
	chunk_hex(hash, hex);
	if (cap > CHUNK_SIZE_MAX)
		cap = CHUNK_SIZE_MAX;
	err = s3_get(s, key, 0, 0, cap + CHUNK_SEAL_EXTRA, &sealed, &sealed_len);
	if (err == -ENOENT)
		return xfer_fail(msg, msg_len, err, "chunk %s is missing from the store (%s)", hex,
				 key);
	if (err == -EFBIG)
		return xfer_fail(msg, msg_len, -EBADMSG, "chunk %s is corrupt: over %zu bytes (%s)",
				 hex, cap, key);
	if (err < 0)
		return xfer_fail(msg, msg_len, err, "chunk %s: %s", hex, s->err);
	*wire = sealed_len;
	err = chunk_open(k, hash, sealed, sealed_len, out, cap, len);
	free(sealed);
	if (err < 0)
		return xfer_fail(
			msg, msg_len, -EBADMSG,
			"chunk %s is corrupt: it does not open to bytes of that SHA-256 (%s)", hex,
			key);
	return 0;
}

int chunk_xfer_fetch(chunk_fetch_fn fetch, void *arg, const uint8_t hash[CHUNK_HASH_LEN],
		     uint8_t *out, size_t cap, size_t *len, char *msg, size_t msg_len)
{
	char hex[2 * CHUNK_HASH_LEN + 1];
	uint8_t check[CHUNK_HASH_LEN];
	int err;

	*len = 0;
	chunk_hex(hash, hex);
	if (!fetch)
		return xfer_fail(msg, msg_len, -EINVAL, "chunk %s: no store to fetch it from", hex);
	if ((err = fetch(arg, hash, out, cap, len, msg, msg_len)) < 0)
		return err;
	if (*len > cap)
		return xfer_fail(msg, msg_len, -EBADMSG, "chunk %s: over %zu bytes", hex, cap);
	chunk_hash(out, *len, check);
	if (memcmp(check, hash, CHUNK_HASH_LEN) != 0)
		return xfer_fail(msg, msg_len, -EBADMSG,
				 "chunk %s is corrupt: its bytes are not of that SHA-256", hex);
	return 0;
}
