package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/holiman/uint256"
)

// verified is a block and its uncles with every value that their contents
// determine checked: what may be served, cached or stored.
type verified struct {
	block  *backend.Block
	uncles []*backend.Uncle
}

// VerifyError is a block an endpoint gave that does not hold together: a
// hash, root, size or sender that its contents contradict, or an answer
// that is not a block. Such a block is never served, cached or stored.
type VerifyError struct {
	Endpoint string // scheme and host only
	Block    string // what was asked for: a number, tag or hash
	Err      error  // a *backend.MismatchError or *backend.FieldError, mostly
}

// Error names the endpoint, the block and what did not verify.
func (e *VerifyError) Error() string {
	return fmt.Sprintf("upstream %s: block %s does not verify: %v", e.Endpoint, e.Block, e.Err)
}

// Unwrap returns Err, for errors.As to find the mismatch.
func (e *VerifyError) Unwrap() error { return e.Err }

// errNoBodies is for an answer with transaction hashes where objects were
// asked for: its transactions cannot be checked.
var errNoBodies = errors.New("transaction hashes where objects were asked for")

// isNull reports whether a result is JSON null (or empty).
func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

// maxUncles is how many uncles a block may have (two, by Ethereum's
// rules since its first block). A block that lists more is refused
// before its uncles are asked for, in a batch as long as the list.
const maxUncles = 2

// fetchBlock asks the endpoint for a block with its transaction objects,
// by number or tag (method eth_getBlockByNumber) or by hash
// (eth_getBlockByHash), then for its uncles in one batch, and verifies all
// of it against chainID (0: not known). It returns nil and no error when
// the endpoint has no such block. The pending block is fetchPending's.
// Calls given as also go in the same request as the block's, and are
// filled in whenever the exchange succeeded.
//
// The total difficulty is left as the endpoint gave it: settling it needs
// the parent's, which is the caller's to know.
func (c *client) fetchBlock(ctx context.Context, method string, arg any, chainID uint64, also ...*call) (*verified, error) {
	raw, err := c.fetchRaw(ctx, method, arg, also...)
	if raw == nil || err != nil {
		return nil, err
	}
	what := fmt.Sprint(arg)
	var b backend.Block
	if err := json.Unmarshal(raw, &b); err != nil {
		return nil, &VerifyError{Endpoint: c.name, Block: what, Err: err}
	}
	if b.Pending {
		return nil, &VerifyError{Endpoint: c.name, Block: what, Err: &backend.FieldError{Object: "block", Field: "number", Err: backend.ErrMissingField}}
	}
	if len(b.Uncles) > maxUncles {
		return nil, &VerifyError{Endpoint: c.name, Block: what, Err: &backend.FieldError{Object: "block", Field: "uncles",
			Err: fmt.Errorf("%d listed, more than the %d a block may have", len(b.Uncles), maxUncles)}}
	}
	var uncles []*backend.Uncle
	if len(b.Uncles) > 0 {
		if uncles, err = c.fetchUncles(ctx, &b); err != nil {
			return nil, err
		}
	}
	if err := verify(&b, uncles, chainID, false); err != nil {
		return nil, &VerifyError{Endpoint: c.name, Block: what, Err: err}
	}
	return &verified{block: &b, uncles: uncles}, nil
}

// fetchRaw asks for one block object, with transaction objects, and the
// calls also in the same request; nil when the endpoint has no such block.
func (c *client) fetchRaw(ctx context.Context, method string, arg any, also ...*call) (json.RawMessage, error) {
	cl := &call{method: method, params: []any{arg, true}}
	if err := c.do(ctx, append([]*call{cl}, also...)...); err != nil {
		return nil, err
	}
	if cl.err != nil {
		return nil, cl.err
	}
	if isNull(cl.result) {
		return nil, nil
	}
	return cl.result, nil
}

