package backend

// These tests are internal: they check the RLP writer and the trie builder
// directly, against known encodings and an independent reference.

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/blockrpc/blockrpc/internal/fixtures"
	"github.com/blockrpc/blockrpc/internal/rlptest"
	"github.com/holiman/uint256"
	"golang.org/x/crypto/sha3"
)

func mustHash(s string) Hash {
	h, err := ParseHash(s)
	if err != nil {
		panic(err)
	}
	return h
}

func fromHex(s string) []byte {
	b, err := hex.DecodeString(strings.TrimPrefix(s, "0x"))
	if err != nil {
		panic(err)
	}
	return b
}

// refKeccak is Keccak-256 computed here rather than by the package.
func refKeccak(data []byte) Hash {
	d := sha3.NewLegacyKeccak256()
	d.Write(data)
	return Hash(d.Sum(nil))
}

// ---------------------------------------------------------------------------
// Reference RLP encoder, written from the Yellow Paper's definition.

func refLength(base byte, n int) []byte {
	if n < 56 {
		return []byte{base + byte(n)}
	}
	var be [8]byte
	binary.BigEndian.PutUint64(be[:], uint64(n))
	size := bytes.TrimLeft(be[:], "\x00")
	return append([]byte{base + 55 + byte(len(size))}, size...)
}

func refString(b []byte) []byte {
	if len(b) == 1 && b[0] < 0x80 {
		return []byte{b[0]}
	}
	return append(refLength(0x80, len(b)), b...)
}

func refList(items ...[]byte) []byte {
	payload := bytes.Join(items, nil)
	return append(refLength(0xc0, len(payload)), payload...)
}

func refUint(v uint64) []byte {
	var be [8]byte
	binary.BigEndian.PutUint64(be[:], v)
	return refString(bytes.TrimLeft(be[:], "\x00"))
}

func refU256(z *uint256.Int) []byte { return refString(z.Bytes()) }

func TestRLPWriter(t *testing.T) {
	long56 := "Lorem ipsum dolor sit amet, consectetur adipisicing elit"
	long60 := bytes.Repeat([]byte{0xab}, 60)
	tests := []struct {
		name  string
		write func(w *rlpWriter)
		want  string
	}{
		{"empty string", func(w *rlpWriter) { w.bytes(nil) }, "80"},
		{"byte 0x00", func(w *rlpWriter) { w.bytes([]byte{0}) }, "00"},
		{"byte 0x7f", func(w *rlpWriter) { w.bytes([]byte{0x7f}) }, "7f"},
		{"byte 0x80", func(w *rlpWriter) { w.bytes([]byte{0x80}) }, "8180"},
		{"dog", func(w *rlpWriter) { w.bytes([]byte("dog")) }, "83646f67"},
		{"55-byte string", func(w *rlpWriter) { w.bytes(bytes.Repeat([]byte{1}, 55)) }, "b7" + strings.Repeat("01", 55)},
		{"56-byte string", func(w *rlpWriter) { w.bytes([]byte(long56)) }, "b838" + hex.EncodeToString([]byte(long56))},
		{"1024-byte string", func(w *rlpWriter) { w.bytes(make([]byte, 1024)) }, "b90400" + strings.Repeat("00", 1024)},
		{"uint 0", func(w *rlpWriter) { w.uint64(0) }, "80"},
		{"uint 1", func(w *rlpWriter) { w.uint64(1) }, "01"},
		{"uint 127", func(w *rlpWriter) { w.uint64(127) }, "7f"},
		{"uint 128", func(w *rlpWriter) { w.uint64(128) }, "8180"},
		{"uint 255", func(w *rlpWriter) { w.uint64(255) }, "81ff"},
		{"uint 256", func(w *rlpWriter) { w.uint64(256) }, "820100"},
		{"uint 1024", func(w *rlpWriter) { w.uint64(1024) }, "820400"},
		{"uint max", func(w *rlpWriter) { w.uint64(1<<64 - 1) }, "88ffffffffffffffff"},
		{"u256 0", func(w *rlpWriter) { w.u256(new(uint256.Int)) }, "80"},
		{"u256 127", func(w *rlpWriter) { w.u256(uint256.NewInt(127)) }, "7f"},
		{"u256 2^64", func(w *rlpWriter) { w.u256(new(uint256.Int).Lsh(uint256.NewInt(1), 64)) }, "89010000000000000000"},
		{"u256 max", func(w *rlpWriter) { w.u256(new(uint256.Int).SetAllOne()) }, "a0" + strings.Repeat("ff", 32)},
		{"absent u256", func(w *rlpWriter) { w.optionalU256(nil) }, "80"},
		{"absent uint64", func(w *rlpWriter) { w.optionalUint64(nil) }, "80"},
		{"present uint64", func(w *rlpWriter) { v := uint64(0x400); w.optionalUint64(&v) }, "820400"},
		{"absent hash", func(w *rlpWriter) { w.optionalHash(nil) }, "80"},
		{"contract creation", func(w *rlpWriter) { w.address(nil) }, "80"},
		{"address", func(w *rlpWriter) { w.address(&Address{19: 1}) }, "94" + strings.Repeat("00", 19) + "01"},
		{"empty list", func(w *rlpWriter) { w.endList(w.list()) }, "c0"},
		{"[cat, dog]", func(w *rlpWriter) {
			m := w.list()
			w.bytes([]byte("cat"))
			w.bytes([]byte("dog"))
			w.endList(m)
		}, "c88363617483646f67"},
		// The set-theoretic representation of three: [ [], [[]], [ [], [[]] ] ].
		{"nested lists", func(w *rlpWriter) {
			outer := w.list()
			w.endList(w.list())
			one := w.list()
			w.endList(w.list())
			w.endList(one)
			two := w.list()
			w.endList(w.list())
			inner := w.list()
			w.endList(w.list())
			w.endList(inner)
			w.endList(two)
			w.endList(outer)
		}, "c7c0c1c0c3c0c1c0"},
		{"list of a 56-byte string", func(w *rlpWriter) {
			m := w.list()
			w.bytes([]byte(long56))
			w.endList(m)
		}, "f83a" + "b838" + hex.EncodeToString([]byte(long56))},
		// Both lists need a long header: the inner one's insertion must
		// shift what the outer one already holds.
		{"long list in long list", func(w *rlpWriter) {
			outer := w.list()
			w.uint64(1)
			inner := w.list()
			w.bytes(long60)
			w.endList(inner)
			w.uint64(2)
			w.endList(outer)
		}, "f842" + "01" + "f83e" + "b83c" + hex.EncodeToString(long60) + "02"},
		{"items after a list", func(w *rlpWriter) {
			m := w.list()
			w.bytes([]byte("a"))
			w.endList(m)
			w.bytes([]byte("bc"))
		}, "c161" + "826263"},
	}
	for _, tc := range tests {
		var w rlpWriter
		tc.write(&w)
		if got := hex.EncodeToString(w.buf); got != tc.want {
			t.Errorf("%s: wrote %s, want %s", tc.name, got, tc.want)
		}
	}
}

