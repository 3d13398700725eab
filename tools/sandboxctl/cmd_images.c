/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sandboxctl images [ls]: the installed images; sandboxctl images import: install one.
 * An image is $SANDBOX_HOME/images/<name>/ with `kernel`, `initrd`, `rootfs` (a raw ext4 base,
 * read-only: sandboxes stack an overlay on it) and `hash` (sha256 of the kernel, the initrd
 * and the rootfs's size and first and last MiB, the samples disk layers identify a raw base
 * by). An import builds the directory beside its place and renames it in, so a reader never
 * sees half an image; importing the same files again changes nothing. images import --oci
 * builds the rootfs (and exec.conf) from an OCI layout or a docker save archive (oci.h) in
 * that same directory beside the image's place, the staging tree inside it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "oci.h"
#include "sandboxctl.h"

#define SAMPLE_LEN (1u << 20)

/* Hash `len` bytes of `fd` from `off` into `ctx`. */
static int hash_range(EVP_MD_CTX *ctx, int fd, off_t off, uint64_t len)
{
	static uint8_t buf[1 << 16];

	while (len) {
		ssize_t n = pread(fd, buf, len < sizeof(buf) ? len : sizeof(buf), off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		EVP_DigestUpdate(ctx, buf, (size_t)n);
		off += n;
		len -= (uint64_t)n;
	}
	return 0;
}

/* The image's hash, as 64 hex digits. */
static int image_hash(const char *kernel, const char *initrd, const char *rootfs, char out[65])
{
	const char *files[] = {kernel, initrd, rootfs};
	uint8_t md[32];
	unsigned mdlen = 0;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	int err = 0;

	if (!ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) {
		EVP_MD_CTX_free(ctx);
		return -ENOMEM;
	}
	for (int i = 0; i < 3 && !err; i++) {
		struct stat st;
		uint64_t size;
		int fd = open(files[i], O_RDONLY | O_CLOEXEC);

		if (fd < 0 || fstat(fd, &st) < 0) {
			err = -errno;
			if (fd >= 0)
				close(fd);
			break;
		}
		size = (uint64_t)st.st_size;
		EVP_DigestUpdate(ctx, &size, sizeof(size));
		if (i < 2 || size <= 2 * SAMPLE_LEN) {
			err = hash_range(ctx, fd, 0, size);
		} else {
			err = hash_range(ctx, fd, 0, SAMPLE_LEN);
			if (!err)
				err = hash_range(ctx, fd, (off_t)(size - SAMPLE_LEN), SAMPLE_LEN);
		}
		close(fd);
	}
	if (!err && !EVP_DigestFinal_ex(ctx, md, &mdlen))
		err = -EIO;
	EVP_MD_CTX_free(ctx);
	for (unsigned i = 0; !err && i < 32; i++)
		sprintf(out + 2 * i, "%02x", md[i]);
	return err;
}

/* pread/pwrite up to `len` bytes, for file systems copy_file_range cannot cross. */
static ssize_t copy_plain(int in, off_t *off_in, int out, off_t *off_out, off_t len)
{
	static uint8_t buf[1 << 16];
	ssize_t n = pread(in, buf, len < (off_t)sizeof(buf) ? (size_t)len : sizeof(buf), *off_in);

	if (n <= 0)
		return n;
	if (pwrite(out, buf, (size_t)n, *off_out) != n)
		return -1;
	*off_in += n;
	*off_out += n;
	return n;
}

/* Copy `src` to the new file `dst`, keeping holes. */
static int copy_sparse(const char *src, const char *dst, mode_t mode)
{
	struct stat st;
	int in, out = -1, err = 0;
	off_t data = 0, hole;

	in = open(src, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return -errno;
	if (fstat(in, &st) < 0 || !S_ISREG(st.st_mode)) {
		err = -EINVAL;
		goto out;
	}
	out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
	if (out < 0 || ftruncate(out, st.st_size) < 0) {
		err = -errno;
		goto out;
	}
	while (data < st.st_size) {
		data = lseek(in, data, SEEK_DATA);
		if (data < 0) {
			if (errno == ENXIO)
				break; /* only a hole is left */
			err = -errno;
			goto out;
		}
		hole = lseek(in, data, SEEK_HOLE);
		if (hole < 0) {
			err = -errno;
			goto out;
		}
		for (off_t off_in = data, off_out = data; off_in < hole;) {
			ssize_t n = copy_file_range(in, &off_in, out, &off_out,
						    (size_t)(hole - off_in), 0);

			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS ||
				      errno == EOPNOTSUPP))
				n = copy_plain(in, &off_in, out, &off_out, hole - off_in);
			if (n <= 0) {
				err = n < 0 ? -errno : -EIO;
				goto out;
			}
		}
		data = hole;
	}
	if (fsync(out) < 0)
		err = -errno;
out:
	if (out >= 0)
		close(out);
	close(in);
	return err;
}

