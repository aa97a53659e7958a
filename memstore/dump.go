package memstore

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"strings"

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

// DefaultMaxLineBytes is the longest dump line a Loader takes by default:
// several times the JSON of the largest real block, full transactions
// included.
const DefaultMaxLineBytes = 16 << 20

// ErrLineTooLong matches, with errors.Is, the error of a dump line longer
// than the Loader's MaxLineBytes.
var ErrLineTooLong = errors.New("memstore: dump line too long")

// lineTooLongError says what the limit is, and is ErrLineTooLong.
type lineTooLongError struct{ limit int }

func (e lineTooLongError) Error() string {
	return fmt.Sprintf("longer than the limit of %d bytes", e.limit)
}

func (e lineTooLongError) Is(target error) bool { return target == ErrLineTooLong }

// A Loader reads dumps, as Load does, with the limits and the log set by
// its fields. The zero value is Load's loader.
type Loader struct {
	// Logger, when set, is given a summary of the dump once it is loaded:
	// the blocks the canonical chain misses, and the blocks whose total
	// difficulty is unknown because of them, lines that repeat a block,
	// and lines whose block number is below the previous canonical line's.
	// Such a dump loads: the summary is how an operator learns of its holes.
	Logger *slog.Logger
	// MaxLineBytes bounds the length of a line, newline excluded, so that
	// a damaged or hostile dump cannot take memory without bound; the
	// longest line read is all the loader holds of it. Zero means
	// DefaultMaxLineBytes.
	MaxLineBytes int
}

// Load returns a store holding the blocks of a dump, applied in order with
// AddBlock: a later line at the same number becomes canonical, the earlier
// block stays reachable by hash. Every block hash, size and transaction hash
// is computed and checked. The first line that fails ends the load with a
// *LineError naming the line and the field. Load is Loader.Load of the zero
// Loader: lines are bounded by DefaultMaxLineBytes and nothing is logged.
func Load(r io.Reader) (*Store, error) {
	var l Loader
	return l.Load(r)
}

// Load returns a store holding the blocks of a dump, as the function Load
// does, and logs its summary to l.Logger.
func (l *Loader) Load(r io.Reader) (*Store, error) {
	s := New()
	if err := l.load(r, s, s); err != nil {
		return nil, err
	}
	return s, nil
}

// LoadInto writes the blocks of a dump into any store, as Load does into a
// new memstore: each line through w's AddBlock, or AddSideBlock for a line
// marked "canonical": false, so that w checks every block as it would any
// other. The lines before a failing one stay written. A store that already
// holds the dump's blocks is left as it was, but for the canonical chain,
// which the dump's lines set again.
func (l *Loader) LoadInto(r io.Reader, w backend.Writer) error {
	return l.load(r, w, nil)
}

// load writes a dump's lines into w; s is w when it is a memstore, whose
// summary can tell more.
func (l *Loader) load(r io.Reader, w backend.Writer, s *Store) error {
	limit := l.MaxLineBytes
	if limit <= 0 {
		limit = DefaultMaxLineBytes
	}
	sum := summary{logging: l.Logger != nil}
	if sum.logging && s != nil {
		sum.firstLine = make(map[backend.Hash]int)
	}
	br := bufio.NewReaderSize(r, 1<<16)
	var line []byte
	for n := 1; ; n++ {
		var err error
		line, err = readLine(br, line[:0], limit)
		if err != nil && err != io.EOF {
			return &LineError{Line: n, Err: err}
		}
		if len(bytes.TrimSpace(line)) > 0 {
			d, lerr := addLine(w, line)
			if lerr != nil {
				return &LineError{Line: n, Err: lerr}
			}
			sum.note(n, d)
		}
		if err == io.EOF {
			if l.Logger != nil {
				sum.log(l.Logger, s)
			}
			return nil
		}
	}
}

// readLine appends the next line of br to buf, newline included, and
// fails once the line is longer than limit: it never holds more of a line
// than limit and one buffer of br.
func readLine(br *bufio.Reader, buf []byte, limit int) ([]byte, error) {
	for {
		chunk, err := br.ReadSlice('\n')
		length := len(buf) + len(chunk)
		if err == nil {
			length-- // the newline
		}
		if length > limit {
			return buf, lineTooLongError{limit}
		}
		buf = append(buf, chunk...)
		if err != bufio.ErrBufferFull {
			return buf, err
		}
	}
}

