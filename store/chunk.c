/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One chunk (store.h): its hash, its name in the store, its sealing. A sealed chunk is
 *
 *   "SBCK" | version 1 | 0 0 0 | AES-256-GCM ciphertext | 16-byte tag
 *
 * under the workspace's key, with the 8-byte head and the chunk's SHA-256 as additional data
 * (a sealed chunk moved under another name does not open) and a nonce derived from that
 * SHA-256 (convergent within a workspace: the same bytes seal the same, so a second upload of
 * them is skipped, and two different chunks never share a nonce). Opening checks the tag and
 * then the plaintext's SHA-256 against the name it was asked by.
 */
#include <errno.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "store.h"

static const uint8_t chunk_head[CHUNK_SEAL_HEAD] = {'S', 'B', 'C', 'K', 1, 0, 0, 0};

static void chunk_hmac(const uint8_t key[32], const void *data, size_t len, uint8_t out[32])
{
	size_t n = 0;

	/* cannot fail with these arguments but for want of memory: then a zero MAC, which no
	 * chunk or manifest check accepts */
	if (!EVP_Q_mac(NULL, "HMAC", NULL, "SHA256", NULL, key, 32, data, len, out, 32, &n) ||
	    n != 32)
		memset(out, 0, 32);
}

void chunk_keys_derive(const uint8_t secret[32], struct chunk_keys *k)
{
	chunk_hmac(secret, "sandbox chunk enc", 17, k->enc);
	chunk_hmac(secret, "sandbox chunk name", 18, k->name);
	chunk_hmac(secret, "sandbox chunk nonce", 19, k->nonce);
	chunk_hmac(secret, "sandbox manifest mac", 20, k->mac);
}

void chunk_keys_wipe(struct chunk_keys *k)
{
	OPENSSL_cleanse(k, sizeof(*k));
}

void chunk_hash(const void *data, size_t len, uint8_t out[CHUNK_HASH_LEN])
{
	unsigned n = CHUNK_HASH_LEN;

	EVP_Digest(data, len, out, &n, EVP_sha256(), NULL);
}

void chunk_hex(const uint8_t hash[CHUNK_HASH_LEN], char out[2 * CHUNK_HASH_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";

	for (int i = 0; i < CHUNK_HASH_LEN; i++) {
		out[2 * i] = hex[hash[i] >> 4];
		out[2 * i + 1] = hex[hash[i] & 15];
	}
	out[2 * CHUNK_HASH_LEN] = 0;
}

int chunk_unhex(const char *s, uint8_t out[CHUNK_HASH_LEN])
{
	for (int i = 0; i < 2 * CHUNK_HASH_LEN; i++) {
		char c = s[i];
		int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;

		if (v < 0)
			return -EBADMSG;
		if (i % 2 == 0)
			out[i / 2] = (uint8_t)(v << 4);
		else
			out[i / 2] |= (uint8_t)v;
	}
	return 0;
}

int chunk_hash_cmp(const void *a, const void *b)
{
	return memcmp(a, b, CHUNK_HASH_LEN);
}

void chunk_object_id(const struct chunk_keys *k, const uint8_t hash[CHUNK_HASH_LEN],
		     uint8_t out[CHUNK_HASH_LEN])
{
	chunk_hmac(k->name, hash, CHUNK_HASH_LEN, out);
}

void chunk_object_name(const struct chunk_keys *k, const uint8_t hash[CHUNK_HASH_LEN],
		       char out[2 * CHUNK_HASH_LEN + 1])
{
	uint8_t n[CHUNK_HASH_LEN];

	chunk_object_id(k, hash, n);
	chunk_hex(n, out);
}

/* AES-256-GCM of in (len bytes) into out, aad the head and the hash; enc 1 seals, 0 opens
 * (tag checked). 0, or -EBADMSG (a tag that does not match), -EIO. */
static int chunk_gcm(const struct chunk_keys *k, const uint8_t hash[CHUNK_HASH_LEN], int enc,
		     const uint8_t *in, size_t len, uint8_t *out, uint8_t tag[CHUNK_SEAL_TAG])
{
	uint8_t nonce[32];
	EVP_CIPHER_CTX *c;
	int n = 0, ok;

	if (len > CHUNK_SIZE_MAX || !(c = EVP_CIPHER_CTX_new()))
		return -EIO;
	chunk_hmac(k->nonce, hash, CHUNK_HASH_LEN, nonce);
	ok = EVP_CipherInit_ex(c, EVP_aes_256_gcm(), NULL, NULL, NULL, enc) == 1 &&
	     EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_IVLEN, 12, NULL) == 1 &&
	     EVP_CipherInit_ex(c, NULL, NULL, k->enc, nonce, enc) == 1 &&
	     EVP_CipherUpdate(c, NULL, &n, chunk_head, CHUNK_SEAL_HEAD) == 1 &&
	     EVP_CipherUpdate(c, NULL, &n, hash, CHUNK_HASH_LEN) == 1 &&
	     (len == 0 || EVP_CipherUpdate(c, out, &n, in, (int)len) == 1);
	if (ok && !enc)
		ok = EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, CHUNK_SEAL_TAG, tag) == 1;
	if (ok) {
		int fin = EVP_CipherFinal_ex(c, out + (len ? (size_t)n : 0), &n);

		if (fin != 1) {
			EVP_CIPHER_CTX_free(c);
			return enc ? -EIO : -EBADMSG;
		}
	}
	if (ok && enc)
		ok = EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, CHUNK_SEAL_TAG, tag) == 1;
	EVP_CIPHER_CTX_free(c);
	return ok ? 0 : -EIO;
}

int chunk_seal(const struct chunk_keys *k, const uint8_t hash[CHUNK_HASH_LEN], const void *pt,
	       size_t len, uint8_t *out)
{
	if (len > CHUNK_SIZE_MAX)
		return -EFBIG;
	memcpy(out, chunk_head, CHUNK_SEAL_HEAD);
	return chunk_gcm(k, hash, 1, pt, len, out + CHUNK_SEAL_HEAD, out + CHUNK_SEAL_HEAD + len);
}

int chunk_open(const struct chunk_keys *k, const uint8_t hash[CHUNK_HASH_LEN], const uint8_t *in,
	       size_t in_len, uint8_t *out, size_t cap, size_t *len)
{
	uint8_t tag[CHUNK_SEAL_TAG], got[CHUNK_HASH_LEN];
	size_t n;
	int err;

	*len = 0;
	if (in_len < CHUNK_SEAL_EXTRA || memcmp(in, chunk_head, CHUNK_SEAL_HEAD) != 0)
		return -EBADMSG;
	n = in_len - CHUNK_SEAL_EXTRA;
	if (n > cap || n > CHUNK_SIZE_MAX)
		return -EFBIG;
	memcpy(tag, in + CHUNK_SEAL_HEAD + n, CHUNK_SEAL_TAG);
	if ((err = chunk_gcm(k, hash, 0, in + CHUNK_SEAL_HEAD, n, out, tag)) < 0) {
		OPENSSL_cleanse(out, n);
		return err;
	}
	chunk_hash(out, n, got);
	if (CRYPTO_memcmp(got, hash, CHUNK_HASH_LEN) != 0) {
		OPENSSL_cleanse(out, n);
		return -EBADMSG;
	}
	*len = n;
	return 0;
}
