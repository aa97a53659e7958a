package backend

// Writer is a chain that can be written: what the follower, the dump
// loader and the chain builders write through, and what every writable
// store implements. A Writer checks what it is given (Seal, and the total
// difficulty against the parent's) and stores nothing that fails; it never
// changes a Block or Uncle it was given.
type Writer interface {
	// AddBlock stores a block with the headers of its uncles, in the order
	// the block lists them, and makes it canonical at its number. A block
	// already stored is only made canonical again. When another block was
	// canonical there the chain reorganises in one step: the block's
	// stored ancestors become canonical down to the first that already is,
	// and a canonical block above stays so only while each is the child
	// of the one below. A block that fills a gap keeps the block above it
	// canonical only if it is its child. Blocks that leave the canonical
	// chain stay reachable by hash.
	AddBlock(block *Block, uncles ...*Uncle) error

	// AddSideBlock stores a block as AddBlock does but leaves the canonical
	// chain as it is: a branch is written with AddSideBlock up to its last
	// block, which AddBlock then makes canonical with all of it at once.
	AddSideBlock(block *Block, uncles ...*Uncle) error

	// SetPending sets the block served for the "pending" tag, or clears it
	// when block is nil.
	SetPending(block *Block) error

	// SetSafe and SetFinalized make the canonical block at number the one
	// the tag selects. There must be one. A reorganisation that takes that
	// block out of the canonical chain clears the tag, which then selects
	// nothing until it is set again.
	SetSafe(number uint64) error
	SetFinalized(number uint64) error

	// SetChainID sets the chain id, for a chain whose transactions do not
	// tell it. It fails when stored transactions are signed for another.
	SetChainID(id uint64) error
}
