// Package chaintestcheck holds the tests that check memstore/chaintest's
// chains against go-ethereum: every block the builder makes, rebuilt with
// go-ethereum's types, must have the same hashes, roots, sizes and
// senders, and the transactions go-ethereum signs with the same keys must
// be the same transactions. It also shows a service tested with
// go-ethereum's ethclient against blockrpctest.
package chaintestcheck
