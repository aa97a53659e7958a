package upstreamcheck

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/blockrpctest"
	"github.com/blockrpc/blockrpc/examples/interop/gethnode"
	"github.com/blockrpc/blockrpc/hexutil"
	"github.com/holiman/uint256"
)

const (
	// devPeriod is how often the development node mines a block, and
	// mining how long the test sends it transactions.
	devPeriod = "1"
	mining    = 12 * time.Second
	// maxDelay is how long after geth reports a new head the Follower's
	// store may take to hold it: the Follower polls every 2 s by default.
	maxDelay = 5 * time.Second
)

// TestFollowerKeepsUpWithAMiningNode follows a geth development node that
// mines a block a second while transactions come in, with the Follower's
// default poll interval: every block geth mines must be in the Follower's
// store within maxDelay of geth reporting it as its head, and then served
// exactly as geth serves it, but for this service's documented additions
// (totalDifficulty, which must be the sum of the difficulties, and the
// transactions' blockTimestamp, which go-ethereum writes from 1.17 on).
func TestFollowerKeepsUpWithAMiningNode(t *testing.T) {
	node := gethnode.Start(t, "--dev", "--dev.period", devPeriod, "--datadir", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	store, follower := follow(t, node.URL, 0) // the default poll interval

	var wg sync.WaitGroup
	sent := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		sent = sendTransactions(ctx, t, node, time.Now().Add(mining))
	}()

	// Each block geth reports as its head from now on, when the watcher
	// saw it first, and when the store first held it.
	type seen struct {
		number         uint64
		hash           backend.Hash
		mined, written time.Time
	}
	var blocks []*seen
	var first uint64
	end := time.Now().Add(mining)
	for {
		now := time.Now()
		var head struct {
			Number hexutil.Uint64
			Hash   backend.Hash
		}
		if err := json.Unmarshal(result(t, post(t, node.URL, request("eth_getBlockByNumber", "latest", false))), &head); err != nil {
			t.Fatal(err)
		}
		switch n := uint64(head.Number); {
		case first == 0:
			first = n + 1 // blocks mined before the watch began are not timed
		case n >= first && (len(blocks) == 0 || n > blocks[len(blocks)-1].number):
			if len(blocks) > 0 && n != blocks[len(blocks)-1].number+1 {
				t.Fatalf("geth's head went from %d to %d between two looks 10 ms apart", blocks[len(blocks)-1].number, n)
			}
			blocks = append(blocks, &seen{number: n, hash: head.Hash, mined: now})
		}
		all := true
		for _, b := range blocks {
			if b.written.IsZero() {
				if _, err := store.BlockByHash(ctx, b.hash); err == nil {
					b.written = time.Now()
				} else {
					all = false
				}
			}
		}
		if now.After(end) && all && len(blocks) > 0 {
			break
		}
		if now.After(end.Add(2 * maxDelay)) {
			t.Fatalf("the follower has not caught up %v after the mining ended: %+v", 2*maxDelay, follower.Progress())
		}
		time.Sleep(10 * time.Millisecond)
	}
	wg.Wait()

	var delays []time.Duration
	for _, b := range blocks {
		d := b.written.Sub(b.mined)
		delays = append(delays, d)
		if d > maxDelay {
			t.Errorf("block %d was in the follower's store %v after geth reported it, more than %v", b.number, d.Round(time.Millisecond), maxDelay)
		}
	}
	slices.Sort(delays)
	last := blocks[len(blocks)-1].number
	t.Logf("geth mined blocks %d to %d (%d transactions sent); the follower's store held each %v after geth reported it (median; %v at most, %v at least), polling every %v",
		first, last, sent, delays[len(delays)/2].Round(time.Millisecond), delays[len(delays)-1].Round(time.Millisecond), delays[0].Round(time.Millisecond), "2s")

	// Every block up to the last one timed, as geth serves it: through the
	// follower's store, and through an upstream Backend on the same node.
	up := openUpstream(t, node.URL)
	c := &devComparer{t: t, geth: node.URL, follower: blockrpctest.NewServer(t, store).URL, upstream: blockrpctest.NewServer(t, up).URL}
	var td uint256.Int
	txs := 0
	for n := uint64(0); n <= last; n++ {
		number := hexutil.EncodeUint64(n)
		var b struct {
			Hash         backend.Hash
			Difficulty   hexutil.U256
			Transactions []json.RawMessage
		}
		if err := json.Unmarshal(c.same("eth_getBlockByNumber", number, false), &b); err != nil {
			t.Fatal(err)
		}
		td.Add(&td, (*uint256.Int)(&b.Difficulty))
		c.td(number, &td)
		c.same("eth_getBlockByNumber", number, true)
		c.same("eth_getBlockByHash", b.Hash.String(), false)
		c.same("eth_getBlockByHash", b.Hash.String(), true)
		c.same("eth_getUncleCountByBlockHash", b.Hash.String())
		c.same("eth_getUncleByBlockNumberAndIndex", number, "0x0")
		txs += len(b.Transactions)
	}
	if txs == 0 {
		t.Error("no transaction was mined")
	}
	// The tags move every second: they are compared until both agree,
	// which they do once the follower has polled and until geth mines
	// the next block.
	for _, tag := range []string{"latest", "safe", "finalized"} {
		c.sameTag(tag)
	}
	c.same("eth_chainId")
	t.Logf("%d blocks mined by geth (%d transactions) served as geth serves them, byte for byte once blockrpc's totalDifficulty and blockTimestamp are removed: %d answers through the Follower (totalDifficulty checked as the sum of the difficulties), %d through the upstream Backend (totalDifficulty checked null)",
		last+1, txs, c.compared[0], c.compared[1])
}

