/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The API's proxy_config as the sandbox's egress policy (docs/api.md, "proxy_config"):
 * header rules become the proxy's credentials (injected outside the VM; a workspace secret's
 * value never enters the guest), access_control's allow or deny list becomes its allow or deny
 * lists (IPs and CIDRs its allow-cidr). What our proxy does not do (AWS or GCP signing, Azure,
 * relays, rewrites, callbacks, path or header matching, regular expressions) is a 422 naming
 * it, so nothing the client asked for is silently dropped.
 *
 * The resolved values go to the proxy through a policy file whose header values are files
 * ({file: PATH}, 0600 under service/tmp), so no secret is in an environment, a command line or
 * a log; the files are removed once the proxy read them.
 */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hostutil.h"
#include "sandboxd.h"

#define PC_RULES_MAX   64
#define PC_HOSTS_MAX   64
#define PC_HEADERS_MAX 32
#define PC_LIST_MAX    256

static const char *const refused_fields[] = {"aws", "gcp", "azure", "relay_id", "rewrite"};

static bool valid_host_pattern(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 253)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '.' || (c == '*' && i == 0 && s[1] == '.')))
			return false;
	}
	return true;
}

/* An IP or CIDR, strictly: the address inet_pton takes, then nothing or '/' and a prefix
 * length of digits only within the family's. Into *v6, addr (16 bytes) and *prefix. */
static bool parse_cidr(const char *s, bool *v6, uint8_t addr[16], unsigned *prefix)
{
	char buf[64];
	const char *slash = strchr(s, '/');
	size_t n = slash ? (size_t)(slash - s) : strlen(s);

	if (n == 0 || n >= sizeof(buf))
		return false;
	memcpy(buf, s, n);
	buf[n] = 0;
	memset(addr, 0, 16);
	if (inet_pton(AF_INET, buf, addr) == 1)
		*v6 = false;
	else if (inet_pton(AF_INET6, buf, addr) == 1)
		*v6 = true;
	else
		return false;
	unsigned max = *v6 ? 128 : 32;

	*prefix = max;
	if (!slash)
		return true;
	const char *p = slash + 1;

	if (!*p || strlen(p) > 3)
		return false;
	unsigned v = 0;

	for (; *p; p++) {
		if (*p < '0' || *p > '9')
			return false;
		v = v * 10 + (unsigned)(*p - '0');
	}
	*prefix = v;
	return v <= max;
}

static bool is_cidr(const char *s)
{
	bool v6;
	uint8_t a[16];
	unsigned p;

	return parse_cidr(s, &v6, a, &p);
}

/* Does the range [a/p] overlap [b/q]? */
static bool overlaps(const uint8_t *a, unsigned p, const uint8_t *b, unsigned q)
{
	unsigned bits = p < q ? p : q;

	for (unsigned i = 0; i < bits; i++)
		if (((a[i / 8] >> (7 - i % 8)) & 1) != ((b[i / 8] >> (7 - i % 8)) & 1))
			return false;
	return true;
}

/* A range a tenant may not open its guest's egress to: this host's loopback and link-local
 * ranges, "this network", and every address of this host's own interfaces (its loopback
 * services: the operator's listener, other boxes' port forwarders, sandboxd itself). */
static bool cidr_forbidden(const char *s)
{
	static const struct {
		const char *net;
	} special[] = {{"127.0.0.0/8"}, {"0.0.0.0/8"}, {"169.254.0.0/16"},	{"::1/128"},
		       {"::/128"},	{"fe80::/10"}, {"::ffff:127.0.0.0/104"}};
	bool v6, sv6;
	uint8_t a[16], sa[16];
	unsigned p, sp;

	if (!parse_cidr(s, &v6, a, &p))
		return true;
	for (size_t i = 0; i < sizeof(special) / sizeof(special[0]); i++)
		if (parse_cidr(special[i].net, &sv6, sa, &sp) && sv6 == v6 &&
		    overlaps(a, p, sa, sp))
			return true;
	struct ifaddrs *ifs, *i;
	bool hit = false;

	if (getifaddrs(&ifs) < 0)
		return true; /* cannot tell: refuse */
	for (i = ifs; i && !hit; i = i->ifa_next) {
		if (!i->ifa_addr)
			continue;
		if (i->ifa_addr->sa_family == AF_INET && !v6)
			hit = overlaps(a, p,
				       (uint8_t *)&((struct sockaddr_in *)i->ifa_addr)->sin_addr,
				       32);
		else if (i->ifa_addr->sa_family == AF_INET6 && v6)
			hit = overlaps(
				a, p, ((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr.s6_addr, 128);
	}
	freeifaddrs(ifs);
	return hit;
}

static bool valid_header_name(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 128)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '-' || s[i] == '_'))
			return false;
	return true;
}