// TestRLPWriterMatchesReference compares lists of random strings, which
// cross the short/long boundaries of both headers, with the reference.
func TestRLPWriterMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		var w rlpWriter
		mark := w.list()
		var items [][]byte
		for range rng.IntN(8) {
			s := make([]byte, rng.IntN(3)*rng.IntN(70))
			for i := range s {
				s[i] = byte(rng.IntN(256))
			}
			w.bytes(s)
			items = append(items, refString(s))
		}
		w.endList(mark)
		if want := refList(items...); !bytes.Equal(w.buf, want) {
			t.Fatalf("wrote %x, want %x", w.buf, want)
		}
	}
}

// ---------------------------------------------------------------------------
// Reference trie, built the way go-ethereum's trie package builds one: by
// inserting keys one at a time into nodes that split as keys diverge. Keys are
// nibbles ending in the terminator 16, so that a value ends every path.

const terminator = 16

type (
	refShort struct {
		key   []byte // nibbles; ends in the terminator when child is a refValue
		child any
	}
	refFull  struct{ children [17]any } // children[16] is the value ending here
	refValue []byte
)

func refInsert(n any, key []byte, value refValue) any {
	if len(key) == 0 {
		return value
	}
	switch n := n.(type) {
	case nil:
		return &refShort{key: key, child: value}
	case *refShort:
		match := 0
		for match < len(key) && match < len(n.key) && key[match] == n.key[match] {
			match++
		}
		if match == len(n.key) {
			n.child = refInsert(n.child, key[match:], value)
			return n
		}
		branch := &refFull{}
		branch.children[n.key[match]] = refShorten(n.key[match+1:], n.child)
		branch.children[key[match]] = refInsert(nil, key[match+1:], value)
		if match == 0 {
			return branch
		}
		return &refShort{key: key[:match], child: branch}
	case *refFull:
		n.children[key[0]] = refInsert(n.children[key[0]], key[1:], value)
		return n
	default:
		panic(fmt.Sprintf("refInsert: a key is a prefix of another (%T)", n))
	}
}

func refShorten(key []byte, child any) any {
	if len(key) == 0 {
		return child
	}
	return &refShort{key: key, child: child}
}

// refCompact is the hex-prefix encoding of the Yellow Paper, appendix C.
func refCompact(key []byte) []byte {
	flag := byte(0)
	if len(key) > 0 && key[len(key)-1] == terminator {
		flag = 0x20
		key = key[:len(key)-1]
	}
	if len(key)%2 == 1 {
		flag |= 0x10 | key[0]
		key = key[1:]
	}
	out := []byte{flag}
	for i := 0; i+1 < len(key); i += 2 {
		out = append(out, key[i]<<4|key[i+1])
	}
	return out
}

