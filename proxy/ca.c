/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sandbox's CA: made once by `sandbox-proxy prepare`, loaded by `run`, and the leaves it
 * signs for intercepted hosts (cached per name) and for test servers. The CA key is only ever
 * in memory and in key_path.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "hostutil.h"
#include "mitm.h"

#define CA_LABEL_MAX	48
#define CA_DAYS		3650
#define LEAF_DAYS	397
/* Certificates start a day early: a guest's clock may lag the host's. */
#define BACKDATE_SECS	86400L
/* A cached leaf is made again this long before it expires. */
#define LEAF_RENEW_SECS (7 * 86400L)
#define CA_FILE_MAX	(64 * 1024)
#define LEAF_BUCKETS	64
/* The cache is bounded; when full it is emptied (leaves in use hold their own references). */
#define LEAF_MAX	1024
#define NAME_MAX_LEN	253

struct ca_leaf {
	char name[NAME_MAX_LEN + 1];
	X509 *cert;
	EVP_PKEY *key;
	time_t renew_after;
	struct ca_leaf *next;
};

struct mitm_ca {
	X509 *cert;
	EVP_PKEY *key;
	SSL_CTX *guest_ctx;
	pthread_mutex_t lock; /* guards leaves and nleaves */
	struct ca_leaf *leaves[LEAF_BUCKETS];
	unsigned nleaves;
};

static void ca_errf(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void ca_errf(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* PEM-encode into a freshly allocated buffer (cleansed and freed by the caller). */
static int ca_pem_write(X509 *cert, EVP_PKEY *key, char **out, size_t *out_len)
{
	BIO *mem = BIO_new(BIO_s_mem());
	char *p;
	long n;
	int err = -ENOMEM;

	if (!mem)
		return -ENOMEM;
	if (cert && !PEM_write_bio_X509(mem, cert))
		goto out;
	if (key && !PEM_write_bio_PrivateKey(mem, key, NULL, NULL, 0, NULL, NULL))
		goto out;
	n = BIO_get_mem_data(mem, &p);
	if (n <= 0 || !(*out = malloc((size_t)n)))
		goto out;
	memcpy(*out, p, (size_t)n);
	*out_len = (size_t)n;
	err = 0;
out:
	/* A memory BIO of a key holds it in the clear: wipe before freeing. */
	n = BIO_get_mem_data(mem, &p);
	if (n > 0)
		OPENSSL_cleanse(p, (size_t)n);
	BIO_free(mem);
	return err;
}

static int ca_write_pem(const char *path, X509 *cert, EVP_PKEY *key, mode_t mode)
{
	char *buf;
	size_t len;
	int err = ca_pem_write(cert, key, &buf, &len);

	if (err)
		return err;
	err = write_file_atomic(path, buf, len, mode);
	OPENSSL_cleanse(buf, len);
	free(buf);
	return err;
}

static int ca_set_serial(X509 *cert)
{
	BIGNUM *bn = BN_new();
	int ok;

	/* 127 random bits: positive, unique enough that no two leaves share one. */
	ok = bn && BN_rand(bn, 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) &&
	     BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert));
	BN_free(bn);
	return ok ? 0 : -ENOMEM;
}

static int ca_add_ext(X509 *cert, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX ctx;
	X509_EXTENSION *ext;
	int ok;

	X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
	ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
	if (!ext)
		return -ENOMEM;
	ok = X509_add_ext(cert, ext, -1);
	X509_EXTENSION_free(ext);
	return ok ? 0 : -ENOMEM;
}

/* A certificate with serial, validity and key set; the caller adds names and extensions. */
static X509 *ca_cert_new(EVP_PKEY *key, long days, const ASN1_TIME *not_after_max)
{
	X509 *cert = X509_new();

	if (!cert || !X509_set_version(cert, X509_VERSION_3) || ca_set_serial(cert) ||
	    !X509_gmtime_adj(X509_getm_notBefore(cert), -BACKDATE_SECS) ||
	    !X509_time_adj_ex(X509_getm_notAfter(cert), (int)days, 0, NULL) ||
	    !X509_set_pubkey(cert, key))
		goto fail;
	/* A leaf never outlives its CA. */
	if (not_after_max && ASN1_TIME_compare(X509_get0_notAfter(cert), not_after_max) > 0 &&
	    !X509_set1_notAfter(cert, not_after_max))
		goto fail;
	return cert;
fail:
	X509_free(cert);
	return NULL;
}