func addLine(w backend.Writer, line []byte) (*dumpLine, error) {
	var d dumpLine
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return nil, wrongBlockHash(line, err)
	}
	if rest := bytes.TrimSpace(line[dec.InputOffset():]); len(rest) > 0 {
		return nil, fmt.Errorf("more than one JSON value on the line: %.20q follows the object", rest)
	}
	if d.Block == nil {
		return nil, errors.New(`no "block" member`)
	}
	if d.Block.Pending {
		return nil, errors.New("block: a pending block (null number) cannot be loaded")
	}
	for i, u := range d.Uncles {
		if u == nil {
			return nil, fmt.Errorf("uncles[%d]: null", i)
		}
	}
	if d.Canonical != nil && !*d.Canonical {
		return &d, w.AddSideBlock(d.Block, d.Uncles...)
	}
	return &d, w.AddBlock(d.Block, d.Uncles...)
}

// wrongBlockHash returns, for a line whose transactions disagree with the
// block's hash, the error that names what is wrong. Each transaction object
// repeats the block's hash, and the decoder, meeting them first, blames the
// first transaction; but when the header does not hash to the block's hash
// either, it is the block's hash that is wrong, and the transactions that
// are right. Any other error is returned as it is.
func wrongBlockHash(line []byte, err error) error {
	var fe *backend.FieldError
	if !errors.As(err, &fe) || fe.Field != "blockHash" || !strings.HasPrefix(fe.Object, "transaction") {
		return err
	}
	// The header alone: the block without its transactions.
	var d struct{ Block map[string]json.RawMessage }
	if json.Unmarshal(line, &d) != nil || d.Block == nil {
		return err
	}
	d.Block["transactions"] = json.RawMessage("[]")
	header, merr := json.Marshal(d.Block)
	var b backend.Block
	if merr != nil || json.Unmarshal(header, &b) != nil || b.Hash == (backend.Hash{}) {
		return err
	}
	if computed := backend.HeaderHash(&b.Header); computed != b.Hash {
		return blockError(&b, &backend.MismatchError{Field: "hash", Given: b.Hash.String(), Computed: computed.String()})
	}
	return err
}

