package backend

import (
	"fmt"

	"github.com/holiman/uint256"
)

// Descendant is a stored block, or the header of an uncle a stored block
// holds, as a store lists it among its parent's children for
// DescendantTotalDifficulties, which hands back the same shape for each
// whose total difficulty becomes known: the stores keep different records
// but learn a total the same way.
type Descendant struct {
	Hash       Hash         // the block's, or for an uncle the block holding it
	Uncle      int          // the uncle's index in that block; -1 for the block itself
	Difficulty uint256.Int  // the header's
	TD         *uint256.Int // the stored total difficulty, nil while unknown
}

// DescendantTotalDifficulties works out what the total difficulty td of
// the block hash gives to its stored descendants, when it becomes known:
// a store keeps a block whose parent's total is unknown, and its own then
// waits for the parent's. children lists the stored children of a block,
// those whose parent hash is parent (blocks and uncles alike).
//
// Each descendant's total is its parent's plus its difficulty. It returns
// the descendants that have none yet, with TD set to the value they take,
// in no order a store should rely on; nothing is changed, so a store can
// refuse the write before storing any. A descendant that has a total is
// checked, and one that disagrees is an error; the walk does not go past
// it, as its own descendants were settled when its total was. A total past
// 2^256-1 is an error too.
func DescendantTotalDifficulties(hash Hash, td *uint256.Int, children func(parent Hash) ([]Descendant, error)) ([]Descendant, error) {
	type parent struct {
		hash Hash
		td   *uint256.Int
	}
	var found []Descendant
	queue := []parent{{hash, td}}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		cs, err := children(p.hash)
		if err != nil {
			return nil, err
		}
		for _, c := range cs {
			want, err := addTotalDifficulty(p.td, &c.Difficulty)
			if err != nil {
				return nil, fmt.Errorf("stored descendant %s: %w", c.Hash, err)
			}
			if c.TD != nil {
				if !c.TD.Eq(want) {
					return nil, fmt.Errorf("stored descendant %s has totalDifficulty %s, but this block makes it %s", c.Hash, c.TD.Hex(), want.Hex())
				}
				continue
			}
			c.TD = want
			found = append(found, c)
			// Not past an uncle: its Hash is the block holding it, and the
			// children of the uncle's own hash are reached through the
			// uncle's own block when that is stored.
			if c.Uncle < 0 {
				queue = append(queue, parent{c.Hash, want})
			}
		}
	}
	return found, nil
}
