/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sandboxd: the sandbox service's command line (docs/api.md, "Running the service").
 *
 *   sandboxd serve [--listen HOST:PORT] [--insecure-http] [--public-url URL]
 *                  [--operator HOST:PORT] [--tls-cert FILE --tls-key FILE]
 *                  [--default-image NAME]
 *   sandboxd keys create WORKSPACE | keys list | keys revoke ID
 *   sandboxd secrets set WORKSPACE NAME       (the value on stdin)
 *   sandboxd quota set WORKSPACE [sandboxes=N] [vcpus=N] [memory_mib=N] [disk_gib=N]
 *                                [snapshots=N] [checkpoint_s=N]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>

#include "fleetd.h"
#include "sandboxd.h"

struct sd_config sd_conf = {
	.default_image = CREATE_DEFAULT_IMAGE,
	.default_mem_bytes = 512ull << 20,
	.default_vcpus = 1,
};

#define WORK_LIFECYCLE_THREADS 4 /* they take turns on lifecycle_lock; claims need none */
#define WORK_IO_THREADS	       8
#define TICK_MS		       250 /* keys reloaded, revoked WebSockets closed, idle boxes stopped */
#define SECRET_IN_MAX	       (64u << 10)

static volatile sig_atomic_t stop_signal;
static struct lws_context *ctx;

/* Only a flag: the loop sees it within TICK_MS (lws_service's wait). lws_cancel_service is
 * not async-signal-safe (it may take the context's lock the interrupted loop holds). */
static void on_signal(int sig)
{
	stop_signal = sig;
}

static int usage(void)
{
	fprintf(stderr,
		"usage: sandboxd serve [--listen HOST:PORT] [--insecure-http] [--public-url URL]\n"
		"                      [--operator HOST:PORT] [--tls-cert F --tls-key F]\n"
		"                      [--default-image NAME]\n"
		"                      [--fleet nats://H:P[,...] --host-id ID [--fleet-pool NAME]\n"
		"                       [--slots N] [--fleet-replicas N] [--advertise HOST:PORT]\n"
		"                       [--fleet-near-ms N]\n"
		"                       [--store-endpoint URL --store-bucket B --store-credentials "
		"F\n"
		"                        --fleet-key F [--store-region R] [--chunk-kib N]\n"
		"                        [--store-cache-mib N] [--restore-memory lazy|eager]\n"
		"                        [--store-transfers N] [--gc-every S [--gc-grace-s S]]]]\n"
		"       sandboxd keys create WORKSPACE | keys list | keys revoke ID  [--fleet "
		"URLS]\n"
		"       sandboxd secrets set WORKSPACE NAME   (value on stdin)\n"
		"       sandboxd quota set WORKSPACE [sandboxes=N] [vcpus=N] [memory_mib=N]\n"
		"                                    [disk_gib=N] [snapshots=N] [checkpoint_s=N]\n"
		"                                    [--fleet URLS]\n"
		"       sandboxd drain [--operator HOST:PORT]   (a fleet's host: its boxes to the "
		"store)\n"
		"       sandboxd gc WORKSPACE [--grace-s N] [--dry-run] [--operator HOST:PORT]\n"
		"                                    (a fleet: the store's chunks no snapshot "
		"names)\n");
	return 2;
}

/* HOST:PORT into host and port; true for a loopback host. */
static int split_addr(const char *s, char *host, size_t hlen, int *port, bool *loopback)
{
	const char *colon = strrchr(s, ':');
	uint64_t p;

	if (!colon || (size_t)(colon - s) >= hlen || !parse_u64(colon + 1, 0, 65535, &p))
		return -EINVAL;
	memcpy(host, s, (size_t)(colon - s));
	host[colon - s] = 0;
	*port = (int)p;
	struct in_addr a;

	*loopback = strcmp(host, "localhost") == 0 ||
		    (inet_pton(AF_INET, host, &a) == 1 && (ntohl(a.s_addr) >> 24) == 127);
	return 0;
}

static const struct lws_protocols protocols[] = {
	{"http", http_callback, sizeof(struct sd_conn), 0, 0, NULL, 0},
	{"agent-link", link_callback, 0, 0, 0, NULL, 0},
	{"dp-relay", dp_relay_callback, 0, 0, 0, NULL, 0},
	{NULL, NULL, 0, 0, 0, NULL, 0},
};

