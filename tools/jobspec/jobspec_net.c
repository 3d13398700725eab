/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A job spec's network and secrets (docs/jobspec.md), turned into sandbox-proxy prepare's
 * words as `sandboxctl create` passes them. Each value is checked here, by the proxy's own
 * grammar (netpolicy.h), so a bad one is the spec's FILE:LINE:COLUMN error before any sandbox
 * exists.
 *
 *   network: none                    # no NIC at all
 *   network:                         # or the proxy's policy (the default: allow-public)
 *     default: deny                  # allow-public | deny
 *     allow: [example.test, "*.example.test"]
 *     deny: ["*.evil.test"]
 *     allow-cidr: [203.0.113.0/24]
 *     ports: [80, 443]
 *     egress-bytes: 1000000000
 *     resolver: 203.0.113.53         # IP[:PORT], the proxy's upstream DNS
 *   secrets:                         # credential rules: the value reaches the proxy only
 *     - host: api.example.test
 *       header: Authorization
 *       env: API_TOKEN               # read from sandboxctl's environment at create
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobspec_yaml.h"
#include "netpolicy.h"

/* The policy's grammar is netpolicy.h's, the proxy's own: what passes here passes there. */
static bool domain_pattern(const char *s)
{
	char norm[NETPOL_NAME_TEXT + 2];

	return netpol_pattern_norm(s, norm, sizeof(norm));
}

static bool domain_name(const char *s)
{
	char norm[NETPOL_NAME_TEXT];

	return netpol_name_norm(s, norm, sizeof(norm));
}

static bool valid_cidr(const char *s)
{
	struct netpol_cidr c;

	return netpol_cidr_parse(s, &c) == 0;
}

static bool valid_resolver(const char *s)
{
	struct sockaddr_storage sa;
	socklen_t len;

	return netpol_hostport_parse(s, 53, &sa, &len) == 0;
}

/* A list of values, each checked by `ok` and given to prepare after `flag`. */
static int spec_rule_list(struct spec_parse *p, const yaml_node_t *n, struct jobspec *js,
			  const char *what, const char *flag, bool (*ok)(const char *),
			  const char *expected)
{
	int len = spec_sequence(p, n, what, SPEC_MAX_LIST), err;

	if (len < 0)
		return len;
	for (int i = 0; i < len; i++) {
		yaml_node_t *it = spec_item(p, n, (size_t)i);
		const char *s = spec_scalar(p, it, what);

		if (!s)
			return -EINVAL;
		if (!ok(s))
			return spec_fail(p, it, "%s: '%.60s' is not %s", what, s, expected);
		if ((err = spec_net_word(p, it, js, flag)) < 0 ||
		    (err = spec_net_word(p, it, js, s)) < 0)
			return err;
	}
	return 0;
}

static bool port(const char *s)
{
	uint64_t v;

	return parse_u64(s, 1, 65535, &v);
}