func refEncodeNode(n any) []byte {
	switch n := n.(type) {
	case *refShort:
		return refList(refString(refCompact(n.key)), refChild(n.child))
	case *refFull:
		items := make([][]byte, 17)
		for i, c := range n.children {
			items[i] = refChild(c)
		}
		return refList(items...)
	}
	panic(fmt.Sprintf("refEncodeNode(%T)", n))
}

// refChild is how a node refers to a child: the value itself, nothing (an
// empty string), the child's encoding if shorter than 32 bytes, or its hash.
func refChild(n any) []byte {
	switch n := n.(type) {
	case nil:
		return refString(nil)
	case refValue:
		return refString(n)
	}
	enc := refEncodeNode(n)
	if len(enc) < 32 {
		return enc
	}
	h := refKeccak(enc)
	return refString(h[:])
}

// refTrieRoot returns the root of the trie holding the given nibble keys
// (without terminator) and values, inserted in the given order.
func refTrieRoot(keys [][]byte, values [][]byte) Hash {
	var root any
	for i, k := range keys {
		key := append(slices.Clone(k), terminator)
		root = refInsert(root, key, refValue(values[i]))
	}
	if root == nil {
		return refKeccak(refString(nil))
	}
	return refKeccak(refEncodeNode(root))
}

func refNibbles(b []byte) []byte {
	var n []byte
	for _, c := range b {
		n = append(n, c>>4, c&0x0f)
	}
	return n
}

func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.IntN(256))
	}
	return b
}

func TestOrderedTrieRootMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{1, 2, 3, 15, 16, 17, 127, 128, 129, 130, 255, 256, 300, 1000} {
		values := make([][]byte, n)
		keys := make([][]byte, n)
		for i := range values {
			// Short values make nodes that are embedded in their parent,
			// long ones nodes that are referred to by hash.
			values[i] = randomBytes(rng, 1+rng.IntN(3)*rng.IntN(60))
			keys[i] = refNibbles(refUint(uint64(i)))
		}
		want := refTrieRoot(keys, values)
		if got := orderedTrieRoot(values); got != want {
			t.Errorf("%d values: orderedTrieRoot = %v, reference %v", n, got, want)
		}
	}
}

// TestTrieNodeMatchesReference builds tries with arbitrary nibble keys, some
// of odd length and some the prefix of others (a value in a branch), which
// ordered keys never produce.
func TestTrieNodeMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for round := range 2000 {
		seen := map[string]bool{}
		var leaves []trieLeaf
		var keys, values [][]byte
		for range 1 + rng.IntN(20) {
			key := make([]byte, rng.IntN(7))
			for i := range key {
				key[i] = byte(rng.IntN(4)) // few nibbles: many shared prefixes
			}
			if seen[string(key)] {
				continue
			}
			seen[string(key)] = true
			value := randomBytes(rng, 1+rng.IntN(40))
			leaves = append(leaves, trieLeaf{key: key, value: value})
			keys, values = append(keys, key), append(values, value)
		}
		slices.SortFunc(leaves, func(a, b trieLeaf) int { return bytes.Compare(a.key, b.key) })
		want := refTrieRoot(keys, values)
		if got := keccak(trieNode(leaves, 0)); got != want {
			t.Fatalf("round %d: keys %v: root %v, reference %v", round, keys, got, want)
		}
	}
}

func TestHexPrefix(t *testing.T) {
	for _, tc := range []struct {
		nibbles []byte
		leaf    bool
		want    string
	}{
		{nil, false, "00"},
		{nil, true, "20"},
		{[]byte{1, 2, 3, 4, 5}, false, "112345"},
		{[]byte{0, 1, 2, 3, 4, 5}, false, "00012345"},
		{[]byte{0, 15, 1, 12, 11, 8}, true, "200f1cb8"},
		{[]byte{15, 1, 12, 11, 8}, true, "3f1cb8"},
	} {
		if got := hex.EncodeToString(hexPrefix(tc.nibbles, tc.leaf)); got != tc.want {
			t.Errorf("hexPrefix(%v, %t) = %s, want %s", tc.nibbles, tc.leaf, got, tc.want)
		}
	}
}

// ---------------------------------------------------------------------------
// Known values

const (
	emptyRootHex  = "0x56e81f171bcc55a6ff8345e692c0f86e5b48e01b996cadc001622fb5e363b421"
	emptyUncleHex = "0x1dcc4de8dec75d7aab85b567b6ccd41ad312451b948a7413f0a142fd40d49347"
)

