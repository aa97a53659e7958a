package gethconv

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/blockrpc/blockrpc/memstore"
	"github.com/ethereum/go-ethereum/core"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/rlp"
)

// inputLimit bounds what the RLP decoder may read by the size of the
// export when it is a file, so that a crafted length cannot make it
// allocate more than the file holds. (For in-memory readers the decoder
// finds the bound itself.)
func inputLimit(r io.Reader) uint64 {
	if f, ok := r.(interface{ Stat() (os.FileInfo, error) }); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			return uint64(fi.Size())
		}
	}
	return 0
}

// ReadGenesis reads a genesis file in go-ethereum's format.
func ReadGenesis(path string) (*core.Genesis, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var genesis core.Genesis
	if err := json.Unmarshal(data, &genesis); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if genesis.Config == nil || genesis.Config.ChainID == nil {
		return nil, fmt.Errorf("%s: no chain id in the config", path)
	}
	return &genesis, nil
}

// LoadExport loads a chain exported by go-ethereum (`geth export`: blocks as
// concatenated RLP, with or without the genesis) into a new store, with the
// genesis and chain id from the genesis specification. An export is one
// canonical chain: each block must be the child of the one before it, the
// first of the genesis.
func LoadExport(genesis *core.Genesis, export io.Reader) (*memstore.Store, error) {
	signer := types.LatestSignerForChainID(genesis.Config.ChainID)
	store := memstore.New()
	if err := store.SetChainID(genesis.Config.ChainID.Uint64()); err != nil {
		return nil, err
	}
	add := func(b *types.Block) error {
		block, uncles, err := Block(signer, b)
		if err != nil {
			return err
		}
		return store.AddBlock(block, uncles...)
	}
	first := genesis.ToBlock()
	if err := add(first); err != nil {
		return nil, fmt.Errorf("the genesis: %w", err)
	}
	parent := first
	stream := rlp.NewStream(export, inputLimit(export))
	for n := 0; ; n++ {
		var b types.Block
		err := stream.Decode(&b)
		if errors.Is(err, io.EOF) {
			return store, nil
		}
		if err != nil {
			return nil, fmt.Errorf("block %d of the export: %w", n, err)
		}
		if b.NumberU64() == 0 {
			if b.Hash() != first.Hash() {
				return nil, fmt.Errorf("the export's genesis %s is not the genesis file's %s", b.Hash(), first.Hash())
			}
			continue
		}
		if b.ParentHash() != parent.Hash() || b.NumberU64() != parent.NumberU64()+1 {
			return nil, fmt.Errorf("block %d (%s) is not the child of block %d (%s)", b.NumberU64(), b.Hash(), parent.NumberU64(), parent.Hash())
		}
		if err := add(&b); err != nil {
			return nil, fmt.Errorf("block %d: %w", b.NumberU64(), err)
		}
		parent = &b
	}
}