static const struct lws_protocols operator_protocols[] = {
	{"http", http_callback, sizeof(struct sd_conn), 0, 0, NULL, 0},
	{NULL, NULL, 0, 0, 0, NULL, 0},
};

/* Each tick: keys reloaded (a revoke by another process takes effect), WebSockets of revoked
 * keys closed, idle boxes stopped, usage counted. */
static lws_sorted_usec_list_t tick_sul;

static void tick(lws_sorted_usec_list_t *sul)
{
	static uint64_t last;
	uint64_t now = sd_now_ms();

	/* lws's own timer: the loop's poll waits no longer than this (lws_service's timeout
	 * argument is not honoured by lws 4), so the flag of a signal is seen within TICK_MS */
	lws_sul_schedule(ctx, 0, &tick_sul, tick, TICK_MS * LWS_US_PER_MS);
	if (stop_signal)
		return;
	usage_tick(last ? now - last : 0);
	last = now;
	if (keys_refresh())
		ws_close_revoked();
	idle_tick(now);
	if (fleetd_on)
		fleetd_tick();
}

static int serve(int argc, char **argv)
{
	static const struct option opts[] = {
		{"listen", required_argument, NULL, 'l'},
		{"insecure-http", no_argument, NULL, 'i'},
		{"public-url", required_argument, NULL, 'u'},
		{"operator", required_argument, NULL, 'o'},
		{"tls-cert", required_argument, NULL, 'c'},
		{"tls-key", required_argument, NULL, 'k'},
		{"default-image", required_argument, NULL, 'm'},
		{"registry-allow-loopback", no_argument, NULL, 'L'},
		{"registry-stall", required_argument, NULL, 'S'},
		{"pool", required_argument, NULL, 'P'},
		{"fleet", required_argument, NULL, 'F'},
		{"host-id", required_argument, NULL, 'F'},
		{"fleet-pool", required_argument, NULL, 'F'},
		{"slots", required_argument, NULL, 'F'},
		{"fleet-replicas", required_argument, NULL, 'F'},
		{"advertise", required_argument, NULL, 'F'},
		{"fleet-near-ms", required_argument, NULL, 'F'},
		{"store-endpoint", required_argument, NULL, 'F'},
		{"store-bucket", required_argument, NULL, 'F'},
		{"store-region", required_argument, NULL, 'F'},
		{"store-credentials", required_argument, NULL, 'F'},
		{"fleet-key", required_argument, NULL, 'F'},
		{"chunk-kib", required_argument, NULL, 'F'},
		{"store-cache-mib", required_argument, NULL, 'F'},
		{"restore-memory", required_argument, NULL, 'F'},
		{"store-transfers", required_argument, NULL, 'F'},
		{"gc-every", required_argument, NULL, 'F'},
		{"gc-grace-s", required_argument, NULL, 'F'},
		{NULL, 0, NULL, 0},
	};
	const char *listen = "127.0.0.1:8380", *op = "127.0.0.1:8381", *cert = NULL, *key = NULL;
	bool insecure = false;
	int c, optidx;

	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, &optidx)) != -1) {
		switch (c) {
		case 'F': {
			int r = fleetd_option(opts[optidx].name, optarg);

			if (r == 0)
				r = fstore_option(opts[optidx].name, optarg);
			if (r == 0)
				r = fleet_gc_turn_option(opts[optidx].name, optarg);
			if (r != 1)
				return 2;
			break;
		}
		case 'l':
			listen = optarg;
			break;
		case 'i':
			insecure = true;
			break;
		case 'u':
			if (strncmp(optarg, "http://", 7) && strncmp(optarg, "https://", 8)) {
				fprintf(stderr,
					"sandboxd: --public-url must be http:// or https://\n");
				return 2;
			}
			snprintf(sd_conf.public_url, sizeof(sd_conf.public_url), "%s", optarg);
			break;
		case 'o':
			op = optarg;
			break;
		case 'c':
			cert = optarg;
			break;
		case 'k':
			key = optarg;
			break;
		case 'm':
			if (!valid_name(optarg)) {
				fprintf(stderr, "sandboxd: --default-image: not an image name\n");
				return 2;
			}
			snprintf(sd_conf.default_image, sizeof(sd_conf.default_image), "%s",
				 optarg);
			break;
		case 'L':
			sd_conf.registry_loopback = true;
			break;
		case 'P':
			if (pool_add(optarg) < 0) {
				fprintf(stderr, "sandboxd: --pool takes IMAGE:VCPUS:MEM_MIB=N (N 1 "
						"to 64)\n");
				return 2;
			}
			break;
		case 'S': {
			uint64_t v;

			if (!parse_u64(optarg, 1, 3600, &v)) {
				fprintf(stderr,
					"sandboxd: --registry-stall takes 1 to 3600 seconds\n");
				return 2;
			}
			sd_conf.registry_stall_s = (unsigned)v;
			break;
		}
		default:
			return usage();
		}
	}
	if (optind != argc || (!cert) != (!key))
		return usage();
	char host[256], ophost[256];
	int port, opport;
	bool lo, oplo;

	if (split_addr(listen, host, sizeof(host), &port, &lo) < 0 ||
	    split_addr(op, ophost, sizeof(ophost), &opport, &oplo) < 0) {
		fprintf(stderr, "sandboxd: --listen and --operator take HOST:PORT\n");
		return 2;
	}
	if (!lo && !cert && !insecure) {
		fprintf(stderr,
			"sandboxd: plain HTTP on %s is not loopback: give --tls-cert and "
			"--tls-key, or --insecure-http\n",
			host);
		return 2;
	}
	if (fleetd_check(listen) < 0)
		return 2;
	if (!sd_conf.public_url[0])
		snprintf(sd_conf.public_url, sizeof(sd_conf.public_url), "%s://%s",
			 cert ? "https" : "http", listen);
	(void)state_home(); /* its static buffer filled before any worker reads it */
	/* Every WebSocket and HTTP connection is a descriptor, and a box's agent link another:
	 * the soft limit (often 1024) raised to the hard one, or clients past it are dropped. */
	struct rlimit nofile;

	if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
		nofile.rlim_cur = nofile.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &nofile) < 0)
			sd_log("cannot raise the open files limit: %s", strerror(errno));
	}
	int err;

	if ((err = state_init()) < 0 || (err = sd_dir_init()) < 0 || (err = keys_load()) < 0 ||
	    (err = boxes_load()) < 0 || (err = snaps_load()) < 0 || (err = usage_load()) < 0) {
		fprintf(stderr, "sandboxd: %s: %s\n", sd_dir(), strerror(-err));
		return 1;
	}
	lws_set_log_level(LLL_ERR, NULL);
	struct lws_context_creation_info info = {0};

	info.options = LWS_SERVER_OPTION_EXPLICIT_VHOSTS | LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT |
		       LWS_SERVER_OPTION_VALIDATE_UTF8;
	info.max_http_header_data = 0;
	info.max_http_header_data2 = SD_HEADERS_MAX;
	info.max_http_header_pool2 = 4096;
	info.timeout_secs = 30;
	info.fd_limit_per_thread = 0;
	ctx = lws_create_context(&info);
	if (!ctx) {
		fprintf(stderr, "sandboxd: cannot make the event loop\n");
		return 1;
	}
	struct lws_context_creation_info vi = {0};

	vi.port = port;
	vi.iface = host;
	vi.protocols = protocols;
	vi.vhost_name = "api";
	/* IPv4 only: without this lws binds [::] too, whatever --listen names (both listeners
	 * would answer on every interface) */
	vi.options = LWS_SERVER_OPTION_VALIDATE_UTF8 | LWS_SERVER_OPTION_DISABLE_IPV6;
	if (cert) /* lws reads this per vhost: without it the vhost serves plain HTTP */
		vi.options |= LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
	/* HTTP/1.1 only: over h2 the custom headers (X-Api-Key) are not kept where
	 * lws_hdr_custom_copy looks, and every client of the API speaks 1.1 */
	vi.alpn = "http/1.1";
	vi.ssl_cert_filepath = cert;
	vi.ssl_private_key_filepath = key;
	vi.keepalive_timeout = 60;
	struct lws_vhost *api = lws_create_vhost(ctx, &vi);
	struct lws_context_creation_info oi = {0};

	oi.port = opport;
	oi.iface = ophost;
	oi.protocols = operator_protocols;
	oi.vhost_name = "operator";
	oi.options = LWS_SERVER_OPTION_DISABLE_IPV6;
	struct lws_vhost *ovh = lws_create_vhost(ctx, &oi);

	if (!api || !ovh) {
		fprintf(stderr, "sandboxd: cannot listen on %s or %s\n", listen, op);
		lws_context_destroy(ctx);
		return 1;
	}
	link_set_vhost(api);
	dp_relay_set_vhost(api);
	if ((err = work_start(WORK_LIFECYCLE_THREADS, WORK_IO_THREADS, ctx)) < 0) {
		fprintf(stderr, "sandboxd: cannot start workers: %s\n", strerror(-err));
		return 1;
	}
	if ((err = fstore_start()) < 0) {
		fprintf(stderr, "sandboxd: cannot use the object store: %s\n", strerror(-err));
		return 1;
	}
	if (fleetd_on && (err = fleetd_start()) < 0) {
		fprintf(stderr, "sandboxd: cannot join the fleet: %s\n", strerror(-err));
		return 1;
	}
	if (fleetd_on)
		fleetd_adopt_filter();
	adopt_boxes();
	pools_clean();
	pools_start();
	signal(SIGPIPE, SIG_IGN);
	struct sigaction sa = {.sa_handler = on_signal};

	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	printf("sandboxd listening url=%s operator=http://%s\n", sd_conf.public_url, op);
	fflush(stdout);
	tick(&tick_sul);
	while (!stop_signal)
		if (lws_service(ctx, 0) < 0)
			break;
	/* SIGTERM: every WebSocket closes with 1001 (its client attaches again at once to the
	 * next sandboxd); the boxes and their commands go on without us. */
	ws_close_all(LWS_CLOSE_STATUS_GOINGAWAY);
	for (uint64_t end = sd_now_ms() + 1000; sd_now_ms() < end && ws_attached_count();)
		lws_service(ctx, 0);
	if (fleetd_on)
		fleetd_stop();
	lws_context_destroy(ctx);
	usage_flush();
	return 0;
}

