/* SPDX-License-Identifier: Apache-2.0 */
/* proxy/policy*.c: parsing (errors with their line), matching, special addresses. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "proxy.h"

static struct policy *parse_ok(const char *text)
{
	struct policy *p = policy_new();
	char err[512] = "";

	cr_assert(p);
	cr_assert_eq(policy_parse(p, "p.yaml", text, strlen(text), err, sizeof(err)), 0, "%s", err);
	return p;
}

static void parse_bad(const char *text, const char *want)
{
	struct policy *p = policy_new();
	char err[512] = "";

	cr_assert_eq(policy_parse(p, "p.yaml", text, strlen(text), err, sizeof(err)), -EINVAL,
		     "accepted: %s", text);
	cr_assert(strstr(err, want), "error '%s' lacks '%s'", err, want);
	policy_free(p);
}

Test(policy, errors_name_the_line)
{
	parse_bad("default: deny\nallow: [a.test]\nbogus: 1\n", "p.yaml:3: unknown key 'bogus'");
	parse_bad("allow-cidr:\n  - 10.0.0.0/8\n  - 10.0.0.0/33\n",
		  "p.yaml:3: allow-cidr: bad CIDR");
	parse_bad("allow-cidr: [300.1.1.1/8]\n", "p.yaml:1: allow-cidr: bad CIDR");
	parse_bad("ports: [80, 0]\n", "p.yaml:1: ports: bad port '0'");
	parse_bad("\n\nports: [65536]\n", "p.yaml:3:");
	parse_bad("ports: [http]\n", "bad port");
	parse_bad("allow: [\"a..b\"]\n", "bad domain pattern");
	parse_bad("allow: [\"*\"]\n", "bad domain pattern");
	parse_bad("allow: [\"a.*.b\"]\n", "bad domain pattern");
	parse_bad("allow: [\"exa mple.test\"]\n", "bad domain pattern");
	parse_bad("allow: a.test\n", "p.yaml:1: allow: expected a list");
	parse_bad("allow: [[a.test]]\n", "expected a single value");
	parse_bad("default: maybe\n", "default: expected allow-public or deny");
	parse_bad("egress-bytes: -1\n", "egress-bytes");
	parse_bad("resolver: nowhere\n", "resolver");
	parse_bad("- a\n- b\n", "expected a mapping");
	parse_bad("allow: [a\n", "p.yaml:");
	parse_bad("credentials:\n  - host: a.test\n    headers:\n      X-Key: {path: /x}\n",
		  "p.yaml:4: X-Key: unknown key 'path'");
	parse_bad("credentials:\n  - host: a.test\n    heders: {}\n",
		  "p.yaml:3: credentials: unknown key");
	parse_bad("credentials:\n  - host: a.test\n    headers:\n      \"Bad Name\": x\n",
		  "p.yaml:4: bad header name");
}

Test(policy, full_file)
{
	struct policy *p = parse_ok("default: deny\n"
				    "allow: [Example.Test., \"*.example.test\"]\n"
				    "deny: [\"*.evil.test\"]\n"
				    "allow-cidr: [203.0.113.7/24, \"2001:db8::/32\"]\n"
				    "ports: [80, 443, 22]\n"
				    "egress-bytes: 1000\n"
				    "resolver: 203.0.113.53:5353\n"
				    "ca-file: /tmp/ca.pem\n"
				    "credentials:\n"
				    "  - host: api.example.test\n"
				    "    headers:\n"
				    "      Authorization: \"Bearer ${TEST_POLICY_KEY}\"\n"
				    "      X-Key: {file: /nonexistent/key}\n");
	char *text;

	cr_assert(p->default_deny);
	cr_assert_eq(p->nallow, 2);
	cr_assert_str_eq(p->allow[0], "example.test");
	cr_assert_str_eq(p->cidrs[0].text, "203.0.113.0/24");
	cr_assert_eq(p->nports, 3);
	cr_assert_eq(p->egress_bytes, 1000);
	cr_assert_str_eq(p->resolver, "203.0.113.53:5353");
	cr_assert_eq(p->ncreds, 1);
	cr_assert_eq(p->creds[0].nheaders, 2);
	text = policy_format(p);
	cr_assert(strstr(text, "\"Authorization\": \"<from $TEST_POLICY_KEY>\""), "%s", text);
	cr_assert(strstr(text, "\"X-Key\": \"<from file /nonexistent/key>\""), "%s", text);
	/* The normalised text parses back to the same policy. */
	{
		struct policy *q = parse_ok(text);
		char *again = policy_format(q);

		cr_assert_str_eq(again, text);
		free(again);
		policy_free(q);
	}
	free(text);
	policy_free(p);
}

