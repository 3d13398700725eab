/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sandboxctl images [ls]: the installed images; sandboxctl images import: install one.
 * An image is $SANDBOX_HOME/images/<name>/ with `kernel`, `initrd`, `rootfs` (a raw ext4 base,
 * read-only: sandboxes stack an overlay on it) and `hash` (sha256 of the kernel, the initrd
 * and the rootfs's size and first and last MiB, the samples disk layers identify a raw base
 * by). An import builds the directory beside its place and renames it in, so a reader never
 * sees half an image; importing the same files again changes nothing. images import --oci
 * builds the rootfs (and exec.conf) from an OCI layout or a docker save archive (oci.h) in
 * that same directory beside the image's place, the staging tree inside it. images pull
 * runs sandbox-pull (oci.h's oci_pull as a program: sandboxctl is static, libcurl cannot be)
 * into a layout in that same directory, then imports it as --oci does.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "disk.h"
#include "oci.h"
#include "sandboxctl.h"

static void import_signal(int sig)
{
	oci_interrupted = sig;
}

/* images pull: what sandbox-pull is given (the password it reads from our stdin itself). */
struct pull_args {
	const char *ref, *user, *ca_file, *timeout;
	bool insecure;
};

/* Run sandbox-pull into the new directory `layout`: 0, or -1 once it said why (its stderr is
 * ours). ^C: it gets the signal too (the same process group); we end it if it lingers. */
static int run_pull(const struct pull_args *pa, const char *layout)
{
	char prog[4096];
	const char *argv[16];
	unsigned n = 0;
	int status;
	pid_t pid;

	if (program_find("SANDBOX_PULL", "tools/oci", "sandbox-pull", prog, sizeof(prog)) < 0)
		return -1;
	argv[n++] = prog;
	argv[n++] = pa->ref;
	argv[n++] = layout;
	if (pa->user) {
		argv[n++] = "--user";
		argv[n++] = pa->user;
		argv[n++] = "--password-stdin";
	}
	if (pa->insecure)
		argv[n++] = "--insecure";
	if (pa->ca_file) {
		argv[n++] = "--ca-file";
		argv[n++] = pa->ca_file;
	}
	if (pa->timeout) {
		argv[n++] = "--timeout";
		argv[n++] = pa->timeout;
	}
	argv[n] = NULL;
	fflush(NULL);
	if ((pid = fork()) < 0) {
		errmsg("images pull: fork: %s", strerror(errno));
		return -1;
	}
	if (pid == 0) {
		execv(prog, (char *const *)argv);
		fprintf(stderr, "sandboxctl: images pull: cannot run %s: %s\n", prog,
			strerror(errno));
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR)
			return -1;
		if (oci_interrupted)
			kill(pid, SIGTERM);
	}
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* images pull: sandbox-pull into the new image's directory, as oci_import's prepare. */
static int pull_prepare(void *arg, int dirfd, const char *tmp, const char **archive)
{
	static char layout[4200];

	if (path_fmt(layout, sizeof(layout), "%s/layout", tmp) < 0 || run_pull(arg, layout) < 0)
		return -EIO;
	*archive = layout;
	return 0;
}

/* images import NAME --oci ARCHIVE: the rootfs made from the archive in the new image's
 * directory (beside its place), then installed as any import (oci_import). images pull NAME
 * REF (`pull` set): the archive is a layout pulled into that directory first, removed before
 * the swap. */
static int images_import_oci(const char *name, const char *archive, const char *kernel,
			     const char *initrd, const struct pull_args *pull)
{
	struct sigaction sa = {.sa_handler = import_signal}, old_sa[3];
	static const int sigs[3] = {SIGINT, SIGTERM, SIGHUP};
	struct oci_msg *m = calloc(1, sizeof(*m));
	char dst[4096], hash[65];
	uint64_t t0 = now_ms();
	struct stat st;
	int err, status = EXIT_ERR;

	if (!m)
		return EXIT_ERR;
	sigemptyset(&sa.sa_mask);
	for (int i = 0; i < 3; i++) {
		sigaction(sigs[i], &sa, &old_sa[i]);
		if (old_sa[i].sa_handler == SIG_IGN) /* nohup, a background job: stays ignored */
			sigaction(sigs[i], &old_sa[i], NULL);
	}
	err = oci_import(name, archive, kernel, initrd, pull ? pull_prepare : NULL, (void *)pull,
			 hash, m);
	if (err == -EIO && pull && !m->text[0]) {
		/* sandbox-pull said why on our stderr */
	} else if (err < 0) {
		errmsg("%s: %s", pull ? pull->ref : archive, m->text[0] ? m->text : strerror(-err));
	} else {
		char p[4200];

		if (path_fmt(dst, sizeof(dst), "%s/images/%s", state_home(), name) == 0 &&
		    path_fmt(p, sizeof(p), "%s/rootfs", dst) == 0 && stat(p, &st) == 0)
			printf("image %s: installed (%.12s) from %s in %.1f s: rootfs %lluM, %lluM "
			       "used\n",
			       name, hash, pull ? pull->ref : archive,
			       (double)(now_ms() - t0) / 1e3, (unsigned long long)st.st_size >> 20,
			       (unsigned long long)st.st_blocks * 512 >> 20);
		status = EXIT_OK;
	}
	for (int i = 0; i < 3; i++)
		sigaction(sigs[i], &old_sa[i], NULL);
	if (status != EXIT_OK && oci_interrupted)
		status = 128 + oci_interrupted;
	free(m);
	return status;
}

/* The debian image's kernel and initrd, else busybox's: -1 once it said there is neither. */
static int default_kernel(const char *verb, const char *name, char *kernel, char *initrd,
			  size_t len)
{
	static const char *const from[] = {"debian", "busybox"};

	for (int i = 0; i < 2; i++)
		if (image_path(from[i], "kernel", kernel, len) == 0 &&
		    image_path(from[i], "initrd", initrd, len) == 0)
			return 0;
	errmsg("images %s %s: no debian or busybox image to take the kernel and initrd from: "
	       "give --kernel and --initrd",
	       verb, name);
	return -1;
}

/* images pull NAME REF [--user U --password-stdin] [--insecure] [--ca-file F] [--timeout S]
 * [--kernel K --initrd I] */
static int images_pull(int argc, char **argv)
{
	static const struct option opts[] = {
		{"user", required_argument, NULL, 'u'},
		{"password-stdin", no_argument, NULL, 'p'},
		{"insecure", no_argument, NULL, 'k'},
		{"ca-file", required_argument, NULL, 'c'},
		{"timeout", required_argument, NULL, 't'},
		{"kernel", required_argument, NULL, 'K'},
		{"initrd", required_argument, NULL, 'i'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct pull_args pa = {0};
	const char *kernel = NULL, *initrd = NULL, *name;
	char def_kernel[4200], def_initrd[4200];
	bool pw_stdin = false;
	uint64_t v;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'u':
			pa.user = optarg;
			break;
		case 'p':
			pw_stdin = true;
			break;
		case 'k':
			pa.insecure = true;
			break;
		case 'c':
			pa.ca_file = optarg;
			break;
		case 't':
			if (!parse_u64(optarg, 1, 86400, &v)) {
				errmsg("images pull: --timeout takes 1 to 86400 seconds");
				return EXIT_USAGE;
			}
			pa.timeout = optarg;
			break;
		case 'K':
			kernel = optarg;
			break;
		case 'i':
			initrd = optarg;
			break;
		case 'h':
			return ctl_help("images");
		default:
			return ctl_usage("images");
		}
	}
	if (optind + 2 != argc || !pa.user != !pw_stdin || !kernel != !initrd) {
		errmsg("images pull: give NAME and REF; --user with --password-stdin; --kernel "
		       "with --initrd");
		return EXIT_USAGE;
	}
	name = argv[optind];
	pa.ref = argv[optind + 1];
	if (!valid_name(name)) {
		errmsg("images pull: '%s' is not a valid image name ([A-Za-z0-9][A-Za-z0-9._-]*)",
		       name);
		return EXIT_USAGE;
	}
	if (!kernel) {
		if (default_kernel("pull", name, def_kernel, def_initrd, sizeof(def_kernel)) < 0)
			return EXIT_USAGE;
		kernel = def_kernel;
		initrd = def_initrd;
	}
	return images_import_oci(name, NULL, kernel, initrd, &pa);
}

static int images_import(int argc, char **argv)
{
	static const struct option opts[] = {
		{"kernel", required_argument, NULL, 'k'}, {"initrd", required_argument, NULL, 'i'},
		{"rootfs", required_argument, NULL, 'r'}, {"oci", required_argument, NULL, 'o'},
		{"help", no_argument, NULL, 'h'},	  {NULL, 0, NULL, 0},
	};
	const char *kernel = NULL, *initrd = NULL, *rootfs = NULL, *oci = NULL, *name;
	char tmp[4096], dst[4096], p[4200], hash[65], *old = NULL;
	char def_kernel[4200], def_initrd[4200];
	int c, err;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'k':
			kernel = optarg;
			break;
		case 'i':
			initrd = optarg;
			break;
		case 'r':
			rootfs = optarg;
			break;
		case 'o':
			oci = optarg;
			break;
		case 'h':
			return ctl_help("images");
		default:
			return ctl_usage("images");
		}
	}
	if (oci && optind + 1 == argc && !rootfs && !kernel != !initrd) {
		errmsg("images import --oci: give both --kernel and --initrd, or neither");
		return EXIT_USAGE;
	}
	if (optind + 1 != argc || (!oci && (!kernel || !initrd || !rootfs)) || (oci && rootfs)) {
		errmsg("images import: give NAME and --kernel, --initrd and --rootfs, or --oci");
		return EXIT_USAGE;
	}
	name = argv[optind];
	if (!valid_name(name)) {
		errmsg("images import: '%s' is not a valid image name ([A-Za-z0-9][A-Za-z0-9._-]*)",
		       name);
		return EXIT_USAGE;
	}
	if (oci && !kernel) {
		if (default_kernel("import", name, def_kernel, def_initrd, sizeof(def_kernel)) < 0)
			return EXIT_USAGE;
		kernel = def_kernel;
		initrd = def_initrd;
	}
	if (oci)
		return images_import_oci(name, oci, kernel, initrd, NULL);
	if ((err = oci_image_hash(kernel, initrd, rootfs, hash)) < 0) {
		errmsg("images import %s: cannot read the kernel, initrd or rootfs: %s", name,
		       strerror(-err));
		return EXIT_ERR;
	}
	if ((err = state_init()) < 0) {
		errmsg("cannot create %s: %s", state_home(), strerror(-err));
		return EXIT_ERR;
	}
	if ((err = path_fmt(dst, sizeof(dst), "%s/images/%s", state_home(), name)) < 0 ||
	    (err = path_fmt(tmp, sizeof(tmp), "%s/images/.%s.%d", state_home(), name,
			    (int)getpid())) < 0)
		goto fail;
	if (path_fmt(p, sizeof(p), "%s/hash", dst) == 0 && read_file(p, 128, &old, NULL) == 0) {
		bool same = strncmp(old, hash, 64) == 0;

		free(old);
		if (same) {
			struct disk_error derr;
			struct stat st;

			/* one installed before identity files: its own now (disk_raw_id.c) */
			if (path_fmt(p, sizeof(p), "%s/rootfs.identity", dst) == 0 &&
			    stat(p, &st) < 0 && path_fmt(p, sizeof(p), "%s/rootfs", dst) == 0 &&
			    disk_raw_identity_write(p, &derr) < 0)
				errmsg("warning: %s", derr.msg);
			printf("image %s: up to date (%.12s)\n", name, hash);
			return EXIT_OK;
		}
	}
	remove_flat_dir(tmp);
	if (mkdir(tmp, 0755) < 0) {
		err = -errno;
		goto fail;
	}
	if ((err = oci_image_install(tmp, dst, kernel, initrd, false, rootfs, hash)) < 0)
		goto fail_tmp;
	remove_flat_dir(tmp);
	printf("image %s: installed (%.12s)\n", name, hash);
	return EXIT_OK;