/* A rule's headers, as a list [{name,type,value}] or a map {name: value}. */
static int headers_check(struct sd_req *q, json_t *h, const char *rule)
{
	if (json_is_object(h)) {
		const char *k;
		json_t *v;

		json_object_foreach(h, k, v) if (!valid_header_name(k) || !json_is_string(v))
		{
			req_reply_invalid(q, "proxy_config",
					  "rule '%.64s': header '%.64s' is not a "
					  "name with a string value",
					  rule, k);
			return -EINVAL;
		}
		return json_object_size(h) > PC_HEADERS_MAX ? -E2BIG : 0;
	}
	if (!json_is_array(h) || json_array_size(h) > PC_HEADERS_MAX) {
		req_reply_invalid(q, "proxy_config", "rule '%.64s': headers must be a list", rule);
		return -EINVAL;
	}
	size_t i;
	json_t *e;

	json_array_foreach(h, i, e)
	{
		const char *name = json_string_value(json_object_get(e, "name"));
		const char *type = json_string_value(json_object_get(e, "type"));
		const char *value = json_string_value(json_object_get(e, "value"));

		if (!name || !valid_header_name(name) ||
		    (type && strcmp(type, "workspace_secret") && strcmp(type, "opaque") &&
		     strcmp(type, "plaintext")) ||
		    !value) {
			req_reply_invalid(q, "proxy_config",
					  "rule '%.64s': a header needs a name, a type "
					  "(workspace_secret, opaque, plaintext) and a value",
					  rule);
			return -EINVAL;
		}
	}
	return 0;
}

int proxy_config_check(struct sd_req *q, json_t *pc)
{
	if (!json_is_object(pc)) {
		req_reply_invalid(q, "proxy_config", "proxy_config must be an object");
		return -EINVAL;
	}
	json_t *rules = json_object_get(pc, "rules"), *ac = json_object_get(pc, "access_control");
	json_t *cb = json_object_get(pc, "callbacks");

	if (cb && json_is_array(cb) && json_array_size(cb)) {
		req_reply_error(q, 422, "SandboxConfig",
				"proxy_config.callbacks are not supported");
		return -EINVAL;
	}
	if (rules && (!json_is_array(rules) || json_array_size(rules) > PC_RULES_MAX)) {
		req_reply_invalid(q, "proxy_config", "rules must be a list of at most %d",
				  PC_RULES_MAX);
		return -EINVAL;
	}
	size_t i;
	json_t *r;

	json_array_foreach(rules, i, r)
	{
		const char *name = json_string_value(json_object_get(r, "name"));
		const char *type = json_string_value(json_object_get(r, "type"));
		json_t *hosts = json_object_get(r, "match_hosts"),
		       *paths = json_object_get(r, "match_paths");

		if (!json_is_object(r) || !name) {
			req_reply_invalid(q, "proxy_config", "each rule needs a name");
			return -EINVAL;
		}
		for (size_t f = 0; f < sizeof(refused_fields) / sizeof(refused_fields[0]); f++)
			if (json_object_get(r, refused_fields[f]) ||
			    (type && strcmp(type, refused_fields[f]) == 0) ||
			    (type && strcmp(type, "relay") == 0)) {
				req_reply_error(
					q, 422, "SandboxConfig",
					"proxy_config rule '%.64s': %s rules are not supported "
					"by this server",
					name, type ? type : refused_fields[f]);
				return -EINVAL;
			}
		if (json_array_size(json_object_get(r, "match_headers"))) {
			req_reply_error(q, 422, "SandboxConfig",
					"proxy_config rule '%.64s': match_headers is not supported",
					name);
			return -EINVAL;
		}
		size_t j;
		json_t *v;

		json_array_foreach(paths, j, v) if (!json_is_string(v) ||
						    strcmp(json_string_value(v), "*") != 0)
		{
			req_reply_error(
				q, 422, "SandboxConfig",
				"proxy_config rule '%.64s': match_paths other than \"*\" are "
				"not supported",
				name);
			return -EINVAL;
		}
		if (!json_is_array(hosts) || json_array_size(hosts) == 0 ||
		    json_array_size(hosts) > PC_HOSTS_MAX) {
			req_reply_invalid(q, "proxy_config",
					  "rule '%.64s': match_hosts must list 1 to %d hosts", name,
					  PC_HOSTS_MAX);
			return -EINVAL;
		}
		json_array_foreach(hosts, j, v) if (!json_is_string(v) ||
						    !valid_host_pattern(json_string_value(v)))
		{
			req_reply_invalid(q, "proxy_config", "rule '%.64s': a host is not a domain",
					  name);
			return -EINVAL;
		}
		json_t *h = json_object_get(r, "headers");

		if (h && headers_check(q, h, name) < 0)
			return -EINVAL;
	}
	if (ac) {
		json_t *al = json_object_get(ac, "allow_list"),
		       *dl = json_object_get(ac, "deny_list");

		if (json_array_size(al) && json_array_size(dl)) {
			req_reply_invalid(q, "proxy_config",
					  "give allow_list or deny_list, not both");
			return -EINVAL;
		}
		json_t *l = json_array_size(al) ? al : dl;
		json_t *v;

		if (json_array_size(l) > PC_LIST_MAX) {
			req_reply_invalid(q, "proxy_config",
					  "access_control lists at most %d entries", PC_LIST_MAX);
			return -EINVAL;
		}
		json_array_foreach(l, i, v)
		{
			const char *s = json_string_value(v);

			if (s && s[0] == '~') {
				req_reply_error(
					q, 422, "SandboxConfig",
					"access_control: regular expressions are not supported");
				return -EINVAL;
			}
			if (!s || (!valid_host_pattern(s) && !is_cidr(s))) {
				req_reply_invalid(q, "proxy_config",
						  "access_control: an entry is not a domain, glob, "
						  "IP or CIDR");
				return -EINVAL;
			}
			if (is_cidr(s) && l == al && cidr_forbidden(s)) {
				req_reply_error(
					q, 422, "SandboxConfig",
					"access_control: %.64s is this host's own or a loopback "
					"or link-local range: not allowed",
					s);
				return -EINVAL;
			}
			if (is_cidr(s) && l == dl) {
				req_reply_error(
					q, 422, "SandboxConfig",
					"access_control: IPs in a deny list are not supported");
				return -EINVAL;
			}
		}
	}
	return 0;
}