int spec_network(struct spec_parse *p, const yaml_node_t *n, struct jobspec *js)
{
	int err;

	if (n && n->type == YAML_SCALAR_NODE) {
		const char *s = spec_scalar(p, n, "network");

		if (!s)
			return -EINVAL;
		if (strcmp(s, "none") == 0)
			js->no_network = true;
		else if (strcmp(s, "proxy") != 0)
			return spec_fail(p, n, "network: give none, proxy or a policy mapping");
		return 0;
	}
	if ((err = spec_mapping(p, n, "network")) < 0)
		return err;
	for (size_t i = 0; i < spec_mapping_len(n); i++) {
		yaml_node_t *k, *val;
		const char *key = spec_key(p, n, i, &k, &val), *s;
		uint64_t v;
		char num[24];

		if (strcmp(key, "default") == 0) {
			if (!(s = spec_scalar(p, val, "default")))
				return -EINVAL;
			if (strcmp(s, "deny") == 0)
				err = spec_net_word(p, val, js, "--deny-all");
			else if (strcmp(s, "allow-public") != 0)
				err = spec_fail(p, val, "default: give allow-public or deny");
		} else if (strcmp(key, "allow") == 0) {
			err = spec_rule_list(p, val, js, "allow", "--allow", domain_pattern,
					     "a domain or *.domain");
		} else if (strcmp(key, "deny") == 0) {
			err = spec_rule_list(p, val, js, "deny", "--deny", domain_pattern,
					     "a domain or *.domain");
		} else if (strcmp(key, "allow-cidr") == 0) {
			err = spec_rule_list(p, val, js, "allow-cidr", "--allow-cidr", valid_cidr,
					     "ADDRESS[/BITS]");
		} else if (strcmp(key, "ports") == 0) {
			err = spec_rule_list(p, val, js, "ports", "--allow-port", port,
					     "a port from 1 to 65535");
		} else if (strcmp(key, "egress-bytes") == 0) {
			if (!(err = spec_uint(p, val, "egress-bytes", 0, UINT64_MAX / 2, &v))) {
				snprintf(num, sizeof(num), "%llu", (unsigned long long)v);
				if (!(err = spec_net_word(p, val, js, "--egress-bytes")))
					err = spec_net_word(p, val, js, num);
			}
		} else if (strcmp(key, "resolver") == 0) {
			if (!(s = spec_scalar(p, val, "resolver")))
				return -EINVAL;
			if (!valid_resolver(s))
				err = spec_fail(p, val, "resolver: '%.60s' is not IP or IP:PORT",
						s);
			else if (!(err = spec_net_word(p, val, js, "--resolver")))
				err = spec_net_word(p, val, js, s);
		} else {
			err = spec_fail(p, k,
					"unknown network key '%.40s' (default, allow, deny, "
					"allow-cidr, ports, egress-bytes, resolver)",
					key);
		}
		if (err < 0)
			return err;
	}
	return 0;
}

/* An HTTP header name: a token (RFC 9110), at most 64 bytes. */
static bool valid_header(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 64)
		return false;
	return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
			 "!#$%&'*+-.^_`|~") == n;
}

static bool valid_env_name(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 255 || (s[0] >= '0' && s[0] <= '9'))
		return false;
	return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == n;
}

static int spec_secret(struct spec_parse *p, const yaml_node_t *n, struct jobspec *js)
{
	const char *host = NULL, *header = NULL, *env = NULL;
	char rule[600];
	int err;

	if ((err = spec_mapping(p, n, "secrets")) < 0)
		return err;
	for (size_t i = 0; i < spec_mapping_len(n); i++) {
		yaml_node_t *k, *val;
		const char *key = spec_key(p, n, i, &k, &val), *s = NULL;

		if (strcmp(key, "host") && strcmp(key, "header") && strcmp(key, "env"))
			return spec_fail(p, k, "unknown secret key '%.40s' (host, header, env)",
					 key);
		if (!(s = spec_scalar(p, val, key)))
			return -EINVAL;
		if (strcmp(key, "host") == 0) {
			if (!domain_name(s))
				return spec_fail(p, val, "host: '%.60s' is not a domain", s);
			host = s;
		} else if (strcmp(key, "header") == 0) {
			if (!valid_header(s))
				return spec_fail(p, val, "header: '%.60s' is not a header name", s);
			header = s;
		} else {
			if (!valid_env_name(s))
				return spec_fail(p, val,
						 "env: '%.60s' is not an environment variable's "
						 "name",
						 s);
			env = s;
		}
	}
	if (!host || !header || !env)
		return spec_fail(p, n, "a secret needs host, header and env");
	snprintf(rule, sizeof(rule), "%s:%s=%s", host, header, env);
	if ((err = spec_net_word(p, n, js, "--credential")) < 0)
		return err;
	return spec_net_word(p, n, js, rule);
}

int spec_secrets(struct spec_parse *p, const yaml_node_t *n, struct jobspec *js)
{
	int len = spec_sequence(p, n, "secrets", SPEC_MAX_LIST), err;

	if (len < 0)
		return len;
	for (int i = 0; i < len; i++)
		if ((err = spec_secret(p, spec_item(p, n, (size_t)i), js)) < 0)
			return err;
	return 0;
}