// Save writes the stored blocks as a dump that Load reads back into the
// same chain: the canonical chain by number, then the other blocks by
// number, marked "canonical": false. The pending block, the safe and
// finalized marks, and a chain id set with SetChainID are not part of the
// format: a chain none of whose transactions is signed for its id (EIP-155
// and later) loads back without one.
func (s *Store) Save(w io.Writer) error {
	// A snapshot: what an entry points to is replaced, never changed, so
	// the values taken under the lock stay valid after it, as long as the
	// store that holds their encodings.
	defer runtime.KeepAlive(s)
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
		err := e.lend(func(b *backend.Block, txs backend.TransactionDecoder) (err error) {
			line, err = b.AppendLentJSON(line, true, txs)
			return err
		})
		if err != nil {
			return err
		}
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

// maxListed bounds each list a summary logs: a dump with a hole at every
// other block must not turn its summary into a second dump.
const maxListed = 10

// summary gathers what the log of a load tells of the dump's holes.
type summary struct {
	logging bool
	lines   int // lines with a block
	// firstLine is the line of each block, to name the line a duplicate
	// repeats; nil when nothing is logged, and for a store other than
	// memstore: such a store may hold a chain far larger than memory,
	// and skips the blocks it holds already by itself.
	firstLine       map[backend.Hash]int
	duplicates      []string // "line (as line)", the first maxListed
	duplicateCount  int
	outOfOrder      int
	firstOutOfOrder int
	// The number of the previous canonical line.
	previous      uint64
	seenCanonical bool
	// runs holds the numbers of the canonical lines as runs of
	// consecutive numbers, for a store other than memstore, whose
	// canonical chain the summary cannot read: a dump in order is one run,
	// whatever its length.
	runs [][2]uint64
}

// addRun notes a canonical line's number.
func (sum *summary) addRun(n uint64) {
	if k := len(sum.runs) - 1; k >= 0 && n >= sum.runs[k][0] && n <= sum.runs[k][1]+1 {
		sum.runs[k][1] = max(sum.runs[k][1], n)
		return
	}
	sum.runs = append(sum.runs, [2]uint64{n, n})
}

// mergedRuns returns the runs in order, merged where they overlap or
// touch: the holes between them are the canonical chain's.
func (sum *summary) mergedRuns() [][2]uint64 {
	runs := slices.Clone(sum.runs)
	slices.SortFunc(runs, func(a, b [2]uint64) int { return cmp.Compare(a[0], b[0]) })
	var merged [][2]uint64
	for _, r := range runs {
		if k := len(merged) - 1; k >= 0 && r[0] <= merged[k][1]+1 {
			merged[k][1] = max(merged[k][1], r[1])
			continue
		}
		merged = append(merged, r)
	}
	return merged
}

// note takes in line n, whose block was stored.
func (sum *summary) note(n int, d *dumpLine) {
	sum.lines++
	if d.Canonical == nil || *d.Canonical {
		if sum.seenCanonical && d.Block.Number < sum.previous {
			sum.outOfOrder++
			if sum.firstOutOfOrder == 0 {
				sum.firstOutOfOrder = n
			}
		}
		sum.previous, sum.seenCanonical = d.Block.Number, true
	}
	if !sum.logging {
		return
	}
	if sum.firstLine == nil {
		if d.Canonical == nil || *d.Canonical {
			sum.addRun(d.Block.Number)
		}
		return
	}
	// Stored means checked: a given hash is the header's.
	hash := d.Block.Hash
	if hash == (backend.Hash{}) {
		hash = backend.HeaderHash(&d.Block.Header)
	}
	first, seen := sum.firstLine[hash]
	if !seen {
		sum.firstLine[hash] = n
		return
	}
	sum.duplicateCount++
	if len(sum.duplicates) < maxListed {
		sum.duplicates = append(sum.duplicates, fmt.Sprintf("%d (as line %d)", n, first))
	}
}

// log logs the summary of the dump loaded into s, or, when s is nil, into
// a store it cannot read: then the canonical chain is the canonical lines',
// and whether a total difficulty is unknown is not said.
func (sum *summary) log(log *slog.Logger, s *Store) {
	ctx := context.Background()
	// The canonical chain as runs of consecutive numbers: the store's own,
	// or the canonical lines'.
	runs := sum.mergedRuns()
	var numbers []uint64
	if s != nil {
		s.mu.RLock()
		defer s.mu.RUnlock()
		numbers = make([]uint64, 0, len(s.canonical))
		for n := range s.canonical {
			numbers = append(numbers, n)
		}
		slices.Sort(numbers)
		runs = nil
		for i, n := range numbers {
			if i > 0 && n == numbers[i-1]+1 {
				runs[len(runs)-1][1] = n
				continue
			}
			runs = append(runs, [2]uint64{n, n})
		}
	}
	var (
		ranges    []string
		missing   uint64
		unknownTD int
	)
	for i := 1; i < len(runs); i++ {
		from, to := runs[i-1][1]+1, runs[i][0]-1
		missing += to - from + 1
		if len(ranges) < maxListed {
			ranges = append(ranges, numberRange(from, to))
		}
	}
	if len(runs) > 1 && s != nil {
		// Above the first hole, a total difficulty is known only if the
		// dump gave it.
		for _, n := range numbers {
			if n > runs[0][1] && s.blocks[s.canonical[n]].block.TotalDifficulty == nil {
				unknownTD++
			}
		}
	}
	rangeCount := max(len(runs)-1, 0)

	// How many distinct blocks the dump held is known of a memstore only.
	attrs := []slog.Attr{slog.Int("lines", sum.lines)}
	if s != nil {
		attrs = append(attrs, slog.Int("blocks", len(s.blocks)))
	}
	if len(runs) > 0 {
		attrs = append(attrs, slog.String("canonical", numberRange(runs[0][0], runs[len(runs)-1][1])))
	}
	log.LogAttrs(ctx, slog.LevelInfo, "memstore: dump loaded", attrs...)
	if rangeCount > 0 {
		attrs := []slog.Attr{slog.Uint64("missing", missing), slog.String("ranges", listed(ranges, rangeCount))}
		if s != nil {
			attrs = append(attrs, slog.Int("unknown_total_difficulty", unknownTD))
		}
		log.LogAttrs(ctx, slog.LevelWarn, "memstore: the dump misses blocks of the canonical chain", attrs...)
	}
	if sum.duplicateCount > 0 {
		log.LogAttrs(ctx, slog.LevelWarn, "memstore: dump lines repeat a block",
			slog.Int("count", sum.duplicateCount),
			slog.String("lines", listed(sum.duplicates, sum.duplicateCount)))
	}
	if sum.outOfOrder > 0 {
		log.LogAttrs(ctx, slog.LevelWarn, "memstore: dump lines out of order, below the previous canonical line's number",
			slog.Int("count", sum.outOfOrder),
			slog.Int("first_line", sum.firstOutOfOrder))
	}
}

func numberRange(from, to uint64) string {
	if from == to {
		return strconv.FormatUint(from, 10)
	}
	return strconv.FormatUint(from, 10) + "-" + strconv.FormatUint(to, 10)
}

// listed joins the first of total items, saying how many are left out.
func listed(items []string, total int) string {
	s := strings.Join(items, ", ")
	if left := total - len(items); left > 0 {
		s += fmt.Sprintf(" and %d more", left)
	}
	return s
}
