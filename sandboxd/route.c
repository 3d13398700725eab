/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Paths to routes (docs/api.md, "Routes"). The control plane is whatever follows the first
 * "/v2/sandboxes" of the path, so that "", "/api" and "/api/v1" prefixes all work (the LangSmith
 * clients build all three); a box's dataplane is /dp/<box id>/...; a download link
 * /files/<token>; a service URL /svc/<token>/.... No I/O here: the fuzz target calls it.
 *
 * A collection is its exact path: "/boxes/" (an empty name) is no route, not the list or a
 * create. libwebsockets hands us the path decoded, its dot segments and "//" resolved, and cut
 * at a %00: ".../boxes/%00/start" and ".../boxes/%2F" arrive as ".../boxes/", which must not
 * become a create or a list (no client puts a '/' after a collection).
 */
#include <string.h>

#include "sandboxd.h"

#define CP_PREFIX "/v2/sandboxes"

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int route_pct_decode(char *s)
{
	char *w = s;

	for (const char *p = s; *p; p++) {
		if (*p != '%') {
			*w++ = *p;
			continue;
		}
		int hi = hexval((unsigned char)p[1]),
		    lo = hi < 0 ? -1 : hexval((unsigned char)p[2]);

		if (hi < 0 || lo < 0 || (hi | lo) == 0)
			return -1;
		*w++ = (char)(hi << 4 | lo);
		p += 2;
	}
	*w = 0;
	return 0;
}

/* The next segment of `*p` (after its '/') into out; false when none or too long or empty. */
static bool segment(const char **p, char *out, size_t len)
{
	const char *s = *p;

	if (*s != '/')
		return false;
	s++;
	size_t n = strcspn(s, "/");

	if (n == 0 || n >= len)
		return false;
	memcpy(out, s, n);
	out[n] = 0;
	*p = s + n;
	return true;
}

static enum route_kind set(struct route *r, enum route_kind k, bool ok)
{
	r->kind = k;
	r->method_ok = ok;
	return k;
}

static enum route_kind route_box(enum http_method m, const char *p, struct route *r)
{
	if (*p == 0)
		return set(r, R_BOXES, m == M_GET || m == M_POST);
	if (!segment(&p, r->arg, sizeof(r->arg)))
		return R_NONE;
	if (*p == 0)
		return set(r, R_BOX, m == M_GET || m == M_PATCH || m == M_DELETE);
	static const struct {
		const char *name;
		enum route_kind kind;
		enum http_method m1, m2;
	} subs[] = {
		{"/status", R_BOX_STATUS, M_GET, M_GET},
		{"/start", R_BOX_START, M_POST, M_POST},
		{"/stop", R_BOX_STOP, M_POST, M_POST},
		{"/snapshot", R_BOX_SNAPSHOT, M_POST, M_POST},
		{"/download-url", R_BOX_DOWNLOAD_URL, M_POST, M_POST},
		{"/service-url", R_BOX_SERVICE_URL, M_POST, M_POST},
		{"/service-urls", R_BOX_SERVICE_URLS, M_GET, M_DELETE},
		{"/commands", R_BOX_COMMANDS, M_GET, M_GET},
		{"/stats", R_BOX_STATS, M_GET, M_GET},
		{"/export", R_BOX_EXPORT, M_GET, M_GET},
	};
	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++)
		if (strcmp(p, subs[i].name) == 0)
			return set(r, subs[i].kind, m == subs[i].m1 || m == subs[i].m2);
	return R_NONE;
}

static enum route_kind route_control(enum http_method m, const char *p, struct route *r)
{
	if (strncmp(p, "/boxes", 6) == 0 && (p[6] == 0 || p[6] == '/'))
		return route_box(m, p + 6, r);
	if (strncmp(p, "/snapshots-by-name/", 19) == 0) {
		size_t n = strlen(p + 19);

		if (n == 0 || n >= sizeof(r->arg))
			return R_NONE;
		memcpy(r->arg, p + 19, n + 1);
		return set(r, R_SNAPSHOT_BY_NAME, m == M_GET);
	}
	if (strncmp(p, "/snapshots", 10) == 0 && (p[10] == 0 || p[10] == '/')) {
		p += 10;
		if (*p == 0)
			return set(r, R_SNAPSHOTS, m == M_GET || m == M_POST);
		if (!segment(&p, r->arg, sizeof(r->arg)) || *p)
			return R_NONE;
		return set(r, R_SNAPSHOT, m == M_GET || m == M_DELETE);
	}
	if (strncmp(p, "/registries", 11) == 0 && (p[11] == 0 || p[11] == '/')) {
		p += 11;
		if (*p == 0)
			return set(r, R_REGISTRIES, m == M_GET || m == M_POST);
		if (!segment(&p, r->arg, sizeof(r->arg)) || *p)
			return R_NONE;
		return set(r, R_REGISTRY, m == M_GET || m == M_PATCH || m == M_DELETE);
	}
	if (strncmp(p, "/usage", 6) == 0 && (p[6] == 0 || p[6] == '/'))
		return set(r, R_USAGE, m == M_GET);
	if (strcmp(p, "/chunks/missing") == 0)
		return set(r, R_CHUNKS_MISSING, m == M_POST);
	if (strncmp(p, "/chunks/", 8) == 0) {
		p += 7;
		if (!segment(&p, r->arg, sizeof(r->arg)) || *p)
			return R_NONE;
		return set(r, R_CHUNK, m == M_GET || m == M_PUT);
	}
	if (strcmp(p, "/imports") == 0)
		return set(r, R_IMPORTS, m == M_POST);
	return R_NONE;
}

