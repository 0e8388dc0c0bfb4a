#!/usr/bin/env bash
# ring.sh against an API server without sharded list and watch (the
# ShardedListAndWatch gate off): the members find out, filter their watches
# themselves, and every figure of ring.sh must hold the same.
RING_UNFILTERED=1
# shellcheck source=test/faults/ring.sh
source "$(dirname "$0")/ring.sh"