static void key_line(const struct sd_key *k, void *arg)
{
	printf("id=%s workspace=%s created=%" PRIu64 "%s\n", k->id, k->workspace, k->created,
	       k->revoked ? " revoked" : "");
}

/* The key's record into the fleet's keys bucket too (--fleet URLS last on the line). */
static int key_to_fleet(const char *servers, const char *id)
{
	char text[256];

	if (!servers)
		return 0;
	char key[32];

	snprintf(key, sizeof(key), "k.%s", id);
	if (keys_load() < 0 || keys_text(id, text, sizeof(text)) < 0 ||
	    fleetd_put_record(servers, "sandbox_keys", key, text) < 0) {
		fprintf(stderr, "sandboxd: key %s is made here but not in the fleet: run again\n",
			id);
		return 1;
	}
	return 0;
}

static int keys_cmd(int argc, char **argv)
{
	const char *fleet = NULL;
	int err;

	if (argc >= 4 && strcmp(argv[argc - 2], "--fleet") == 0) {
		fleet = argv[argc - 1];
		argc -= 2;
	}
	if (argc < 2)
		return usage();
	if ((err = sd_dir_init()) < 0 || (err = keys_load()) < 0) {
		fprintf(stderr, "sandboxd: %s: %s\n", sd_dir(), strerror(-err));
		return 1;
	}
	if (strcmp(argv[1], "create") == 0 && argc == 3) {
		char text[SD_KEY_TEXT_LEN + 1], id[SD_KEY_ID_LEN + 1];

		if (!valid_workspace(argv[2])) {
			fprintf(stderr, "sandboxd: '%.64s' is not a workspace name\n", argv[2]);
			return 2;
		}
		if ((err = keys_create(argv[2], text, id)) < 0) {
			fprintf(stderr, "sandboxd: cannot make a key: %s\n", strerror(-err));
			return 1;
		}
		if (key_to_fleet(fleet, id) != 0)
			return 1;
		printf("key=%s id=%s\n", text, id);
		return 0;
	}
	if (strcmp(argv[1], "list") == 0 && argc == 2) {
		keys_foreach(key_line, NULL);
		return 0;
	}
	if (strcmp(argv[1], "revoke") == 0 && argc == 3) {
		if ((err = keys_revoke(argv[2])) < 0) {
			fprintf(stderr, "sandboxd: key %.16s: %s\n", argv[2],
				err == -ENOENT ? "no such key" : strerror(-err));
			return 1;
		}
		return key_to_fleet(fleet, argv[2]);
	}
	return usage();
}

