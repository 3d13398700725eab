/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A registry's manifest for a pull (oci.h): an OCI image manifest or index, or Docker's v2
 * manifest or manifest list, parsed by our strict JSON reader (oci_json.c) into descriptors.
 * The bytes are the registry's, hostile: their digest is checked before they are parsed (by
 * the pull), every descriptor's digest and size are checked here (a config or a manifest at
 * most OCI_JSON_MAX, a layer at most OCI_UNPACKED_MAX), the counts are bounded, and the kind
 * is the document's own mediaType (which its digest covers) when it has one: a Content-Type
 * that names another kind is refused rather than trusted, and a document that is both an
 * index and a manifest is refused. Docker's schema 1 is refused by name. Not the layers' media
 * types: the importer (oci_image.c) checks them, as for any archive.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oci.h"

static const char *const index_types[] = {
	"application/vnd.oci.image.index.v1+json",
	"application/vnd.docker.distribution.manifest.list.v2+json",
};
static const char *const image_types[] = {
	"application/vnd.oci.image.manifest.v1+json",
	"application/vnd.docker.distribution.manifest.v2+json",
};

static bool in(const char *t, const char *const *list, size_t n)
{
	for (size_t i = 0; t && i < n; i++)
		if (strcmp(t, list[i]) == 0)
			return true;
	return false;
}

static bool is_index(const char *t)
{
	return in(t, index_types, 2);
}

static bool is_image(const char *t)
{
	return in(t, image_types, 2);
}

/* A Content-Type's media type: parameters and whitespace dropped, into out. */
static void media_of(const char *ct, char *out, size_t len)
{
	size_t n;

	out[0] = '\0';
	if (!ct)
		return;
	while (*ct == ' ' || *ct == '\t')
		ct++;
	n = strcspn(ct, "; \t");
	snprintf(out, len, "%.*s", (int)(n < len ? n : len - 1), ct);
}

/* Descriptor `d` into out: a sha256 digest, a size up to `max`, a media type if any. */
static int take_desc(const struct oci_json *d, uint64_t max, const char *what, size_t i,
		     struct oci_desc *out, struct oci_msg *m)
{
	const char *digest = oci_json_cstr(oci_json_get(d, "digest"));
	const struct oci_json *mt = oci_json_get(d, "mediaType");
	const char *type = oci_json_cstr(mt);

	memset(out, 0, sizeof(*out));
	if (!d || d->type != OJ_OBJECT)
		return oci_fail(m, -EBADMSG, "the manifest's %s %zu is not an object", what, i);
	if (!oci_valid_digest(digest))
		return oci_fail(m, -EBADMSG, "the manifest's %s %zu has no sha256 digest", what, i);
	if (!oci_json_u64(oci_json_get(d, "size"), max, &out->size))
		return oci_fail(m, -EFBIG,
				"the manifest's %s %zu (%s): no size, or over %llu bytes", what, i,
				digest, (unsigned long long)max);
	if (mt && (!type || strlen(type) >= sizeof(out->media_type)))
		return oci_fail(m, -EBADMSG, "the manifest's %s %zu (%s): a bad mediaType", what, i,
				digest);
	snprintf(out->digest, sizeof(out->digest), "%s", digest);
	snprintf(out->media_type, sizeof(out->media_type), "%s", type ? type : "");
	printable(out->media_type, strlen(out->media_type), false);
	return 0;
}

static int parse_index(const struct oci_json *doc, struct oci_manifest *man, struct oci_msg *m)
{
	const struct oci_json *mans = oci_json_get(doc, "manifests");

	if (!mans || mans->type != OJ_ARRAY)
		return oci_fail(m, -EBADMSG, "the index has no manifests array");
	if (mans->n == 0 || mans->n > OCI_CANDIDATES_MAX)
		return oci_fail(m, -EFBIG, "the index lists %zu manifests (1 to %u)", mans->n,
				OCI_CANDIDATES_MAX);
	if (!(man->descs = calloc(mans->n, sizeof(*man->descs))))
		return -ENOMEM;
	for (size_t i = 0; i < mans->n; i++) {
		const struct oci_json *d = &mans->items[i];
		const struct oci_json *pf = oci_json_get(d, "platform");
		const char *os = oci_json_cstr(oci_json_get(pf, "os"));
		const char *arch = oci_json_cstr(oci_json_get(pf, "architecture"));
		const char *var = oci_json_cstr(oci_json_get(pf, "variant"));
		const char *rt = oci_json_cstr(
			oci_json_get(oci_json_get(d, "annotations"), "vnd.docker.reference.type"));
		struct oci_desc *o = &man->descs[i];
		int err;

		if ((err = take_desc(d, OCI_JSON_MAX, "manifest", i + 1, o, m)) < 0)
			return err;
		man->n = i + 1;
		if (os && arch)
			snprintf(o->platform, sizeof(o->platform), "%.20s/%.20s%s%.20s", os, arch,
				 var ? "/" : "", var ? var : "");
		printable(o->platform, strlen(o->platform), false);
		o->attestation = rt && strcmp(rt, "attestation-manifest") == 0;
	}
	return 0;
}

