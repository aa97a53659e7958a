package fixturechains

import (
	"testing"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/internal/rlptest"
	"github.com/holiman/uint256"
)

// The execution-apis chain and the ethereum-tests blocks come as RLP,
// which the library only writes; internal/rlptest reads it.

// rlpU256 reads an RLP string as a 256-bit integer.
func rlpU256(v rlptest.Item) *uint256.Int { return new(uint256.Int).SetBytes(v.Bytes) }

// rlpAddress reads an RLP string as an address: nil for the empty string, a
// contract creation's "to".
func rlpAddress(v rlptest.Item) *backend.Address {
	if len(v.Bytes) == 0 {
		return nil
	}
	a := backend.Address(v.Bytes)
	return &a
}

// blockFromRLP reads a block ([header, transactions, uncles,
// withdrawals?]) with each transaction's sender recovered: what
// memstore.AddBlock takes. The derived values are left for it to compute.
func blockFromRLP(t testing.TB, v rlptest.Item) (*backend.Block, []*backend.Uncle) {
	t.Helper()
	if !v.IsList || len(v.List) < 3 {
		t.Fatal("a block is a list of at least 3 items")
	}
	b := &backend.Block{Header: headerFromRLP(v.List[0]), Transactions: []*backend.Transaction{}}
	for i, item := range v.List[1].List {
		tx := txFromRLP(t, item)
		from, err := backend.Sender(tx)
		if err != nil {
			t.Fatalf("block %d transaction %d: %v", b.Number, i, err)
		}
		tx.From = from
		b.Transactions = append(b.Transactions, tx)
	}
	var uncles []*backend.Uncle
	for _, item := range v.List[2].List {
		uncles = append(uncles, &backend.Uncle{Header: headerFromRLP(item)})
	}
	if len(v.List) > 3 {
		b.Withdrawals = []backend.Withdrawal{}
		for _, item := range v.List[3].List {
			f := item.List
			b.Withdrawals = append(b.Withdrawals, backend.Withdrawal{Index: f[0].Uint64(), ValidatorIndex: f[1].Uint64(), Address: *rlpAddress(f[2]), Amount: f[3].Uint64()})
		}
	}
	return b, uncles
}

func headerFromRLP(v rlptest.Item) backend.Header {
	f := v.List
	h := backend.Header{
		ParentHash: backend.Hash(f[0].Bytes), Sha3Uncles: backend.Hash(f[1].Bytes), Miner: *rlpAddress(f[2]),
		StateRoot: backend.Hash(f[3].Bytes), TransactionsRoot: backend.Hash(f[4].Bytes), ReceiptsRoot: backend.Hash(f[5].Bytes),
		LogsBloom: backend.Bloom(f[6].Bytes), Difficulty: *rlpU256(f[7]), Number: f[8].Uint64(),
		GasLimit: f[9].Uint64(), GasUsed: f[10].Uint64(), Timestamp: f[11].Uint64(),
		ExtraData: f[12].Bytes, MixHash: backend.Hash(f[13].Bytes), Nonce: backend.Nonce(f[14].Bytes),
	}
	opt := f[15:]
	if len(opt) > 0 {
		h.BaseFeePerGas = rlpU256(opt[0])
	}
	if len(opt) > 1 {
		r := backend.Hash(opt[1].Bytes)
		h.WithdrawalsRoot = &r
	}
	if len(opt) > 2 {
		n := opt[2].Uint64()
		h.BlobGasUsed = &n
	}
	if len(opt) > 3 {
		n := opt[3].Uint64()
		h.ExcessBlobGas = &n
	}
	if len(opt) > 4 {
		r := backend.Hash(opt[4].Bytes)
		h.ParentBeaconBlockRoot = &r
	}
	if len(opt) > 5 {
		r := backend.Hash(opt[5].Bytes)
		h.RequestsHash = &r
	}
	return h
}

func txFromRLP(t testing.TB, v rlptest.Item) *backend.Transaction {
	t.Helper()
	if v.IsList { // legacy
		f := v.List
		return &backend.Transaction{
			Type: backend.LegacyTxType, Nonce: f[0].Uint64(), GasPrice: rlpU256(f[1]), Gas: f[2].Uint64(),
			To: rlpAddress(f[3]), Value: *rlpU256(f[4]), Input: f[5].Bytes, V: *rlpU256(f[6]), R: *rlpU256(f[7]), S: *rlpU256(f[8]),
		}
	}
	if len(v.Bytes) == 0 {
		t.Fatal("an empty typed transaction")
	}
	body, _, err := rlptest.Decode(v.Bytes[1:])
	if err != nil {
		t.Fatal(err)
	}
	f := body.List
	tx := &backend.Transaction{Type: v.Bytes[0], ChainID: rlpU256(f[0]), Nonce: f[1].Uint64()}
	var rest []rlptest.Item
	if tx.Type == backend.AccessListTxType {
		tx.GasPrice = rlpU256(f[2])
		rest = f[3:]
	} else {
		tx.MaxPriorityFeePerGas, tx.MaxFeePerGas = rlpU256(f[2]), rlpU256(f[3])
		rest = f[4:]
	}
	tx.Gas, tx.To, tx.Value, tx.Input = rest[0].Uint64(), rlpAddress(rest[1]), *rlpU256(rest[2]), rest[3].Bytes
	for _, e := range rest[4].List {
		tuple := backend.AccessTuple{Address: *rlpAddress(e.List[0]), StorageKeys: []backend.Hash{}}
		for _, k := range e.List[1].List {
			tuple.StorageKeys = append(tuple.StorageKeys, backend.Hash(k.Bytes))
		}
		tx.AccessList = append(tx.AccessList, tuple)
	}
	if tx.AccessList == nil {
		tx.AccessList = []backend.AccessTuple{}
	}
	rest = rest[5:]
	switch tx.Type {
	case backend.BlobTxType:
		tx.MaxFeePerBlobGas = rlpU256(rest[0])
		for _, h := range rest[1].List {
			tx.BlobVersionedHashes = append(tx.BlobVersionedHashes, backend.Hash(h.Bytes))
		}
		rest = rest[2:]
	case backend.SetCodeTxType:
		for _, a := range rest[0].List {
			tx.AuthorizationList = append(tx.AuthorizationList, backend.SetCodeAuthorization{
				ChainID: *rlpU256(a.List[0]), Address: *rlpAddress(a.List[1]), Nonce: a.List[2].Uint64(),
				YParity: uint8(a.List[3].Uint64()), R: *rlpU256(a.List[4]), S: *rlpU256(a.List[5]),
			})
		}
		rest = rest[1:]
	}
	tx.V, tx.R, tx.S = *rlpU256(rest[0]), *rlpU256(rest[1]), *rlpU256(rest[2])
	return tx
}
