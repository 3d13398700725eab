/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench-snapshot: what a snapshot, a restore and a fork of a native guest cost, beside a cold
 * start of the same guest, and how much memory 16 forks take (tools/bench/snapshot.sh).
 *
 *   bench-snapshot [--runs N] --vmm SANDBOX_VMM --payload PAYLOAD_SNAP [--memory MiB]
 *       [--cpus N] [--dir DIR]
 *
 * The guest is payload-snap (tests/guests/snap.c): it fills its RAM above 64 MiB with a
 * pattern (512 MiB of the default --memory 577), counts on vCPU 1 and answers lines over
 * vsock port 1234. A guest is "up" when it answers `ping`: connect to its VMM's --vsock
 * socket, "CONNECT 1234\n", "OK <n>\n", "ping\n", "pong counter=N seed=S\n". A connect that
 * is refused, or a socket the VMM closes before the answer (a restored guest resets its
 * device and the VMM drops what came before), is retried after 1 ms: no longer sleep is in
 * a timed path. Times are CLOCK_MONOTONIC.
 *
 * One parent VMM boots (`--payload P --cpus C --memory M`) and stays up throughout; one
 * durable snapshot of it is made for the restores. Then, --runs times each (default 10):
 *   snapshot_ms    a durable SNAPSHOT (flags 0) of the running parent into a fresh empty
 *                  directory: the API call, connect to reply. The VMM's own total_us goes
 *                  beside it on stderr. It writes and fsyncs the memory file in DIR (with the
 *                  guest paused throughout: flags 0 is not LIVE), so it is a figure of DIR's
 *                  file system too. The directory is removed after each.
 *   cold_start_ms  spawn `sandbox-vmm --payload P ...` to its first ping answer: that
 *                  includes the guest filling its 512 MiB.
 *   restore_ms     spawn `sandbox-vmm --restore SNAP` to its first ping answer. Nothing is
 *                  dropped from the page cache: the memory file was just written and stays
 *                  cached, and a restore maps it privately; that warm restore is the one users
 *                  get (restoring what they snapshotted a moment ago).
 *   fork1_ms       SNAPSHOT with API_SNAPSHOT_LIVE of the running parent into a fresh
 *                  directory (state only), then one child `--restore DIR --restore-memory
 *                  PATHS` (the reply's frozen RAM): from before the request to the child's
 *                  answer, which must carry the parent's seed. parent_pause_ms is the reply's
 *                  pause_us, as the VMM measured it.
 *   fork16_ms      the same with 16 children, all spawned right after the reply, then all
 *                  asked at once (one poll over their sockets): to the last answer. Asking one
 *                  after another would add up each guest's wait for a CPU (see below) instead
 *                  of overlapping them. In the last run, before the children are killed, the
 *                  density line: each child's Private_Clean + Private_Dirty
 *                  (/proc/PID/smaps_rollup), summed, and the fall of MemAvailable
 *                  (/proc/meminfo) from just before the spawns to the last answer.
 * The directories of snapshots and forks are made before the clock starts.
 * Cold starts and restores alternate, so that drifts in load hit both alike. The figure of
 * each is the median of its runs; every run's figure, and bench_report's summary, go to
 * stderr. The last two lines on stdout (the only ones) are:
 *   snapshot restore_ms=.. fork1_ms=.. fork16_ms=.. parent_pause_ms=.. snapshot_ms=..
 *       cold_start_ms=..
 *   density forks=16 own_mib_total=.. own_mib_per_fork=.. memavailable_drop_mib=..
 *
 * The parent and the CPUs. Our machines have 2 CPUs, and payload-snap never halts (a ring-3
 * payload has no way to wait: no hlt), so every vCPU of every guest keeps a CPU busy. The
 * default is --cpus 1: vCPU 0 polls its device and counts, and a child still finds a CPU the
 * parent leaves free. With --cpus 2 (vCPU 1 counting) the parent alone takes both CPUs and
 * a fork measures mostly the scheduler: fork1 27 ms against 6 ms, measured 2026-12-01.
 *   - Snapshots and forks are of the parent running, since that is what users do: its two
 *     vCPUs compete with the VMM's own work and with the children (16 children are 32 more
 *     busy vCPUs), and that is in the figures.
 *   - Cold starts and restores have nothing to do with the parent, so it is PAUSEd (API_PAUSE)
 *     through them, and RESUMEd before the forks.
 * The parent's own boot is reported on stderr but not counted: where guest RAM touched for the
 * first time costs more (in a VM, whose host backs its memory lazily), it is the slowest start
 * of all, and the cold starts after it reuse memory the ones before them freed.
 * The parent is forked 2 x --runs times; every 8th freeze after the first compacts its chain
 * of memory files into one copy of all RAM, with the guest paused (vmm/mem_snap.c): with the
 * default 10 runs, fork1 run 9 and fork16 run 7 show it, in the p90 and max, not the median.
 *
 * Every VMM runs with --timeout 600 in a directory of its own under DIR (its sockets, its
 * console and its stderr in vmm.log, whose end is shown when its run fails), is SIGKILLed
 * and reaped after its run, and sits in one table so that every exit kills what runs. DIR
 * (default: a mkdtemp under /tmp) must be empty or new; it is emptied at the end, and removed
 * if we made it, on a failure or SIGINT/SIGTERM/SIGHUP too (not on SIGKILL: the VMMs' own
 * --timeout ends them then). Every wait has a deadline of 60 s; a failed run ends the
 * benchmark with exit 1 and a message naming what failed; usage errors exit 2.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api_proto.h"
