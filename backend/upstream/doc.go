// Package upstream serves a live network through the JSON-RPC endpoints
// of nodes or providers, trusting none of them blindly.
//
// A Backend reads blocks from one or more endpoints with the methods every
// provider offers (eth_getBlockByNumber, eth_getBlockByHash,
// eth_getUncleByBlockHashAndIndex, eth_chainId), batched where that saves
// round trips (an endpoint that refuses a batch as too large, or takes
// none, is sent smaller ones from then on), and verifies each block
// before it is served or cached: the
// block hash from the header fields, the size, the transactions root and
// every transaction hash, sha3Uncles and each uncle's hash, the
// withdrawals root, every sender recovered from its signature, and the
// chain id the transactions are signed for. A block that fails is never
// served: its endpoint is skipped for a while and the next one is asked.
// Answers are then rendered by blockrpc from the verified values, so they
// are go-ethereum's bytes whichever node is upstream. Two things rest on
// an endpoint's word: that a block read by number below the tracker's
// window is the chain's at that number (the endpoint must give the
// finalized block in the same request, but a whole block forged with a
// hash of its own is believed), and a total difficulty it gives, which is
// checked against its parent's from the same endpoint.
//
// A head tracker polls each endpoint for its latest, safe and finalized
// blocks. Blocks are cached by hash, which makes them immutable; numbers
// are mapped to hashes in the cache only at or below the finalized block,
// and above it through the tracker's view of the canonical chain, which a
// reorg replaces at once. A block at or below the finalized block is read
// only from an endpoint whose chain holds that finalized block, and a
// block the tracker saw, or one at or below the finalized block or below
// the tracker's window, is not taken to be missing on the word of an
// endpoint that lags or pruned it. An endpoint is read from only once its chain id is
// known to be the chain's.
//
// A Follower copies a chain from an endpoint into a store that can be
// written (a backend.Writer, such as memstore) and keeps it current,
// verifying every block the same way.
//
// # Total difficulty
//
// blockrpc serves totalDifficulty on every block, which current nodes no
// longer give. A post-merge block of a chain whose total difficulty froze
// at the merge (mainnet, Sepolia, Holesky, Hoodi) has the frozen value. A
// value an endpoint gives is served when it is its parent's plus the
// block's difficulty, and refused as tampered when it is not. Any other is
// null: it cannot be known without the ancestry. The Follower, which holds
// the ancestry, adds it up itself.
package upstream