static int secrets_cmd(int argc, char **argv)
{
	if (argc != 4 || strcmp(argv[1], "set") != 0)
		return usage();
	char *buf = malloc(SECRET_IN_MAX + 1);
	size_t len = 0;
	ssize_t n;

	if (!buf)
		return 1;
	while ((n = read(0, buf + len, SECRET_IN_MAX + 1 - len)) > 0 && len <= SECRET_IN_MAX)
		len += (size_t)n;
	if (len > SECRET_IN_MAX) {
		fprintf(stderr, "sandboxd: a secret is at most %u bytes\n", SECRET_IN_MAX);
		free(buf);
		return 1;
	}
	while (len && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
		len--;
	int err = sd_dir_init();

	if (err == 0)
		err = secret_set(argv[2], argv[3], buf, len);
	explicit_bzero(buf, SECRET_IN_MAX + 1);
	free(buf);
	if (err < 0) {
		fprintf(stderr, "sandboxd: cannot set the secret: %s\n",
			err == -EINVAL ? "not a workspace or secret name" : strerror(-err));
		return 1;
	}
	return 0;
}

static int quota_cmd(int argc, char **argv)
{
	struct sd_quota q;
	int err;

	const char *fleet = NULL;

	if (argc >= 5 && strcmp(argv[argc - 2], "--fleet") == 0) {
		fleet = argv[argc - 1];
		argc -= 2;
	}
	if (argc < 3 || strcmp(argv[1], "set") != 0 || !valid_workspace(argv[2]))
		return usage();
	if ((err = sd_dir_init()) < 0 || (err = quota_load(argv[2], &q)) < 0) {
		fprintf(stderr, "sandboxd: %s\n", strerror(-err));
		return 1;
	}
	for (int i = 3; i < argc; i++) {
		char *eq = strchr(argv[i], '=');
		uint64_t v;

		if (!eq || !parse_u64(eq + 1, 0, UINT32_MAX, &v))
			return usage();
		*eq = 0;
		if (strcmp(argv[i], "sandboxes") == 0)
			q.sandboxes = v;
		else if (strcmp(argv[i], "vcpus") == 0)
			q.vcpus = v;
		else if (strcmp(argv[i], "memory_mib") == 0)
			q.memory_mib = v;
		else if (strcmp(argv[i], "disk_gib") == 0)
			q.disk_gib = v;
		else if (strcmp(argv[i], "snapshots") == 0)
			q.snapshots = v;
		else if (strcmp(argv[i], "checkpoint_s") == 0)
			q.checkpoint_s = v;
		else
			return usage();
	}
	if ((err = quota_save(argv[2], &q)) < 0) {
		fprintf(stderr, "sandboxd: %s\n", strerror(-err));
		return 1;
	}
	if (fleet) { /* every host of the fleet mirrors it */
		char key[96], text[256];

		snprintf(key, sizeof(key), "q.%s", argv[2]);
		if (quota_text(&q, text, sizeof(text)) < 0 ||
		    fleetd_put_record(fleet, "sandbox_quotas", key, text) < 0)
			return 1;
	}
	return 0;
}

/* `sandboxd drain [--operator HOST:PORT]`: the serving sandboxd's POST /drain. */
static size_t drain_out(char *p, size_t size, size_t n, void *arg)
{
	(void)arg;
	fwrite(p, size, n, stdout);
	return size * n;
}

/* POST body (JSON, or "") to the serving sandboxd's operator listener op: its answer on
 * stdout; 0 for a 200. */
static int operator_post(const char *op, const char *path, const char *body, long timeout_s)
{
	char url[300];
	long status = 0;
	struct curl_slist *h = NULL;

	snprintf(url, sizeof(url), "http://%s%s", op, path);
	CURL *c = curl_easy_init();

	if (!c)
		return 1;
	if (body[0])
		h = curl_slist_append(NULL, "Content-Type: application/json");
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_POST, 1L);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http");
	curl_easy_setopt(c, CURLOPT_TIMEOUT, timeout_s);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, drain_out);
	CURLcode rc = curl_easy_perform(c);

	if (rc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(c);
	curl_slist_free_all(h);
	printf("\n");
	if (rc != CURLE_OK)
		fprintf(stderr, "sandboxd: %s: %s\n", url, curl_easy_strerror(rc));
	return status == 200 ? 0 : 1;
}