// fetchPending asks for the pending block and verifies what it can. The
// pending block has no hash yet, and nodes hide more: go-ethereum answers
// its miner and nonce null. parent returns the block it is built on, whose
// miner it is taken to have (a node builds its pending block for its own
// fee recipient, the one it proposes with) and whose number it follows; a
// proof-of-stake nonce is zero. Those are what its size is computed from,
// and both have a fixed length, so the size checks whatever they are.
func (c *client) fetchPending(ctx context.Context, chainID uint64, parent func(backend.Hash) (*backend.Block, error)) (*verified, error) {
	raw, err := c.fetchRaw(ctx, "eth_getBlockByNumber", "pending")
	if raw == nil || err != nil {
		return nil, err
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return nil, &VerifyError{Endpoint: c.name, Block: "pending", Err: err}
	}
	var parentHash backend.Hash
	if err := json.Unmarshal(members["parentHash"], &parentHash); err != nil {
		return nil, &VerifyError{Endpoint: c.name, Block: "pending", Err: &backend.FieldError{Object: "block", Field: "parentHash", Err: err}}
	}
	p, err := parent(parentHash)
	if err != nil {
		return nil, fmt.Errorf("the pending block's parent %s: %w", parentHash, err)
	}
	if isNull(members["miner"]) {
		members["miner"], _ = json.Marshal(p.Miner)
	}
	if isNull(members["nonce"]) {
		members["nonce"] = json.RawMessage(`"0x0000000000000000"`)
	}
	if raw, err = json.Marshal(members); err != nil {
		return nil, err
	}
	var b backend.Block
	if err := json.Unmarshal(raw, &b); err != nil {
		return nil, &VerifyError{Endpoint: c.name, Block: "pending", Err: err}
	}
	b.Number, b.Hash = p.Number+1, backend.Hash{}
	if err := verify(&b, nil, chainID, true); err != nil {
		return nil, &VerifyError{Endpoint: c.name, Block: "pending", Err: err}
	}
	return &verified{block: &b}, nil
}

// fetchUncles asks for the uncles b lists, in one batch.
func (c *client) fetchUncles(ctx context.Context, b *backend.Block) ([]*backend.Uncle, error) {
	calls := make([]*call, len(b.Uncles))
	for i := range calls {
		calls[i] = &call{method: "eth_getUncleByBlockHashAndIndex", params: []any{b.Hash, fmt.Sprintf("%#x", i)}}
	}
	if err := c.do(ctx, calls...); err != nil {
		return nil, err
	}
	uncles := make([]*backend.Uncle, len(calls))
	for i, cl := range calls {
		if cl.err != nil {
			return nil, cl.err
		}
		what := fmt.Sprintf("%s uncle %d", b.Hash, i)
		if isNull(cl.result) {
			return nil, &VerifyError{Endpoint: c.name, Block: what, Err: errors.New("the block lists it, but the endpoint has no such uncle")}
		}
		uncles[i] = new(backend.Uncle)
		if err := json.Unmarshal(cl.result, uncles[i]); err != nil {
			return nil, &VerifyError{Endpoint: c.name, Block: what, Err: err}
		}
	}
	return uncles, nil
}

// verify checks a block as an endpoint gave it: everything its contents
// determine (backend.Seal), every sender (backend.VerifySenders), and the
// chain its transactions are signed for. The block must carry its
// transaction objects: a block known by its transaction hashes cannot be
// checked. The pending block's hash, which it has not yet, is the only
// value not checked.
func verify(b *backend.Block, uncles []*backend.Uncle, chainID uint64, pending bool) error {
	if !b.HasTransactionBodies() {
		return errNoBodies
	}
	if !pending && b.Hash == (backend.Hash{}) {
		return &backend.FieldError{Object: "block", Field: "hash", Err: backend.ErrMissingField}
	}
	// Seal fills in what is absent; the pending block lacks its hash,
	// which it would fill in, and which stays hidden.
	b.Pending = false
	err := backend.Seal(b, uncles)
	b.Pending = pending
	if err != nil {
		return err
	}
	if err := backend.VerifySenders(b); err != nil {
		return err
	}
	id, err := b.SignedChainID()
	if err != nil {
		return err
	}
	if id != nil && chainID != 0 && !id.Eq(uint256.NewInt(chainID)) {
		return &backend.MismatchError{Field: "chainId", Given: id.Hex() + " (of the transactions)", Computed: fmt.Sprintf("%#x (eth_chainId)", chainID)}
	}
	return nil
}