fail_tmp:
	remove_flat_dir(tmp);
fail:
	errmsg("images import %s: %s", name, strerror(-err));
	return EXIT_ERR;
}

static int images_list(void)
{
	char dir[4096], p[4200], *hash;
	struct dirent *e;
	struct stat st;
	DIR *d;

	if (path_fmt(dir, sizeof(dir), "%s/images", state_home()) < 0)
		return EXIT_ERR;
	printf("%-20s %-12s %10s %10s\n", "NAME", "HASH", "DISK", "USED");
	d = opendir(dir);
	if (!d)
		return errno == ENOENT ? EXIT_OK : EXIT_ERR;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' || !valid_name(e->d_name))
			continue;
		if (image_path(e->d_name, "rootfs", p, sizeof(p)) < 0 || stat(p, &st) < 0)
			continue;
		if (image_path(e->d_name, "hash", p, sizeof(p)) < 0 ||
		    read_file(p, 128, &hash, NULL) < 0)
			continue;
		hash[strcspn(hash, "\n")] = '\0';
		printable(hash, strlen(hash), false); /* the file's text */
		printf("%-20s %-12.12s %9lluM %9lluM\n", e->d_name, hash,
		       (unsigned long long)st.st_size >> 20,
		       (unsigned long long)st.st_blocks * 512 >> 20);
		free(hash);
	}
	closedir(d);
	return EXIT_OK;
}

int cmd_images(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "ls") == 0)
		return argc <= 2 ? images_list() : ctl_usage("images");
	if (strcmp(argv[1], "import") == 0)
		return images_import(argc - 1, argv + 1);
	if (strcmp(argv[1], "pull") == 0)
		return images_pull(argc - 1, argv + 1);
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
		return ctl_help("images");
	}
	errmsg("images: unknown subcommand '%s'", argv[1]);
	return ctl_usage("images");
}