Test(policy, credentials_resolve)
{
	struct policy *p = parse_ok("credentials:\n  - host: api.example.test\n    headers:\n"
				    "      Authorization: \"Bearer ${TEST_POLICY_KEY}\"\n");
	char err[256] = "", *creds;

	unsetenv("TEST_POLICY_KEY");
	cr_assert_eq(policy_resolve_creds(p, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "TEST_POLICY_KEY"), "%s", err);
	setenv("TEST_POLICY_KEY", "sk-123", 1);
	cr_assert_eq(policy_add_cred_env(p, "API.example.test:X-Other=TEST_POLICY_KEY", err,
					 sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(policy_resolve_creds(p, err, sizeof(err)), 0, "%s", err);
	creds = policy_format_creds(p);
	cr_assert_str_eq(creds, "api.example.test\tAuthorization\tBearer sk-123\n"
				"api.example.test\tX-Other\tsk-123\n");
	{
		char *text = policy_format(p);
		struct policy *q;

		cr_assert_null(strstr(text, "sk-123"), "a secret in %s", text);
		q = parse_ok(text);
		cr_assert_eq(policy_load_creds(q, creds, err, sizeof(err)), 0, "%s", err);
		cr_assert_str_eq(q->creds[0].headers[1].value, "sk-123");
		cr_assert_eq(policy_load_creds(q, "", err, sizeof(err)), -EINVAL);
		policy_free(q);
		free(text);
	}
	setenv("TEST_POLICY_KEY", "a\r\nX-Evil: 1", 1);
	cr_assert_eq(policy_resolve_creds(p, err, sizeof(err)), -EINVAL);
	cr_assert_eq(policy_add_cred_env(p, "nohost", err, sizeof(err)), -EINVAL);
	cr_assert_eq(policy_add_cred_env(p, "h.test:Bad Header=X", err, sizeof(err)), -EINVAL);
	free(creds);
	policy_free(p);
}

Test(policy, wildcards)
{
	cr_assert(netpol_pattern_match("*.example.test", "a.example.test"));
	cr_assert(netpol_pattern_match("*.example.test", "b.a.example.test"));
	cr_assert_not(netpol_pattern_match("*.example.test", "example.test"));
	cr_assert_not(netpol_pattern_match("*.example.test", "example.test.evil"));
	cr_assert_not(netpol_pattern_match("*.example.test", "badexample.test"));
	cr_assert(netpol_pattern_match("example.test", "example.test"));
	cr_assert_not(netpol_pattern_match("example.test", "a.example.test"));
}

Test(policy, decisions)
{
	struct policy *p = parse_ok("default: deny\nallow: [\"*.example.test\", other.test]\n"
				    "deny: [bad.example.test]\nports: [443]\n");
	char rule[RULE_LEN];

	cr_assert(policy_check_name(p, "A.Example.Test.", 443, rule, sizeof(rule)));
	cr_assert_str_eq(rule, "allow *.example.test");
	cr_assert_not(policy_check_name(p, "example.test", 443, rule, sizeof(rule)));
	cr_assert_str_eq(rule, "deny (not on the allow list)");
	cr_assert_not(policy_check_name(p, "example.test.evil", 443, rule, sizeof(rule)));
	cr_assert_not(policy_check_name(p, "BAD.example.test", 443, rule, sizeof(rule)));
	cr_assert_str_eq(rule, "deny bad.example.test");
	cr_assert_not(policy_check_name(p, "other.test", 80, rule, sizeof(rule)));
	cr_assert_str_eq(rule, "deny port 80");
	cr_assert(policy_check_name(p, "other.test", 0, rule, sizeof(rule)));
	cr_assert_not(policy_check_name(p, "a b.test", 443, rule, sizeof(rule)));
	policy_free(p);

	p = policy_new();
	cr_assert(policy_check_name(p, "anything.test", 80, rule, sizeof(rule)));
	cr_assert_str_eq(rule, "default allow-public");
	cr_assert_not(policy_check_name(p, "anything.test", 22, rule, sizeof(rule)));
	policy_free(p);
}

static struct sockaddr_storage sa_of(const char *text)
{
	struct sockaddr_storage ss;
	socklen_t len;

	cr_assert_eq(netpol_hostport_parse(text, 1, &ss, &len), 0, "%s", text);
	return ss;
}

Test(policy, special_addresses)
{
	static const char *special[] = {
		"127.0.0.1",	    "10.0.0.5",	       "172.16.3.4",	"172.31.255.255",
		"192.168.1.1",	    "169.254.169.254", "100.64.0.1",	"100.127.255.254",
		"0.0.0.0",	    "0.1.2.3",	       "224.0.0.1",	"239.255.255.250",
		"240.0.0.1",	    "255.255.255.255", "::1",		"::",
		"fe80::1",	    "fc00::1",	       "fd12:3456::1",	"ff02::1",
		"::ffff:127.0.0.1", "::ffff:10.1.2.3", "64:ff9b::a00:1"};
	static const char *public[] = {"203.0.113.10", "198.51.100.1",	     "192.0.2.1",
				       "8.8.8.8",      "172.32.0.1",	     "100.128.0.1",
				       "2001:db8::1",  "::ffff:203.0.113.5", "2606:4700::1"};
	char rule[RULE_LEN];
	struct policy *p = policy_new();

	for (size_t i = 0; i < sizeof(special) / sizeof(special[0]); i++) {
		struct sockaddr_storage ss = sa_of(special[i]);

		cr_assert(policy_special_class(NULL, (struct sockaddr *)&ss), "%s", special[i]);
		cr_assert_not(policy_check_resolved(p, (struct sockaddr *)&ss, rule, sizeof(rule)));
	}
	for (size_t i = 0; i < sizeof(public) / sizeof(public[0]); i++) {
		struct sockaddr_storage ss = sa_of(public[i]);

		cr_assert_null(policy_special_class(NULL, (struct sockaddr *)&ss), "%s", public[i]);
	}
	{
		struct sockaddr_storage ss = sa_of("10.0.0.5");

		policy_check_resolved(p, (struct sockaddr *)&ss, rule, sizeof(rule));
		cr_assert_str_eq(rule, "deny private address 10.0.0.5");
		cr_assert_eq(policy_add_cidr(p, "10.0.0.0/24", rule, sizeof(rule)), 0);
		cr_assert(policy_check_resolved(p, (struct sockaddr *)&ss, rule, sizeof(rule)));
	}
	cr_assert_eq(policy_host_addrs(p), 0);
	cr_assert_gt(p->nown, 0);
	policy_free(p);
}

Test(policy, cidrs)
{
	struct policy *p = policy_new();
	char err[256];
	struct sockaddr_storage a = sa_of("203.0.113.10:443"), b = sa_of("198.51.100.1:443"),
				c = sa_of("[2001:db8::5]:443"),
				m = sa_of("[::ffff:203.0.113.9]:443");

	cr_assert_eq(policy_add_cidr(p, "203.0.113.0/24", err, sizeof(err)), 0);
	cr_assert_eq(policy_add_cidr(p, "2001:db8::/33", err, sizeof(err)), 0);
	cr_assert_eq(policy_add_cidr(p, "1.2.3.4/", err, sizeof(err)), -EINVAL);
	cr_assert_eq(policy_add_cidr(p, "::1/129", err, sizeof(err)), -EINVAL);
	cr_assert(policy_check_addr(p, (struct sockaddr *)&a, 443, err, sizeof(err)));
	cr_assert_str_eq(err, "allow-cidr 203.0.113.0/24");
	cr_assert(policy_check_addr(p, (struct sockaddr *)&m, 443, err, sizeof(err)));
	cr_assert(policy_check_addr(p, (struct sockaddr *)&c, 443, err, sizeof(err)));
	cr_assert_not(policy_check_addr(p, (struct sockaddr *)&b, 443, err, sizeof(err)));
	cr_assert_str_eq(err, "deny raw address 198.51.100.1 (no CIDR rule)");
	cr_assert_not(policy_check_addr(p, (struct sockaddr *)&a, 22, err, sizeof(err)));
	cr_assert_eq(policy_add_port(p, "22", err, sizeof(err)), 0);
	cr_assert(policy_check_addr(p, (struct sockaddr *)&a, 22, err, sizeof(err)));
	cr_assert(policy_check_addr(p, (struct sockaddr *)&a, 443, err, sizeof(err)));
	policy_free(p);
}

/* netpolicy/request.c: the request file sandboxctl hands prepare, and its option table. */
Test(policy, request_roundtrip)
{
	char *words[] = {"--policy",	 "base.yaml",  "--deny-all", "--allow", "a\\b\nc\x01\xff",
			 "--credential", "h.test:X=V", "--allow",    ""};
	struct netpol_request r = {0}, back = {0};
	char err[256] = "", *text;
	size_t len;

	cr_assert_eq(netpol_request_words(&r, words, 9, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(r.nitems, 5);
	cr_assert_eq(netpol_request_format(&r, &text, &len), 0);
	cr_assert_str_eq(text, "sandbox-policy-request 1\npolicy base.yaml\ndeny-all\n"
			       "allow a\\\\b\\nc\\x01\xff\ncredential h.test:X=V\nallow \n");
	cr_assert_eq(netpol_request_parse(&back, "R", text, len, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(back.nitems, r.nitems);
	for (unsigned i = 0; i < r.nitems; i++) {
		cr_assert_eq(back.items[i].opt, r.items[i].opt);
		cr_assert_eq(!back.items[i].value, !r.items[i].value);
		if (r.items[i].value)
			cr_assert_str_eq(back.items[i].value, r.items[i].value);
	}
	free(text);
	netpol_request_free(&r);
	netpol_request_free(&back);
}

static void request_bad(const char *text, const char *want)
{
	struct netpol_request r = {0};
	char err[256] = "";

	cr_assert_eq(netpol_request_parse(&r, "R", text, strlen(text), err, sizeof(err)), -EINVAL,
		     "accepted: %s", text);
	cr_assert(strstr(err, want), "error '%s' lacks '%s'", err, want);
	netpol_request_free(&r);
}

Test(policy, request_hostile)
{
	request_bad("", "R:1: not a policy request");
	request_bad("sandbox-policy-request 2\n", "R:1: not a policy request");
	request_bad("sandbox-policy-request 1\nallow a.test\nbogus x\n", "R:3: unknown option");
	request_bad("sandbox-policy-request 1\nallow\n", "R:2: allow lacks its value");
	request_bad("sandbox-policy-request 1\ndeny-all x\n", "R:2: deny-all takes no value");
	request_bad("sandbox-policy-request 1\nallow a.test", "R:2: the last line has no newline");
	request_bad("sandbox-policy-request 1\nallow a\\x00b\n", "R:2: allow: a bad byte");
	request_bad("sandbox-policy-request 1\nallow a\\q\n", "R:2: allow: a bad byte");
	request_bad("sandbox-policy-request 1\nallow a\\x4\n", "R:2: allow: a bad byte");
	request_bad("sandbox-policy-request 1\nallow a\tb\n", "R:2: allow: a bad byte");
	request_bad("sandbox-policy-request 1\n--allow a\n", "R:2: unknown option");
	request_bad("sandbox-policy-request 1\n\n", "R:2: no option name");
}

Test(policy, request_words)
{
	char *lacks[] = {"--allow", "a.test", "--bogus"};
	char *unknown[] = {"--allow", "a.test", "--bogus", "x", "--deny", "b.test"};
	struct netpol_request r = {0};
	char err[256] = "";

	cr_assert_eq(netpol_request_words(&r, lacks, 3, err, sizeof(err)), -EINVAL);
	cr_assert_str_eq(err, "an option lacks its value");
	netpol_request_free(&r);
	/* the words before an unknown one are kept: prepare applies them, then says it */
	cr_assert_eq(netpol_request_words(&r, unknown, 6, err, sizeof(err)), -ENOENT);
	cr_assert_str_eq(err, "unknown option --bogus");
	cr_assert_eq(r.nitems, 1);
	netpol_request_free(&r);
}

/* prepare's messages, byte for byte (sandboxctl create prints them), and its order: the first
 * bad option in the order given, whatever its kind. */
Test(policy, request_apply_messages)
{
	static const struct {
		const char *words[4];
		const char *want;
	} cases[] = {
		{{"--allow", "exa mple"}, "--allow: bad domain pattern 'exa mple'"},
		{{"--deny", "a.*.b"}, "--deny: bad domain pattern 'a.*.b'"},
		{{"--allow-cidr", "10.0.0.0/33"}, "--allow-cidr: bad CIDR '10.0.0.0/33'"},
		{{"--allow-port", "000080"}, "--allow-port: bad port '000080'"},
		{{"--credential", "nohost"},
		 "--credential: expected HOST:HEADER=ENVVAR, got 'nohost'"},
		{{"--credential", "b@d:X=V"}, "--credential: bad host 'b@d'"},
		{{"--credential", "h.test:Bad Header=V"},
		 "--credential: bad header name 'Bad Header'"},
		{{"--egress-bytes", "-1"}, "--egress-bytes: bad number '-1'"},
		{{"--resolver", "dns.test"}, "resolver: expected IP[:PORT], got 'dns.test'"},
		{{"--deny", "!", "--allow", "!"}, "--deny: bad domain pattern '!'"},
		{{"--resolver", "x", "--resolver", "1.1.1.1"},
		 "resolver: expected IP[:PORT], got 'x'"},
	};

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		struct netpol_request r = {0};
		struct policy *p = policy_new();
		char err[256] = "";
		unsigned n = cases[c].words[2] ? 4 : 2;
		int e = 0;

		cr_assert_eq(netpol_request_words(&r, (char *const *)cases[c].words, n, err,
						  sizeof(err)),
			     0);
		for (unsigned i = 0; i < r.nitems && e == 0; i++)
			e = policy_apply(p, &r.items[i], err, sizeof(err));
		cr_assert_eq(e, -EINVAL, "case %zu", c);
		cr_assert_str_eq(err, cases[c].want);
		netpol_request_free(&r);
		policy_free(p);
	}
}
