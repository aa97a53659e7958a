package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/hexutil"
)

// view is the chain as the head tracker saw it at its last poll. It is
// replaced whole, never changed, so that a reader holds one consistent
// picture: after a reorg no reader can see the old branch's numbers next
// to the new branch's head.
type view struct {
	head            ref
	safe, finalized *ref
	// canon maps each number from low to the head to the canonical hash,
	// as the preferred endpoint sees its chain. Numbers at or below the
	// finalized block are final and left to the cache.
	canon map[uint64]backend.Hash
	low   uint64
	// best is the highest head the endpoints reported at the poll, less
	// those of the endpoints whose chain did not hold together below it.
	best uint64
	// at is when an endpoint last answered a poll: tags older than a
	// poll or two are not served (see Backend.tag).
	at time.Time
	// from is the endpoint whose chain the view is.
	from *endpoint
}

// ref is a block the tracker knows by number and hash.
type ref struct {
	number uint64
	hash   backend.Hash
}

// onFinalizedChain reports whether an endpoint's chain is known to hold
// the view's finalized block: the view's own endpoint's, or one whose last
// poll gave the same finalized block. Without one, any endpoint's is.
func (v *view) onFinalizedChain(ep *endpoint) bool {
	return v.finalized == nil || ep == v.from || ep.finalizedIs(v.finalized)
}

// isFinal reports whether n is at or below the finalized block.
func (v *view) isFinal(n uint64) bool { return v.finalized != nil && n <= v.finalized.number }

// tracked reports whether the tracker saw hash on the chain: its head, a
// block of its window, or its safe or finalized block. An endpoint that
// answers null for such a hash lags, and is not believed.
func (v *view) tracked(hash backend.Hash) bool {
	switch {
	case v == nil || hash == backend.Hash{}:
		return false
	case v.head.hash == hash, v.safe != nil && v.safe.hash == hash, v.finalized != nil && v.finalized.hash == hash:
		return true
	}
	for _, h := range v.canon {
		if h == hash {
			return true
		}
	}
	return false
}

// polled is what one endpoint answered to a poll.
type polled struct {
	ep                  *endpoint
	head                *header
	safe, finalized     *header
	err                 error
	chainID             uint64
	chainIDAsked, gotID bool
}

// header is a block known by its header, hash checked.
type header struct {
	number     uint64
	hash       backend.Hash
	parentHash backend.Hash
}

func (h *header) ref() *ref {
	if h == nil {
		return nil
	}
	return &ref{number: h.number, hash: h.hash}
}

// decodeHeader reads a block object (either form) and checks that its hash
// is its header's. nil for null.
func decodeHeader(raw json.RawMessage) (*header, error) {
	if isNull(raw) {
		return nil, nil
	}
	var b backend.Block
	if err := json.Unmarshal(raw, &b); err != nil {
		return nil, err
	}
	if b.Pending {
		return nil, &backend.FieldError{Object: "block", Field: "number", Err: backend.ErrMissingField}
	}
	if computed := backend.HeaderHash(&b.Header); computed != b.Hash {
		return nil, &backend.MismatchError{Field: "hash", Given: b.Hash.String(), Computed: computed.String()}
	}
	return &header{number: b.Number, hash: b.Hash, parentHash: b.ParentHash}, nil
}

// pollOne asks an endpoint for its latest, safe and finalized blocks (and
// its chain id, until it has given it) in one batch.
func (b *Backend) pollOne(ctx context.Context, ep *endpoint, askID bool) polled {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.Timeout)
	defer cancel()
	p := polled{ep: ep, chainIDAsked: askID}
	calls := []*call{
		{method: "eth_getBlockByNumber", params: []any{"latest", false}},
		{method: "eth_getBlockByNumber", params: []any{"safe", false}},
		{method: "eth_getBlockByNumber", params: []any{"finalized", false}},
	}
	if askID {
		calls = append(calls, &call{method: "eth_chainId"})
	}
	if p.err = ep.do(ctx, calls...); p.err != nil {
		return p
	}
	if calls[0].err != nil {
		p.err = calls[0].err
		return p
	}
	var err error
	if p.head, err = decodeHeader(calls[0].result); err != nil || p.head == nil {
		p.err = &VerifyError{Endpoint: ep.name, Block: "latest", Err: orNoBlock(err)}
		return p
	}
	// A chain without a consensus client has no safe or finalized block:
	// nodes answer an error or null, which leaves the tag unset.
	for i, dst := range []**header{&p.safe, &p.finalized} {
		c := calls[1+i]
		if c.err != nil {
			continue
		}
		if *dst, err = decodeHeader(c.result); err != nil {
			p.err = &VerifyError{Endpoint: ep.name, Block: c.params[0].(string), Err: err}
			return p
		}
	}
	if askID {
		c := calls[3]
		if c.err != nil {
			// Its head counts for nothing until its chain is known: an
			// endpoint of another chain, higher, would make the view.
			p.err = fmt.Errorf("eth_chainId: %w", c.err)
			return p
		}
		var id hexutil.Uint64
		if err := json.Unmarshal(c.result, &id); err != nil {
			p.err = fmt.Errorf("%w: eth_chainId: %v", errBadAnswer, err)
			return p
		}
		p.chainID, p.gotID = uint64(id), true
	}
	return p
}