#include "bench.h"
#include "client.h"
#include "snapvm.h"

#define SNAPBENCH_RUNS_DEFAULT 10
#define SNAPBENCH_RUNS_MAX     1000
#define SNAPBENCH_FORKS	       16
#define SNAPBENCH_VMS_MAX      (1 + SNAPBENCH_FORKS) /* the parent, then one run's VMMs */

/* The series of figures a benchmark run collects, one entry per run each. */
enum snapbench_series {
	SNAPBENCH_SNAPSHOT,	/* snapshot_ms */
	SNAPBENCH_SNAPSHOT_VMM, /* its total_us */
	SNAPBENCH_COLD,		/* cold_start_ms */
	SNAPBENCH_RESTORE,	/* restore_ms */
	SNAPBENCH_FORK1,	/* fork1_ms */
	SNAPBENCH_FORK1_SNAP,	/* its SNAPSHOT call */
	SNAPBENCH_FORK1_PAUSE,	/* parent_pause_ms */
	SNAPBENCH_FORK16,	/* fork16_ms */
	SNAPBENCH_FORK16_SNAP,	/* its SNAPSHOT call */
	SNAPBENCH_FORK16_PAUSE, /* its pause_us */
	SNAPBENCH_NSERIES,
};

/* What bench_report calls each series on stderr. */
static const char *const snapbench_labels[SNAPBENCH_NSERIES] = {
	[SNAPBENCH_SNAPSHOT] = "snapshot: durable SNAPSHOT, the API call",
	[SNAPBENCH_SNAPSHOT_VMM] = "snapshot: the VMM's total_us",
	[SNAPBENCH_COLD] = "cold start: spawn to the first ping answer",
	[SNAPBENCH_RESTORE] = "restore: spawn --restore to the first ping answer",
	[SNAPBENCH_FORK1] = "fork1: SNAPSHOT live to the child's ping answer",
	[SNAPBENCH_FORK1_SNAP] = "fork1: its SNAPSHOT live, the API call",
	[SNAPBENCH_FORK1_PAUSE] = "fork1: the parent's pause (pause_us)",
	[SNAPBENCH_FORK16] = "fork16: SNAPSHOT live to the last child's answer",
	[SNAPBENCH_FORK16_SNAP] = "fork16: its SNAPSHOT live, the API call",
	[SNAPBENCH_FORK16_PAUSE] = "fork16: the parent's pause (pause_us)",
};

