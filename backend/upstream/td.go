package upstream

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/holiman/uint256"
)

// finalTotalDifficulty is the total difficulty that chains which moved to
// proof of stake stopped at: their later blocks have difficulty 0, so it
// is every post-merge block's. These are public facts of each chain:
//   - mainnet (1): 58750003716598352816469, the total difficulty of the
//     last proof-of-work block, 15537393 (any explorer, or a node that
//     still serves totalDifficulty, shows it for that block and later);
//   - Sepolia (11155111): 17000018015853232, that of its last
//     proof-of-work block, 1450408 (Nethermind's Sepolia configuration
//     syncs from it as PivotTotalDifficulty);
//   - Holesky (17000) and Hoodi (560048) began as proof of stake: their
//     genesis has difficulty 1 (see their genesis.json) and every later
//     block 0.
var finalTotalDifficulty = map[uint64]*uint256.Int{
	1:        uint256.MustFromDecimal("58750003716598352816469"),
	11155111: uint256.MustFromDecimal("17000018015853232"),
	17000:    uint256.NewInt(1),
	560048:   uint256.NewInt(1),
}

// frozenTotalDifficulty returns the total difficulty of a post-merge block
// of a chain whose total difficulty is known to have stopped at the merge,
// or nil when h is not one.
func frozenTotalDifficulty(chainID uint64, h *backend.Header) *uint256.Int {
	final, ok := finalTotalDifficulty[chainID]
	if !ok || h.Number == 0 || !h.Difficulty.IsZero() {
		return nil
	}
	return final
}

// settleTotalDifficulty applies the rules for a fetched block's total
// difficulty, and its uncles': a post-merge block of a chain whose total
// difficulty froze has the frozen value; a value the endpoint gives is
// kept when it is its parent's plus the block's difficulty (the parent's
// as the cache or the same endpoint has it), and refused as a mismatch
// when it is not; any other is null, since it cannot be known without the
// ancestry.
func (b *Backend) settleTotalDifficulty(ctx context.Context, ep *endpoint, v *verified) error {
	headers := []*backend.Header{&v.block.Header}
	tds := []**uint256.Int{&v.block.TotalDifficulty}
	for _, u := range v.uncles {
		headers = append(headers, &u.Header)
		tds = append(tds, &u.TotalDifficulty)
	}
	var parents []backend.Hash
	for i, h := range headers {
		if frozen := frozenTotalDifficulty(b.chainID, h); frozen != nil {
			if err := backend.SettleTotalDifficulty(fieldOf(i), tds[i], frozen, new(uint256.Int)); err != nil {
				return &VerifyError{Endpoint: ep.name, Block: v.block.Hash.String(), Err: err}
			}
			continue
		}
		if *tds[i] != nil && h.Number > 0 {
			parents = append(parents, h.ParentHash)
		}
	}
	if len(parents) == 0 {
		if v.block.Number == 0 && v.block.TotalDifficulty != nil {
			return settleAgainst(ep, v, 0, tds[0], new(uint256.Int), &headers[0].Difficulty)
		}
		return nil
	}
	known, err := b.parentTotalDifficulties(ctx, ep, parents)
	if err != nil {
		return err
	}
	for i, h := range headers {
		if *tds[i] == nil || h.Number == 0 || frozenTotalDifficulty(b.chainID, h) != nil {
			continue
		}
		parentTD := known[h.ParentHash]
		if parentTD == nil {
			*tds[i] = nil // nothing to check it against
			continue
		}
		if err := settleAgainst(ep, v, i, tds[i], parentTD, &h.Difficulty); err != nil {
			return err
		}
	}
	return nil
}

func settleAgainst(ep *endpoint, v *verified, i int, td **uint256.Int, parentTD, difficulty *uint256.Int) error {
	if err := backend.SettleTotalDifficulty(fieldOf(i), td, parentTD, difficulty); err != nil {
		return &VerifyError{Endpoint: ep.name, Block: v.block.Hash.String(), Err: err}
	}
	return nil
}

// fieldOf names the total difficulty of the block (0) or an uncle (i-1).
func fieldOf(i int) string {
	if i == 0 {
		return "totalDifficulty"
	}
	return fmt.Sprintf("uncle %d: totalDifficulty", i-1)
}

// parentTotalDifficulties returns the total difficulty of each hash, from
// the cache or else from the endpoint's headers, in one batch. A header's
// hash is checked; its total difficulty is as the endpoint gives it, or
// frozen. A hash without one is left out.
func (b *Backend) parentTotalDifficulties(ctx context.Context, ep *endpoint, hashes []backend.Hash) (map[backend.Hash]*uint256.Int, error) {
	out := make(map[backend.Hash]*uint256.Int, len(hashes))
	var calls []*call
	for _, h := range hashes {
		if _, done := out[h]; done {
			continue
		}
		// A cached parent without one is asked again, so that the answer
		// does not depend on what the cache holds.
		if b.cache != nil {
			if c := b.cache.get(h); c != nil && c.block.TotalDifficulty != nil {
				out[h] = c.block.TotalDifficulty
				continue
			}
		}
		out[h] = nil
		calls = append(calls, &call{method: "eth_getBlockByHash", params: []any{h, false}})
	}
	if err := ep.do(ctx, calls...); err != nil {
		return nil, err
	}
	for _, c := range calls {
		hash := c.params[0].(backend.Hash)
		if c.err != nil {
			return nil, c.err
		}
		if isNull(c.result) {
			continue
		}
		var p backend.Block
		if err := json.Unmarshal(c.result, &p); err != nil {
			return nil, &VerifyError{Endpoint: ep.name, Block: hash.String(), Err: err}
		}
		if computed := backend.HeaderHash(&p.Header); computed != hash || p.Hash != hash {
			return nil, &VerifyError{Endpoint: ep.name, Block: hash.String(), Err: &backend.MismatchError{Field: "hash", Given: p.Hash.String(), Computed: computed.String()}}
		}
		if frozen := frozenTotalDifficulty(b.chainID, &p.Header); frozen != nil {
			out[hash] = frozen
		} else {
			out[hash] = p.TotalDifficulty
		}
	}
	return out, nil
}
