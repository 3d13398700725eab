#!/bin/sh
# The noisy neighbour (docs/benchmarks.md, "noisy"): an exec's round trip in a quiet payload
# sandbox beside one whose guest fills 512 MiB and spins every vCPU its cgroup allows, against
# the same beside it paused (medians of 200, interleaved). Goal: within 2x. The isolation
# itself (quota held, both VMMs live, every exec answered) is cgroup-v1/cgroup-v2's test.
#
# usage: tools/bench/noisy.sh BUILD   (run where payloads run: tools/dev bench noisy routes it)
# Last line: `noisy idle_us=... busy_us=... ratio=... goal=2.00 execs=... hostile_cpus=...`.
set -eu
build=$1
exec "$build/tests/integration/cgroup-payload" noisy "$build/vmm/sandbox-vmm" \
	"$build/tests/guests/payload-snap"
