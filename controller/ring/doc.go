// Package ring splits namespaces among the live members of a ring of
// stencil replicas (stencil run --ring, docs/operating.md "A ring of
// replicas"): which namespaces each member holds, the hash ranges that
// stand for them, the shard selector that asks the API server for exactly
// those (KEP-5866 sharded list and watch), and the rule that decides when
// a member may write for a namespace.
//
// It is the ring's arithmetic and protocol only, each a function of its
// inputs, with no client and no clock of its own; the membership Leases,
// the namespace informer and the wiring into the controller's informers
// and write fence come on top.
//
// The choice a newcomer may question: the ranges are cut from the hashes
// of the namespaces that exist, not from the hash space. The API server
// hashes a namespace with FNV-1a 64, whose high bits barely depend on a
// name's last bytes: team-01 ... team-30 fall into one sliver of the
// space, and an even split of the space gave one member all of them. So
// the namespaces themselves are placed (each on the member it scores
// highest with, a member taking no more than its equal share), and each
// member's ranges are the stretches of the FNV-1a order its namespaces
// start. The split is even whatever the names, and a namespace added or
// removed moves at most a few others.
package ring
