/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sandboxctl run JOB.yaml: a fresh sandbox for the job, each step run as `sh -c` through the
 * agent with its output streamed under a header, the timings, then the sandbox removed. The
 * exit status is the first failing step's (docs/design.md, "Job specs").
 *
 * The sandbox lives no longer than the run (unless --keep): its VMM holds the read end of a
 * pipe whose write end only we hold (--lifeline), so it stops however we end, SIGKILL
 * included. SIGINT, SIGTERM and SIGHUP go to the step's command (exec.c: a second one, or a
 * SIGTERM the command outlives by 5 s, ends the step with 128+N); while the sandbox is created
 * one stops the create (which removes what it made), while it is removed one is only noted,
 * and no step runs after one.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sandboxctl.h"

#define RUN_CACHE_MAX_GIB 16 /* the job snapshots' budget without --cache-max */

/* The lifeline: a pipe, both ends close-on-exec (no other child inherits them) and above
 * stdio (the VMM takes fds from 3 up). */
static int run_lifeline(int fds[2])
{
	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	for (int i = 0; i < 2; i++) {
		int fd;

		if (fds[i] > 2)
			continue;
		fd = fcntl(fds[i], F_DUPFD_CLOEXEC, 3);
		close(fds[i]);
		fds[i] = fd;
	}
	if (fds[0] < 0 || fds[1] < 0) {
		int err = -errno;

		for (int i = 0; i < 2; i++)
			if (fds[i] >= 0)
				close(fds[i]);
		return err;
	}
	return 0;
}

/* Outside a step, SIGINT, SIGTERM and SIGHUP are only noted (a handler, not a blocked mask:
 * the proxy and the VMM we start must not inherit them blocked); a create waiting for its
 * agent sees the note and gives up. */
static void run_on_signal(int sig)
{
	sandbox_interrupted = sig;
}

/* The job's env with the step's over it (a name the step sets is the step's): `buf` holds
 * js->nenv + st->nenv entries. */
static unsigned run_step_env(const struct jobspec *js, const struct job_step *st, char **buf)
{
	unsigned n = 0;

	for (unsigned i = 0; i < js->nenv; i++) {
		size_t klen = strcspn(js->env[i], "=") + 1;
		bool over = false;

		for (unsigned j = 0; j < st->nenv && !over; j++)
			over = strncmp(js->env[i], st->env[j], klen) == 0;
		if (!over)
			buf[n++] = js->env[i];
	}
	for (unsigned j = 0; j < st->nenv; j++)
		buf[n++] = st->env[j];
	return n;
}

/*
 * A cache hit: the job's sandbox restored from the state after its cache: step. Returns the
 * number of steps it skips (js->cache_step), or 0 with `sb` untouched: a miss, the cache's
 * name in `cache` for run_cache_keep (empty when there is none to be had).
 */
static unsigned run_cache_restore(const struct jobspec *js, const struct create_opts *co,
				  struct sandbox *sb, char *cache, size_t len, struct job_report *r)
{
	struct lc_report lc = CTL_REPORT;
	char name[128];
	uint64_t t0 = now_ms();
	int err;

	if (state_init() < 0 || job_cache_name(js, co, cache, len) < 0) {
		cache[0] = '\0';
		return 0;
	}
	printable_copy(js->steps[js->cache_step - 1].name, name, sizeof(name));
	if ((err = ready_restore(co, cache, sb, &lc)) < 0) {
		fprintf(stderr, "==> cache: no state after step %u (%s) for this spec yet\n",
			js->cache_step, name);
		memset(sb, 0, sizeof(*sb));
		return 0;
	}
	job_cache_touch(cache);
	report_event(r, "cache", ",\"action\":\"restored\",\"snapshot\":\"%s\",\"step\":%u", cache,
		     js->cache_step);
	fprintf(stderr,
		"==> cache: restored the state after step %u (%s) in %.2f s: steps 1-%u "
		"skipped\n",
		js->cache_step, name, (double)(now_ms() - t0) / 1e3, js->cache_step);
	return js->cache_step;
}

/* After the cache: step passed: keep the state as `cache`, then trim the cache to its
 * budget. A failure is said, and the job goes on uncached. */
static void run_cache_keep(struct sandbox *sb, const struct jobspec *js,
			   const struct create_opts *co, const char *cache, uint64_t max_gib,
			   struct job_report *r)
{
	struct lc_report lc = CTL_REPORT;
	char again[NAME_MAX_LEN + 2];
	uint64_t t0 = now_ms();
	int status;

	/* Keyed again now: a file that changed since the key was made (while it was copied in,
	 * or the steps ran) would have the state stored under a key it does not match. */
	if (job_cache_name(js, co, again, sizeof(again)) < 0 || strcmp(again, cache) != 0) {
		errmsg("cache: the job's files changed while it ran: the state is not kept");
		return;
	}
	status = snapshot_take_once(sb, cache, &lc);
	if (status == -EBUSY) {
		fprintf(stderr, "==> cache: another run is keeping this state\n");
		return;
	}
	if (status < 0) {
		ctl_failed(&lc, status);
		errmsg("cache: could not keep the state after step %u: the next run runs it too",
		       js->cache_step);
		return;
	}
	job_cache_touch(cache);
	report_event(r, "cache", ",\"action\":\"kept\",\"snapshot\":\"%s\",\"step\":%u", cache,
		     js->cache_step);
	fprintf(stderr, "==> cache: kept the state after step %u as %s in %.2f s\n", js->cache_step,
		cache, (double)(now_ms() - t0) / 1e3);
	job_cache_trim(max_gib << 30, cache);
}