func TestEmptyValues(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  Hash
		want string
	}{
		{"emptyRoot", emptyRoot, emptyRootHex},
		{"keccak(rlp(\"\"))", refKeccak([]byte{0x80}), emptyRootHex},
		{"TransactionsRoot(nil)", TransactionsRoot(nil), emptyRootHex},
		{"TransactionsRoot(empty)", TransactionsRoot([]*Transaction{}), emptyRootHex},
		{"WithdrawalsRoot(nil)", WithdrawalsRoot(nil), emptyRootHex},
		{"UnclesHash(nil)", UnclesHash(nil), emptyUncleHex},
		{"UnclesHash(empty)", UnclesHash([]*Header{}), emptyUncleHex},
	} {
		if tc.got != mustHash(tc.want) {
			t.Errorf("%s = %v, want %s", tc.name, tc.got, tc.want)
		}
	}
}

// mainnetGenesis is the header of Ethereum mainnet's block 0, whose hash
// and size are well known.
func mainnetGenesis() Header {
	return Header{
		Sha3Uncles:       mustHash(emptyUncleHex),
		StateRoot:        mustHash("0xd7f8974fb5ac78d9ac099b9ad5018bedc2ce0a72dad1827a1709da30580f0544"),
		TransactionsRoot: mustHash(emptyRootHex),
		ReceiptsRoot:     mustHash(emptyRootHex),
		Difficulty:       *uint256.NewInt(0x400000000),
		GasLimit:         5000,
		ExtraData:        fromHex("11bbe8db4e347b4e8c937c1c8370e4b5ed33adb3db69cbdb7a38e1e50b1b82fa"),
		Nonce:            Nonce{7: 0x42},
	}
}

func TestMainnetGenesis(t *testing.T) {
	h := mainnetGenesis()
	if got, want := HeaderHash(&h), mustHash("0xd4e56740f876aef8c010b86a40d5f56745a118d0906a34e69aec8c0db1cb8fa3"); got != want {
		t.Errorf("HeaderHash(mainnet genesis) = %v, want %v", got, want)
	}
	if got := BlockSize(&h, nil, nil, nil); got != 540 {
		t.Errorf("BlockSize(mainnet genesis) = %d, want 540", got)
	}
	if got := UncleSize(&h); got != 540 {
		t.Errorf("UncleSize(mainnet genesis) = %d, want 540", got)
	}
}

// forkHeaders returns a header of each fork, and headers with gaps in the
// fork fields, which are encoded as empty strings up to the last present.
func forkHeaders() map[string]*Header {
	root, n := mustHash("0x"+strings.Repeat("ab", 32)), uint64(0x20000)
	frontier := mainnetGenesis()
	frontier.Number, frontier.Difficulty = 1_000_000, *uint256.MustFromHex("0xc70d815d562d3cfa955")
	with := func(edit func(h *Header)) *Header {
		h := frontier.Copy()
		edit(&h)
		return &h
	}
	return map[string]*Header{
		"frontier": &frontier,
		"london":   with(func(h *Header) { h.BaseFeePerGas = uint256.NewInt(7) }),
		"shanghai": with(func(h *Header) { h.BaseFeePerGas, h.WithdrawalsRoot = uint256.NewInt(7), &root }),
		"prague": with(func(h *Header) {
			h.BaseFeePerGas, h.WithdrawalsRoot, h.BlobGasUsed, h.ExcessBlobGas = uint256.NewInt(0), &root, &n, new(uint64)
			h.ParentBeaconBlockRoot, h.RequestsHash = &root, &root
		}),
		"requestsHash only": with(func(h *Header) { h.RequestsHash = &root }),
		"blobGasUsed only":  with(func(h *Header) { h.BlobGasUsed = &n }),
		"no withdrawalsRoot": with(func(h *Header) {
			h.BaseFeePerGas, h.BlobGasUsed, h.ExcessBlobGas, h.ParentBeaconBlockRoot = uint256.NewInt(1), &n, &n, &root
		}),
	}
}

// refHeader is the header's RLP encoding, built with the reference encoder.
func refHeader(h *Header) []byte {
	items := [][]byte{
		refString(h.ParentHash[:]), refString(h.Sha3Uncles[:]), refString(h.Miner[:]),
		refString(h.StateRoot[:]), refString(h.TransactionsRoot[:]), refString(h.ReceiptsRoot[:]),
		refString(h.LogsBloom[:]), refU256(&h.Difficulty), refUint(h.Number), refUint(h.GasLimit),
		refUint(h.GasUsed), refUint(h.Timestamp), refString(h.ExtraData), refString(h.MixHash[:]),
		refString(h.Nonce[:]),
	}
	var optional [][]byte // nil for an absent field
	if h.BaseFeePerGas != nil {
		optional = append(optional, refU256(h.BaseFeePerGas))
	} else {
		optional = append(optional, nil)
	}
	for _, f := range []*Hash{h.WithdrawalsRoot} {
		optional = append(optional, refOptionalHash(f))
	}
	for _, f := range []*uint64{h.BlobGasUsed, h.ExcessBlobGas} {
		if f != nil {
			optional = append(optional, refUint(*f))
		} else {
			optional = append(optional, nil)
		}
	}
	for _, f := range []*Hash{h.ParentBeaconBlockRoot, h.RequestsHash} {
		optional = append(optional, refOptionalHash(f))
	}
	for len(optional) > 0 && optional[len(optional)-1] == nil {
		optional = optional[:len(optional)-1]
	}
	for _, item := range optional {
		if item == nil {
			item = refString(nil)
		}
		items = append(items, item)
	}
	return refList(items...)
}

