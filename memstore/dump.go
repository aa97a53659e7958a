package memstore

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/blockrpc/blockrpc/backend"
)

// The dump format is JSON Lines, one block a line:
//
//	{"block": <block object as eth_getBlockByNumber(n, true) answers it>,
//	 "uncles": [<uncle objects as eth_getUncleByBlockHashAndIndex answers them, in order>]}
//
// "uncles" may be left out when the block has none. A line may also say
// "canonical": false, for a block of a side chain: it is stored and
// reachable by hash, and the canonical chain stays as it is (without the
// member, a line makes its block canonical). A block's transactions may be
// given as hashes only, for data that has no bodies; such a block must give
// its size and transactionsRoot, which cannot then be checked, and is
// served without transaction details.

// dumpLine is one line of a dump.
type dumpLine struct {
	Block     *backend.Block   `json:"block"`
	Uncles    []*backend.Uncle `json:"uncles,omitempty"`
	Canonical *bool            `json:"canonical,omitempty"`
}

// LineError reports the line of a dump that could not be loaded.
type LineError struct {
	Line int // 1-based
	Err  error
}

// Error returns the line number and what is wrong with the line.
func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }

// Unwrap returns the error of the line.
func (e *LineError) Unwrap() error { return e.Err }

// Load returns a store holding the blocks of a dump, applied in order with
// AddBlock: a later line at the same number becomes canonical, the earlier
// block stays reachable by hash. Every block hash, size and transaction hash
// is computed and checked. The first line that fails ends the load with a
// *LineError naming the line and the field.
func Load(r io.Reader) (*Store, error) {
	s := New()
	br := bufio.NewReaderSize(r, 1<<16)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if err != nil && err != io.EOF {
			return nil, &LineError{Line: n, Err: err}
		}
		if len(bytes.TrimSpace(line)) > 0 {
			if lerr := s.addLine(line); lerr != nil {
				return nil, &LineError{Line: n, Err: lerr}
			}
		}
		if err == io.EOF {
			return s, nil
		}
	}
}

func (s *Store) addLine(line []byte) error {
	var d dumpLine
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return err
	}
	if rest := bytes.TrimSpace(line[dec.InputOffset():]); len(rest) > 0 {
		return fmt.Errorf("more than one JSON value on the line: %.20q follows the object", rest)
	}
	if d.Block == nil {
		return errors.New(`no "block" member`)
	}
	if d.Block.Pending {
		return errors.New("block: a pending block (null number) cannot be loaded")
	}
	for i, u := range d.Uncles {
		if u == nil {
			return fmt.Errorf("uncles[%d]: null", i)
		}
	}
	if d.Canonical != nil && !*d.Canonical {
		return s.AddSideBlock(d.Block, d.Uncles...)
	}
	return s.AddBlock(d.Block, d.Uncles...)
}

// Save writes the stored blocks as a dump that Load reads back into the
// same chain: the canonical chain by number, then the other blocks by
// number, marked "canonical": false. The pending block and the safe and
// finalized marks are not part of the format.
func (s *Store) Save(w io.Writer) error {
	// A snapshot: what an entry points to is replaced, never changed, so
	// the values taken under the lock stay valid after it.
	s.mu.RLock()
	saved := make([]entry, 0, len(s.blocks))
	canonical := make(map[backend.Hash]bool, len(s.canonical))
	for _, e := range s.blocks {
		saved = append(saved, *e)
	}
	for _, h := range s.canonical {
		canonical[h] = true
	}
	s.mu.RUnlock()

	slices.SortFunc(saved, func(a, b entry) int {
		if ca, cb := canonical[a.block.Hash], canonical[b.block.Hash]; ca != cb {
			if ca {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(a.block.Number, b.block.Number), bytes.Compare(a.block.Hash[:], b.block.Hash[:]))
	})
	bw := bufio.NewWriterSize(w, 1<<16)
	var line []byte
	for _, e := range saved {
		line = append(line[:0], `{"block":`...)
		line = e.block.AppendJSON(line, true)
		if len(e.uncles) > 0 {
			line = append(line, `,"uncles":[`...)
			for i, u := range e.uncles {
				if i > 0 {
					line = append(line, ',')
				}
				line = u.AppendJSON(line)
			}
			line = append(line, ']')
		}
		if !canonical[e.block.Hash] {
			line = append(line, `,"canonical":false`...)
		}
		line = append(line, '}', '\n')
		if _, err := bw.Write(line); err != nil {
			return err
		}
	}
	return bw.Flush()
}