/* How the last fork16 run found the memory of its children. */
struct snapbench_density {
	double own_mib_total, memavailable_drop_mib;
};

/* What the runs need, and what they measured. */
struct snapbench {
	const char *vmm, *payload, *memory, *cpus;
	int runs;
	char dir[SNAPVM_PATH_MAX]; /* DIR */
	bool made_dir;		   /* a mkdtemp: removed at the end, not only emptied */
	char restore_snap[SNAPVM_PATH_MAX];
	char seed[SNAPVM_SEED_MAX];	      /* the parent's, from its first ping */
	struct snapvm vms[SNAPBENCH_VMS_MAX]; /* [0] the parent */
	double *ms[SNAPBENCH_NSERIES];	      /* [series][run], in ms */
	struct snapbench_density density;     /* of the last fork16 run */
};

static void snapbench_on_signal(int sig)
{
	snapvm_signal = sig;
}

/* Removes everything in dir, dir itself staying. */
static void snapbench_empty_dir(const char *dir)
{
	char path[SNAPVM_PATH_MAX * 2];
	struct dirent *de;
	DIR *d = opendir(dir);

	if (!d)
		return;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
		    !path_fmt(path, sizeof(path), "%s/%s", dir, de->d_name))
			snapvm_rmtree(path);
	closedir(d);
}

/* Starts a VMM with args in the slot vm, in the new directory DIR/name. */
__attribute__((warn_unused_result)) static int snapbench_start(const struct snapbench *b,
							       struct snapvm *vm, const char *name,
							       const char *const *args)
{
	char dir[SNAPVM_PATH_MAX];

	if (path_fmt(dir, sizeof(dir), "%s/%s", b->dir, name) < 0) {
		snapvm_msg("%s/%s: path too long", b->dir, name);
		return -ENAMETOOLONG;
	}
	return snapvm_start(vm, b->vmm, dir, args);
}

/* The deadline of a wait that starts now. */
static int64_t snapbench_deadline(void)
{
	return bench_clock_ns() + (int64_t)SNAPVM_WAIT_MS * 1000000;
}

/* Makes the fresh empty directory DIR/name for a snapshot, its path in out. */
__attribute__((warn_unused_result)) static int
snapbench_mkdir(const struct snapbench *b, const char *name, char *out, size_t out_len)
{
	int err = path_fmt(out, out_len, "%s/%s", b->dir, name);

	if (err < 0) {
		snapvm_msg("%s/%s: path too long", b->dir, name);
		return err;
	}
	if (mkdir(out, 0700) < 0) {
		err = -errno;
		snapvm_msg("cannot make %s: %s", out, strerror(errno));
	}
	return err;
}

/*
 * Run i of snapshot_ms: a durable snapshot of the running parent into a fresh directory (made
 * before the clock starts), the API call timed; the directory is removed after.
 */
__attribute__((warn_unused_result)) static int snapbench_run_snapshot(struct snapbench *b, int i)
{
	struct snapvm_snap snap;
	char dir[SNAPVM_PATH_MAX];
	int64_t t0;
	int err;

	if ((err = snapbench_mkdir(b, "snapshot", dir, sizeof(dir))) < 0)
		return err;
	t0 = bench_clock_ns();
	err = snapvm_snapshot(b->vms[0].api, 0, dir, &snap);
	b->ms[SNAPBENCH_SNAPSHOT][i] = bench_since_ms(t0);
	if (!err) {
		b->ms[SNAPBENCH_SNAPSHOT_VMM][i] = (double)snap.total_us / 1e3;
		snapvm_msg("%.3f ms (the VMM: %.3f ms, paused %.3f ms, %llu MiB written)",
			   b->ms[SNAPBENCH_SNAPSHOT][i], b->ms[SNAPBENCH_SNAPSHOT_VMM][i],
			   (double)snap.pause_us / 1e3,
			   (unsigned long long)(snap.memory_bytes >> 20));
	}
	snapvm_rmtree(dir);
	return err;
}