func refOptionalHash(h *Hash) []byte {
	if h == nil {
		return nil
	}
	return refString(h[:])
}

func TestHeaderRLP(t *testing.T) {
	for name, h := range forkHeaders() {
		var w rlpWriter
		h.appendRLP(&w)
		want := refHeader(h)
		if !bytes.Equal(w.buf, want) {
			t.Errorf("%s: header RLP\n got %x\nwant %x", name, w.buf, want)
		}
		if got := HeaderHash(h); got != refKeccak(want) {
			t.Errorf("%s: HeaderHash = %v, want %v", name, got, refKeccak(want))
		}
	}
}

// refBlock is the RLP encoding of a block: header, transactions (a typed one
// as the byte string of its encoding), uncles and, when given, withdrawals.
func refBlock(h *Header, txs []*Transaction, uncles []*Header, withdrawals []Withdrawal, withWithdrawals bool) []byte {
	var txItems, uncleItems, wdItems [][]byte
	for _, tx := range txs {
		enc := EncodeTransaction(tx)
		if tx.Type != LegacyTxType {
			enc = refString(enc)
		}
		txItems = append(txItems, enc)
	}
	for _, u := range uncles {
		uncleItems = append(uncleItems, refHeader(u))
	}
	for _, wd := range withdrawals {
		wdItems = append(wdItems, refList(refUint(wd.Index), refUint(wd.ValidatorIndex), refString(wd.Address[:]), refUint(wd.Amount)))
	}
	items := [][]byte{refHeader(h), refList(txItems...), refList(uncleItems...)}
	if withWithdrawals {
		items = append(items, refList(wdItems...))
	}
	return refList(items...)
}

func sampleTransactions() []*Transaction {
	to := Address{1, 2, 3}
	r, s := *uint256.MustFromHex("0x" + strings.Repeat("12", 32)), *uint256.MustFromHex("0x" + strings.Repeat("34", 32))
	one, fee := uint256.NewInt(1), uint256.NewInt(1_000_000_000)
	return []*Transaction{
		{Type: LegacyTxType, Nonce: 1, GasPrice: fee, Gas: 21000, To: &to, Value: *uint256.NewInt(5), V: *uint256.NewInt(27), R: r, S: s},
		{Type: AccessListTxType, ChainID: one, GasPrice: fee, Gas: 30000, To: &to, AccessList: []AccessTuple{{Address: to, StorageKeys: []Hash{{1}}}}, V: *one, R: r, S: s},
		{Type: DynamicFeeTxType, ChainID: one, MaxPriorityFeePerGas: one, MaxFeePerGas: fee, Gas: 21000, Input: bytes.Repeat([]byte{0xee}, 300), R: r, S: s},
		{Type: BlobTxType, ChainID: one, MaxPriorityFeePerGas: one, MaxFeePerGas: fee, Gas: 21000, To: &to, MaxFeePerBlobGas: one, BlobVersionedHashes: []Hash{{1}}, R: r, S: s},
		{Type: SetCodeTxType, ChainID: one, MaxPriorityFeePerGas: one, MaxFeePerGas: fee, Gas: 21000, To: &to, AuthorizationList: []SetCodeAuthorization{{ChainID: *one, Address: to, Nonce: 2, YParity: 1, R: r, S: s}}, R: r, S: s},
	}
}

func TestBlockSize(t *testing.T) {
	headers := forkHeaders()
	txs := sampleTransactions()
	uncles := []*Header{headers["frontier"], headers["london"]}
	withdrawals := []Withdrawal{{Index: 1, ValidatorIndex: 2, Address: Address{9}, Amount: 3}, {Index: 1 << 40}}
	for name, h := range headers {
		withWithdrawals := h.WithdrawalsRoot != nil
		for _, tc := range []struct {
			desc        string
			txs         []*Transaction
			uncles      []*Header
			withdrawals []Withdrawal
		}{
			{"empty", nil, nil, nil},
			{"transactions", txs, nil, nil},
			{"uncles", nil, uncles, nil},
			{"everything", txs, uncles, withdrawals},
		} {
			want := len(refBlock(h, tc.txs, tc.uncles, tc.withdrawals, withWithdrawals))
			if got := BlockSize(h, tc.txs, tc.uncles, tc.withdrawals); got != uint64(want) {
				t.Errorf("%s, %s: BlockSize = %d, want %d", name, tc.desc, got, want)
			}
		}
		// An uncle's size is that of a block of the header alone, without
		// a withdrawals list even when the header has a withdrawals root.
		if got, want := UncleSize(h), len(refBlock(h, nil, nil, nil, false)); got != uint64(want) {
			t.Errorf("%s: UncleSize = %d, want %d", name, got, want)
		}
		empty := BlockSize(h, nil, nil, nil)
		switch {
		case !withWithdrawals && UncleSize(h) != empty:
			t.Errorf("%s: UncleSize = %d, want BlockSize of the header alone, %d", name, UncleSize(h), empty)
		case withWithdrawals && UncleSize(h) != empty-1:
			t.Errorf("%s: UncleSize = %d, want BlockSize of the header alone less the empty withdrawals list, %d", name, UncleSize(h), empty-1)
		}
	}
	if got, want := UnclesHash(uncles), refKeccak(refList(refHeader(uncles[0]), refHeader(uncles[1]))); got != want {
		t.Errorf("UnclesHash of two headers = %v, want %v", got, want)
	}
}