static int drain_cmd(int argc, char **argv)
{
	const char *op =
		argc == 3 && strcmp(argv[1], "--operator") == 0 ? argv[2] : "127.0.0.1:8381";

	if (argc != 1 && argc != 3)
		return usage();
	return operator_post(op, "/drain", "", 60);
}

/* `sandboxd gc WORKSPACE [--grace-s N] [--dry-run] [--operator HOST:PORT]`: POST /gc. */
static int gc_cmd(int argc, char **argv)
{
	const char *op = "127.0.0.1:8381";
	uint64_t grace = 3600;
	bool dry = false;
	char body[256];

	if (argc < 2 || !valid_workspace(argv[1]))
		return usage();
	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--dry-run") == 0)
			dry = true;
		else if (strcmp(argv[i], "--operator") == 0 && i + 1 < argc)
			op = argv[++i];
		else if (strcmp(argv[i], "--grace-s") == 0 && i + 1 < argc &&
			 parse_u64(argv[i + 1], 0, 30 * 24 * 3600, &grace))
			i++;
		else
			return usage();
	}
	snprintf(body, sizeof(body), "{\"workspace\":\"%s\",\"grace_seconds\":%llu,\"dry_run\":%s}",
		 argv[1], (unsigned long long)grace, dry ? "true" : "false");
	/* (a collection waits up to 10 minutes for the workspace's pushes, then runs) */
	return operator_post(op, "/gc", body, 3600);
}