/* ---- the policy file ---- */

/* `s` as a YAML double-quoted scalar: only the characters the checks above let through
 * (domains, globs, addresses, header names) are expected; anything else is written escaped,
 * so no value can end its string or its line. */
static void yaml_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20 || c >= 0x7f)
			fprintf(f, "\\x%02x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

struct pf {
	FILE *f;
	char dir[4300];
	unsigned nfiles;
	int err;
};

/* `value` with each {NAME} replaced by the workspace's secret NAME. */
static char *resolve(const char *workspace, const char *type, const char *value, int *err)
{
	if (type && strcmp(type, "workspace_secret") == 0) {
		char name[160];
		size_t n = strlen(value);

		if (n >= 2 && value[0] == '{' && value[n - 1] == '}')
			snprintf(name, sizeof(name), "%.*s", (int)(n - 2), value + 1);
		else
			snprintf(name, sizeof(name), "%s", value);
		char *v;
		size_t len;

		*err = secret_get(workspace, name, &v, &len);
		return *err < 0 ? NULL : v;
	}
	/* opaque, plaintext: {NAME} references inside are secrets too */
	size_t cap = strlen(value) + 1, len = 0;
	char *out = malloc(cap);

	for (const char *p = value; out && *p;) {
		const char *close = *p == '{' ? strchr(p, '}') : NULL;
		char *sv = NULL;
		size_t sl = 0;

		if (close && close - p > 1 && close - p < 130) {
			char name[160];

			snprintf(name, sizeof(name), "%.*s", (int)(close - p - 1), p + 1);
			if (secret_get(workspace, name, &sv, &sl) < 0)
				sv = NULL;
		}
		const char *piece = sv ? sv : p;
		size_t pl = sv ? sl : 1;

		if (len + pl + 1 > cap) {
			cap = (len + pl + 1) * 2;
			char *n = realloc(out, cap);

			if (!n) {
				free(out);
				free(sv);
				*err = -ENOMEM;
				return NULL;
			}
			out = n;
		}
		memcpy(out + len, piece, pl);
		len += pl;
		p = sv ? close + 1 : p + 1;
		free(sv);
	}
	if (!out) {
		*err = -ENOMEM;
		return NULL;
	}
	out[len] = 0;
	*err = 0;
	return out;
}

static void header_line(struct pf *pf, const char *workspace, const char *name, const char *type,
			const char *value)
{
	int err;
	char *v = resolve(workspace, type, value, &err), path[4400];

	if (!v) {
		pf->err = err == -ENOENT ? -ENOKEY : err;
		return;
	}
	snprintf(path, sizeof(path), "%s/h%u", pf->dir, pf->nfiles++);
	err = write_file_atomic(path, v, strlen(v), 0600);
	explicit_bzero(v, strlen(v));
	free(v);
	if (err < 0) {
		pf->err = err;
		return;
	}
	fputs("      ", pf->f);
	yaml_str(pf->f, name);
	fputs(": {file: ", pf->f);
	yaml_str(pf->f, path);
	fputs("}\n", pf->f);
}

int proxy_config_words(const struct box *b, char ***words, unsigned *n)
{
	json_t *pc = b->proxy_config, *rules = json_object_get(pc, "rules");
	json_t *ac = json_object_get(pc, "access_control");
	struct pf pf = {0};
	char file[4400];
	size_t i, j;
	json_t *r, *v;

	snprintf(pf.dir, sizeof(pf.dir), "%s/tmp", sd_dir());
	if (mkdir(pf.dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	snprintf(pf.dir, sizeof(pf.dir), "%s/tmp/%s", sd_dir(), b->id);
	if (mkdir(pf.dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	snprintf(file, sizeof(file), "%s/policy.yaml", pf.dir);
	int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);

	if (fd < 0 || !(pf.f = fdopen(fd, "w"))) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	json_t *al = json_object_get(ac, "allow_list"), *dl = json_object_get(ac, "deny_list");

	fprintf(pf.f, "default: %s\n", json_array_size(al) ? "deny" : "allow-public");
	if (json_array_size(al) || json_array_size(dl)) {
		json_t *l = json_array_size(al) ? al : dl;

		fprintf(pf.f, "%s: [", l == al ? "allow" : "deny");
		unsigned k = 0;

		json_array_foreach(l, i, v) if (!is_cidr(json_string_value(v)))
		{
			fputs(k++ ? ", " : "", pf.f);
			yaml_str(pf.f, json_string_value(v));
		}
		fprintf(pf.f, "]\n");
		if (l == al) {
			fprintf(pf.f, "allow-cidr: [");
			k = 0;
			json_array_foreach(l, i, v) if (is_cidr(json_string_value(v)))
			{
				fputs(k++ ? ", " : "", pf.f);
				yaml_str(pf.f, json_string_value(v));
			}
			fprintf(pf.f, "]\n");
		}
	}
	if (json_array_size(rules)) {
		fprintf(pf.f, "credentials:\n");
		json_array_foreach(rules, i, r)
		{
			json_t *h = json_object_get(r, "headers");

			if (json_is_false(json_object_get(r, "enabled")) || !h)
				continue;
			json_array_foreach(json_object_get(r, "match_hosts"), j, v)
			{
				fputs("  - host: ", pf.f);
				yaml_str(pf.f, json_string_value(v));
				fputs("\n    headers:\n", pf.f);
				if (json_is_object(h)) {
					const char *k;
					json_t *hv;

					json_object_foreach(h, k, hv)
						header_line(&pf, b->workspace, k, "plaintext",
							    json_string_value(hv));
				} else {
					size_t m;
					json_t *e;

					json_array_foreach(h, m, e) header_line(
						&pf, b->workspace,
						json_string_value(json_object_get(e, "name")),
						json_string_value(json_object_get(e, "type")),
						json_string_value(json_object_get(e, "value")));
				}
			}
		}
	}
	if (fclose(pf.f) != 0 && pf.err == 0)
		pf.err = -EIO;
	if (pf.err < 0)
		return pf.err;
	char **w = calloc(3, sizeof(char *));

	if (!w || !(w[0] = strdup("--policy")) || !(w[1] = strdup(file))) {
		if (w)
			free(w[0]);
		free(w);
		return -ENOMEM;
	}
	*words = w;
	*n = 2;
	return 0;
}

void proxy_config_cleanup(const char *box_id)
{
	char dir[4400];

	snprintf(dir, sizeof(dir), "%s/tmp/%s", sd_dir(), box_id);
	remove_flat_dir(dir);
}