// refTransaction is a transaction's encoding written from the EIPs that
// define each type.
func refTransaction(tx *Transaction) []byte {
	to := refString(nil)
	if tx.To != nil {
		to = refString(tx.To[:])
	}
	var accessList [][]byte
	for _, a := range tx.AccessList {
		var keys [][]byte
		for _, k := range a.StorageKeys {
			keys = append(keys, refString(k[:]))
		}
		accessList = append(accessList, refList(refString(a.Address[:]), refList(keys...)))
	}
	opt := func(z *uint256.Int) []byte {
		if z == nil {
			return refString(nil)
		}
		return refU256(z)
	}
	sig := [][]byte{refU256(&tx.V), refU256(&tx.R), refU256(&tx.S)}
	switch tx.Type {
	case LegacyTxType: // the original list; EIP-155 only changes v
		return refList(append([][]byte{refUint(tx.Nonce), opt(tx.GasPrice), refUint(tx.Gas), to, refU256(&tx.Value), refString(tx.Input)}, sig...)...)
	case AccessListTxType: // EIP-2930
		return append([]byte{1}, refList(append([][]byte{opt(tx.ChainID), refUint(tx.Nonce), opt(tx.GasPrice), refUint(tx.Gas), to, refU256(&tx.Value), refString(tx.Input), refList(accessList...)}, sig...)...)...)
	case DynamicFeeTxType: // EIP-1559
		return append([]byte{2}, refList(append([][]byte{opt(tx.ChainID), refUint(tx.Nonce), opt(tx.MaxPriorityFeePerGas), opt(tx.MaxFeePerGas), refUint(tx.Gas), to, refU256(&tx.Value), refString(tx.Input), refList(accessList...)}, sig...)...)...)
	case BlobTxType: // EIP-4844
		var hashes [][]byte
		for _, h := range tx.BlobVersionedHashes {
			hashes = append(hashes, refString(h[:]))
		}
		return append([]byte{3}, refList(append([][]byte{opt(tx.ChainID), refUint(tx.Nonce), opt(tx.MaxPriorityFeePerGas), opt(tx.MaxFeePerGas), refUint(tx.Gas), to, refU256(&tx.Value), refString(tx.Input), refList(accessList...), opt(tx.MaxFeePerBlobGas), refList(hashes...)}, sig...)...)...)
	case SetCodeTxType: // EIP-7702
		var auths [][]byte
		for _, a := range tx.AuthorizationList {
			auths = append(auths, refList(refU256(&a.ChainID), refString(a.Address[:]), refUint(a.Nonce), refUint(uint64(a.YParity)), refU256(&a.R), refU256(&a.S)))
		}
		return append([]byte{4}, refList(append([][]byte{opt(tx.ChainID), refUint(tx.Nonce), opt(tx.MaxPriorityFeePerGas), opt(tx.MaxFeePerGas), refUint(tx.Gas), to, refU256(&tx.Value), refString(tx.Input), refList(accessList...), refList(auths...)}, sig...)...)...)
	}
	panic("refTransaction: unknown type")
}

func TestEncodeTransaction(t *testing.T) {
	for _, tx := range sampleTransactions() {
		want := refTransaction(tx)
		if got := EncodeTransaction(tx); !bytes.Equal(got, want) {
			t.Errorf("type %d: EncodeTransaction\n got %x\nwant %x", tx.Type, got, want)
		}
		if got := TransactionHash(tx); got != refKeccak(want) {
			t.Errorf("type %d: TransactionHash = %v, want %v", tx.Type, got, refKeccak(want))
		}
	}
}

// ---------------------------------------------------------------------------
// The execution-apis chain: real blocks of every fork, as RLP.

// rlpU256 reads an RLP string as a 256-bit integer.
func rlpU256(it rlptest.Item) uint256.Int {
	var z uint256.Int
	z.SetBytes(it.Bytes)
	return z
}