int cmd_run(int argc, char **argv)
{
	static const struct option opts[] = {
		{"keep", no_argument, NULL, 'k'},
		{"check", no_argument, NULL, 'c'},
		{"artifacts", required_argument, NULL, 'a'},
		{"no-cache", no_argument, NULL, 'n'},
		{"cache-max", required_argument, NULL, 'm'},
		{"json", no_argument, NULL, 'j'},
		{"junit", required_argument, NULL, 'u'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct create_opts co = CREATE_OPTS_DEFAULT;
	struct jobspec js;
	struct sandbox sb;
	char err[768], name[128];
	bool keep = false, check = false, no_cache = false, json = false;
	const char *artifacts = "artifacts", *junit = NULL;
	struct job_report rep;
	char cache[NAME_MAX_LEN + 2] = "";
	uint64_t cache_max = RUN_CACHE_MAX_GIB;
	unsigned first = 0;	  /* the first step to run: past the cached ones */
	bool soft_failed = false; /* a step failed under continue-on-error */
	unsigned step_env_max = 0;
	char **env = NULL;
	struct image_conf conf; /* the image's defaults for every step (exec.conf) */
	uint64_t t0, deadline = 0;
	int c, status = EXIT_OK, lifeline[2] = {-1, -1}, err_no;
	struct sigaction sa = {.sa_handler = run_on_signal, .sa_flags = SA_RESTART};

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'k':
			keep = true;
			break;
		case 'c':
			check = true;
			break;
		case 'a':
			artifacts = optarg;
			break;
		case 'n':
			no_cache = true;
			break;
		case 'j':
			json = true;
			break;
		case 'u':
			junit = optarg;
			break;
		case 'm':
			if (!parse_u64(optarg, 0, 1u << 20, &cache_max)) {
				errmsg("--cache-max %s: give GiB, 0 to 1048576", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'h':
			return ctl_help("run");
		default:
			return ctl_usage("run");
		}
	}
	if (optind + 1 != argc) {
		return ctl_usage("run");
	}
	if (jobspec_load(argv[optind], &js, err, sizeof(err)) < 0) {
		errmsg("%s", err);
		jobspec_free(&js);
		return EXIT_USAGE;
	}
	if (check) {
		jobspec_print(&js, stdout);
		jobspec_free(&js);
		return EXIT_OK;
	}
	if ((status = host_check_linux())) {
		jobspec_free(&js);
		return status;
	}
	if ((err_no = image_conf_load(js.image, &conf)) < 0) {
		errmsg("image %s: cannot read its exec.conf: %s", js.image,
		       err_no == -EBADMSG ? "it does not parse" : strerror(-err_no));
		jobspec_free(&js);
		return EXIT_ERR;
	}
	if (report_init(&rep, &js, argv[optind], json, junit) < 0) {
		image_conf_free(&conf);
		errmsg("out of memory");
		jobspec_free(&js);
		return EXIT_ERR;
	}
	co.image = js.image;
	co.cpus = js.cpus;
	co.memory_mib = js.memory_mib;
	co.disk_size_gib = js.disk_gib;
	co.no_network = js.no_network;
	co.net_opts = js.net_opts;
	co.nnet_opts = js.nnet_opts;
	for (unsigned i = 0; i < js.nsteps; i++)
		if (js.steps[i].nenv > step_env_max)
			step_env_max = js.steps[i].nenv;
	env = calloc(js.nenv + step_env_max + 1, sizeof(*env));
	if (!env) {
		errmsg("out of memory");
		image_conf_free(&conf);
		report_free(&rep);
		jobspec_free(&js);
		return EXIT_ERR;
	}
	if (!keep && (err_no = run_lifeline(lifeline)) < 0) {
		errmsg("cannot make the VMM's lifeline: %s", strerror(-err_no));
		image_conf_free(&conf);
		report_free(&rep);
		jobspec_free(&js);
		free(env);
		return EXIT_ERR;
	}
	co.lifeline_fd = keep ? 0 : lifeline[0];
	/* Noted from here; exec_run takes them through its signalfd while a step runs, and they
	 * are only noted through the removal, so a third ^C cannot leave half a sandbox. */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	t0 = now_ms();
	fprintf(stderr, "==> creating a sandbox (image %s, %u vCPU, %llu MiB)\n", js.image, js.cpus,
		(unsigned long long)js.memory_mib);
	if (js.cache_step && !no_cache)
		first = run_cache_restore(&js, &co, &sb, cache, sizeof(cache), &rep);
	if (!first) {
		struct lc_report lc = CTL_REPORT;
		int e = sandbox_create(&co, &sb, &lc);

		status = e < 0 ? ctl_failed(&lc, e) : EXIT_OK;
	}
	if (lifeline[0] >= 0)
		close(lifeline[0]); /* the VMM has its own */
	if (status != EXIT_OK) {
		if (sandbox_interrupted)
			status = 128 + sandbox_interrupted;
		report_job_ended(&rep, status, (double)(now_ms() - t0) / 1e3);
		image_conf_free(&conf);
		report_free(&rep);
		jobspec_free(&js);
		free(env);
		return status;
	}
	fprintf(stderr, "==> sandbox %s ready in %.2f s\n", sb.id, (double)(now_ms() - t0) / 1e3);
	report_job_started(&rep, sb.id, js.image);
	report_step_cached(&rep, first);

	if (js.timeout_s)
		deadline = t0 + js.timeout_s * 1000ull;
	if (!first)
		status = job_files_in(&sb, &js);
	for (unsigned i = first; i < js.nsteps && status == EXIT_OK; i++) {
		struct job_step *st = &js.steps[i];
		char *argv_sh[] = {"sh", "-c", st->run, NULL};
		struct exec_opts eo = {
			.argv = argv_sh,
			.argc = 3,
			.env = env,
			.nenv = run_step_env(&js, st, env),
			.cwd = st->workdir,
			.image = &conf,
			.timeout_s = st->timeout_s,
			.on_output = report_output,
			.output_arg = &rep,
		};
		uint64_t ts = now_ms();

		if (sandbox_interrupted) {
			errmsg("%s before step '%s': the job stops here",
			       strsignal(sandbox_interrupted), st->name);
			status = 128 + sandbox_interrupted;
			break;
		}
		if (deadline) {
			uint64_t left = deadline > ts ? (deadline - ts + 999) / 1000 : 0;

			if (left == 0) {
				errmsg("job timeout (%u s) reached before step '%s'", js.timeout_s,
				       st->name);
				status = EXIT_TIMEOUT;
				break;
			}
			if (!eo.timeout_s || left < eo.timeout_s)
				eo.timeout_s = (unsigned)left;
		}
		/* a job spec may come with the code it tests: its names print made printable */
		printable_copy(st->name, name, sizeof(name));
		fprintf(stderr, "==> [%u/%u] %s\n", i + 1, js.nsteps, name);
		fflush(stderr);
		report_step_started(&rep, i);
		status = exec_run(&sb, &eo);
		report_step_ended(&rep, i, status,
				  status == 0		  ? "passed"
				  : st->continue_on_error ? "continued"
							  : "failed",
				  (double)(now_ms() - ts) / 1e3);
		fflush(stdout);
		fprintf(stderr, "<== [%u/%u] %s: %s", i + 1, js.nsteps, name,
			status == 0		? "ok"
			: st->continue_on_error ? "failed, continuing (continue-on-error)"
						: "failed");
		if (status)
			fprintf(stderr, " (status %d)", status);
		fprintf(stderr, " in %.2f s\n", (double)(now_ms() - ts) / 1e3);
		if (status)
			soft_failed = true;
		/* only a state every step up to it passed: a soft failure's is not kept */
		if (!soft_failed && i + 1 == js.cache_step && cache[0])
			run_cache_keep(&sb, &js, &co, cache, cache_max, &rep);
		/* continue-on-error: the job goes on and is not failed by it, as in GitHub
		 * Actions; a timeout of the whole job or a lost sandbox still stops it. */
		if (status && st->continue_on_error && status != EXIT_SANDBOX &&
		    !sandbox_interrupted && !(deadline && now_ms() >= deadline)) {
			status = EXIT_OK;
			continue;
		}
		if (status)
			break;
	}
	/* also after a failed step, as CI systems keep a failed job's logs and reports */
	if (status != EXIT_SANDBOX && !sandbox_interrupted) {
		int st = job_artifacts_out(&sb, &js, artifacts, &rep);

		if (st != EXIT_OK && status == EXIT_OK)
			status = st;
	}
	fprintf(stderr, "==> job %s in %.2f s\n", status ? "failed" : "passed",
		(double)(now_ms() - t0) / 1e3);
	if (status == EXIT_OK && sandbox_interrupted) /* after the last step */
		status = 128 + sandbox_interrupted;
	if (keep) {
		fprintf(stderr, "==> sandbox %s kept (sandboxctl rm -f %s)\n", sb.id, sb.id);
	} else {
		if (sandbox_stop_vmm(&sb, true, &ctl_report) < 0)
			errmsg("%s: cannot stop the VMM (pid %d)", sb.id, (int)sb.pid);
		else
			remove_flat_dir(sb.dir);
		close(lifeline[1]);
	}
	if (report_job_ended(&rep, status, (double)(now_ms() - t0) / 1e3) < 0 && status == EXIT_OK)
		status = EXIT_ERR;
	image_conf_free(&conf);
	report_free(&rep);
	jobspec_free(&js);
	free(env);
	return status;
}