static bool ca_label_valid(const char *label)
{
	size_t n = label ? strlen(label) : 0;

	if (n == 0 || n > CA_LABEL_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = label[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

int mitm_ca_create(const char *cert_path, const char *key_path, const char *label)
{
	char cn[80];
	EVP_PKEY *key = NULL;
	X509 *cert = NULL;
	X509_NAME *subj;
	int err = -ENOMEM;

	if (!cert_path || !key_path || !ca_label_valid(label))
		return -EINVAL;
	snprintf(cn, sizeof(cn), "sandbox %s CA", label);
	key = EVP_EC_gen("P-256");
	if (!key || !(cert = ca_cert_new(key, CA_DAYS, NULL)))
		goto out;
	subj = X509_get_subject_name(cert);
	if (!X509_NAME_add_entry_by_txt(subj, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1,
					0) ||
	    !X509_set_issuer_name(cert, subj))
		goto out;
	if ((err = ca_add_ext(cert, cert, NID_basic_constraints, "critical,CA:TRUE,pathlen:0")) ||
	    (err = ca_add_ext(cert, cert, NID_key_usage, "critical,keyCertSign,cRLSign")) ||
	    (err = ca_add_ext(cert, cert, NID_subject_key_identifier, "hash")))
		goto out;
	err = -ENOMEM;
	if (!X509_sign(cert, key, EVP_sha256()))
		goto out;
	/* The key first: a certificate on disk without its key would be useless. */
	if ((err = ca_write_pem(key_path, NULL, key, 0600)))
		goto out;
	err = ca_write_pem(cert_path, cert, NULL, 0644);
out:
	X509_free(cert);
	EVP_PKEY_free(key);
	return err;
}

/* Read a whole small file; the caller cleanses and frees *buf. */
static int ca_read_file(const char *path, bool secret, char **buf, size_t *len, char *err,
			size_t errlen)
{
	struct stat st;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	int rc = 0;

	if (fd < 0) {
		rc = -errno;
		ca_errf(err, errlen, "%s: %s", path, strerror(errno));
		return rc;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		ca_errf(err, errlen, "%s: not a regular file", path);
		rc = -EINVAL;
		goto out;
	}
	if (secret && (st.st_mode & 077)) {
		ca_errf(err, errlen, "%s: mode %04o, readable by group or others (want 0600)", path,
			(unsigned)(st.st_mode & 07777));
		rc = -EPERM;
		goto out;
	}
	if (st.st_size <= 0 || st.st_size > CA_FILE_MAX) {
		ca_errf(err, errlen, "%s: size %lld, not a PEM file", path, (long long)st.st_size);
		rc = -EINVAL;
		goto out;
	}
	*buf = malloc((size_t)st.st_size);
	if (!*buf) {
		rc = -ENOMEM;
		ca_errf(err, errlen, "%s: out of memory", path);
		goto out;
	}
	*len = 0;
	while (*len < (size_t)st.st_size) {
		n = read(fd, *buf + *len, (size_t)st.st_size - *len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		*len += (size_t)n;
	}
	if (*len == 0) {
		free(*buf);
		*buf = NULL;
		ca_errf(err, errlen, "%s: cannot read", path);
		rc = -EIO;
	}
out:
	close(fd);
	return rc;
}

static int ca_alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
			  const unsigned char *in, unsigned inlen, void *arg)
{
	static const unsigned char ours[] = "\x08http/1.1";

	(void)ssl;
	(void)arg;
	if (SSL_select_next_proto((unsigned char **)out, outlen, ours, sizeof(ours) - 1, in,
				  inlen) != OPENSSL_NPN_NEGOTIATED)
		return SSL_TLSEXT_ERR_ALERT_FATAL; /* no_application_protocol: h2 only */
	return SSL_TLSEXT_ERR_OK;
}

static SSL_CTX *ca_guest_ctx_new(void)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());

	if (!ctx)
		return NULL;
	if (!SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION)) {
		SSL_CTX_free(ctx);
		return NULL;
	}
	/* Renegotiation by the guest is refused: a cheap way to make the proxy do expensive work.
	 */
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE |
					 SSL_OP_NO_COMPRESSION);
	SSL_CTX_set_mode(ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	SSL_CTX_set_alpn_select_cb(ctx, ca_alpn_select, NULL);
	return ctx;
}

struct mitm_ca *mitm_ca_load(const char *cert_path, const char *key_path, char *err, size_t errlen)
{
	struct mitm_ca *ca = NULL;
	char *cbuf = NULL, *kbuf = NULL;
	size_t clen = 0, klen = 0;
	X509 *cert = NULL;
	EVP_PKEY *key = NULL;
	BIO *bio;