/*
 * One cold start (`--payload`) or restore (`--restore` of b->restore_snap), spawn to the
 * first ping answer in *ms; the VMM is killed after.
 */
__attribute__((warn_unused_result)) static int snapbench_run_start(struct snapbench *b,
								   bool restore, double *ms)
{
	const char *boot[] = {"--payload", b->payload, "--cpus", b->cpus,
			      "--memory",  b->memory,  NULL};
	const char *from[] = {"--restore", b->restore_snap, NULL};
	struct snapvm *vm = &b->vms[1];
	int64_t t0 = bench_clock_ns();
	int err;

	if ((err = snapbench_start(b, vm, restore ? "restore" : "cold", restore ? from : boot)) < 0)
		return err;
	/* A restore goes on from the parent's memory: its seed. */
	err = snapvm_ping_all(vm, 1, t0 + (int64_t)SNAPVM_WAIT_MS * 1000000,
			      restore ? b->seed : NULL);
	*ms = (double)(vm->answer_ns - t0) / 1e6;
	if (!err)
		snapvm_msg("%.3f ms", *ms);
	snapvm_kill(vm);
	return err;
}

/* MemAvailable from /proc/meminfo, in KiB. */
__attribute__((warn_unused_result)) static int snapbench_memavailable(long long *kib)
{
	char line[256];
	FILE *f = fopen("/proc/meminfo", "re");
	int err = -ENOENT;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %lld kB", kib) == 1) {
			err = 0;
			break;
		}
	fclose(f);
	return err;
}

/* Private_Clean + Private_Dirty of pid (/proc/PID/smaps_rollup), in KiB. */
__attribute__((warn_unused_result)) static int snapbench_private_kib(pid_t pid, long long *kib)
{
	char path[64], line[256];
	long long v;
	FILE *f;
	int found = 0;

	snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", (int)pid);
	if (!(f = fopen(path, "re")))
		return -errno;
	*kib = 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Private_Clean: %lld kB", &v) == 1 ||
		    sscanf(line, "Private_Dirty: %lld kB", &v) == 1) {
			*kib += v;
			found++;
		}
	fclose(f);
	return found == 2 ? 0 : -EBADMSG;
}

/*
 * One fork of the running parent into nforks children: SNAPSHOT live into a fresh directory
 * (made before the clock starts), every child spawned, every answer awaited and its seed
 * checked. The whole in *ms, the API call in *snap_ms, the VMM's pause in *pause_ms; with
 * density, the children's memory before they are killed.
 */
__attribute__((warn_unused_result)) static int snapbench_run_fork(struct snapbench *b, int nforks,
								  double *ms, double *snap_ms,
								  double *pause_ms,
								  struct snapbench_density *density)
{
	struct snapvm_snap snap;
	char dir[SNAPVM_PATH_MAX], name[16];
	const char *args[] = {"--restore", dir, "--restore-memory", snap.memory, NULL};
	long long avail0 = 0, avail1 = 0, own_kib = 0, kib = 0, min_kib = INT64_MAX, max_kib = 0;
	int64_t t0, deadline_ns, first_ns;
	double spawned_ms;
	int err;

