/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Running one job (job_run, jobs.h): a fresh sandbox for it, each step run as `sh -c` through
 * the agent (sandbox_exec) with its output streamed under a header, the timings, then the
 * sandbox removed. The status is the first failing step's (docs/jobspec.md, "Running").
 *
 * The sandbox lives no longer than the run (unless keep): its VMM holds the read end of a
 * pipe whose write end only we hold (--lifeline), so it stops however we end, SIGKILL
 * included. SIGINT, SIGTERM and SIGHUP go to the step's command (sandbox_exec: a second one,
 * or a SIGTERM the command outlives by 5 s, ends the step with 128+N); while the sandbox is
 * created one stops the create (which removes what it made), while it is removed one is only
 * noted, and no step runs after one.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jobs.h"

/* One run's state. */
struct job {
	const struct jobspec *js;
	const struct job_run_opts *o;
	struct create_opts co;
	struct sandbox sb;
	struct image_conf conf; /* the image's defaults for every step (exec.conf) */
	struct job_report rep;
	char **env; /* a step's environment: room for the job's and the most a step sets */
	char cache[NAME_MAX_LEN + 2];
	int lifeline[2];
	uint64_t t0, deadline; /* deadline: the job's timeout's end, 0 for none */
};

/* The lifeline: a pipe, both ends close-on-exec (no other child inherits them) and above
 * stdio (the VMM takes fds from 3 up). */
static int job_lifeline(int fds[2])
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

/* The job's env with the step's over it (a name the step sets is the step's): `buf` holds
 * js->nenv + st->nenv entries. */
static unsigned job_step_env(const struct jobspec *js, const struct job_step *st, char **buf)
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

/* What the run needs before a sandbox: the host checked, the image's exec.conf, the
 * report, the steps' environment, the lifeline; then the signals noted. A status; on
 * failure nothing of it is left. */
static int job_prepare(struct job *j)
{
	const struct jobspec *js = j->js;
	struct lc_report lc = job_lc_report(j->o);
	unsigned step_env_max = 0;
	int err;

	if ((err = sandbox_host_check(&lc)) < 0)
		return j->o->failed(&lc, err);
	if ((err = image_conf_load(js->image, &j->conf)) < 0) {
		errmsg("image %s: cannot read its exec.conf: %s", js->image,
		       err == -EBADMSG ? "it does not parse" : strerror(-err));
		return JOB_EXIT_ERR;
	}
	if (report_init(&j->rep, js, j->o->spec, j->o->json, j->o->junit) < 0) {
		image_conf_free(&j->conf);
		errmsg("out of memory");
		return JOB_EXIT_ERR;
	}
	for (unsigned i = 0; i < js->nsteps; i++)
		if (js->steps[i].nenv > step_env_max)
			step_env_max = js->steps[i].nenv;
	j->env = calloc(js->nenv + step_env_max + 1, sizeof(*j->env));
	if (!j->env) {
		errmsg("out of memory");
		goto fail;
	}
	if (!j->o->keep && (err = job_lifeline(j->lifeline)) < 0) {
		errmsg("cannot make the VMM's lifeline: %s", strerror(-err));
		goto fail;
	}
	j->co.lifeline_fd = j->o->keep ? 0 : j->lifeline[0];
	/* Noted from here; sandbox_exec takes them through its signalfd while a step runs, and
	 * they are only noted through the removal, so a third ^C cannot leave half a sandbox. */
	job_interrupt_catch();
	return JOB_EXIT_OK;
fail:
	image_conf_free(&j->conf);
	report_free(&j->rep);
	free(j->env);
	return JOB_EXIT_ERR;
}

/* The job's sandbox, restored from the job cache or created: the first step to run (past
 * the cached ones) in *first. A status. */
