/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for what a registry sends a pull (tools/oci/oci_www_auth.c,
 * oci_registry_manifest.c) and the reference a caller gives it (oci_registry_ref.c). The first
 * byte picks the parser, the rest is its input, hostile:
 *   0  a WWW-Authenticate value: parsed, or refused with a message; a parsed one is Bearer
 *      (with a realm) or Basic, each field NUL-terminated within its bound, no control byte
 *   1  a manifest: "CONTENT-TYPE\0BODY": parsed into an image (a config, 1 to OCI_LAYERS_MAX
 *      layers) or an index (1 to OCI_CANDIDATES_MAX manifests), every digest valid and every
 *      size within its bound, or refused; an index's choice is one of its entries
 *   2  a reference: parsed into a host, a repository and a tag or a digest that keep to their
 *      grammar (nothing that would mean more in a URL's path), or refused
 * Never a crash, a leak, or a read past the input.
 *
 * Built and run by tests/fuzz/run.sh registry; seeds in tests/fuzz/corpus/registry/.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oci.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define fuzz_check(cond)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "fuzz_registry: %s:%d: %s\n", __FILE__, __LINE__, #cond);  \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

static void field_ok(const char *s, size_t cap)
{
	size_t n = strnlen(s, cap);

	fuzz_check(n < cap);
	for (size_t i = 0; i < n; i++)
		fuzz_check((unsigned char)s[i] >= 0x20 || s[i] == '\t');
}

static void www_auth(const char *v, size_t len)
{
	struct oci_challenge c;
	struct oci_msg m = {{0}};

	if (oci_www_auth_parse(v, len, &c, &m) < 0) {
		fuzz_check(m.text[0]);
		return;
	}
	fuzz_check(c.scheme == OCI_AUTH_BEARER || c.scheme == OCI_AUTH_BASIC);
	field_ok(c.realm, sizeof(c.realm));
	field_ok(c.service, sizeof(c.service));
	field_ok(c.scope, sizeof(c.scope));
	fuzz_check(c.scheme != OCI_AUTH_BEARER || c.realm[0]);
}

static void manifest(const char *in, size_t len)
{
	const char *nul = memchr(in, '\0', len);
	char ct[200];
	const char *body = in;
	size_t blen = len;
	struct oci_manifest man;
	struct oci_msg m = {{0}};
	size_t pick;

	ct[0] = '\0';
	if (nul) {
		size_t cl = (size_t)(nul - in);

		snprintf(ct, sizeof(ct), "%.*s", (int)(cl < sizeof(ct) - 1 ? cl : sizeof(ct) - 1),
			 in);
		body = nul + 1;
		blen = len - cl - 1;
	}
	if (oci_manifest_parse(body, blen, nul ? ct : NULL, &man, &m) < 0) {
		fuzz_check(m.text[0] && !man.descs && man.n == 0);
		return;
	}
	fuzz_check(man.n > 0);
	if (man.kind == OCI_MANIFEST_IMAGE) {
		fuzz_check(man.n <= OCI_LAYERS_MAX);
		fuzz_check(oci_valid_digest(man.config.digest) && man.config.size <= OCI_JSON_MAX);
		for (size_t i = 0; i < man.n; i++)
			fuzz_check(oci_valid_digest(man.descs[i].digest) &&
				   man.descs[i].size <= OCI_UNPACKED_MAX);
	} else {
		fuzz_check(man.kind == OCI_MANIFEST_INDEX && man.n <= OCI_CANDIDATES_MAX);
		for (size_t i = 0; i < man.n; i++) {
			fuzz_check(oci_valid_digest(man.descs[i].digest) &&
				   man.descs[i].size <= OCI_JSON_MAX);
			field_ok(man.descs[i].platform, sizeof(man.descs[i].platform));
		}
		if (oci_index_choose(&man, &pick, &m) == 0)
			fuzz_check(pick < man.n);
		else
			fuzz_check(m.text[0]);
	}
	/* the media type goes into index.json as it is: one of the four, nothing to escape */
	fuzz_check(strspn(man.media_type, "abcdefghijklmnopqrstuvwxyz0123456789./+-") ==
		   strlen(man.media_type));
	oci_manifest_free(&man);
}

static void reference(const char *in, size_t len)
{
	char text[OCI_REF_MAX + 2];
	struct oci_ref r;
	struct oci_msg m = {{0}};

	if (len > OCI_REF_MAX + 1)
		len = OCI_REF_MAX + 1;
	memcpy(text, in, len);
	text[len] = '\0';
	if (oci_ref_parse(text, len & 1, &r, &m) < 0) {
		fuzz_check(m.text[0]);
		return;
	}
	fuzz_check(r.host[0] && r.repo[0] && (r.tag[0] || r.digest[0])); /* both: the digest wins */
	fuzz_check(strspn(r.repo, "abcdefghijklmnopqrstuvwxyz0123456789._-/") == strlen(r.repo));
	fuzz_check(strcspn(r.host, "/?#@%\\ ") == strlen(r.host));
	fuzz_check(strcspn(r.tag, "/?#@%:\\ ") == strlen(r.tag));
	fuzz_check(!r.digest[0] || oci_valid_digest(r.digest));
	fuzz_check(r.https || r.loopback || (len & 1));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *copy;

	if (size < 1)
		return 0;
	if (!(copy = malloc(size)))
		return 0;
	memcpy(copy, data + 1, size - 1);
	switch (data[0] % 3) {
	case 0:
		www_auth(copy, size - 1);
		break;
	case 1:
		manifest(copy, size - 1);
		break;
	default:
		reference(copy, size - 1);
		break;
	}
	free(copy);
	return 0;
}
