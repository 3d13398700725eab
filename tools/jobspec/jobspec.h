/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Job specs (docs/jobspec.md), a room of its own: the YAML of `sandboxctl run` parsed into a
 * struct jobspec, every error as FILE:LINE:COLUMN. It knows nothing of the command line or of
 * running a job (sandboxctl's cmd_run.c and job_*.c do that); its fuzzer links it alone.
 */
#ifndef SANDBOX_JOBSPEC_H
#define SANDBOX_JOBSPEC_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "client.h" /* NAME_MAX_LEN, __must_check */

struct job_step {
	char *name;
	char *run; /* a sh -c script */
	unsigned timeout_s;
	char **env; /* K=V, over the job's */
	unsigned nenv;
	char *workdir;		/* absolute, in the guest; NULL: / */
	bool continue_on_error; /* a failure does not stop the job, nor fail it */
};
/* The longest path a spec's files: or artifacts: may give (the agent's paths are shorter). */
#define JOB_PATH_MAX 4000
/* files: one host path (relative to the spec's directory, normalised, no "..") copied to an
 * absolute guest path; a directory is copied whole. */
struct job_file {
	char *src;
	char *dst;
};
struct jobspec {
	char dir[4096]; /* the spec's directory, where files: are found (jobspec_load) */
	char image[NAME_MAX_LEN + 1];
	unsigned cpus;
	uint64_t memory_mib;
	uint64_t disk_gib;  /* 0: the image's size */
	unsigned timeout_s; /* the whole job; 0: none */
	char **env;	    /* K=V */
	unsigned nenv;
	bool no_network; /* network: none */
	/* network: {...} and secrets: as sandbox-proxy prepare's words (--allow D, --credential
	 * HOST:HEADER=ENVVAR, ...); the secrets' values stay in sandboxctl's environment. */
	char **net_opts;
	unsigned nnet_opts;
	struct job_step *steps;
	unsigned nsteps;
	struct job_file *files; /* copied in before the first step */
	unsigned nfiles;
	char **artifacts; /* absolute guest paths, a component may be a glob: copied out */
	unsigned nartifacts;
	unsigned cache_step; /* cache: the state after this step (1-based) is kept; 0: none */
};
/* Parse the spec at `path`. On failure `err` says why as "FILE:LINE:COLUMN: what"; call
 * jobspec_free either way. */
int jobspec_load(const char *path, struct jobspec *js, char *err, size_t err_len) __must_check;
/* The same for the `len` bytes of spec text at `text` (not NUL-terminated), its errors naming
 * `name`: what jobspec_load does once the file is read (the fuzz target's entry point). */
int jobspec_parse(const char *name, const char *text, size_t len, struct jobspec *js, char *err,
		  size_t err_len) __must_check;
void jobspec_free(struct jobspec *js);
/* The parsed spec, normalised, on `f` (sandboxctl run --check): what a golden file holds. */
void jobspec_print(const struct jobspec *js, FILE *f);

#endif