// rlpAddress reads an RLP string as an address: nil for the empty string, a
// contract creation's "to".
func rlpAddress(it rlptest.Item) *Address {
	if len(it.Bytes) == 0 {
		return nil
	}
	a := Address(it.Bytes)
	return &a
}

func headerFromRLP(it rlptest.Item) *Header {
	f := it.List
	h := &Header{
		ParentHash: Hash(f[0].Bytes), Sha3Uncles: Hash(f[1].Bytes), Miner: *rlpAddress(f[2]),
		StateRoot: Hash(f[3].Bytes), TransactionsRoot: Hash(f[4].Bytes), ReceiptsRoot: Hash(f[5].Bytes),
		LogsBloom: Bloom(f[6].Bytes), Difficulty: rlpU256(f[7]), Number: f[8].Uint64(),
		GasLimit: f[9].Uint64(), GasUsed: f[10].Uint64(), Timestamp: f[11].Uint64(),
		ExtraData: f[12].Bytes, MixHash: Hash(f[13].Bytes), Nonce: Nonce(f[14].Bytes),
	}
	optional := f[15:]
	if len(optional) > 0 {
		z := rlpU256(optional[0])
		h.BaseFeePerGas = &z
	}
	if len(optional) > 1 {
		r := Hash(optional[1].Bytes)
		h.WithdrawalsRoot = &r
	}
	if len(optional) > 2 {
		v := optional[2].Uint64()
		h.BlobGasUsed = &v
	}
	if len(optional) > 3 {
		v := optional[3].Uint64()
		h.ExcessBlobGas = &v
	}
	if len(optional) > 4 {
		r := Hash(optional[4].Bytes)
		h.ParentBeaconBlockRoot = &r
	}
	if len(optional) > 5 {
		r := Hash(optional[5].Bytes)
		h.RequestsHash = &r
	}
	return h
}

func transactionFromRLP(t *testing.T, it rlptest.Item) (*Transaction, []byte) {
	t.Helper()
	ptr := func(z uint256.Int) *uint256.Int { return &z }
	if it.IsList { // legacy
		f := it.List
		return &Transaction{
			Type: LegacyTxType, Nonce: f[0].Uint64(), GasPrice: ptr(rlpU256(f[1])), Gas: f[2].Uint64(),
			To: rlpAddress(f[3]), Value: rlpU256(f[4]), Input: f[5].Bytes, V: rlpU256(f[6]), R: rlpU256(f[7]), S: rlpU256(f[8]),
		}, it.Raw
	}
	envelope := it.Bytes
	body, _, err := rlptest.Decode(envelope[1:])
	if err != nil {
		t.Fatal(err)
	}
	f := body.List
	tx := &Transaction{Type: envelope[0], ChainID: ptr(rlpU256(f[0])), Nonce: f[1].Uint64()}
	accessList := func(it rlptest.Item) []AccessTuple {
		var list []AccessTuple
		for _, e := range it.List {
			tuple := AccessTuple{Address: *rlpAddress(e.List[0])}
			for _, k := range e.List[1].List {
				tuple.StorageKeys = append(tuple.StorageKeys, Hash(k.Bytes))
			}
			list = append(list, tuple)
		}
		return list
	}
	var rest []rlptest.Item
	if tx.Type == AccessListTxType {
		tx.GasPrice = ptr(rlpU256(f[2]))
		rest = f[3:]
	} else {
		tx.MaxPriorityFeePerGas, tx.MaxFeePerGas = ptr(rlpU256(f[2])), ptr(rlpU256(f[3]))
		rest = f[4:]
	}
	tx.Gas, tx.To, tx.Value, tx.Input, tx.AccessList = rest[0].Uint64(), rlpAddress(rest[1]), rlpU256(rest[2]), rest[3].Bytes, accessList(rest[4])
	rest = rest[5:]
	switch tx.Type {
	case BlobTxType:
		tx.MaxFeePerBlobGas = ptr(rlpU256(rest[0]))
		for _, h := range rest[1].List {
			tx.BlobVersionedHashes = append(tx.BlobVersionedHashes, Hash(h.Bytes))
		}
		rest = rest[2:]
	case SetCodeTxType:
		for _, a := range rest[0].List {
			tx.AuthorizationList = append(tx.AuthorizationList, SetCodeAuthorization{
				ChainID: rlpU256(a.List[0]), Address: *rlpAddress(a.List[1]), Nonce: a.List[2].Uint64(),
				YParity: uint8(a.List[3].Uint64()), R: rlpU256(a.List[4]), S: rlpU256(a.List[5]),
			})
		}
		rest = rest[1:]
	}
	tx.V, tx.R, tx.S = rlpU256(rest[0]), rlpU256(rest[1]), rlpU256(rest[2])
	return tx, envelope
}

