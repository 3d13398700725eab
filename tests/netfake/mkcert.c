/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fakenet mkcert: the fake internet's test CA and its server certificates (EC P-256, SHA-256).
 * Written here with OpenSSL directly rather than through proxy/ca.c: the fake internet plays
 * the public web, whose CA must not be the sandbox's own, and these tests should not fail
 * because the code they test does.
 */
#include "fakenet.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CA_DAYS	  3650
#define LEAF_DAYS 825

static EVP_PKEY *key_new(void)
{
	return EVP_EC_gen("P-256");
}

static int write_pem(const char *path, mode_t mode, EVP_PKEY *key, X509 *cert)
{
	char tmp[4096];
	FILE *f;
	int fd, ok;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0)
		return -errno;
	f = fdopen(fd, "w");
	if (!f) {
		close(fd);
		return -errno;
	}
	ok = key ? PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL)
		 : PEM_write_X509(f, cert);
	if (fclose(f) || !ok || rename(tmp, path)) {
		unlink(tmp);
		return -EIO;
	}
	return 0;
}

/* X509v3 extension NID with value text, issued by issuer for cert. */
static int add_ext(X509 *cert, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX v3;
	X509_EXTENSION *ext;
	int ok;

	X509V3_set_ctx_nodb(&v3);
	X509V3_set_ctx(&v3, issuer, cert, NULL, NULL, 0);
	ext = X509V3_EXT_conf_nid(NULL, &v3, nid, value);
	if (!ext)
		return -EINVAL;
	ok = X509_add_ext(cert, ext, -1);
	X509_EXTENSION_free(ext);
	return ok ? 0 : -EINVAL;
}

/* A certificate for key with subject CN cn, signed by (issuer, issuer_key), or self-signed. */
static X509 *cert_new(EVP_PKEY *key, const char *cn, X509 *issuer, EVP_PKEY *issuer_key,
		      unsigned days)
{
	X509 *cert = X509_new();
	X509_NAME *name;
	unsigned char serial[16];
	BIGNUM *bn = NULL;

	if (!cert || RAND_bytes(serial, sizeof(serial)) != 1)
		goto fail;
	serial[0] &= 0x7f; /* positive */
	bn = BN_bin2bn(serial, sizeof(serial), NULL);
	if (!bn || !BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert)))
		goto fail;
	X509_set_version(cert, 2);
	/* An hour back: the emulated host's clock and the host's may disagree a little. */
	X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
	X509_gmtime_adj(X509_getm_notAfter(cert), (long)days * 86400);
	X509_set_pubkey(cert, key);
	name = X509_get_subject_name(cert);
	X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, (const unsigned char *)"fakenet", -1,
				   -1, 0);
	X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
	X509_set_issuer_name(cert, issuer ? X509_get_subject_name(issuer) : name);
	BN_free(bn);
	return cert;
fail:
	BN_free(bn);
	X509_free(cert);
	return NULL;
}