static enum route_kind route_dataplane(enum http_method m, const char *p, struct route *r)
{
	if (!segment(&p, r->arg, sizeof(r->arg)))
		return R_NONE;
	static const struct {
		const char *name;
		enum route_kind kind;
		enum http_method m1, m2;
	} subs[] = {
		{"/execute", R_DP_EXECUTE, M_POST, M_POST},
		{"/execute/ws", R_DP_EXECUTE_WS, M_GET, M_GET},
		{"/upload", R_DP_UPLOAD, M_POST, M_POST},
		{"/download", R_DP_DOWNLOAD, M_GET, M_HEAD},
		{"/glob", R_DP_GLOB, M_POST, M_POST},
		{"/grep", R_DP_GREP, M_POST, M_POST},
		{"/tunnel", R_DP_TUNNEL, M_GET, M_GET},
	};
	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++)
		if (strcmp(p, subs[i].name) == 0)
			return set(r, subs[i].kind, m == subs[i].m1 || m == subs[i].m2);
	return R_NONE;
}

enum route_kind route_parse(enum http_method m, const char *path, bool operator_listener,
			    struct route *r)
{
	memset(r, 0, sizeof(*r));
	if (operator_listener) {
		if (strcmp(path, "/healthz") == 0)
			return set(r, R_HEALTHZ, m == M_GET || m == M_HEAD);
		if (strcmp(path, "/metrics") == 0)
			return set(r, R_METRICS, m == M_GET);
		if (strcmp(path, "/drain") == 0)
			return set(r, R_DRAIN, m == M_POST);
		if (strcmp(path, "/gc") == 0)
			return set(r, R_GC, m == M_POST);
		return R_NONE;
	}
	if (strncmp(path, "/dp/", 4) == 0)
		return route_dataplane(m, path + 3, r);
	if (strncmp(path, "/files/", 7) == 0) {
		const char *p = path + 6;

		if (!segment(&p, r->arg, sizeof(r->arg)) || *p)
			return R_NONE;
		return set(r, R_FILE_LINK, m == M_GET || m == M_HEAD);
	}
	if (strncmp(path, "/svc/", 5) == 0) {
		const char *p = path + 4;

		if (!segment(&p, r->arg, sizeof(r->arg)))
			return R_NONE;
		size_t n = strlen(p);

		if (n >= sizeof(r->rest))
			return R_NONE;
		memcpy(r->rest, *p ? p : "/", *p ? n + 1 : 2);
		return set(r, R_SERVICE, true);
	}
	const char *cp = strstr(path, CP_PREFIX);

	if (!cp)
		return R_NONE;
	return route_control(m, cp + strlen(CP_PREFIX), r);
}

const char *route_name(enum route_kind k)
{
	static const char *const names[] = {
		[R_NONE] = "none",
		[R_BOXES] = "boxes",
		[R_BOX] = "box",
		[R_BOX_STATUS] = "box_status",
		[R_BOX_START] = "box_start",
		[R_BOX_STOP] = "box_stop",
		[R_BOX_SNAPSHOT] = "box_snapshot",
		[R_BOX_DOWNLOAD_URL] = "box_download_url",
		[R_BOX_SERVICE_URL] = "box_service_url",
		[R_BOX_SERVICE_URLS] = "box_service_urls",
		[R_BOX_COMMANDS] = "box_commands",
		[R_BOX_STATS] = "box_stats",
		[R_BOX_EXPORT] = "box_export",
		[R_SNAPSHOTS] = "snapshots",
		[R_SNAPSHOT] = "snapshot",
		[R_SNAPSHOT_BY_NAME] = "snapshot_by_name",
		[R_REGISTRIES] = "registries",
		[R_REGISTRY] = "registry",
		[R_USAGE] = "usage",
		[R_CHUNKS_MISSING] = "chunks_missing",
		[R_CHUNK] = "chunk",
		[R_IMPORTS] = "imports",
		[R_DP_EXECUTE] = "execute",
		[R_DP_EXECUTE_WS] = "execute_ws",
		[R_DP_UPLOAD] = "upload",
		[R_DP_DOWNLOAD] = "download",
		[R_DP_GLOB] = "glob",
		[R_DP_GREP] = "grep",
		[R_DP_TUNNEL] = "tunnel",
		[R_FILE_LINK] = "file_link",
		[R_SERVICE] = "service",
		[R_HEALTHZ] = "healthz",
		[R_METRICS] = "metrics",
		[R_DRAIN] = "drain",
		[R_GC] = "gc",
	};
	return (unsigned)k < sizeof(names) / sizeof(names[0]) && names[k] ? names[k] : "none";
}