	ca_errf(err, errlen, "ok");
	if (ca_read_file(cert_path, false, &cbuf, &clen, err, errlen) ||
	    ca_read_file(key_path, true, &kbuf, &klen, err, errlen))
		goto out;
	bio = BIO_new_mem_buf(cbuf, (int)clen);
	cert = bio ? PEM_read_bio_X509(bio, NULL, NULL, NULL) : NULL;
	BIO_free(bio);
	if (!cert) {
		ca_errf(err, errlen, "%s: not a PEM certificate", cert_path);
		goto out;
	}
	bio = BIO_new_mem_buf(kbuf, (int)klen);
	/* No passphrase callback: an encrypted key is refused rather than prompted for. */
	key = bio ? PEM_read_bio_PrivateKey(bio, NULL, NULL, (void *)"") : NULL;
	BIO_free(bio);
	if (!key) {
		ca_errf(err, errlen, "%s: not an unencrypted PEM private key", key_path);
		goto out;
	}
	if (X509_check_ca(cert) != 1) {
		ca_errf(err, errlen, "%s: not a CA certificate (basicConstraints CA:TRUE)",
			cert_path);
		goto out;
	}
	if (X509_cmp_current_time(X509_get0_notAfter(cert)) <= 0) {
		ca_errf(err, errlen, "%s: expired", cert_path);
		goto out;
	}
	if (X509_check_private_key(cert, key) != 1) {
		ca_errf(err, errlen, "%s: not the key of %s", key_path, cert_path);
		goto out;
	}
	ca = calloc(1, sizeof(*ca));
	if (!ca || !(ca->guest_ctx = ca_guest_ctx_new())) {
		ca_errf(err, errlen, "%s: out of memory", cert_path);
		free(ca);
		ca = NULL;
		goto out;
	}
	pthread_mutex_init(&ca->lock, NULL);
	ca->cert = cert;
	ca->key = key;
	cert = NULL;
	key = NULL;
out:
	ERR_clear_error();
	X509_free(cert);
	EVP_PKEY_free(key);
	if (kbuf)
		OPENSSL_cleanse(kbuf, klen);
	free(kbuf);
	free(cbuf);
	return ca;
}

static void ca_leaves_flush(struct mitm_ca *ca)
{
	for (unsigned b = 0; b < LEAF_BUCKETS; b++) {
		struct ca_leaf *l = ca->leaves[b], *next;

		for (; l; l = next) {
			next = l->next;
			X509_free(l->cert);
			EVP_PKEY_free(l->key);
			free(l);
		}
		ca->leaves[b] = NULL;
	}
	ca->nleaves = 0;
}

void mitm_ca_free(struct mitm_ca *ca)
{
	if (!ca)
		return;
	ca_leaves_flush(ca);
	pthread_mutex_destroy(&ca->lock);
	SSL_CTX_free(ca->guest_ctx);
	X509_free(ca->cert);
	EVP_PKEY_free(ca->key);
	free(ca);
}

SSL_CTX *mitm_ca_guest_ctx(struct mitm_ca *ca)
{
	return ca->guest_ctx;
}

/* A host name (LDH labels, '_' allowed, no wildcard) or an IPv4 literal; lower case only. */
static bool ca_name_valid(const char *name)
{
	size_t n = name ? strlen(name) : 0, label = 0;

	if (n == 0 || n > NAME_MAX_LEN || name[0] == '.' || name[n - 1] == '.')
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];

		if (c == '.') {
			if (label == 0 || name[i - 1] == '-')
				return false;
			label = 0;
			continue;
		}
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
		      (c == '-' && label > 0)))
			return false;
		if (++label > 63)
			return false;
	}
	return name[n - 1] != '-';
}

static int ca_add_san(X509 *cert, const char *name)
{
	GENERAL_NAMES *gens = GENERAL_NAMES_new();
	GENERAL_NAME *gen = NULL;
	ASN1_IA5STRING *dns = NULL;
	ASN1_OCTET_STRING *ip = NULL;
	struct in_addr a;
	int err = -ENOMEM;

	if (!gens)
		return -ENOMEM;
	/* The name as a dNSName, built directly: no config string to inject a second SAN into. */
	if (!(dns = ASN1_IA5STRING_new()) || !ASN1_STRING_set(dns, name, (int)strlen(name)) ||
	    !(gen = GENERAL_NAME_new()))
		goto out;
	GENERAL_NAME_set0_value(gen, GEN_DNS, dns);
	dns = NULL;
	if (!sk_GENERAL_NAME_push(gens, gen))
		goto out;
	gen = NULL;
	if (inet_pton(AF_INET, name, &a) == 1) {
		if (!(ip = ASN1_OCTET_STRING_new()) ||
		    !ASN1_OCTET_STRING_set(ip, (unsigned char *)&a, 4) ||
		    !(gen = GENERAL_NAME_new()))
			goto out;
		GENERAL_NAME_set0_value(gen, GEN_IPADD, ip);
		ip = NULL;
		if (!sk_GENERAL_NAME_push(gens, gen))
			goto out;
		gen = NULL;
	}
	if (X509_add1_ext_i2d(cert, NID_subject_alt_name, gens, 0, X509V3_ADD_DEFAULT) == 1)
		err = 0;
out:
	ASN1_IA5STRING_free(dns);
	ASN1_OCTET_STRING_free(ip);
	GENERAL_NAME_free(gen);
	GENERAL_NAMES_free(gens);
	return err;
}