	if ((err = snapbench_mkdir(b, "fork", dir, sizeof(dir))) < 0)
		return err;
	t0 = bench_clock_ns();
	deadline_ns = t0 + (int64_t)SNAPVM_WAIT_MS * 1000000;
	if ((err = snapvm_snapshot(b->vms[0].api, API_SNAPSHOT_LIVE, dir, &snap)) < 0)
		goto out;
	*snap_ms = bench_since_ms(t0);
	*pause_ms = (double)snap.pause_us / 1e3;
	if (density && (err = snapbench_memavailable(&avail0)) < 0) {
		snapvm_msg("/proc/meminfo: %s", strerror(-err));
		goto out;
	}
	for (int i = 0; i < nforks; i++) {
		snprintf(name, sizeof(name), "child-%02d", i);
		if ((err = snapbench_start(b, &b->vms[1 + i], name, args)) < 0)
			goto out;
	}
	spawned_ms = bench_since_ms(t0);
	if ((err = snapvm_ping_all(&b->vms[1], nforks, deadline_ns, b->seed)) < 0)
		goto out;
	*ms = 0;
	first_ns = INT64_MAX;
	for (int i = 0; i < nforks; i++) {
		double child_ms = (double)(b->vms[1 + i].answer_ns - t0) / 1e6;

		*ms = child_ms > *ms ? child_ms : *ms;
		first_ns = b->vms[1 + i].answer_ns < first_ns ? b->vms[1 + i].answer_ns : first_ns;
	}
	snapvm_msg("%.3f ms (SNAPSHOT %.3f ms, the parent paused %.3f ms, %d spawned by %.3f ms, "
		   "the first answer at %.3f ms)",
		   *ms, *snap_ms, *pause_ms, nforks, spawned_ms, (double)(first_ns - t0) / 1e6);
	if (!density)
		goto out;
	if ((err = snapbench_memavailable(&avail1)) < 0) {
		snapvm_msg("/proc/meminfo: %s", strerror(-err));
		goto out;
	}
	for (int i = 0; i < nforks; i++) {
		if ((err = snapbench_private_kib(b->vms[1 + i].pid, &kib)) < 0) {
			snapvm_msg("/proc/%d/smaps_rollup: %s", (int)b->vms[1 + i].pid,
				   strerror(-err));
			goto out;
		}
		own_kib += kib;
		min_kib = kib < min_kib ? kib : min_kib;
		max_kib = kib > max_kib ? kib : max_kib;
	}
	snapvm_msg("the children own %.2f to %.2f MiB each; MemAvailable %.2f MiB before their "
		   "spawns, %.2f MiB after their answers",
		   (double)min_kib / 1024, (double)max_kib / 1024, (double)avail0 / 1024,
		   (double)avail1 / 1024);
	density->own_mib_total = (double)own_kib / 1024;
	density->memavailable_drop_mib = (double)(avail0 - avail1) / 1024;
out:
	for (int i = 0; i < nforks; i++)
		snapvm_kill(&b->vms[1 + i]);
	snapvm_rmtree(dir);
	return err;
}

/* Kills every VMM still running and empties (or removes) DIR: every exit goes through here. */
static void snapbench_cleanup(struct snapbench *b)
{
	for (int i = 0; i < SNAPBENCH_VMS_MAX; i++)
		snapvm_kill(&b->vms[i]);
	if (!b->dir[0])
		return;
	if (b->made_dir)
		snapvm_rmtree(b->dir);
	else
		snapbench_empty_dir(b->dir);
}

