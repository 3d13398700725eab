/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for netpolicy/request.c: the input is a policy request file, which
 * `sandbox-proxy prepare --request` reads from the sandbox's directory (sandboxctl writes it,
 * but the directory is the VMM group's to write too). It is parsed as the proxy parses it;
 * a request accepted must be written back (netpol_request_format) as a file that parses to the
 * same items, and every value must go through its option's check (netpol_value_parse) without
 * harm, its message NUL-terminated.
 *
 * Built and run by tests/fuzz/run.sh policy_request; seeds in tests/fuzz/corpus/policy_request/.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "netpolicy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct netpol_request r = {0}, back = {0};
	char err[256], *text;
	size_t len;

	if (netpol_request_parse(&r, "R", (const char *)data, size, err, sizeof(err)) == 0) {
		if (netpol_request_format(&r, &text, &len) != 0 ||
		    netpol_request_parse(&back, "R", text, len, err, sizeof(err)) != 0 ||
		    back.nitems != r.nitems)
			abort();
		for (unsigned i = 0; i < r.nitems; i++) {
			union netpol_value v;

			if (back.items[i].opt != r.items[i].opt ||
			    !back.items[i].value != !r.items[i].value ||
			    (r.items[i].value && strcmp(back.items[i].value, r.items[i].value)))
				abort();
			if (r.items[i].value) {
				err[0] = 0;
				if (netpol_value_parse(r.items[i].opt, r.items[i].value, &v, err,
						       sizeof(err)) < 0 &&
				    !memchr(err, 0, sizeof(err)))
					abort();
			}
		}
		free(text);
	}
	netpol_request_free(&r);
	netpol_request_free(&back);
	return 0;
}