static int job_sandbox(struct job *j, unsigned *first)
{
	const struct jobspec *js = j->js;
	int status = JOB_EXIT_OK;

	fprintf(stderr, "==> creating a sandbox (image %s, %u vCPU, %llu MiB)\n", js->image,
		js->cpus, (unsigned long long)js->memory_mib);
	*first = 0;
	if (js->cache_step && !j->o->no_cache)
		*first = job_cache_restore(js, &j->co, &j->sb, j->cache, sizeof(j->cache), j->o,
					   &j->rep);
	if (!*first) {
		struct lc_report lc = job_lc_report(j->o);
		int e = sandbox_create(&j->co, &j->sb, &lc);

		status = e < 0 ? j->o->failed(&lc, e) : JOB_EXIT_OK;
	}
	if (j->lifeline[0] >= 0)
		close(j->lifeline[0]); /* the VMM has its own */
	if (status != JOB_EXIT_OK && job_interrupted)
		status = 128 + job_interrupted;
	return status;
}

/* sandbox_exec's result as the step's status: the command's, else its failure said and
 * JOB_EXIT_TIMEOUT, JOB_EXIT_CMD_EXEC, or o->failed's for the rest. */
static int job_exec_status(const struct job *j, const struct lc_report *lc, int err)
{
	if (err >= 0)
		return err;
	if (err != -ETIMEDOUT && err != -ENOEXEC)
		return j->o->failed(lc, err);
	errmsg("%s", lc->error);
	return err == -ETIMEDOUT ? JOB_EXIT_TIMEOUT : JOB_EXIT_CMD_EXEC;
}

/* Step `i` run, under its header and with its timings: its status, or the job's when the
 * job must not run it (interrupted, out of time). *stop: the job goes no further. */
static int job_step(struct job *j, unsigned i, bool *stop)
{
	const struct jobspec *js = j->js;
	const struct job_step *st = &js->steps[i];
	char *argv_sh[] = {"sh", "-c", st->run, NULL};
	struct exec_opts eo = {
		.argv = argv_sh,
		.argc = 3,
		.env = j->env,
		.nenv = job_step_env(js, st, j->env),
		.cwd = st->workdir,
		.image = &j->conf,
		.timeout_s = st->timeout_s,
		.on_output = report_output,
		.output_arg = &j->rep,
	};
	struct lc_report lc = job_lc_report(j->o);
	uint64_t ts = now_ms();
	char name[128];
	int status;

	*stop = true;
	if (job_interrupted) {
		errmsg("%s before step '%s': the job stops here", strsignal(job_interrupted),
		       st->name);
		return 128 + job_interrupted;
	}
	if (j->deadline) {
		uint64_t left = j->deadline > ts ? (j->deadline - ts + 999) / 1000 : 0;

		if (left == 0) {
			errmsg("job timeout (%u s) reached before step '%s'", js->timeout_s,
			       st->name);
			return JOB_EXIT_TIMEOUT;
		}
		if (!eo.timeout_s || left < eo.timeout_s)
			eo.timeout_s = (unsigned)left;
	}
	*stop = false;
	/* a job spec may come with the code it tests: its names print made printable */
	printable_copy(st->name, name, sizeof(name));
	fprintf(stderr, "==> [%u/%u] %s\n", i + 1, js->nsteps, name);
	fflush(stderr);
	report_step_started(&j->rep, i);
	status = job_exec_status(j, &lc, sandbox_exec(&j->sb, &eo, &lc));
	report_step_ended(&j->rep, i, status,
			  status == 0		  ? "passed"
			  : st->continue_on_error ? "continued"
						  : "failed",
			  (double)(now_ms() - ts) / 1e3);
	fflush(stdout);
	fprintf(stderr, "<== [%u/%u] %s: %s", i + 1, js->nsteps, name,
		status == 0		? "ok"
		: st->continue_on_error ? "failed, continuing (continue-on-error)"
					: "failed");
	if (status)
		fprintf(stderr, " (status %d)", status);
	fprintf(stderr, " in %.2f s\n", (double)(now_ms() - ts) / 1e3);
	return status;
}