/* DIR: the one given (made if missing; it must be empty), or a mkdtemp under /tmp. */
__attribute__((warn_unused_result)) static int snapbench_setup_dir(struct snapbench *b,
								   const char *dir)
{
	struct dirent *de;
	DIR *d;

	if (!dir) {
		strcpy(b->dir, "/tmp/bench-snapshot-XXXXXX");
		if (!mkdtemp(b->dir)) {
			fprintf(stderr, "bench-snapshot: mkdtemp: %s\n", strerror(errno));
			b->dir[0] = '\0';
			return -errno;
		}
		b->made_dir = true;
		return 0;
	}
	/* Room for DIR/child-15/api.sock in a sun_path. */
	if (strlen(dir) > SNAPVM_PATH_MAX - 24) {
		fprintf(stderr, "bench-snapshot: --dir %s: too long for its sockets\n", dir);
		return -ENAMETOOLONG;
	}
	if (mkdir(dir, 0700) == 0)
		b->made_dir = true;
	else if (errno != EEXIST) {
		fprintf(stderr, "bench-snapshot: cannot make %s: %s\n", dir, strerror(errno));
		return -errno;
	}
	if (!(d = opendir(dir))) {
		fprintf(stderr, "bench-snapshot: --dir %s: %s\n", dir, strerror(errno));
		return -errno;
	}
	while ((de = readdir(d)) && (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")))
		;
	closedir(d);
	if (de) {
		fprintf(stderr, "bench-snapshot: --dir %s is not empty\n", dir);
		return -ENOTEMPTY;
	}
	strcpy(b->dir, dir);
	return 0;
}

/* Every series, in the order the comment at the top gives. 0, or negative after a message. */
__attribute__((warn_unused_result)) static int snapbench_run_all(struct snapbench *b)
{
	const char *boot[] = {"--payload", b->payload, "--cpus", b->cpus,
			      "--memory",  b->memory,  NULL};
	struct snapvm_snap snap;
	int64_t t0 = bench_clock_ns();
	double **ms = b->ms;
	int err, last = b->runs - 1;

	snapvm_set_phase("the parent's boot");
	if ((err = snapbench_start(b, &b->vms[0], "parent", boot)) < 0 ||
	    (err = snapvm_ping_all(&b->vms[0], 1, snapbench_deadline(), NULL)) < 0)
		return err;
	strcpy(b->seed, b->vms[0].seed);
	fprintf(stderr, "bench-snapshot: the parent answers after %.3f ms, seed %s\n",
		(double)(b->vms[0].answer_ns - t0) / 1e6, b->seed);

	snapvm_set_phase("the snapshot to restore");
	if ((err = snapbench_mkdir(b, "restore-snapshot", b->restore_snap,
				   sizeof(b->restore_snap))) < 0 ||
	    (err = snapvm_snapshot(b->vms[0].api, 0, b->restore_snap, &snap)) < 0)
		return err;

	for (int i = 0; i < b->runs; i++) {
		snapvm_set_phase("snapshot run %d/%d", i + 1, b->runs);
		if ((err = snapbench_run_snapshot(b, i)) < 0)
			return err;
	}

	snapvm_set_phase("pausing the parent");
	if ((err = snapvm_api_simple(b->vms[0].api, API_PAUSE, "PAUSE")) < 0)
		return err;
	for (int i = 0; i < b->runs; i++) {
		snapvm_set_phase("cold start run %d/%d", i + 1, b->runs);
		if ((err = snapbench_run_start(b, false, &ms[SNAPBENCH_COLD][i])) < 0)
			return err;
		snapvm_set_phase("restore run %d/%d", i + 1, b->runs);
		if ((err = snapbench_run_start(b, true, &ms[SNAPBENCH_RESTORE][i])) < 0)
			return err;
	}
	snapvm_set_phase("resuming the parent");
	if ((err = snapvm_api_simple(b->vms[0].api, API_RESUME, "RESUME")) < 0)
		return err;

	for (int i = 0; i < b->runs; i++) {
		snapvm_set_phase("fork1 run %d/%d", i + 1, b->runs);
		if ((err = snapbench_run_fork(b, 1, &ms[SNAPBENCH_FORK1][i],
					      &ms[SNAPBENCH_FORK1_SNAP][i],
					      &ms[SNAPBENCH_FORK1_PAUSE][i], NULL)) < 0)
			return err;
	}
	for (int i = 0; i < b->runs; i++) {
		snapvm_set_phase("fork16 run %d/%d", i + 1, b->runs);
		if ((err = snapbench_run_fork(b, SNAPBENCH_FORKS, &ms[SNAPBENCH_FORK16][i],
					      &ms[SNAPBENCH_FORK16_SNAP][i],
					      &ms[SNAPBENCH_FORK16_PAUSE][i],
					      i == last ? &b->density : NULL)) < 0)
			return err;
	}
	return 0;
}

static void snapbench_usage(FILE *f)
{
	fprintf(f,
		"usage: bench-snapshot [--runs N] --vmm SANDBOX_VMM --payload PAYLOAD_SNAP\n"
		"                      [--memory MiB] [--cpus N] [--dir DIR]\n"
		"Snapshot, restore and fork of payload-snap against its cold start, and the\n"
		"memory of %d forks; the last two lines on stdout:\n"
		"  snapshot restore_ms=.. fork1_ms=.. fork16_ms=.. parent_pause_ms=.. "
		"snapshot_ms=.. cold_start_ms=..\n"
		"  density forks=%d own_mib_total=.. own_mib_per_fork=.. memavailable_drop_mib=..\n"
		"  --runs N      runs of each figure, their median reported (default %d)\n"
		"  --memory MiB  guest RAM (default 577: the guest fills 512 MiB of it)\n"
		"  --cpus N      the parent's and cold starts' vCPUs (default 1)\n"
		"  --dir DIR     an empty or new directory for the sockets and snapshots,\n"
		"                emptied at the end (default: a mkdtemp under /tmp)\n",
		SNAPBENCH_FORKS, SNAPBENCH_FORKS, SNAPBENCH_RUNS_DEFAULT);
}

int main(int argc, char **argv)
{
	static struct snapbench b = {.memory = "577", .cpus = "1", .runs = SNAPBENCH_RUNS_DEFAULT};
	struct sigaction sa = {.sa_handler = snapbench_on_signal};
	double med[SNAPBENCH_NSERIES];
	const char *dir = NULL;
	int err, n;

	for (int i = 1; i < argc; i += 2) {
		const char *val = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			snapbench_usage(stdout);
			return 0;
		}
		if (!val)
			goto usage;
		if (!strcmp(argv[i], "--runs")) {
			if (bench_parse_count(val, 1, SNAPBENCH_RUNS_MAX, &b.runs) < 0)
				goto usage;
		} else if (!strcmp(argv[i], "--memory")) {
			if (bench_parse_count(val, 1, INT32_MAX, &n) < 0)
				goto usage;
			b.memory = val;
		} else if (!strcmp(argv[i], "--cpus")) {
			if (bench_parse_count(val, 1, 1024, &n) < 0)
				goto usage;
			b.cpus = val;
		} else if (!strcmp(argv[i], "--vmm")) {
			b.vmm = val;
		} else if (!strcmp(argv[i], "--payload")) {
			b.payload = val;
		} else if (!strcmp(argv[i], "--dir")) {
			dir = val;
		} else {
			goto usage;
		}
	}
	if (!b.vmm || !b.payload)
		goto usage;
	for (int s = 0; s < SNAPBENCH_NSERIES; s++)
		if (!(b.ms[s] = calloc((size_t)b.runs, sizeof(double)))) {
			fprintf(stderr, "bench-snapshot: out of memory\n");
			return 1;
		}

	/* No SA_RESTART: a signal ends the wait under way with EINTR, which sees the flag. */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	if (snapbench_setup_dir(&b, dir) < 0)
		return 1;
	err = snapbench_run_all(&b);
	snapbench_cleanup(&b);
	if (snapvm_signal) {
		snapvm_msg("stopped by signal %d", (int)snapvm_signal);
		return 1;
	}
	if (err < 0)
		return 1;

	for (int s = 0; s < SNAPBENCH_NSERIES; s++)
		med[s] = bench_report(snapbench_labels[s], b.ms[s], b.runs);
	printf("snapshot restore_ms=%.2f fork1_ms=%.2f fork16_ms=%.2f parent_pause_ms=%.2f "
	       "snapshot_ms=%.2f cold_start_ms=%.2f\n",
	       med[SNAPBENCH_RESTORE], med[SNAPBENCH_FORK1], med[SNAPBENCH_FORK16],
	       med[SNAPBENCH_FORK1_PAUSE], med[SNAPBENCH_SNAPSHOT], med[SNAPBENCH_COLD]);
	printf("density forks=%d own_mib_total=%.2f own_mib_per_fork=%.2f "
	       "memavailable_drop_mib=%.2f\n",
	       SNAPBENCH_FORKS, b.density.own_mib_total, b.density.own_mib_total / SNAPBENCH_FORKS,
	       b.density.memavailable_drop_mib);
	for (int s = 0; s < SNAPBENCH_NSERIES; s++)
		free(b.ms[s]);
	return 0;
usage:
	snapbench_usage(stderr);
	return 2;
}