/* Make a leaf for a valid name: a new P-256 key, signed by the CA. */
static int ca_leaf_make(struct mitm_ca *ca, const char *name, X509 **out_cert, EVP_PKEY **out_key)
{
	EVP_PKEY *key = EVP_EC_gen("P-256");
	X509 *cert = NULL;
	X509_NAME *subj;
	int err = -ENOMEM;

	if (!key || !(cert = ca_cert_new(key, LEAF_DAYS, X509_get0_notAfter(ca->cert))))
		goto out;
	subj = X509_get_subject_name(cert);
	/* CN is at most 64 characters; the SAN is what clients check. */
	if (strlen(name) <= 64 &&
	    !X509_NAME_add_entry_by_txt(subj, "CN", MBSTRING_ASC, (const unsigned char *)name, -1,
					-1, 0))
		goto out;
	if (!X509_set_issuer_name(cert, X509_get_subject_name(ca->cert)))
		goto out;
	if ((err = ca_add_ext(cert, ca->cert, NID_basic_constraints, "critical,CA:FALSE")) ||
	    (err = ca_add_ext(cert, ca->cert, NID_key_usage, "critical,digitalSignature")) ||
	    (err = ca_add_ext(cert, ca->cert, NID_ext_key_usage, "serverAuth")) ||
	    (err = ca_add_ext(cert, ca->cert, NID_subject_key_identifier, "hash")) ||
	    (err = ca_add_san(cert, name)))
		goto out;
	/* The authority key id only when the CA has a subject key id to point at. */
	if (X509_get0_subject_key_id(ca->cert) &&
	    (err = ca_add_ext(cert, ca->cert, NID_authority_key_identifier, "keyid:always")))
		goto out;
	err = -ENOMEM;
	if (!X509_sign(cert, ca->key, EVP_sha256()))
		goto out;
	*out_cert = cert;
	*out_key = key;
	cert = NULL;
	key = NULL;
	err = 0;
out:
	ERR_clear_error();
	X509_free(cert);
	EVP_PKEY_free(key);
	return err;
}

static unsigned ca_name_hash(const char *name)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 16777619u;
	return h % LEAF_BUCKETS;
}

int mitm_ca_leaf(struct mitm_ca *ca, const char *name, X509 **cert, EVP_PKEY **key)
{
	unsigned b;
	struct ca_leaf *l, **pp;
	time_t now = time(NULL);
	int err = 0;

	if (!ca || !ca_name_valid(name))
		return -EINVAL;
	b = ca_name_hash(name);
	/* Made under the lock, so that a name gets one leaf however many threads ask at once. */
	pthread_mutex_lock(&ca->lock);
	for (pp = &ca->leaves[b]; (l = *pp); pp = &l->next) {
		if (strcmp(l->name, name) != 0)
			continue;
		if (now < l->renew_after)
			goto found;
		*pp = l->next; /* near its end: made again below */
		X509_free(l->cert);
		EVP_PKEY_free(l->key);
		free(l);
		ca->nleaves--;
		break;
	}
	if (ca->nleaves >= LEAF_MAX)
		ca_leaves_flush(ca);
	l = calloc(1, sizeof(*l));
	if (!l) {
		err = -ENOMEM;
		goto out;
	}
	if ((err = ca_leaf_make(ca, name, &l->cert, &l->key))) {
		free(l);
		goto out;
	}
	snprintf(l->name, sizeof(l->name), "%s", name);
	{
		int days = 0, secs = 0;

		/* renew a week before notAfter (or at once, for a CA about to expire) */
		ASN1_TIME_diff(&days, &secs, NULL, X509_get0_notAfter(l->cert));
		l->renew_after = now + (time_t)days * 86400 + secs - LEAF_RENEW_SECS;
	}
	l->next = ca->leaves[b];
	ca->leaves[b] = l;
	ca->nleaves++;
found:
	X509_up_ref(l->cert);
	EVP_PKEY_up_ref(l->key);
	*cert = l->cert;
	*key = l->key;
out:
	pthread_mutex_unlock(&ca->lock);
	return err;
}

int mitm_ca_issue_files(struct mitm_ca *ca, const char *name, const char *cert_path,
			const char *key_path)
{
	X509 *cert = NULL;
	EVP_PKEY *key = NULL;
	int err;

	if (!ca || !ca_name_valid(name) || !cert_path || !key_path)
		return -EINVAL;
	if ((err = ca_leaf_make(ca, name, &cert, &key)))
		return err;
	if (!(err = ca_write_pem(key_path, NULL, key, 0600)))
		err = ca_write_pem(cert_path, cert, NULL, 0644);
	X509_free(cert);
	EVP_PKEY_free(key);
	return err;
}