static int ca_create(const char *cert_path, const char *key_path)
{
	EVP_PKEY *key = key_new();
	X509 *cert = key ? cert_new(key, "fakenet test CA", NULL, NULL, CA_DAYS) : NULL;
	int rc = -EINVAL;

	if (!cert)
		goto out;
	if (add_ext(cert, cert, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") ||
	    add_ext(cert, cert, NID_key_usage, "critical,keyCertSign,cRLSign") ||
	    add_ext(cert, cert, NID_subject_key_identifier, "hash") ||
	    add_ext(cert, cert, NID_authority_key_identifier, "keyid:always") ||
	    !X509_sign(cert, key, EVP_sha256()))
		goto out;
	rc = write_pem(key_path, 0600, key, NULL);
	if (!rc)
		rc = write_pem(cert_path, 0644, NULL, cert);
out:
	X509_free(cert);
	EVP_PKEY_free(key);
	return rc;
}

static int ca_load(const char *cert_path, const char *key_path, X509 **cert, EVP_PKEY **key)
{
	FILE *f = fopen(cert_path, "r");

	if (!f)
		return -errno;
	*cert = PEM_read_X509(f, NULL, NULL, NULL);
	fclose(f);
	f = fopen(key_path, "r");
	if (!f)
		return -errno;
	*key = PEM_read_PrivateKey(f, NULL, NULL, NULL);
	fclose(f);
	if (!*cert || !*key || X509_check_private_key(*cert, *key) != 1)
		return -EINVAL;
	return 0;
}

static int leaf_issue(X509 *ca, EVP_PKEY *ca_key, const char *name, const char *cert_path,
		      const char *key_path)
{
	struct in_addr ip;
	char san[300];
	EVP_PKEY *key = key_new();
	X509 *cert = key ? cert_new(key, name, ca, ca_key, LEAF_DAYS) : NULL;
	int rc = -EINVAL;

	if (!cert)
		goto out;
	snprintf(san, sizeof(san), "%s:%s", inet_pton(AF_INET, name, &ip) == 1 ? "IP" : "DNS",
		 name);
	if (add_ext(cert, ca, NID_basic_constraints, "critical,CA:FALSE") ||
	    add_ext(cert, ca, NID_key_usage, "critical,digitalSignature") ||
	    add_ext(cert, ca, NID_ext_key_usage, "serverAuth") ||
	    add_ext(cert, ca, NID_subject_alt_name, san) ||
	    add_ext(cert, ca, NID_subject_key_identifier, "hash") ||
	    add_ext(cert, ca, NID_authority_key_identifier, "keyid:always") ||
	    !X509_sign(cert, ca_key, EVP_sha256()))
		goto out;
	rc = write_pem(key_path, 0600, key, NULL);
	if (!rc)
		rc = write_pem(cert_path, 0644, NULL, cert);
out:
	X509_free(cert);
	EVP_PKEY_free(key);
	return rc;
}

/* A name that is safe as a file name and a dNSName or IPv4 literal. */
static bool name_ok(const char *name)
{
	size_t len = strlen(name);

	if (len == 0 || len > 253 || name[0] == '.' || name[0] == '-')
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '.'))
			return false;
	}
	return strstr(name, "..") == NULL;
}

int mkcert_main(int argc, char **argv)
{
	const char *dir = NULL;
	const char *names[256];
	unsigned nnames = 0;
	char cert_path[4096], key_path[4096];
	X509 *ca = NULL;
	EVP_PKEY *ca_key = NULL;
	int rc;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--ca-dir") && i + 1 < argc) {
			dir = argv[++i];
		} else if (!strcmp(argv[i], "--name")) {
			/* --name A B C, or --name A --name B */
			while (i + 1 < argc && strncmp(argv[i + 1], "--", 2) && nnames < 256)
				names[nnames++] = argv[++i];
		} else {
			fakenet_err("mkcert: unknown argument: %s", argv[i]);
			return 2;
		}
	}
	if (!dir) {
		fakenet_err("mkcert: needs --ca-dir DIR");
		return 2;
	}
	for (unsigned i = 0; i < nnames; i++) {
		if (!name_ok(names[i])) {
			fakenet_err("mkcert: not a host name: %s", names[i]);
			return 2;
		}
	}
	if (mkdir(dir, 0755) && errno != EEXIST) {
		fakenet_err("mkcert: cannot make %s: %s", dir, strerror(errno));
		return 1;
	}
	snprintf(cert_path, sizeof(cert_path), "%s/ca.pem", dir);
	snprintf(key_path, sizeof(key_path), "%s/ca.key", dir);
	if (access(cert_path, F_OK) || access(key_path, F_OK)) {
		rc = ca_create(cert_path, key_path);
		if (rc) {
			fakenet_err("mkcert: cannot make the CA in %s: %s", dir, strerror(-rc));
			return 1;
		}
	}
	rc = ca_load(cert_path, key_path, &ca, &ca_key);
	if (rc) {
		fakenet_err("mkcert: cannot load the CA %s: %s", cert_path, strerror(-rc));
		return 1;
	}
	for (unsigned i = 0; i < nnames && !rc; i++) {
		snprintf(cert_path, sizeof(cert_path), "%s/%s.pem", dir, names[i]);
		snprintf(key_path, sizeof(key_path), "%s/%s.key", dir, names[i]);
		rc = leaf_issue(ca, ca_key, names[i], cert_path, key_path);
		if (rc)
			fakenet_err("mkcert: cannot issue %s: %s", names[i], strerror(-rc));
	}
	X509_free(ca);
	EVP_PKEY_free(ca_key);
	return rc ? 1 : 0;
}
