/* SPDX-License-Identifier: Apache-2.0 */
/* Parse the sandbox.* options out of the guest kernel command line. */
#include <errno.h>
#include <string.h>

#include "cmdline.h"
#include "log.h"

#define CMDLINE_PREFIX	   "sandbox."
#define CMDLINE_PREFIX_LEN (sizeof(CMDLINE_PREFIX) - 1)
/* How much of a bad word a warning quotes: enough to recognise it, not the whole line. */
#define CMDLINE_QUOTE_MAX  80

/*
 * Parse the value of one option into opts. val is not NUL-terminated; has_val is false for a
 * bare word with no '='. Returns 0 or -EINVAL.
 */
typedef int (*cmdline_parse_fn)(struct cmdline_options *opts, const char *val, size_t val_len,
				bool has_val);

/* One option: its name after "sandbox." and the function that parses its value. */
struct cmdline_option {
	const char *name;
	cmdline_parse_fn parse;
};

/* Parse a boolean value: "1" or a bare word is true, "0" is false. Returns 0 or -EINVAL. */
static int cmdline_parse_bool(const char *val, size_t val_len, bool has_val, bool *out)
{
	if (!has_val) {
		*out = true;
		return 0;
	}
	if (val_len == 1 && (val[0] == '0' || val[0] == '1')) {
		*out = val[0] == '1';
		return 0;
	}
	return -EINVAL;
}

/* sandbox.panic=0|1 */
static int cmdline_parse_panic(struct cmdline_options *opts, const char *val, size_t val_len,
			       bool has_val)
{
	return cmdline_parse_bool(val, val_len, has_val, &opts->panic);
}

/* sandbox.reboot=0|1 */
static int cmdline_parse_reboot(struct cmdline_options *opts, const char *val, size_t val_len,
				bool has_val)
{
	return cmdline_parse_bool(val, val_len, has_val, &opts->reboot);
}

/*
 * Copy a string value of val_len bytes into out (out_size bytes, NUL-terminated) if it is not
 * empty, fits, and every byte passes ok. Returns 0 or -EINVAL (out is then untouched).
 */
static int cmdline_parse_string(const char *val, size_t val_len, bool has_val, char *out,
				size_t out_size, bool (*ok)(char c))
{
	size_t i;

	if (!has_val || val_len == 0 || val_len >= out_size)
		return -EINVAL;
	for (i = 0; i < val_len; i++) {
		if (!ok(val[i]))
			return -EINVAL;
	}
	memcpy(out, val, val_len);
	out[val_len] = '\0';
	return 0;
}

/* True for the bytes allowed in a device path: printable ASCII but space, quote and backslash. */
static bool cmdline_is_path_char(char c)
{
	return c > ' ' && c < 0x7f && c != '"' && c != '\\';
}

/* True for the bytes allowed in a filesystem type: [a-z0-9_]. */
static bool cmdline_is_fstype_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

/* sandbox.root=/dev/NAME: a device path under /dev/, not /dev/ itself, no "..". */
static int cmdline_parse_root(struct cmdline_options *opts, const char *val, size_t val_len,
			      bool has_val)
{
	static const char dev[] = "/dev/";

	if (!has_val || val_len <= sizeof(dev) - 1 || memcmp(val, dev, sizeof(dev) - 1) != 0)
		return -EINVAL;
	if (memmem(val, val_len, "..", 2) != NULL)
		return -EINVAL;
	return cmdline_parse_string(val, val_len, has_val, opts->root, sizeof(opts->root),
				    cmdline_is_path_char);
}

/* sandbox.rootfstype=FS */
static int cmdline_parse_rootfstype(struct cmdline_options *opts, const char *val, size_t val_len,
				    bool has_val)
{
	return cmdline_parse_string(val, val_len, has_val, opts->rootfstype,
				    sizeof(opts->rootfstype), cmdline_is_fstype_char);
}

/* sandbox.rw=0|1 */
static int cmdline_parse_rw(struct cmdline_options *opts, const char *val, size_t val_len,
			    bool has_val)
{
	return cmdline_parse_bool(val, val_len, has_val, &opts->root_rw);
}

/*
 * Parse a dotted-quad IPv4 address (four decimal numbers 0-255, no leading zeros but "0",
 * nothing else) at the start of s, at most len bytes; *used says how many bytes it took.
 * Returns 0 or -EINVAL.
 */
static int cmdline_parse_ipv4(const char *s, size_t len, uint32_t *out, size_t *used)
{
	uint32_t addr = 0;
	size_t i = 0;

	for (int part = 0; part < 4; part++) {
		unsigned int v = 0;
		size_t start;

		if (part) {
			if (i >= len || s[i] != '.')
				return -EINVAL;
			i++;
		}
		start = i;
		while (i < len && s[i] >= '0' && s[i] <= '9' && i - start < 3)
			v = v * 10 + (unsigned int)(s[i++] - '0');
		if (i == start || v > 255 || (s[start] == '0' && i - start > 1))
			return -EINVAL;
		addr = addr << 8 | v;
	}
	*out = addr;
	*used = i;
	return 0;
}

