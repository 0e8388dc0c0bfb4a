#!/usr/bin/env bash
# ring.sh against an API server without sharded list and watch (the
# ShardedListAndWatch gate off): the members find out, filter their watches
# themselves, and every figure of ring.sh must hold the same. Its names are
# hex unless RING_NAMING says otherwise (ring.sh's are sequential).
RING_UNFILTERED=1
RING_NAMING=${RING_NAMING:-hex}
# shellcheck source=test/faults/ring.sh
source "$(dirname "$0")/ring.sh"
