/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A pull (oci.h, docs/images.md "Pulling from a registry"): an image from a registry's HTTP
 * API v2 (the distribution spec) into an OCI image layout that oci_build imports. GET /v2/;
 * on 401 its WWW-Authenticate challenge: Bearer (a token from the realm, the Basic credentials
 * sent to the realm only, scope repository:REPO:pull) or Basic (the credentials to the
 * registry itself); then the manifest (an index: its linux/amd64 manifest, by digest), the
 * config and each layer, by digest. A 401 later (a token expired mid-pull) authenticates once
 * more and retries that GET once.
 *
 * What is checked: a manifest asked by digest, and every blob, is hashed as it streams and
 * refused unless its sha256 is that digest (the message names both); a manifest asked by tag
 * is checked against the registry's Docker-Content-Digest when it sends one (nothing else can
 * check it: TLS is what vouches for a tag); each blob's size is its descriptor's, and no more
 * is read than that; a manifest or a config at most OCI_JSON_MAX; the layers together at most
 * the caller's bound, checked from the manifest before a layer is fetched. The bounds on
 * time are oci_registry_http.c's. The password and the token live in this pull's memory only,
 * are wiped when it ends, and are never part of a message: the registry's error answers give
 * only their error code ([A-Z_]), never their text, which could echo a header back.
 */
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "oci.h"

#define ACCEPT_MANIFESTS                                                                           \
	"application/vnd.oci.image.index.v1+json, "                                                \
	"application/vnd.oci.image.manifest.v1+json, "                                             \
	"application/vnd.docker.distribution.manifest.list.v2+json, "                              \
	"application/vnd.docker.distribution.manifest.v2+json"
#define PING_MAX     (64u << 10) /* /v2/'s answer (its body is not read) */
#define USER_MAX     256	 /* a user name */
#define PASSWORD_MAX 4096	 /* a password or an identity token */

struct pull {
	const struct oci_pull_req *q;
	struct oci_ref ref;
	struct oci_http h;
	char base[300]; /* scheme://host */
	char *auth;	/* "Authorization: ..." for the registry, or NULL; wiped, freed */
	size_t auth_len;
	bool authed;	/* a challenge was answered (auth may still be NULL: anonymous) */
	int dirfd;	/* the layout */
	char name[700]; /* host/repo:tag for messages */
};

