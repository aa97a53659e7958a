// Package upstreamcheck holds the tests of backend/upstream against the
// pinned go-ethereum: chains imported into geth (the execution-apis chain
// and the demo chain) served through the upstream Backend and copied by
// the Follower, each answer compared with blockrpc's from a dump of the
// same chain; and a geth development node mining while the Follower
// follows it.
package upstreamcheck
