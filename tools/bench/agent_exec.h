/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One raw agent call of the benchmarks: an EXEC on an open agent connection (client/'s
 * agent_conn), from the send of its frame to its EXIT: bench-exec's `conn`, and service-ws's
 * anchor interleaved with its WebSocket runs.
 */
#ifndef BENCH_AGENT_EXEC_H
#define BENCH_AGENT_EXEC_H

#include <stddef.h>
#include <stdint.h>

#include "client.h"

#define BENCH_AGENT_TIMEOUT_MS 10000 /* one call's answer, or the CONNECT reply */

/* One EXEC of strings on c (cwd, argc argv strings, one env string: len bytes with their
 * NULs), until its EXIT, which must say 0. 0, -ECHILD for another code, or -errno. */
int bench_agent_exec(struct agent_conn *c, const char *strings, size_t len, uint16_t argc);

/* One EXEC of `true` as `sandboxctl exec ID -- true` sends it, until its EXIT. */
int bench_agent_exec_true(struct agent_conn *c);

#endif