static void progress(struct pull *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void progress(struct pull *p, const char *fmt, ...)
{
	char line[512];
	va_list ap;

	if (!p->q->progress)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	p->q->progress(p->q->progress_arg, line);
}

static void auth_clear(struct pull *p)
{
	if (p->auth) {
		explicit_bzero(p->auth, p->auth_len);
		free(p->auth);
	}
	p->auth = NULL;
	p->auth_len = 0;
}

/* "Authorization: Basic base64(user:password)" into *out (wiped by the caller). */
static int basic_header(const struct oci_pull_req *q, char **out, size_t *out_len,
			struct oci_msg *m)
{
	size_t ul = strlen(q->user), pl = q->password ? strlen(q->password) : 0;
	size_t raw_len = ul + 1 + pl, enc_len = 4 * ((raw_len + 2) / 3) + 1;
	char *raw, *hdr;

	if (ul == 0 || ul > USER_MAX || strchr(q->user, ':') || pl > PASSWORD_MAX)
		return oci_fail(m, -EINVAL,
				"the user name must be 1 to %u bytes without ':', the password at "
				"most %u",
				USER_MAX, PASSWORD_MAX);
	if (!(raw = malloc(raw_len + 1)))
		return -ENOMEM;
	if (!(hdr = malloc(21 + enc_len))) {
		free(raw);
		return -ENOMEM;
	}
	memcpy(raw, q->user, ul);
	raw[ul] = ':';
	memcpy(raw + ul + 1, q->password ? q->password : "", pl);
	memcpy(hdr, "Authorization: Basic ", 21);
	EVP_EncodeBlock((unsigned char *)hdr + 21, (unsigned char *)raw, (int)raw_len);
	explicit_bzero(raw, raw_len);
	free(raw);
	*out = hdr;
	*out_len = 21 + enc_len;
	return 0;
}

/* The registry's error code in an error answer's body ({"errors":[{"code":...}]}), as
 * " (CODE)", or "": only [A-Z_], so that no text of the answer reaches a message. */
static void error_code(const struct oci_http_get *g, char *out, size_t len)
{
	struct oci_msg scratch = {{0}};
	struct oci_json *doc = NULL;
	const struct oci_json *errs;
	const char *code = NULL;

	out[0] = '\0';
	if (!g->body || oci_json_parse(g->body, g->len, &doc, &scratch) < 0)
		return;
	errs = oci_json_get(doc, "errors");
	if (errs && errs->type == OJ_ARRAY && errs->n > 0)
		code = oci_json_cstr(oci_json_get(&errs->items[0], "code"));
	if (code && strlen(code) <= 40 &&
	    strspn(code, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_") == strlen(code))
		snprintf(out, len, " (%s)", code);
	oci_json_free(doc);
}

/* The token answer's "token" (or "access_token"): visible ASCII only (it goes in a header). */
static int take_token(struct pull *p, const struct oci_http_get *g, struct oci_msg *m)
{
	struct oci_msg scratch = {{0}};
	struct oci_json *doc = NULL;
	const char *tok;
	size_t tl;
	int err = 0;

	if (oci_json_parse(g->body ? g->body : "", g->len, &doc, &scratch) < 0)
		return oci_fail(m, -EBADMSG, "%s: the token server's answer is not JSON", p->name);
	tok = oci_json_cstr(oci_json_get(doc, "token"));
	if (!tok || !*tok)
		tok = oci_json_cstr(oci_json_get(doc, "access_token"));
	tl = tok ? strlen(tok) : 0;
	if (tl == 0 || tl > OCI_TOKEN_MAX) {
		err = oci_fail(m, -EBADMSG,
			       "%s: the token server's answer has no token (or one over %u bytes)",
			       p->name, OCI_TOKEN_MAX);
		goto out;
	}
	for (size_t i = 0; i < tl; i++)
		if (tok[i] < 0x21 || tok[i] > 0x7e) {
			err = oci_fail(m, -EBADMSG,
				       "%s: the token server's token holds a byte a header cannot",
				       p->name);
			goto out;
		}
	auth_clear(p);
	p->auth_len = 23 + tl + 1;
	if (!(p->auth = malloc(p->auth_len))) {
		err = -ENOMEM;
		goto out;
	}
	snprintf(p->auth, p->auth_len, "Authorization: Bearer %s", tok);
out:
	/* the tree holds the token's text too */
	if (doc && tok)
		explicit_bzero((char *)tok, strlen(tok));
	oci_json_free(doc);
	return err;
}

/* A token from the Bearer challenge's realm, for repository:REPO:pull. */
static int fetch_token(struct pull *p, const struct oci_challenge *c, struct oci_msg *m)
{
	struct oci_http_get g = {.fd = -1, .max = OCI_TOKEN_ANSWER_MAX};
	char *basic = NULL, *svc = NULL, *scope = NULL, *url = NULL, sc[300], code[64];
	size_t basic_len = 0, ul;
	int err;

	if (!oci_http_url_allowed(&p->h, c->realm)) {
		char r[80];

		snprintf(r, sizeof(r), "%.60s", c->realm);
		printable(r, strlen(r), false);
		return oci_fail(
			m, -EPERM,
			"%s: the token realm %s is not https (http only on loopback, unless "
			"insecure): no credential goes there",
			p->name, r);
	}
	snprintf(sc, sizeof(sc), "repository:%s:pull", p->ref.repo);
	svc = curl_easy_escape(NULL, c->service, 0);
	scope = curl_easy_escape(NULL, sc, 0);
	ul = strlen(c->realm) + (svc ? strlen(svc) : 0) + (scope ? strlen(scope) : 0) + 32;
	if (!svc || !scope || !(url = malloc(ul))) {
		err = -ENOMEM;
		goto out;
	}
	snprintf(url, ul, "%s%sservice=%s&scope=%s", c->realm, strchr(c->realm, '?') ? "&" : "?",
		 svc, scope);
	if (p->q->user && (err = basic_header(p->q, &basic, &basic_len, m)) < 0)
		goto out;
	g.url = url;
	g.auth_header = basic;
	if ((err = oci_http_get(&p->h, &g, "the token server", m)) < 0) {
		char text[sizeof(m->text)];

		memcpy(text, m->text, sizeof(text));
		snprintf(m->text, sizeof(m->text), "%.300s: %.700s", p->name, text);
		goto out;
	}
	error_code(&g, code, sizeof(code));
	if (g.status == 401 || g.status == 403)
		err = oci_fail(m, -EACCES,
			       p->q->user ? "%s: authentication failed: the token server refused "
					    "the user name and password given (HTTP %ld%s)"
					  : "%s: the registry wants credentials (the token server "
					    "answered HTTP %ld%s): give a user and password",
			       p->name, g.status, code);
	else if (g.status != 200)
		err = oci_fail(m, -EIO, "%s: the token server answered HTTP %ld%s", p->name,
			       g.status, code);
	else
		err = take_token(p, &g, m);
out:
	if (basic) {
		explicit_bzero(basic, basic_len);
		free(basic);
	}
	if (g.body) {
		explicit_bzero(g.body, g.len);
		free(g.body);
	}
	curl_free(svc);
	curl_free(scope);
	free(url);
	return err;
}

/* Answer the challenge of a 401 (g's headers). */
static int authenticate(struct pull *p, const struct oci_http_get *g, struct oci_msg *m)
{
	struct oci_challenge *c = calloc(1, sizeof(*c));
	int err;

	if (!c)
		return -ENOMEM;
	p->authed = true;
	if ((err = oci_www_auth_parse(g->www_auth, g->www_auth_len, c, m)) < 0) {
		char text[sizeof(m->text)];

		memcpy(text, m->text, sizeof(text));
		snprintf(m->text, sizeof(m->text), "%.300s: %.700s", p->name, text);
		goto out;
	}
	if (c->scheme == OCI_AUTH_BEARER) {
		err = fetch_token(p, c, m);
	} else if (!p->q->user) {
		err = oci_fail(
			m, -EACCES,
			"%s: the registry wants credentials (Basic): give a user and password",
			p->name);
	} else {
		auth_clear(p);
		err = basic_header(p->q, &p->auth, &p->auth_len, m);
	}
out:
	free(c);
	return err;
}

/* GET `path` (under base) into g, authenticating once on a 401. */
static int reg_get(struct pull *p, const char *path, struct oci_http_get *g, const char *what,
		   struct oci_msg *m)
{
	char url[1024];
	int err;

	snprintf(url, sizeof(url), "%s%s", p->base, path);
	g->url = url;
	for (int round = 0;; round++) {
		g->auth_header = p->auth;
		if ((err = oci_http_get(&p->h, g, what, m)) < 0) {
			char text[sizeof(m->text)];

			memcpy(text, m->text, sizeof(text));
			snprintf(m->text, sizeof(m->text), "%.300s: %.700s", p->name, text);
			return err;
		}
		if (g->status != 401 || round > 0 || (p->authed && !p->auth))
			return 0;
		if (g->www_auth_len == 0)
			return 0;
		if ((err = authenticate(p, g, m)) < 0)
			return err;
		free(g->body);
		g->body = NULL;
		if (g->fd >= 0 && (ftruncate(g->fd, 0) < 0 || lseek(g->fd, 0, SEEK_SET) < 0))
			return oci_fail(m, -errno, "%s: %s", what, strerror(errno));
	}
}

/* A non-2xx answer to the GET of `what`, said. */
static int refuse_status(struct pull *p, const struct oci_http_get *g, const char *what,
			 struct oci_msg *m)
{
	char code[64];

	error_code(g, code, sizeof(code));
	if (g->status == 401 || g->status == 403)
		return oci_fail(m, -EACCES,
				p->q->user ? "%s: %s: access denied with the credentials given "
					     "(HTTP %ld%s)"
					   : "%s: %s: access denied (HTTP %ld%s): give a user and "
					     "password",
				p->name, what, g->status, code);
	if (g->status == 404)
		return oci_fail(m, -ENOENT, "%s: %s: not found (HTTP 404%s)", p->name, what, code);
	if (g->status == 429)
		return oci_fail(m, -EAGAIN, "%s: %s: the registry's rate limit (HTTP 429%s)",
				p->name, what, code);
	return oci_fail(m, -EIO, "%s: %s: HTTP %ld%s", p->name, what, g->status, code);
}

/* The registry: /v2/, and its challenge answered now if it has one. */
static int ping(struct pull *p, struct oci_msg *m)
{
	struct oci_http_get g = {.fd = -1, .max = PING_MAX};
	int err;

	if ((err = reg_get(p, "/v2/", &g, "/v2/", m)) < 0)
		goto out;
	if (g.status != 200 && !(g.status == 401 && !p->authed))
		err = refuse_status(p, &g, "/v2/ (is it a registry?)", m);
	if (g.status == 401 && !p->authed)
		err = oci_fail(m, -EACCES,
			       "%s: /v2/: HTTP 401 without a WWW-Authenticate challenge", p->name);
out:
	free(g.body);
	return err;
}

/* Write `len` bytes as the new file `name` of the layout. */
static int layout_write(struct pull *p, const char *name, const void *data, size_t len,
			struct oci_msg *m)
{
	int fd =
		openat(p->dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	int err = 0;

	if (fd < 0)
		return oci_fail(m, -errno, "%s: %s", name, strerror(errno));
	if ((err = write_all(fd, data, len)) < 0)
		err = oci_fail(m, err, "%s: %s", name, strerror(-err));
	close(fd);
	return err;
}

/* The manifest `ref` (a tag or a digest; `want` its digest, or NULL) into man and its bytes
 * into the layout as a blob; its digest into digest. */
static int get_manifest(struct pull *p, const char *ref, const char *want, uint64_t want_size,
			struct oci_manifest *man, char digest[72], struct oci_msg *m)
{
	struct oci_http_get g = {.fd = -1, .accept = ACCEPT_MANIFESTS};
	char path[600], what[120], blob[96];
	int err;

	g.max = want_size ? want_size : OCI_JSON_MAX;
	snprintf(path, sizeof(path), "/v2/%s/manifests/%s", p->ref.repo, ref);
	snprintf(what, sizeof(what), "the manifest %.80s", ref);
	if ((err = reg_get(p, path, &g, what, m)) < 0)
		goto out;
	if (g.status != 200) {
		err = refuse_status(p, &g, what, m);
		goto out;
	}
	if (want && strcmp(g.sha256, want) != 0) {
		err = oci_fail(m, -EBADMSG, "%s: the manifest %s: digest mismatch: %s read",
			       p->name, want, g.sha256);
		goto out;
	}
	if (!want && g.docker_digest[0] && strcmp(g.docker_digest, g.sha256) != 0) {
		err = oci_fail(m, -EBADMSG,
			       "%s: the manifest: digest mismatch: the registry says %s, %s read",
			       p->name, g.docker_digest, g.sha256);
		goto out;
	}
	if (want_size && g.got != want_size) {
		err = oci_fail(m, -EBADMSG,
			       "%s: the manifest %s: %llu bytes, its descriptor says %llu", p->name,
			       g.sha256, (unsigned long long)g.got, (unsigned long long)want_size);
		goto out;
	}
	if ((err = oci_manifest_parse(g.body, g.len, g.content_type, man, m)) < 0) {
		char text[sizeof(m->text)];

		memcpy(text, m->text, sizeof(text));
		snprintf(m->text, sizeof(m->text), "%.200s: %s: %.700s", p->name, g.sha256, text);
		goto out;
	}
	snprintf(digest, 72, "%s", g.sha256);
	snprintf(blob, sizeof(blob), "blobs/sha256/%.64s", g.sha256 + 7);
	if ((err = layout_write(p, blob, g.body, g.len, m)) < 0)
		oci_manifest_free(man);
out:
	free(g.body);
	return err;
}

/* The blob `d` into the layout, hashed and counted as it streams. */
static int get_blob(struct pull *p, const struct oci_desc *d, const char *what, struct oci_msg *m)
{
	struct oci_http_get g = {.max = d->size};
	char path[600], part[96], name[96];
	struct stat st;
	int err;

	snprintf(name, sizeof(name), "blobs/sha256/%.64s", d->digest + 7);
	if (fstatat(p->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
		return 0; /* a layer listed twice: fetched and checked once */
	snprintf(part, sizeof(part), "%.80s.part", name);
	g.fd = openat(p->dirfd, part, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (g.fd < 0)
		return oci_fail(m, -errno, "%s: %s", part, strerror(errno));
	snprintf(path, sizeof(path), "/v2/%s/blobs/%s", p->ref.repo, d->digest);
	if ((err = reg_get(p, path, &g, what, m)) < 0)
		goto out;
	if (g.status != 200) {
		err = refuse_status(p, &g, what, m);
		goto out;
	}
	if (g.got != d->size) {
		err = oci_fail(m, -EBADMSG, "%s: %s: truncated: %llu of %llu bytes", p->name, what,
			       (unsigned long long)g.got, (unsigned long long)d->size);
		goto out;
	}
	if (strcmp(g.sha256, d->digest) != 0) {
		err = oci_fail(m, -EBADMSG, "%s: %s: digest mismatch: %s expected, %s read",
			       p->name, what, d->digest, g.sha256);
		goto out;
	}
	if (renameat(p->dirfd, part, p->dirfd, name) < 0)
		err = oci_fail(m, -errno, "%s: %s", name, strerror(errno));
out:
	close(g.fd);
	free(g.body);
	if (err < 0)
		unlinkat(p->dirfd, part, 0);
	return err;
}

/* The layout's directory: made, or an empty one. */
static int layout_open(struct pull *p, const char *dir, struct oci_msg *m)
{
	struct dirent *e;
	DIR *d;
	int fd;

	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return oci_fail(m, -errno, "%s: %s", dir, strerror(errno));
	if ((p->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return oci_fail(m, -errno, "%s: %s", dir, strerror(errno));
	if ((fd = dup(p->dirfd)) < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return oci_fail(m, -errno, "%s: %s", dir, strerror(errno));
	}
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
			closedir(d);
			return oci_fail(m, -EEXIST, "%s: not empty", dir);
		}
	closedir(d);
	if ((mkdirat(p->dirfd, "blobs", 0700) < 0 && errno != EEXIST) ||
	    (mkdirat(p->dirfd, "blobs/sha256", 0700) < 0 && errno != EEXIST))
		return oci_fail(m, -errno, "%s/blobs/sha256: %s", dir, strerror(errno));
	return 0;
}

/* oci-layout, and index.json naming the image manifest `digest` (its blob written already) by
 * the tag, which the reference's grammar keeps to [A-Za-z0-9_.-]: JSON as it is. */
static int layout_finish(struct pull *p, const struct oci_manifest *man, const char *digest,
			 struct oci_msg *m)
{
	static const char layout[] = "{\"imageLayoutVersion\":\"1.0.0\"}\n";
	char json[700], blob[96];
	struct stat st;
	int err;

	snprintf(blob, sizeof(blob), "blobs/sha256/%.64s", digest + 7);
	if (fstatat(p->dirfd, blob, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return oci_fail(m, -errno, "%s: %s", blob, strerror(errno));
	snprintf(
		json, sizeof(json),
		"{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"%s\",\"digest\":\"%s\","
		"\"size\":%llu,\"annotations\":{\"org.opencontainers.image.ref.name\":\"%s\"}}]}\n",
		man->media_type, digest, (unsigned long long)st.st_size,
		p->ref.tag[0] ? p->ref.tag : "pulled");
	if ((err = layout_write(p, "oci-layout", layout, strlen(layout), m)) < 0)
		return err;
	return layout_write(p, "index.json", json, strlen(json), m);
}

/* The image's manifest (chosen from an index if need be), config and layers. */
static int pull_image(struct pull *p, struct oci_msg *m)
{
	struct oci_manifest man = {0}, img = {0};
	char digest[72], what[160];
	const char *ref = p->ref.digest[0] ? p->ref.digest : p->ref.tag;
	uint64_t total = 0, max = p->q->layers_max ? p->q->layers_max : OCI_PULL_LAYERS_DEFAULT;
	size_t pick;
	int err;

	if ((err = get_manifest(p, ref, p->ref.digest[0] ? p->ref.digest : NULL, 0, &man, digest,
				m)) < 0)
		return err;
	if (man.kind == OCI_MANIFEST_INDEX) {
		if ((err = oci_index_choose(&man, &pick, m)) < 0) {
			char text[sizeof(m->text)];

			memcpy(text, m->text, sizeof(text));
			snprintf(m->text, sizeof(m->text), "%.200s: %.800s", p->name, text);
			goto out;
		}
		progress(p, "%s: index %.19s: linux/amd64 is %.19s", p->name, digest,
			 man.descs[pick].digest);
		if ((err = get_manifest(p, man.descs[pick].digest, man.descs[pick].digest,
					man.descs[pick].size, &img, digest, m)) < 0)
			goto out;
		if (img.kind != OCI_MANIFEST_IMAGE) {
			err = oci_fail(m, -EBADMSG,
				       "%s: the index's linux/amd64 entry %s is an index", p->name,
				       digest);
			goto out;
		}
		oci_manifest_free(&man);
		man = img;
		memset(&img, 0, sizeof(img));
	}
	for (size_t i = 0; i < man.n; i++) {
		if (man.descs[i].size > max - total) {
			err = oci_fail(m, -EFBIG,
				       "%s: the layers are more than %llu bytes together", p->name,
				       (unsigned long long)max);
			goto out;
		}
		total += man.descs[i].size;
	}
	progress(p, "%s: manifest %.19s: %zu layers, %.1f MiB", p->name, digest, man.n,
		 (double)total / (1 << 20));
	snprintf(what, sizeof(what), "the config (%.19s)", man.config.digest);
	if ((err = get_blob(p, &man.config, what, m)) < 0)
		goto out;
	for (size_t i = 0; i < man.n; i++) {
		snprintf(what, sizeof(what), "layer %zu of %zu (%.19s)", i + 1, man.n,
			 man.descs[i].digest);
		if ((err = get_blob(p, &man.descs[i], what, m)) < 0)
			goto out;
	}
	err = layout_finish(p, &man, digest, m);
out:
	oci_manifest_free(&man);
	oci_manifest_free(&img);
	return err;
}

int oci_pull(const struct oci_pull_req *q, const char *layout_dir, struct oci_msg *m)
{
	struct pull *p = calloc(1, sizeof(*p));
	int err;

	if (!p)
		return -ENOMEM;
	p->q = q;
	p->dirfd = -1;
	if ((err = oci_ref_parse(q->ref, q->insecure, &p->ref, m)) < 0)
		goto out;
	snprintf(p->base, sizeof(p->base), "%s://%s", p->ref.https ? "https" : "http", p->ref.host);
	snprintf(p->name, sizeof(p->name), "%s/%s%s%s", p->ref.host, p->ref.repo,
		 p->ref.digest[0] ? "@" : ":", p->ref.digest[0] ? p->ref.digest : p->ref.tag);
	if (q->user && !q->password) {
		err = oci_fail(m, -EINVAL, "a user name without a password");
		goto out;
	}
	if (q->refuse_loopback && p->ref.loopback) {
		err = oci_fail(m, -EPERM,
			       "%s: a registry on this host's loopback is not allowed here",
			       p->name);
		goto out;
	}
	p->h.insecure = q->insecure;
	p->h.allow_loopback = p->ref.loopback;
	p->h.ca_file = q->ca_file;
	p->h.connect_timeout_s = q->connect_timeout_s ? q->connect_timeout_s : 10;
	p->h.stall_s = q->stall_s ? q->stall_s : 30;
	p->h.deadline_ms = now_ms() + (q->deadline_s ? q->deadline_s : 3600) * 1000ull;
	if ((err = layout_open(p, layout_dir, m)) < 0 || (err = oci_http_init(&p->h, m)) < 0)
		goto out;
	if ((err = ping(p, m)) < 0)
		goto out;
	err = pull_image(p, m);
out:
	auth_clear(p);
	oci_http_free(&p->h);
	if (p->dirfd >= 0)
		close(p->dirfd);
	free(p);
	return err;
}