// TestChainRLP re-encodes the headers and transactions of the execution-apis
// chain (Frontier through Prague, with uncles, withdrawals, and transactions
// of every type) and checks every derived value against the blocks' own.
func TestChainRLP(t *testing.T) {
	data, err := os.ReadFile(fixtures.Path(t, "execution-apis", "chain.rlp"))
	if err != nil {
		t.Fatal(err)
	}
	var parent Hash
	types := map[uint8]int{}
	var blocks, uncleCount int
	for rest := data; len(rest) > 0; blocks++ {
		var block rlptest.Item
		if block, rest, err = rlptest.Decode(rest); err != nil {
			t.Fatalf("block %d: %v", blocks, err)
		}
		h := headerFromRLP(block.List[0])
		t.Run(fmt.Sprintf("block %d", h.Number), func(t *testing.T) {
			var w rlpWriter
			h.appendRLP(&w)
			if !bytes.Equal(w.buf, block.List[0].Raw) {
				t.Errorf("header re-encodes as\n%x\nwant\n%x", w.buf, block.List[0].Raw)
			}
			hash := HeaderHash(h)
			if blocks > 0 && h.ParentHash != parent {
				t.Errorf("HeaderHash of the previous block = %v, but this block's parentHash is %v", parent, h.ParentHash)
			}
			parent = hash

			var txs []*Transaction
			for i, item := range block.List[1].List {
				tx, enc := transactionFromRLP(t, item)
				if got := EncodeTransaction(tx); !bytes.Equal(got, enc) {
					t.Errorf("transaction %d (type %d) re-encodes as\n%x\nwant\n%x", i, tx.Type, got, enc)
				}
				types[tx.Type]++
				txs = append(txs, tx)
			}
			if got := TransactionsRoot(txs); got != h.TransactionsRoot {
				t.Errorf("TransactionsRoot of %d transactions = %v, want %v", len(txs), got, h.TransactionsRoot)
			}

			var uncles []*Header
			for _, item := range block.List[2].List {
				u := headerFromRLP(item)
				uncles = append(uncles, u)
				if got, want := UncleSize(u), uint64(len(refList(item.Raw, refList(), refList()))); got != want {
					t.Errorf("UncleSize of uncle %d = %d, want %d", u.Number, got, want)
				}
			}
			uncleCount += len(uncles)
			if got := UnclesHash(uncles); got != h.Sha3Uncles {
				t.Errorf("UnclesHash of %d uncles = %v, want %v", len(uncles), got, h.Sha3Uncles)
			}

			var withdrawals []Withdrawal
			if len(block.List) > 3 {
				for _, item := range block.List[3].List {
					f := item.List
					withdrawals = append(withdrawals, Withdrawal{Index: f[0].Uint64(), ValidatorIndex: f[1].Uint64(), Address: *rlpAddress(f[2]), Amount: f[3].Uint64()})
				}
			}
			if h.WithdrawalsRoot != nil {
				if got := WithdrawalsRoot(withdrawals); got != *h.WithdrawalsRoot {
					t.Errorf("WithdrawalsRoot of %d withdrawals = %v, want %v", len(withdrawals), got, *h.WithdrawalsRoot)
				}
			}
			if got := BlockSize(h, txs, uncles, withdrawals); got != uint64(len(block.Raw)) {
				t.Errorf("BlockSize = %d, want the length of the block's RLP, %d", got, len(block.Raw))
			}
		})
	}
	if blocks != 54 || uncleCount != 18 || len(types) != 5 {
		t.Errorf("read %d blocks, %d uncles, transactions of types %v; want 54 blocks, 18 uncles, types 0-4", blocks, uncleCount, types)
	}
}

// ---------------------------------------------------------------------------
// Benchmarks

// largestMainnetBlock decodes block 18,000,000 (94 transactions) from the
// mainnet fixtures.
func largestMainnetBlock(b *testing.B) *Block {
	b.Helper()
	data, err := os.ReadFile(fixtures.Path(b, "mainnet", "eth_getBlockByNumber", "test_08.json"))
	if err != nil {
		b.Fatal(err)
	}
	var cases []struct {
		Response struct{ Result *Block } `json:"response"`
	}
	if err := json.Unmarshal(data, &cases); err != nil {
		b.Fatal(err)
	}
	if len(cases) == 0 || cases[0].Response.Result == nil || len(cases[0].Response.Result.Transactions) == 0 {
		b.Fatal("test_08.json does not hold a block with transaction objects")
	}
	return cases[0].Response.Result
}

func BenchmarkHeaderHash(b *testing.B) {
	block := largestMainnetBlock(b)
	b.ReportAllocs()
	for b.Loop() {
		if HeaderHash(&block.Header) != block.Hash {
			b.Fatal("wrong hash")
		}
	}
}

func BenchmarkTransactionsRoot(b *testing.B) {
	block := largestMainnetBlock(b)
	b.ReportAllocs()
	for b.Loop() {
		if TransactionsRoot(block.Transactions) != block.TransactionsRoot {
			b.Fatal("wrong root")
		}
	}
}
