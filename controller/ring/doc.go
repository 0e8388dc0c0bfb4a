// Package ring is a ring of stencil replicas (stencil run --ring,
// docs/operating.md "A ring of replicas"), all of it: how the live members
// split the namespaces, the hash ranges that stand for each member's share,
// the shard selector that asks the API server for exactly those (KEP-5866
// sharded list and watch), the rule that decides when a member may write
// for a namespace, the membership Leases, and the member at work.
//
// The files, from the arithmetic up: assign.go (the namespaces divided,
// the ranges, the selector) and handover.go (the view, and the rule for
// who may write with the argument that no two members write for one
// namespace at once), both functions of their inputs; member.go (the
// membership Leases); state.go (the view a member acts on, and the write
// fence); namespaces.go (the informer of the names the ring divides);
// share.go (the registry's informers rebuilt for each new share); run.go
// (Run: join, the ring loop, drain, leave); metrics.go. The controller
// reaches it through Run's Options and the State it is handed.
//
// The choice a newcomer may question: the ranges are cut from the hashes
// of the namespaces that exist, not from the hash space. The API server
// hashes a namespace with FNV-1a 64, whose high bits barely depend on a
// name's last bytes: team-01 ... team-30 fall into one sliver of the
// space, and an even split of the space gives one member all of them. So
// the namespaces themselves are placed (each on the member it scores
// highest with, a member taking no more than its equal share), and each
// member's ranges are the stretches of the FNV-1a order its namespaces
// start. The split is even whatever the names, and a namespace added or
// removed moves at most a few others.
package ring