static int parse_image(const struct oci_json *doc, struct oci_manifest *man, struct oci_msg *m)
{
	const struct oci_json *layers = oci_json_get(doc, "layers");
	int err;

	if ((err = take_desc(oci_json_get(doc, "config"), OCI_JSON_MAX, "config", 1, &man->config,
			     m)) < 0)
		return err;
	if (!layers || layers->type != OJ_ARRAY)
		return oci_fail(m, -EBADMSG, "the manifest has no layers array");
	if (layers->n == 0 || layers->n > OCI_LAYERS_MAX)
		return oci_fail(m, -EFBIG, "the manifest has %zu layers (1 to %u)", layers->n,
				OCI_LAYERS_MAX);
	if (!(man->descs = calloc(layers->n, sizeof(*man->descs))))
		return -ENOMEM;
	for (size_t i = 0; i < layers->n; i++) {
		if ((err = take_desc(&layers->items[i], OCI_UNPACKED_MAX, "layer", i + 1,
				     &man->descs[i], m)) < 0)
			return err;
		man->n = i + 1;
	}
	return 0;
}

int oci_manifest_parse(const char *body, size_t len, const char *content_type,
		       struct oci_manifest *man, struct oci_msg *m)
{
	struct oci_json *doc = NULL;
	const char *type;
	char ct[128];
	uint64_t v;
	bool index;
	int err;

	memset(man, 0, sizeof(*man));
	media_of(content_type, ct, sizeof(ct));
	if ((err = oci_json_parse(body, len, &doc, m)) < 0)
		return err;
	if (doc->type != OJ_OBJECT) {
		err = oci_fail(m, -EBADMSG, "the manifest is not a JSON object");
		goto out;
	}
	if (oci_json_u64(oci_json_get(doc, "schemaVersion"), 10, &v) && v == 1) {
		err = oci_fail(m, -ENOTSUP,
			       "a Docker schema 1 manifest: not supported (re-push the image with "
			       "a current client)");
		goto out;
	}
	if (!oci_json_u64(oci_json_get(doc, "schemaVersion"), 10, &v) || v != 2) {
		err = oci_fail(m, -EBADMSG, "the manifest's schemaVersion is not 2");
		goto out;
	}
	type = oci_json_cstr(oci_json_get(doc, "mediaType"));
	if (oci_json_get(doc, "mediaType") && !is_index(type) && !is_image(type)) {
		char t[64];

		snprintf(t, sizeof(t), "%s", type ? type : "(not a string)");
		printable(t, strlen(t), false);
		err = oci_fail(m, -ENOTSUP, "the manifest's mediaType %s: not an image or an index",
			       t);
		goto out;
	}
	if (type && (is_index(ct) || is_image(ct)) && is_index(ct) != is_index(type)) {
		err = oci_fail(m, -EBADMSG,
			       "the manifest says it is an %s, its Content-Type an %s: refused",
			       is_index(type) ? "index" : "image manifest",
			       is_index(ct) ? "index" : "image manifest");
		goto out;
	}
	if (oci_json_get(doc, "manifests") &&
	    (oci_json_get(doc, "layers") || oci_json_get(doc, "config"))) {
		err = oci_fail(m, -EBADMSG, "the manifest is both an index and an image manifest");
		goto out;
	}
	if (!type)
		type = is_index(ct) || is_image(ct) ? ct : NULL;
	index = type ? is_index(type) : oci_json_get(doc, "manifests") != NULL;
	man->kind = index ? OCI_MANIFEST_INDEX : OCI_MANIFEST_IMAGE;
	snprintf(man->media_type, sizeof(man->media_type), "%s",
		 type	 ? type
		 : index ? index_types[0]
			 : image_types[0]);
	err = index ? parse_index(doc, man, m) : parse_image(doc, man, m);
out:
	oci_json_free(doc);
	if (err < 0)
		oci_manifest_free(man);
	return err;
}

void oci_manifest_free(struct oci_manifest *man)
{
	free(man->descs);
	man->descs = NULL;
	man->n = 0;
}

int oci_index_choose(const struct oci_manifest *idx, size_t *pick, struct oci_msg *m)
{
	char list[600] = "";
	size_t len = 0;

	for (size_t i = 0; i < idx->n; i++) {
		const struct oci_desc *d = &idx->descs[i];

		if (d->attestation || (d->media_type[0] && !is_image(d->media_type)))
			continue;
		if (strcmp(d->platform, "linux/amd64") == 0 ||
		    strncmp(d->platform, "linux/amd64/", 12) == 0) {
			*pick = i;
			return 0;
		}
	}
	for (size_t i = 0; i < idx->n && len < sizeof(list) - 1; i++) {
		int n = snprintf(list + len, sizeof(list) - len, "%s%s", i ? ", " : "",
				 idx->descs[i].platform[0] ? idx->descs[i].platform : "none");

		if (n < 0)
			break;
		len += (size_t)n;
	}
	return oci_fail(m, -ENOENT,
			"the index has no linux/amd64 image manifest (only linux/amd64 runs here): "
			"its platforms: %s",
			list);
}