/* The files in, then the steps from `first` on: the job's status so far. */
static int job_steps(struct job *j, unsigned first)
{
	const struct jobspec *js = j->js;
	bool soft_failed = false; /* a step failed under continue-on-error */
	int status = JOB_EXIT_OK;

	if (!first)
		status = job_files_in(&j->sb, js, j->o);
	for (unsigned i = first; i < js->nsteps && status == JOB_EXIT_OK; i++) {
		bool stop;

		status = job_step(j, i, &stop);
		if (stop)
			break;
		if (status)
			soft_failed = true;
		/* only a state every step up to it passed: a soft failure's is not kept */
		if (!soft_failed && i + 1 == js->cache_step && j->cache[0])
			job_cache_keep(&j->sb, js, &j->co, j->cache, j->o, &j->rep);
		/* continue-on-error: the job goes on and is not failed by it, as in GitHub
		 * Actions; a timeout of the whole job or a lost sandbox still stops it. */
		if (status && js->steps[i].continue_on_error && status != JOB_EXIT_SANDBOX &&
		    !job_interrupted && !(j->deadline && now_ms() >= j->deadline)) {
			status = JOB_EXIT_OK;
			continue;
		}
		if (status)
			break;
	}
	return status;
}

/* The end of a job whose sandbox was made: its artifacts out, its verdict, the sandbox
 * removed (or kept). The job's status. */
static int job_finish(struct job *j, int status)
{
	/* also after a failed step, as CI systems keep a failed job's logs and reports */
	if (status != JOB_EXIT_SANDBOX && !job_interrupted) {
		int st = job_artifacts_out(&j->sb, j->js, j->o, &j->rep);

		if (st != JOB_EXIT_OK && status == JOB_EXIT_OK)
			status = st;
	}
	fprintf(stderr, "==> job %s in %.2f s\n", status ? "failed" : "passed",
		(double)(now_ms() - j->t0) / 1e3);
	if (status == JOB_EXIT_OK && job_interrupted) /* after the last step */
		status = 128 + job_interrupted;
	if (j->o->keep) {
		fprintf(stderr, "==> sandbox %s kept (sandboxctl rm -f %s)\n", j->sb.id, j->sb.id);
	} else {
		struct lc_report lc = job_lc_report(j->o);

		if (sandbox_stop_vmm(&j->sb, true, &lc) < 0)
			errmsg("%s: cannot stop the VMM (pid %d)", j->sb.id, (int)j->sb.pid);
		else
			remove_flat_dir(j->sb.dir);
	}
	return status;
}

int job_run(const struct jobspec *js, const struct job_run_opts *o)
{
	struct job j = {
		.js = js,
		.o = o,
		.co = CREATE_OPTS_DEFAULT,
		.lifeline = {-1, -1},
	};
	unsigned first;
	int status;

	j.co.image = js->image;
	j.co.cpus = js->cpus;
	j.co.memory_mib = js->memory_mib;
	j.co.disk_size_gib = js->disk_gib;
	j.co.no_network = js->no_network;
	j.co.net_opts = js->net_opts;
	j.co.nnet_opts = js->nnet_opts;
	if ((status = job_prepare(&j)) != JOB_EXIT_OK)
		return status;
	j.t0 = now_ms();
	if ((status = job_sandbox(&j, &first)) == JOB_EXIT_OK) {
		fprintf(stderr, "==> sandbox %s ready in %.2f s\n", j.sb.id,
			(double)(now_ms() - j.t0) / 1e3);
		report_job_started(&j.rep, j.sb.id, js->image);
		report_step_cached(&j.rep, first);
		if (js->timeout_s)
			j.deadline = j.t0 + js->timeout_s * 1000ull;
		status = job_finish(&j, job_steps(&j, first));
	}
	if (j.lifeline[1] >= 0)
		close(j.lifeline[1]);
	if (report_job_ended(&j.rep, status, (double)(now_ms() - j.t0) / 1e3) < 0 &&
	    status == JOB_EXIT_OK)
		status = JOB_EXIT_ERR;
	image_conf_free(&j.conf);
	report_free(&j.rep);
	free(j.env);
	return status;
}