/* sandbox.net=ADDR/PREFIX,GATEWAY: prefix 1-30, the gateway on the subnet and not ADDR. */
static int cmdline_parse_net(struct cmdline_options *opts, const char *val, size_t val_len,
			     bool has_val)
{
	uint32_t addr, gw, mask;
	unsigned int prefix = 0;
	size_t i, n;

	if (!has_val || cmdline_parse_ipv4(val, val_len, &addr, &n) < 0)
		return -EINVAL;
	i = n;
	if (i >= val_len || val[i++] != '/' || i >= val_len || val[i] < '1' || val[i] > '9')
		return -EINVAL;
	while (i < val_len && val[i] >= '0' && val[i] <= '9' && prefix <= 32)
		prefix = prefix * 10 + (unsigned int)(val[i++] - '0');
	if (prefix < 1 || prefix > 30 || i >= val_len || val[i++] != ',')
		return -EINVAL;
	if (cmdline_parse_ipv4(val + i, val_len - i, &gw, &n) < 0 || i + n != val_len)
		return -EINVAL;
	mask = ~0u << (32 - prefix);
	/* Not the subnet's network or broadcast address either. */
	if (gw == addr || (gw & mask) != (addr & mask) || (addr & ~mask) == 0 ||
	    (addr & ~mask) == ~mask || (gw & ~mask) == 0 || (gw & ~mask) == ~mask)
		return -EINVAL;
	opts->net = true;
	opts->net_addr = addr;
	opts->net_prefix = prefix;
	opts->net_gateway = gw;
	return 0;
}

/* Every option we understand. Add new sandbox.* options here and in cmdline.h. */
static const struct cmdline_option cmdline_options_table[] = {
	{"panic", cmdline_parse_panic},		  /* sandbox.panic=0|1 */
	{"reboot", cmdline_parse_reboot},	  /* sandbox.reboot=0|1 */
	{"root", cmdline_parse_root},		  /* sandbox.root=/dev/NAME */
	{"rootfstype", cmdline_parse_rootfstype}, /* sandbox.rootfstype=FS */
	{"rw", cmdline_parse_rw},		  /* sandbox.rw=0|1 */
	{"net", cmdline_parse_net},		  /* sandbox.net=ADDR/PREFIX,GATEWAY */
};

/* True for the characters that separate command-line words. */
static bool cmdline_is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* The length to quote of a word in a warning, capped at CMDLINE_QUOTE_MAX. */
static int cmdline_quote_len(size_t len)
{
	return len < CMDLINE_QUOTE_MAX ? (int)len : CMDLINE_QUOTE_MAX;
}

/*
 * Handle one word of word_len bytes. Words that do not start with "sandbox." belong to the
 * kernel and are skipped; a sandbox.* word is looked up in the table and its value parsed, a
 * word not understood is logged and counted in opts->ignored_count.
 */
static void cmdline_parse_word(const char *word, size_t word_len, struct cmdline_options *opts)
{
	const char *name, *eq, *val = NULL;
	size_t rest_len, name_len, val_len = 0;
	size_t i;

	if (word_len < CMDLINE_PREFIX_LEN || memcmp(word, CMDLINE_PREFIX, CMDLINE_PREFIX_LEN) != 0)
		return;
	name = word + CMDLINE_PREFIX_LEN;
	rest_len = word_len - CMDLINE_PREFIX_LEN;
	eq = memchr(name, '=', rest_len);
	name_len = eq ? (size_t)(eq - name) : rest_len;
	if (eq) {
		val = eq + 1;
		val_len = rest_len - name_len - 1;
		/* the kernel's parser allows name="value"; take the value without its quotes */
		if (val_len >= 2 && val[0] == '"' && val[val_len - 1] == '"') {
			val++;
			val_len -= 2;
		}
	}

	for (i = 0; i < sizeof(cmdline_options_table) / sizeof(cmdline_options_table[0]); i++) {
		const struct cmdline_option *opt = &cmdline_options_table[i];

		if (strlen(opt->name) != name_len || memcmp(opt->name, name, name_len) != 0)
			continue;
		if (opt->parse(opts, val, val_len, eq != NULL) < 0) {
			log_warn("ignoring bad value in kernel option '%.*s'",
				 cmdline_quote_len(word_len), word);
			opts->ignored_count++;
		}
		return;
	}
	log_warn("ignoring unknown kernel option '%.*s'", cmdline_quote_len(word_len), word);
	opts->ignored_count++;
}

/* Fill opts with the defaults. */
void cmdline_init_options(struct cmdline_options *opts)
{
	opts->panic = false;
	opts->reboot = true;
	opts->root_rw = true;
	opts->root[0] = '\0';
	memcpy(opts->rootfstype, CMDLINE_DEFAULT_FSTYPE, sizeof(CMDLINE_DEFAULT_FSTYPE));
	opts->ignored_count = 0;
	opts->net = false;
	opts->net_addr = opts->net_gateway = 0;
	opts->net_prefix = 0;
}

/*
 * Split buf into words at unquoted whitespace and hand each to cmdline_parse_word. Every index
 * stays below len, itself bounded by CMDLINE_MAX_LEN.
 */
int cmdline_parse(const char *buf, size_t len, struct cmdline_options *opts)
{
	size_t i = 0;

	if (len > CMDLINE_MAX_LEN)
		return -E2BIG;
	len = strnlen(buf, len);

	while (i < len) {
		bool in_quote = false;
		size_t start;

		while (i < len && cmdline_is_space(buf[i]))
			i++;
		start = i;
		while (i < len && (in_quote || !cmdline_is_space(buf[i]))) {
			if (buf[i] == '"')
				in_quote = !in_quote;
			i++;
		}
		if (i > start)
			cmdline_parse_word(buf + start, i - start, opts);
	}
	return 0;
}