/* Remove what imports of `name` killed before they could clean up left: .NAME.PID whose
 * process is gone. */
static void remove_stale_tmp(const char *name)
{
	char dir[4096], prefix[NAME_MAX_LEN + 3];
	struct dirent *e;
	DIR *d;

	if (path_fmt(dir, sizeof(dir), "%s/images", state_home()) < 0 || !(d = opendir(dir)))
		return;
	snprintf(prefix, sizeof(prefix), ".%s.", name);
	while ((e = readdir(d))) {
		uint64_t pid;

		if (strncmp(e->d_name, prefix, strlen(prefix)) != 0 ||
		    !parse_u64(e->d_name + strlen(prefix), 1, 0x7fffffff, &pid))
			continue;
		if (kill((pid_t)pid, 0) < 0 && errno == ESRCH)
			oci_rmtree(dirfd(d), e->d_name);
	}
	closedir(d);
}

static void import_signal(int sig)
{
	oci_interrupted = sig;
}

/* Copy the kernel and initrd into `tmp` and link or copy `rootfs` there (have_rootfs: tmp has
 * its rootfs already, and its hash is computed here), write the hash, swap tmp in as `dst`. */
static int image_install(const char *tmp, const char *dst, const char *kernel, const char *initrd,
			 bool have_rootfs, const char *rootfs, char hash[65])
{
	char p[4200];
	int err;

	if ((err = path_fmt(p, sizeof(p), "%s/kernel", tmp)) < 0 ||
	    (err = copy_sparse(kernel, p, 0444)) < 0)
		return err;
	if ((err = path_fmt(p, sizeof(p), "%s/initrd", tmp)) < 0 ||
	    (err = copy_sparse(initrd, p, 0444)) < 0)
		return err;
	if ((err = path_fmt(p, sizeof(p), "%s/rootfs", tmp)) < 0)
		return err;
	if (!have_rootfs && link(rootfs, p) < 0 && (err = copy_sparse(rootfs, p, 0444)) < 0)
		return err;
	if (have_rootfs) {
		char k[4200], i[4200];

		if ((err = path_fmt(k, sizeof(k), "%s/kernel", tmp)) < 0 ||
		    (err = path_fmt(i, sizeof(i), "%s/initrd", tmp)) < 0 ||
		    (err = image_hash(k, i, p, hash)) < 0)
			return err;
	}
	if ((err = path_fmt(p, sizeof(p), "%s/hash", tmp)) < 0)
		return err;
	hash[64] = '\n';
	err = write_file_atomic(p, hash, 65, 0444);
	hash[64] = '\0';
	if (err < 0)
		return err;
	/* Swap the new directory in; the old one (if any) ends up at tmp and is removed. */
	if (renameat2(AT_FDCWD, tmp, AT_FDCWD, dst, RENAME_EXCHANGE) < 0) {
		if (errno != ENOENT || rename(tmp, dst) < 0)
			return -errno;
	}
	return 0;
}

/* images import NAME --oci ARCHIVE: the rootfs made from the archive in the new image's
 * directory (beside its place), then installed as any import. */
