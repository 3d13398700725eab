/* SPDX-License-Identifier: Apache-2.0 */
/*
 * diskio: the disk benchmark's workload, the same code on the host and in the guest.
 *
 *   diskio [--size MiB] [--rand-ops N] [--threads N] [--direct] PATH
 *
 * On PATH (a file or a block device): sequential 1 MiB writes over --size MiB then
 * fdatasync, sequential 1 MiB reads, then N random 4 KiB reads spread over --threads threads
 * (a queue depth of --threads), from a fixed seed. It prints one line:
 *   diskio seq_write_mib_s=<..> seq_read_mib_s=<..> rand4k_read_iops=<..>
 * --direct opens PATH with O_DIRECT (the guest's side: no guest page cache between the
 * workload and virtio-blk).
 *
 * Run as PID 1 (the kernel's rdinit=/init) it is a whole benchmark guest: it mounts devtmpfs
 * and proc, takes its arguments from the kernel command line's `diskio.args=a,b,c` (commas for
 * spaces: words after "--" would do, but QEMU appends its devices after them), runs, prints,
 * and resets the VM, which makes sandbox-vmm exit with status 0.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MIB	    (1u << 20)
#define BLOCK_4K    4096u
#define THREADS_MAX 64u

struct rand_worker {
	pthread_t thread;
	int fd;
	uint64_t blocks; /* 4 KiB blocks in the range */
	uint64_t ops;
	uint64_t seed;
	int err;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *alloc_aligned(size_t len)
{
	void *p = NULL;

	if (posix_memalign(&p, BLOCK_4K, len))
		return NULL;
	return p;
}

static int seq_pass(int fd, uint8_t *buf, uint64_t size_mib, int write)
{
	for (uint64_t i = 0; i < size_mib; i++) {
		ssize_t n = write ? pwrite(fd, buf, MIB, (off_t)(i * MIB))
				  : pread(fd, buf, MIB, (off_t)(i * MIB));

		if (n != (ssize_t)MIB) {
			fprintf(stderr, "diskio: %s at %llu MiB: %s\n", write ? "write" : "read",
				(unsigned long long)i, n < 0 ? strerror(errno) : "short");
			return -1;
		}
	}
	return 0;
}

static void *rand_run(void *arg)
{
	struct rand_worker *w = arg;
	uint8_t *buf = alloc_aligned(BLOCK_4K);
	uint64_t s = w->seed;

	if (!buf) {
		w->err = ENOMEM;
		return NULL;
	}
	for (uint64_t i = 0; i < w->ops; i++) {
		/* xorshift64: the same offsets on the host and in the guest. */
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		if (pread(w->fd, buf, BLOCK_4K, (off_t)((s % w->blocks) * BLOCK_4K)) != BLOCK_4K) {
			w->err = errno ? errno : EIO;
			break;
		}
	}
	free(buf);
	return NULL;
}

/* As PID 1: /dev for the disk's node, the console for our output, /proc for the command
 * line; argv from its diskio.args= word. */
static void pid1_setup(int *argc, char ***argv)
{
	static char cmdline[4096], *words[32];
	char *p;
	ssize_t n;
	int fd, k = 0;

	mkdir("/dev", 0755);
	mkdir("/proc", 0555);
	if (mount("devtmpfs", "/dev", "devtmpfs", 0, NULL) < 0 && errno != EBUSY)
		fprintf(stderr, "diskio: mounting devtmpfs: %s\n", strerror(errno));
	if (mount("proc", "/proc", "proc", 0, NULL) < 0 && errno != EBUSY)
		fprintf(stderr, "diskio: mounting proc: %s\n", strerror(errno));
	fd = open("/dev/console", O_RDWR);
	if (fd >= 0) {
		dup2(fd, 1);
		dup2(fd, 2);
		if (fd > 2)
			close(fd);
	}
	words[k++] = "diskio";
	fd = open("/proc/cmdline", O_RDONLY);
	n = fd >= 0 ? read(fd, cmdline, sizeof(cmdline) - 1) : -1;
	if (fd >= 0)
		close(fd);
	cmdline[n > 0 ? n : 0] = '\0';
	p = strstr(cmdline, "diskio.args=");
	if (p) {
		p += strlen("diskio.args=");
		p[strcspn(p, " \n")] = '\0';
		for (char *w = strtok(p, ","); w && k < 31; w = strtok(NULL, ","))
			words[k++] = w;
	}
	words[k] = NULL;
	*argc = k;
	*argv = words;
}

