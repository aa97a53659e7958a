package pgstore

import (
	"fmt"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/record"
	"github.com/holiman/uint256"
)

// Blocks are stored in the record encoding that blockrpc's persistent
// stores share (backend/record): everything served, hashes, sizes and
// senders included, with the uncle headers. The uncles table keeps each
// uncle again, as the record of a block made of its header, so that an
// uncle is read without its block. The total difficulties a record holds
// are those known when it was written: the td columns, which may learn
// them later, override them.

// encodeBlock appends the record of a sealed block and its uncles.
func encodeBlock(dst []byte, b *backend.Block, uncles []*backend.Uncle) []byte {
	return record.Append(dst, b, uncles)
}

// decodeBlock decodes what encodeBlock wrote. The block shares buf.
func decodeBlock(buf []byte) (*backend.Block, error) {
	b, _, err := record.Decode(buf)
	return b, err
}

// encodeUncle appends the record of a sealed uncle.
func encodeUncle(dst []byte, u *backend.Uncle) []byte {
	return record.Append(dst, &backend.Block{Header: u.Header, Hash: u.Hash, Size: u.Size, TotalDifficulty: u.TotalDifficulty}, nil)
}

// decodeUncle decodes what encodeUncle wrote.
func decodeUncle(buf []byte) (*backend.Uncle, error) {
	b, _, err := record.DecodeHeader(buf)
	if err != nil {
		return nil, err
	}
	return &backend.Uncle{Header: b.Header, Hash: b.Hash, Size: b.Size, TotalDifficulty: b.TotalDifficulty}, nil
}

// encodeTD returns a total difficulty as stored: its big-endian bytes
// without leading zeros, one zero byte for zero, or nil (NULL) when unknown.
func encodeTD(td *uint256.Int) []byte {
	if td == nil {
		return nil
	}
	b := td.Bytes32()
	n := max((td.BitLen()+7)/8, 1)
	return append([]byte{}, b[32-n:]...)
}

// decodeTD reads a stored total difficulty; NULL (nil) is nil.
func decodeTD(b []byte) (*uint256.Int, error) {
	if b == nil {
		return nil, nil
	}
	if len(b) == 0 || len(b) > 32 {
		return nil, fmt.Errorf("%w: total difficulty of %d bytes", record.ErrCorrupt, len(b))
	}
	return new(uint256.Int).SetBytes(b), nil
}

// hashOf reads a hash column: 32 bytes in every row the store writes, but
// a row changed by hand may hold another length, which must be an error
// rather than a panic.
func hashOf(b []byte) (backend.Hash, error) {
	if len(b) != len(backend.Hash{}) {
		return backend.Hash{}, fmt.Errorf("%w: a hash of %d bytes in the tables", record.ErrCorrupt, len(b))
	}
	return backend.Hash(b), nil
}