// sendTransactions has geth's developer account send transactions of each
// kind geth signs for it until end: legacy, access-list, dynamic-fee and a
// contract creation. It returns how many it sent.
func sendTransactions(ctx context.Context, t *testing.T, node *gethnode.Node, end time.Time) int {
	var accounts []string
	answer, err := node.Call(ctx, "eth_accounts")
	if err == nil {
		err = json.Unmarshal(answer, &accounts)
	}
	if err != nil || len(accounts) == 0 {
		t.Errorf("the developer account: %s %v", answer, err)
		return 0
	}
	from, to := accounts[0], "0x000000000000000000000000000000000000dead"
	gasPrice := "0x2540be400" // 10 gwei
	// initCode deploys a contract whose code returns 42.
	initCode := "0x600a600c600039600a6000f3602a60005260206000f3"
	kinds := []map[string]any{
		{"from": from, "to": to, "value": "0x1", "gasPrice": gasPrice},
		{"from": from, "to": to, "value": "0x2", "gasPrice": gasPrice, "accessList": []any{map[string]any{"address": to, "storageKeys": []string{"0x" + fmt.Sprintf("%064x", 1)}}}},
		{"from": from, "to": to, "value": "0x3"},
		{"from": from, "data": initCode, "gas": "0x30d40"},
	}
	sent := 0
	for i := 0; time.Now().Before(end); i++ {
		if _, err := node.Call(ctx, "eth_sendTransaction", kinds[i%len(kinds)]); err != nil {
			t.Errorf("eth_sendTransaction: %v", err)
			return sent
		}
		sent++
		select {
		case <-ctx.Done():
			return sent
		case <-time.After(300 * time.Millisecond):
		}
	}
	return sent
}

// devComparer asks geth, and blockrpc serving the follower's store and the
// upstream Backend, the same.
type devComparer struct {
	t                        *testing.T
	geth, follower, upstream string
	compared                 [2]int // through the follower, through the upstream Backend
}

// These are what blockrpc writes and go-ethereum 1.16.9 does not: the
// total difficulty (the follower's is the sum of the difficulties, the
// upstream Backend's null on a chain it cannot know it for) and the
// transactions' block time (go-ethereum writes it from 1.17 on).
var (
	givenTotalDifficulty = regexp.MustCompile(`"totalDifficulty":"0x[0-9a-f]+",`)
	nullTotalDifficulty  = regexp.MustCompile(`"totalDifficulty":null,`)
	blockTimestamp       = regexp.MustCompile(`"blockTimestamp":"0x[0-9a-f]+",`)
)

// same compares one answer of each with geth's and returns geth's result.
func (c *devComparer) same(method string, params ...any) json.RawMessage {
	c.t.Helper()
	want, got := c.answers(method, params...)
	for i, name := range []string{"follower", "upstream"} {
		if !bytes.Equal(got[i], want) {
			c.t.Errorf("%s: %s%v differs from geth's answer %s", name, method, params, firstDifference(want, got[i]))
		}
		c.compared[i]++
	}
	return result(c.t, want)
}

// answers returns geth's answer, and the follower's and upstream's without
// what go-ethereum 1.16.9 does not write, having checked that their
// blocks have it.
func (c *devComparer) answers(method string, params ...any) (geth []byte, ours [2][]byte) {
	c.t.Helper()
	body := request(method, params...)
	geth = post(c.t, c.geth, body)
	for i, rule := range []*regexp.Regexp{givenTotalDifficulty, nullTotalDifficulty} {
		answer := post(c.t, []string{c.follower, c.upstream}[i], body)
		if isObject(result(c.t, answer)) && !rule.Match(answer) {
			c.t.Errorf("%s: the block's totalDifficulty is not %s: %s", body, rule, clip(answer))
		}
		ours[i] = blockTimestamp.ReplaceAll(rule.ReplaceAll(answer, nil), nil)
	}
	return geth, ours
}

// td checks the follower's totalDifficulty of a block.
func (c *devComparer) td(number string, want *uint256.Int) {
	c.t.Helper()
	var b struct{ TotalDifficulty *hexutil.U256 }
	if err := json.Unmarshal(result(c.t, post(c.t, c.follower, request("eth_getBlockByNumber", number, false))), &b); err != nil {
		c.t.Fatal(err)
	}
	if b.TotalDifficulty == nil || !(*uint256.Int)(b.TotalDifficulty).Eq(want) {
		c.t.Errorf("block %s: totalDifficulty %v, want the sum of the difficulties %s", number, b.TotalDifficulty, want.Dec())
	}
}

// sameTag compares a tag's block until geth and each of ours agree, for
// at most three of the follower's polls.
func (c *devComparer) sameTag(tag string) {
	c.t.Helper()
	deadline := time.Now().Add(6 * time.Second)
	agreed := [2]bool{}
	for {
		want, got := c.answers("eth_getBlockByNumber", tag, false)
		for i := range got {
			agreed[i] = agreed[i] || bytes.Equal(got[i], want)
		}
		if agreed[0] && agreed[1] {
			c.compared[0]++
			c.compared[1]++
			return
		}
		if time.Now().After(deadline) {
			c.t.Errorf("%s: ours never agreed with geth's (follower %v, upstream %v)", tag, agreed[0], agreed[1])
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}