static int usage(void)
{
	fprintf(stderr,
		"usage: diskio [--size MiB] [--rand-ops N] [--threads N] [--direct] PATH\n");
	return 2;
}

static int run(int argc, char **argv)
{
	uint64_t size_mib = 64, rand_ops = 4000, threads = 4;
	struct rand_worker w[THREADS_MAX];
	double t0, t_write, t_read, t_rand;
	const char *path = NULL;
	int direct = 0, fd, i;
	uint8_t *buf;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--size") && i + 1 < argc)
			size_mib = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--rand-ops") && i + 1 < argc)
			rand_ops = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
			threads = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--direct"))
			direct = 1;
		else if (argv[i][0] != '-' && !path)
			path = argv[i];
		else
			return usage();
	}
	if (!path || size_mib < 1 || size_mib > (1u << 20) || rand_ops < 1 || threads < 1 ||
	    threads > THREADS_MAX)
		return usage();
	fd = open(path, O_RDWR | O_CREAT | (direct ? O_DIRECT : 0), 0600);
	buf = alloc_aligned(MIB);
	if (fd < 0 || !buf) {
		fprintf(stderr, "diskio: %s: %s\n", path, strerror(errno));
		return 1;
	}
	for (uint64_t k = 0; k < MIB; k++)
		buf[k] = (uint8_t)(k * 131 + 7);

	t0 = now_s();
	if (seq_pass(fd, buf, size_mib, 1) < 0)
		return 1;
	if (fdatasync(fd) < 0) {
		fprintf(stderr, "diskio: fdatasync: %s\n", strerror(errno));
		return 1;
	}
	t_write = now_s() - t0;
	t0 = now_s();
	if (seq_pass(fd, buf, size_mib, 0) < 0)
		return 1;
	t_read = now_s() - t0;
	t0 = now_s();
	for (i = 0; i < (int)threads; i++) {
		w[i] = (struct rand_worker){.fd = fd,
					    .blocks = size_mib * (MIB / BLOCK_4K),
					    .ops = rand_ops / threads +
						   (i == 0 ? rand_ops % threads : 0),
					    .seed = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1)};
		if (pthread_create(&w[i].thread, NULL, rand_run, &w[i])) {
			fprintf(stderr, "diskio: cannot start a thread\n");
			return 1;
		}
	}
	for (i = 0; i < (int)threads; i++) {
		pthread_join(w[i].thread, NULL);
		if (w[i].err) {
			fprintf(stderr, "diskio: random read: %s\n", strerror(w[i].err));
			return 1;
		}
	}
	t_rand = now_s() - t0;
	close(fd);
	free(buf);
	printf("diskio seq_write_mib_s=%.1f seq_read_mib_s=%.1f rand4k_read_iops=%.0f\n",
	       (double)size_mib / t_write, (double)size_mib / t_read, (double)rand_ops / t_rand);
	fflush(stdout);
	return 0;
}

int main(int argc, char **argv)
{
	int status;

	if (getpid() != 1)
		return run(argc, argv);
	pid1_setup(&argc, &argv);
	status = run(argc, argv);
	if (status)
		printf("diskio: failed with status %d\n", status);
	fflush(stdout);
	sync();
	reboot(RB_AUTOBOOT);
	for (;;)
		pause();
}
