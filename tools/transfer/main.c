/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sandbox-transfer push SANDBOX URL [--name NAME] [--keep] [--wait S]
 * sandbox-transfer pull NAME URL [--as LOCAL] [--keep] [--wait S]
 *
 * The API key: --key-file FILE, else $SANDBOX_API_KEY, else $LANGSMITH_API_KEY. URL is the
 * service's (http://HOST:PORT, with or without /v2/sandboxes). Exit 0 done, 1 failed (said on
 * stderr), 2 usage. sandboxctl push and pull run it (transfer.h).
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <curl/curl.h>
#include <openssl/crypto.h>

#include "client.h"
#include "transfer.h"

static int usage(void)
{
	fprintf(stderr, "usage: sandbox-transfer push SANDBOX URL [--name NAME] [--keep] "
			"[--key-file F] [--wait S]\n"
			"       sandbox-transfer pull NAME URL [--as LOCAL] [--keep] "
			"[--key-file F] [--wait S]\n");
	return 2;
}

/* The key from a file's first line, or the environment. */
static int api_key(const char *file, char *out, size_t cap)
{
	const char *v;

	if (file) {
		char *text = NULL;
		size_t len;

		if (read_file_follow(file, 4096, &text, &len) < 0 || !len) {
			fprintf(stderr, "sandbox-transfer: %s: no key there\n", file);
			free(text);
			return -1;
		}
		len = strcspn(text, "\r\n");
		snprintf(out, cap, "%.*s", (int)len, text);
		OPENSSL_cleanse(text, len);
		free(text);
		return out[0] ? 0 : -1;
	}
	if ((v = getenv("SANDBOX_API_KEY")) || (v = getenv("LANGSMITH_API_KEY"))) {
		snprintf(out, cap, "%s", v);
		return 0;
	}
	fprintf(stderr, "sandbox-transfer: no API key: --key-file, $SANDBOX_API_KEY or "
			"$LANGSMITH_API_KEY\n");
	return -1;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"name", required_argument, NULL, 'n'},
		{"as", required_argument, NULL, 'n'},
		{"keep", no_argument, NULL, 'k'},
		{"key-file", required_argument, NULL, 'f'},
		{"wait", required_argument, NULL, 'w'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct transfer_opts o = {.wait_s = 600};
	const char *key_file = NULL;
	char key[600];
	struct svc a;
	int c, rc;

	signal(SIGPIPE, SIG_IGN);
	if (argc < 2 || (strcmp(argv[1], "push") != 0 && strcmp(argv[1], "pull") != 0))
		return usage();
	bool push = strcmp(argv[1], "push") == 0;

	optind = 2;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'n':
			o.name = optarg;
			break;
		case 'k':
			o.keep = true;
			break;
		case 'f':
			key_file = optarg;
			break;
		case 'w':
			o.wait_s = (unsigned)strtoul(optarg, NULL, 10);
			break;
		default:
			return usage();
		}
	}
	if (optind != argc - 2)
		return usage();
	o.ref = argv[optind];
	if (!o.name && push)
		o.name = o.ref;
	if (!valid_name(o.ref) || (o.name && (!valid_name(o.name) || strstr(o.name, "..")))) {
		fprintf(stderr, "sandbox-transfer: '%.80s' is not a sandbox name\n",
			o.name && !valid_name(o.name) ? o.name : o.ref);
		return 2;
	}
	if (api_key(key_file, key, sizeof(key)) < 0)
		return 1;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	rc = svc_open(&a, argv[optind + 1], key);
	OPENSSL_cleanse(key, sizeof(key));
	if (rc < 0)
		return 1;
	rc = push ? transfer_push(&a, &o) : transfer_pull(&a, &o);
	svc_close(&a);
	curl_global_cleanup();
	return rc;
}