func orNoBlock(err error) error {
	if err == nil {
		return fmt.Errorf("no latest block")
	}
	return err
}

// poll asks every endpoint for its head at once, records each one's
// health and lag, and makes a new view from the preferred endpoint among
// those that answered and keep up.
func (b *Backend) poll(ctx context.Context) error {
	results := make([]polled, len(b.eps))
	sent := time.Now()
	var wg sync.WaitGroup
	for i, ep := range b.eps {
		if ep.isWrongChain() {
			results[i].err = errWrongChain
			continue
		}
		if ep.pollWaiting(time.Now()) {
			// Waiting out a failure, or the Retry-After of a 429: a poll
			// is a request like any other.
			results[i].err = errWaiting
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = b.pollOne(ctx, ep, !ep.onChain()) // another chain's was left out above
		}()
	}
	wg.Wait()

	now := time.Now()
	for i, r := range results {
		if r.err == errWrongChain || r.err == errWaiting {
			continue
		}
		if r.err == nil && r.gotID && !b.learnedChain(r.ep, r.chainID) {
			results[i].err = errWrongChain
			continue
		}
		if r.err != nil {
			b.endpointFailed(ctx, r.ep, "poll", r.err, now, false)
			continue
		}
		b.endpointAnswered(ctx, r.ep, false, sent)
		r.ep.setHead(r.head.number, r.finalized.ref())
	}
	// The view is the first endpoint's, in the order of preference, that
	// is within MaxLag of the best head and whose chain holds together
	// below its head. One whose chain does not leaves the view to the
	// next, and its head counts for nothing: an endpoint that claims a
	// head far above the others' cannot make them all lag.
	// While the view is fresh, the heads of the endpoints that missed this
	// poll count too, as far as the view's best: when those at the best
	// head miss one, an endpoint far behind them (a node still syncing)
	// would make a view that takes the head back and denies the blocks
	// above its own. One that answers with a lower head (a reorganisation
	// to a shorter chain) counts with that head.
	var floor uint64
	if old := b.view.Load(); old != nil && now.Sub(old.at) <= b.staleAfter() {
		for i, r := range results {
			if r.err != nil && r.err != errWrongChain {
				if h, ok := b.eps[i].lastHead(); ok {
					floor = max(floor, min(h, old.best))
				}
			}
		}
	}
	var errs []error
	tried := make([]bool, len(results))
	for {
		best := floor
		for i, r := range results {
			if r.err == nil && !tried[i] {
				best = max(best, r.head.number)
			}
		}
		found := false
		for i, r := range results {
			if r.err != nil || tried[i] || best-r.head.number > b.cfg.MaxLag {
				continue
			}
			found, tried[i] = true, true
			err := b.advance(ctx, r, best)
			if err == nil {
				return nil
			}
			errs = append(errs, err)
		}
		if !found {
			break
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, r := range results {
		if r.err == nil {
			return fmt.Errorf("upstream: no endpoint that answered is within %d blocks of the head of those that did not, %d", b.cfg.MaxLag, floor)
		}
	}
	return fmt.Errorf("upstream: no endpoint answered its head")
}

// advance makes the view that an endpoint's poll gives, walking back from
// its head to where it meets the chain already seen.
func (b *Backend) advance(ctx context.Context, p polled, best uint64) error {
	old := b.view.Load()
	if old != nil && old.head.hash == p.head.hash && sameRef(old.safe, p.safe.ref()) && sameRef(old.finalized, p.finalized.ref()) {
		v := *old
		v.best, v.at, v.from = best, time.Now(), p.ep
		b.setView(&v)
		return nil
	}
	v := &view{head: *p.head.ref(), safe: p.safe.ref(), finalized: p.finalized.ref(), best: best, at: time.Now(), from: p.ep}
	if old != nil && old.finalized != nil && (v.finalized == nil || v.finalized.number < old.finalized.number) {
		// Behind on finality, or without it (a node that does not serve
		// the tag): the view keeps the block finalized before, which the
		// endpoint's chain must hold (keepsFinality), below its head.
		if v.head.number <= old.finalized.number {
			return fmt.Errorf("upstream %s: its head, block %d, is not above block %d, finalized before", p.ep.name, v.head.number, old.finalized.number)
		}
		v.finalized = old.finalized
	}
	switch {
	case v.finalized != nil && v.finalized.number < v.head.number && v.head.number-v.finalized.number <= maxTracked:
		v.low = v.finalized.number + 1
	case v.head.number > b.cfg.ReorgDepth:
		v.low = v.head.number - b.cfg.ReorgDepth
	}
	// The walk goes down to the old finalized block too, so that the
	// blocks finalized since the last poll can be marked final: from the
	// old view, mostly. After a jump of finality (a long outage), no
	// further than maxTracked below the new finalized block.
	walkLow := v.low
	if old != nil && old.finalized != nil && v.finalized != nil && old.finalized.number < v.low {
		walkLow = max(old.finalized.number+1, v.finalized.number-min(v.finalized.number, maxTracked))
	}
	w, err := b.walk(ctx, p.ep, old, p.head, walkLow)
	if err == nil {
		if err = keepsFinality(old, v, w); err != nil {
			err = &VerifyError{Endpoint: p.ep.name, Block: "latest", Err: err}
		}
	}
	if err != nil {
		b.endpointFailed(ctx, p.ep, "head", err, time.Now(), false)
		return err
	}
	hashes, reorgDepth := w.hashes, w.replaced
	// Each tag is served by its hash, next to the head's chain by
	// number: one of another branch (an endpoint whose head moved
	// between the calls of one batch, which the next poll sees settled,
	// or one that contradicts itself) would be served as that chain's.
	for _, tag := range []struct {
		name string
		r    *ref
	}{{"finalized", v.finalized}, {"safe", v.safe}} {
		if w.contradicts(tag.r) {
			return fmt.Errorf("upstream %s: %s block %d (%s) is not on the chain of its head", p.ep.name, tag.name, tag.r.number, tag.r.hash)
		}
	}
	if v.finalized != nil {
		b.cache.finalize(v.finalized.number, v.finalized.hash)
	}
	v.canon = make(map[uint64]backend.Hash, len(hashes))
	for n, h := range hashes {
		if n >= v.low {
			v.canon[n] = h
		} else if v.isFinal(n) {
			b.cache.finalize(n, h)
		}
	}
	b.setView(v)
	if reorgDepth > 0 {
		b.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "upstream: chain reorganised", slog.Uint64("depth", reorgDepth), slog.Uint64("head", v.head.number), slog.String("hash", v.head.hash.String()), slog.String("endpoint", p.ep.name))
	}
	return nil
}

// keepsFinality checks that the chain a walk found, of a view finalized
// at least as far as old (advance sees to it), holds the block old had
// finalized: an endpoint
// on a branch that left it (a node stuck on a minority fork, within
// MaxLag) would otherwise make the view, and its blocks would be served by
// number next to final ones of the other branch. The walk reaches the old
// finalized block's child, unless finality jumped further than maxTracked
// since (a long outage), which is taken as it is.
func keepsFinality(old, v *view, w walked) error {
	if old == nil || old.finalized == nil {
		return nil
	}
	f := old.finalized
	switch {
	case v.finalized.number == f.number && v.finalized.hash != f.hash:
		return fmt.Errorf("its finalized block %d is %s, not %s, finalized before", f.number, v.finalized.hash, f.hash)
	case w.met:
		return nil // the old view's chain, which holds f
	}
	if h, ok := w.hashes[f.number]; ok && h != f.hash {
		return fmt.Errorf("its block %d is %s, not %s, finalized before", f.number, h, f.hash)
	}
	if w.lowest == f.number+1 && w.lowParent != f.hash {
		return fmt.Errorf("its block %d's parent is %s, not %s, finalized before", w.lowest, w.lowParent, f.hash)
	}
	return nil
}

// maxTracked bounds how far below the head the tracker follows the chain
// by number when the finalized block is further down (a chain that lost
// finality): beyond it ReorgDepth applies.
const maxTracked = 1024

func sameRef(a, b *ref) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// walked is what a walk found of an endpoint's chain.
type walked struct {
	// hashes are the canonical hashes from the head down.
	hashes map[uint64]backend.Hash
	// replaced is how many blocks of the old view they replace.
	replaced uint64
	// met is set when the chain met the old view's, whose blocks below
	// it are then its own. Otherwise lowParent is the parent of the
	// lowest block walked, lowest.
	met       bool
	lowest    uint64
	lowParent backend.Hash
}

// contradicts reports whether the chain a walk found has another block
// than r at r's number: one it walked, or the parent of the lowest one.
// A block below those, of the old view's chain or further down, is not
// known to the walk, which takes it as it is.
func (w walked) contradicts(r *ref) bool {
	if r == nil {
		return false
	}
	if h, ok := w.hashes[r.number]; ok {
		return h != r.hash
	}
	return !w.met && w.lowest == r.number+1 && w.lowParent != r.hash
}

// walk returns the canonical hashes from head down to low, as the
// endpoint's chain has them, and how many blocks of the old view they
// replace. It reuses the old view from the first block where the two
// meet, and fetches the rest by number, a batch at a time, checking that
// each header is the parent of the one above it.
func (b *Backend) walk(ctx context.Context, ep *endpoint, old *view, head *header, low uint64) (walked, error) {
	ctx, cancel := context.WithTimeout(ctx, 4*b.cfg.Timeout)
	defer cancel()
	w := walked{hashes: map[uint64]backend.Hash{head.number: head.hash}}
	hashes := w.hashes
	if old != nil {
		if h, ok := old.canon[head.number]; ok && h != head.hash {
			w.replaced++
		}
	}
	parent, n := head.parentHash, head.number
	var batch map[uint64]*header
	for n > low {
		n--
		if old != nil {
			if h, ok := old.canon[n]; ok {
				if h == parent {
					for m := n; m >= low && m >= old.low; m-- {
						h, ok := old.canon[m]
						if !ok {
							break
						}
						hashes[m] = h
						if m == 0 {
							break
						}
					}
					w.met = true
					return w, nil
				}
				w.replaced++
			}
		}
		hd := batch[n]
		if hd == nil || hd.hash != parent {
			var err error
			if batch, err = b.fetchHeaders(ctx, ep, n, low); err != nil {
				return walked{}, err
			}
			hd = batch[n]
		}
		if hd == nil || hd.hash != parent {
			// The endpoint's chain moved under the walk: fetch the
			// parent by hash, which cannot move.
			var err error
			if hd, err = b.fetchHeader(ctx, ep, parent); err != nil {
				return walked{}, err
			}
			if hd == nil || hd.number != n {
				return walked{}, fmt.Errorf("upstream %s: parent %s of block %d not found", ep.name, parent, n+1)
			}
		}
		hashes[n] = hd.hash
		parent = hd.parentHash
	}
	w.lowest, w.lowParent = n, parent
	return w, nil
}

// headerBatch is how many headers the walk asks for at once.
const headerBatch = 32

// fetchHeaders asks for the headers from n down to max(low, n-31) by
// number, in one batch.
func (b *Backend) fetchHeaders(ctx context.Context, ep *endpoint, n, low uint64) (map[uint64]*header, error) {
	first := low
	if n >= headerBatch && n-headerBatch+1 > low {
		first = n - headerBatch + 1
	}
	calls := make([]*call, 0, n-first+1)
	for m := first; m <= n; m++ {
		calls = append(calls, &call{method: "eth_getBlockByNumber", params: []any{hexutil.EncodeUint64(m), false}})
	}
	if err := ep.do(ctx, calls...); err != nil {
		return nil, err
	}
	out := make(map[uint64]*header, len(calls))
	for i, c := range calls {
		if c.err != nil {
			return nil, c.err
		}
		h, err := decodeHeader(c.result)
		if err != nil {
			return nil, &VerifyError{Endpoint: ep.name, Block: hexutil.EncodeUint64(first + uint64(i)), Err: err}
		}
		if h != nil {
			out[h.number] = h
		}
	}
	return out, nil
}

// fetchHeader asks for one header by hash; nil when the endpoint has none.
func (b *Backend) fetchHeader(ctx context.Context, ep *endpoint, hash backend.Hash) (*header, error) {
	c := &call{method: "eth_getBlockByHash", params: []any{hash, false}}
	if err := ep.do(ctx, c); err != nil {
		return nil, err
	}
	if c.err != nil {
		return nil, c.err
	}
	h, err := decodeHeader(c.result)
	if err != nil {
		return nil, &VerifyError{Endpoint: ep.name, Block: hash.String(), Err: err}
	}
	if h != nil && h.hash != hash {
		return nil, &VerifyError{Endpoint: ep.name, Block: hash.String(), Err: &backend.MismatchError{Field: "hash", Given: h.hash.String(), Computed: hash.String() + " (asked for)"}}
	}
	return h, nil
}
