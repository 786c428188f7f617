#!/usr/bin/env bash
# The concurrent parts under ThreadSanitizer: the disk tier's writer, reader and scrub threads
# against the loops (LarderCacheTests), the event loop and its job queue (LarderIOTests), and
# the daemon itself — event loops, coalescing across loops, disk threads, resolver threads —
# built with TSan and driven by the coalescing integration suite (two hundred clients on one to
# four loops, shared fills, disk stores) and the HTTPS interception suite (TLS sessions that
# move between loops to join a fill, the shared certificate mint). A data race stops
# the test run (and the daemon: halt_on_error, exit status 66) with TSan's report.
# Usage: scripts/tsan.sh          (make tsan; part of make test)
set -euo pipefail
cd "$(dirname "$0")/.."
SCRATCH=.build/tsan
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
# -D LARDER_TSAN: LarderIO's Locked tells TSan about its futex-based mutex.
FLAGS=(--sanitize=thread --scratch-path "$SCRATCH" -Xswiftc -DLARDER_TSAN)
swift build --build-tests "${FLAGS[@]}"
swift test --skip-build "${FLAGS[@]}" --filter 'LarderCacheTests|LarderIOTests|LarderServerTests'
# The daemon runs TSan-built; the test process that drives it is the plain debug build (its own
# helpers are not under test, and TSan cannot see the Mutex they use).
swift build --build-tests
LARDER_BINARY="$PWD/$SCRATCH/debug/larder" swift test --skip-build --filter 'IntegrationTests.Coalescer|IntegrationTests.Interception'