/* Our programs beside this one in a build tree (build/sandboxd/sandboxd: build/vmm/...), for
 * the lifecycle layer's program_find, which looks two levels up (build/tools/X/X). An
 * explicit $SANDBOX_VMM, $SANDBOX_PROXY or $SANDBOX_PULL wins; an installed sandboxd finds
 * them on PATH. */
static void programs_beside(void)
{
	static const char *const progs[][3] = {{"SANDBOX_VMM", "vmm", "sandbox-vmm"},
					       {"SANDBOX_PROXY", "proxy", "sandbox-proxy"},
					       {"SANDBOX_PULL", "tools/oci", "sandbox-pull"}};
	char self[4096], path[4400];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n <= 0)
		return;
	self[n] = 0;
	char *slash = strrchr(self, '/');

	if (!slash)
		return;
	*slash = 0;
	for (size_t i = 0; i < sizeof(progs) / sizeof(progs[0]); i++) {
		if (getenv(progs[i][0]))
			continue;
		snprintf(path, sizeof(path), "%s/../%s/%s", self, progs[i][1], progs[i][2]);
		if (access(path, X_OK) == 0)
			setenv(progs[i][0], path, 0);
	}
}

int main(int argc, char **argv)
{
	programs_beside();
	if (argc < 2)
		return usage();
	if (strcmp(argv[1], "serve") == 0)
		return serve(argc - 1, argv + 1);
	if (strcmp(argv[1], "keys") == 0)
		return keys_cmd(argc - 1, argv + 1);
	if (strcmp(argv[1], "secrets") == 0)
		return secrets_cmd(argc - 1, argv + 1);
	if (strcmp(argv[1], "quota") == 0)
		return quota_cmd(argc - 1, argv + 1);
	if (strcmp(argv[1], "gc") == 0)
		return gc_cmd(argc - 1, argv + 1);
	if (strcmp(argv[1], "drain") == 0)
		return drain_cmd(argc - 1, argv + 1);
	return usage();
}