static int images_import_oci(const char *name, const char *archive, const char *kernel,
			     const char *initrd)
{
	struct sigaction sa = {.sa_handler = import_signal}, old_sa[3];
	static const int sigs[3] = {SIGINT, SIGTERM, SIGHUP};
	struct oci_msg *m = calloc(1, sizeof(*m));
	char tmp[4096], dst[4096], hash[65];
	uint64_t t0 = now_ms();
	struct stat st;
	int dirfd = -1, err, status = EXIT_ERR;

	if (!m)
		return EXIT_ERR;
	if (stat(kernel, &st) < 0 || !S_ISREG(st.st_mode) || stat(initrd, &st) < 0 ||
	    !S_ISREG(st.st_mode)) {
		errmsg("images import %s: cannot read the kernel %s or the initrd %s", name, kernel,
		       initrd);
		free(m);
		return EXIT_ERR;
	}
	if ((err = state_init()) < 0) {
		errmsg("cannot create %s: %s", state_home(), strerror(-err));
		free(m);
		return EXIT_ERR;
	}
	if ((err = path_fmt(dst, sizeof(dst), "%s/images/%s", state_home(), name)) < 0 ||
	    (err = path_fmt(tmp, sizeof(tmp), "%s/images/.%s.%d", state_home(), name,
			    (int)getpid())) < 0) {
		errmsg("images import %s: %s", name, strerror(-err));
		free(m);
		return EXIT_ERR;
	}
	remove_stale_tmp(name);
	oci_rmtree(AT_FDCWD, tmp);
	sigemptyset(&sa.sa_mask);
	for (int i = 0; i < 3; i++) {
		sigaction(sigs[i], &sa, &old_sa[i]);
		if (old_sa[i].sa_handler == SIG_IGN) /* nohup, a background job: stays ignored */
			sigaction(sigs[i], &old_sa[i], NULL);
	}
	/* 0700 while the staging tree is in it: the image's setuid-root files must not be
	 * reachable by this host's users (to run, or to hard-link away) even for a moment */
	if (mkdir(tmp, 0700) < 0 ||
	    (dirfd = open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		errmsg("images import %s: %s: %s", name, tmp, strerror(errno));
		goto out;
	}
	if (oci_build(archive, name, dirfd, tmp, m) < 0) {
		errmsg("%s: %s", archive, m->text[0] ? m->text : "failed");
		goto out;
	}
	if (fchmod(dirfd, 0755) < 0) {
		errmsg("images import %s: %s: %s", name, tmp, strerror(errno));
		goto out;
	}
	if ((err = image_install(tmp, dst, kernel, initrd, true, NULL, hash)) < 0) {
		errmsg("images import %s: %s", name, strerror(-err));
		goto out;
	}
	if (stat(dst, &st) == 0) {
		char p[4200];

		if (path_fmt(p, sizeof(p), "%s/rootfs", dst) == 0 && stat(p, &st) == 0)
			printf("image %s: installed (%.12s) from %s in %.1f s: rootfs %lluM, %lluM "
			       "used\n",
			       name, hash, archive, (double)(now_ms() - t0) / 1e3,
			       (unsigned long long)st.st_size >> 20,
			       (unsigned long long)st.st_blocks * 512 >> 20);
	}
	status = EXIT_OK;
out:
	if (dirfd >= 0)
		close(dirfd);
	oci_rmtree(AT_FDCWD, tmp); /* the old image after a swap, else what we made */
	for (int i = 0; i < 3; i++)
		sigaction(sigs[i], &old_sa[i], NULL);
	if (status != EXIT_OK && oci_interrupted)
		status = 128 + oci_interrupted;
	free(m);
	return status;
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
		const char *from = "debian";

		if (image_path(from, "kernel", def_kernel, sizeof(def_kernel)) < 0 ||
		    image_path(from, "initrd", def_initrd, sizeof(def_initrd)) < 0) {
			from = "busybox";
			if (image_path(from, "kernel", def_kernel, sizeof(def_kernel)) < 0 ||
			    image_path(from, "initrd", def_initrd, sizeof(def_initrd)) < 0) {
				errmsg("images import %s: no debian or busybox image to take the "
				       "kernel "
				       "and initrd from: give --kernel and --initrd",
				       name);
				return EXIT_USAGE;
			}
		}
		kernel = def_kernel;
		initrd = def_initrd;
	}
	if (oci)
		return images_import_oci(name, oci, kernel, initrd);
	if ((err = image_hash(kernel, initrd, rootfs, hash)) < 0) {
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
			printf("image %s: up to date (%.12s)\n", name, hash);
			return EXIT_OK;
		}
	}
	remove_flat_dir(tmp);
	if (mkdir(tmp, 0755) < 0) {
		err = -errno;
		goto fail;
	}
	if ((err = image_install(tmp, dst, kernel, initrd, false, rootfs, hash)) < 0)
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
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
		return ctl_help("images");
	}
	errmsg("images: unknown subcommand '%s'", argv[1]);
	return ctl_usage("images");
}
