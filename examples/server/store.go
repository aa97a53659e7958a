package main

// -store: the chain kept in a persistent store, on local disk (Pebble) or
// in PostgreSQL, rather than in memory. A dump is imported into it, a node
// followed into it, or what it holds served as it is; -read-only serves a
// PostgreSQL store that another server writes.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/pebblestore"
	"github.com/blockrpc/blockrpc/backend/pgstore"
	"github.com/blockrpc/blockrpc/backend/upstream"
	"github.com/blockrpc/blockrpc/memstore/demo"
)

// storeKind is what -store names.
type storeKind int

const (
	storeMemory storeKind = iota
	storePebble
	storePostgres
)

// storeSpec is the store -store names.
type storeSpec struct {
	kind storeKind
	// dir is a Pebble store's directory.
	dir string
	// url is a PostgreSQL store's URL, which may hold a password: it is
	// given to the store only, never logged nor put in an error.
	url string
	// schema is the URL's search_path when it names one schema: the
	// writer creates it when it is missing.
	schema string
	// name is what logs and errors call the store: "memory",
	// "pebble:DIR", or a URL's scheme, host and database.
	name string
	// secrets are the forms in which the URL's password may appear in an
	// error, to be masked there.
	secrets []string
}

// uncleSearchDepth is how far below its head the usage's search for a
// block with an uncle looks in a persistent store, which may hold a
// chain far too long to walk at every start; memoryUncleSearchDepth, in
// a chain in memory: the demo chain's newest uncle is 45 blocks below
// its head, and a post-merge chain of a million blocks has none, whose
// walk (50 to 75 µs a mainnet block) would hold back the printed key for
// a minute.
const (
	uncleSearchDepth       = 64
	memoryUncleSearchDepth = 1024
)

// importProgressInterval is how often a long import logs its progress
// (a variable, for the tests).
var importProgressInterval = 5 * time.Second

// parseStore reads the value of -store. An error never repeats the value,
// which may be a URL with a password in it.
func parseStore(value string) (storeSpec, error) {
	switch {
	case value == "" || value == "memory":
		return storeSpec{kind: storeMemory, name: "memory"}, nil
	case strings.HasPrefix(value, "pebble:"):
		dir := strings.TrimPrefix(value, "pebble:")
		if strings.TrimSpace(dir) == "" {
			return storeSpec{}, errors.New("-store pebble: names no directory: want pebble:DIR")
		}
		return storeSpec{kind: storePebble, dir: dir, name: value}, nil
	case strings.HasPrefix(value, "postgres://"), strings.HasPrefix(value, "postgresql://"):
		s, err := parsePostgres(value)
		if err != nil {
			return storeSpec{}, fmt.Errorf("-store: %w", err)
		}
		return s, nil
	}
	return storeSpec{}, errors.New("-store: want memory, pebble:DIR, or a postgres:// (or postgresql://) URL")
}

// parsePostgres reads a PostgreSQL URL: its name for the logs is its
// scheme, host and database, without the user, the password or the
// parameters.
func parsePostgres(raw string) (storeSpec, error) {
	scheme, _, _ := strings.Cut(raw, "://")
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse's error quotes the URL: say where it is wrong only.
		reason := "not a valid URL"
		var ue *url.Error
		if errors.As(err, &ue) {
			if inner := ue.Err.Error(); !strings.Contains(inner, "@") && !strings.Contains(inner, ":") {
				reason = inner
			}
		}
		return storeSpec{}, fmt.Errorf("the %s:// URL is %s", scheme, reason)
	}
	s := storeSpec{kind: storePostgres, url: raw}
	db := strings.TrimPrefix(u.Path, "/")
	s.name = u.Scheme + "://" + u.Host + "/" + db
	if pw, ok := u.User.Password(); ok && pw != "" {
		s.secrets = append(s.secrets, pw)
		if _, enc, ok := strings.Cut(u.User.String(), ":"); ok {
			s.secrets = append(s.secrets, enc)
		}
	}
	q := u.Query()
	for _, key := range []string{"password", "sslpassword"} {
		if pw := q.Get(key); pw != "" {
			s.secrets = append(s.secrets, pw, url.QueryEscape(pw))
		}
	}
	if sp := q.Get("search_path"); sp != "" && !strings.ContainsAny(sp, `,"' `) {
		s.schema = sp
	}
	return s, nil
}

// redactedError is an error whose text has a store's secrets masked, and
// which still is (errors.Is, errors.As) the error it masks.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redact masks the store's URL and password in err's text.
func (s storeSpec) redact(err error) error {
	if err == nil || s.kind != storePostgres {
		return err
	}
	msg := strings.ReplaceAll(err.Error(), s.url, s.name)
	for _, secret := range s.secrets {
		if secret != "" {
			msg = strings.ReplaceAll(msg, secret, "xxxxx")
		}
	}
	if msg == err.Error() {
		return err
	}
	return &redactedError{msg: msg, err: err}
}

// errorf is fmt.Errorf with the store's secrets masked.
func (s storeSpec) errorf(format string, args ...any) error {
	return s.redact(fmt.Errorf(format, args...))
}

// attrs name the store in a log line.
func (s storeSpec) attrs() []any {
	attrs := []any{"store", s.name}
	if s.schema != "" {
		attrs = append(attrs, "schema", s.schema)
	}
	return attrs
}

// writableStore is a persistent store opened for writing: a Pebble store
// or a PostgreSQL Writer.
type writableStore interface {
	backend.Backend
	backend.Writer
}

// pebbleOptions are the options of the Pebble store of -store.
func pebbleOptions(o options, log *slog.Logger) *pebblestore.Options {
	return &pebblestore.Options{CacheBytes: o.storeCache, Compress: o.storeCompress, Logger: log}
}

// openStore opens the persistent store of -store and makes it ready to
// serve: a dump imported, a follower made (started by startFollowing),
// the demo chain imported into an empty store, or what it holds served.
func openStore(ctx context.Context, log *slog.Logger, o options) (*source, error) {
	spec := o.store
	src := &source{persistent: true, spec: spec, log: log}
	if o.readOnly {
		return openReader(ctx, log, o, src)
	}
	var w writableStore
	switch spec.kind {
	case storePebble:
		s, err := pebblestore.Open(spec.dir, pebbleOptions(o, log))
		if err != nil {
			return nil, fmt.Errorf("-store %s: %w", spec.name, err)
		}
		w, src.closeStore = s, s.Close
	case storePostgres:
		pw, err := pgstore.OpenWriter(ctx, spec.url, &pgstore.Options{Schema: spec.schema, CacheBytes: o.storeCache, Logger: log})
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, errInterrupted
		case errors.Is(err, pgstore.ErrWriterBusy):
			// The holder may be a server killed without closing the store,
			// this one's last run among them: its lease then runs out by
			// itself, at the time the error gives.
			return nil, spec.errorf("-store %s: another server writes this store (one writer at a time); to serve it beside that one, add -read-only; if that server was stopped without closing the store, start again once its lease has run out: %w", spec.name, err)
		case err != nil:
			return nil, spec.errorf("-store %s: %w", spec.name, err)
		}
		w, src.closeStore, src.leaseLost = pw, pw.Close, pw.LeaseLost()
	}
	src.backend, src.store = w, w
	if err := prepareStore(ctx, log, o, src, w); err != nil {
		src.close()
		if ctx.Err() != nil {
			return nil, errInterrupted // a read or a write the signal cut short
		}
		return nil, err
	}
	return src, nil
}

// openReader opens a PostgreSQL store for serving only.
func openReader(ctx context.Context, log *slog.Logger, o options, src *source) (*source, error) {
	spec := o.store
	r, err := pgstore.OpenReader(ctx, spec.url, &pgstore.Options{Schema: spec.schema, PollInterval: o.poll, CacheBytes: o.storeCache, Logger: log})
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, errInterrupted
	case errors.Is(err, pgstore.ErrNoSchema):
		return nil, spec.errorf("-store %s -read-only: the store has no tables yet: start the server that writes it (the same -store without -read-only) first: %w", spec.name, err)
	case err != nil:
		return nil, spec.errorf("-store %s: %w", spec.name, err)
	}
	src.backend, src.store = r, r
	src.closeStore = func() error { r.Close(); return nil }
	src.uncleDepth = uncleSearchDepth
	if _, err := r.BlockByNumber(ctx, backend.Latest); errors.Is(err, backend.ErrNotFound) {
		log.Warn("store: read-only, and the store holds no chain yet: serving what its writer writes, as the polls of its head row find it", spec.attrs()...)
	} else {
		log.Info("store: read-only: serving what its writer keeps current, polling its head row", spec.attrs()...)
	}
	return src, nil
}

// prepareStore imports what the flags ask for into a store opened for
// writing, or makes the follower that will write into it.
func prepareStore(ctx context.Context, log *slog.Logger, o options, src *source, w writableStore) error {
	spec := o.store
	head, err := w.BlockByNumber(ctx, backend.Latest)
	switch {
	case errors.Is(err, backend.ErrNotFound):
		head = nil
	case err != nil:
		return spec.errorf("-store %s: reading its latest block: %w", spec.name, err)
	}
	if o.follow != "" {
		f, err := upstream.NewFollower(w, upstream.FollowConfig{Endpoint: o.follow, PollInterval: o.poll, Logger: log})
		if err != nil {
			return fmt.Errorf("-follow: %w", err)
		}
		src.follower = f
		if head != nil {
			n := head.Number
			src.resumeAt = &n
		}
		return nil
	}
	src.uncleDepth = uncleSearchDepth
	safe, finalized := o.safe, o.finalized
	switch {
	case o.chain != "":
		if err := importFile(ctx, log, spec, o.chain, w); err != nil {
			return err
		}
		after, err := w.BlockByNumber(ctx, backend.Latest)
		if err != nil {
			return spec.errorf("%s: no blocks in the store after the import: %w", o.chain, err)
		}
		if head != nil && after.Hash == head.Hash {
			// The store held the dump's chain and more (a chain it
			// follows, say): its tags stay where they were.
			log.Info("store: the dump leaves the store's head as it was; safe and finalized stay as they are unless given",
				append(spec.attrs(), "head", after.Number)...)
			break
		}
		if err := dropStalePending(ctx, log, spec, w, after); err != nil {
			return err
		}
		// Safe and finalized default to the dump's head, as for a dump
		// in memory.
		safe, finalized = orDefault(safe, int64(after.Number)), orDefault(finalized, int64(after.Number))
	case head != nil && isDemoPart(head):
		// The demo chain's import was cut short, and there is no dump to
		// give again: its blocks held are skipped, the rest imported.
		log.Info("store: holds the demo chain up to a block before its head, an import cut short: importing the rest",
			append(spec.attrs(), "head", head.Number)...)
		if err := importDemo(ctx, log, spec, w); err != nil {
			return err
		}
		safe, finalized = orDefault(safe, demo.Safe), orDefault(finalized, demo.Finalized)
	case head != nil:
		log.Info("store: serving the chain it holds, without importing anything", append(spec.attrs(), "head", head.Number)...)
	default:
		log.Info("store: empty, and no -chain nor -follow: importing the demo chain into it, as the memory store serves it", spec.attrs()...)
		if err := importDemo(ctx, log, spec, w); err != nil {
			return err
		}
		safe, finalized = orDefault(safe, demo.Safe), orDefault(finalized, demo.Finalized)
	}
	return setTags(ctx, spec, w, safe, finalized, o.chainID)
}

// isDemoPart reports whether head, a store's latest block, is a block of
// the demo chain before its head.
func isDemoPart(head *backend.Block) bool {
	if head.Number >= demo.Head {
		return false
	}
	d, err := demo.Store()
	if err != nil {
		return false
	}
	b, err := d.BlockByNumber(context.Background(), backend.BlockNumber(head.Number))
	return err == nil && b.Hash == head.Hash
}

// dropStalePending clears the store's pending block when an import has
// moved its head off the pending block's parent (the demo chain's, below
// a dump that continues it): served, it would be built on a block that
// is no longer the latest.
func dropStalePending(ctx context.Context, log *slog.Logger, spec storeSpec, w writableStore, head *backend.Block) error {
	p, err := w.BlockByNumber(ctx, backend.Pending)
	switch {
	case errors.Is(err, backend.ErrNotFound):
		return nil
	case err != nil:
		return spec.errorf("-store %s: reading its pending block: %w", spec.name, err)
	case p.ParentHash == head.Hash:
		return nil
	}
	if err := w.SetPending(nil); err != nil {
		return spec.errorf("-store %s: clearing its pending block: %w", spec.name, err)
	}
	log.Info("store: the pending block, built on a block no longer the latest, is cleared", append(spec.attrs(), "head", head.Number)...)
	return nil
}

// setTags sets safe and finalized (when not negative) and the chain id
// (when not 0), each only when the store holds another value, so that a
// run that imports nothing new writes nothing.
func setTags(ctx context.Context, spec storeSpec, w writableStore, safe, finalized int64, chainID uint64) error {
	for _, t := range []struct {
		flag string
		tag  backend.BlockNumber
		want int64
		set  func(uint64) error
	}{
		{"-safe", backend.Safe, safe, w.SetSafe},
		{"-finalized", backend.Finalized, finalized, w.SetFinalized},
	} {
		if t.want < 0 {
			continue
		}
		if b, err := w.BlockByNumber(ctx, t.tag); err == nil && b.Number == uint64(t.want) {
			continue
		}
		if err := t.set(uint64(t.want)); err != nil {
			return spec.errorf("%s: %w", t.flag, err)
		}
	}
	if chainID != 0 {
		if id, err := w.ChainID(ctx); err != nil || id != chainID {
			if err := w.SetChainID(chainID); err != nil {
				return spec.errorf("-chainid: %w", err)
			}
		}
	}
	return nil
}

// importFile imports the dump at path into the store.
func importFile(ctx context.Context, log *slog.Logger, spec storeSpec, path string, w writableStore) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return importDump(ctx, log, spec, path, f, fileSize(f), w)
}

// fileSize is the size of a regular file, which a progress line can tell
// the share read of; 0 for a pipe or a device, whose size is not known.
func fileSize(f *os.File) int64 {
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		return fi.Size()
	}
	return 0
}

// importDemo imports the demo chain, with its pending block, into an
// empty store.
func importDemo(ctx context.Context, log *slog.Logger, spec storeSpec, w writableStore) error {
	chain, pendingLine := demo.Dump()
	if err := importDump(ctx, log, spec, "demo", bytes.NewReader(chain), int64(len(chain)), w); err != nil {
		return err
	}
	var pending struct{ Block *backend.Block }
	if err := json.Unmarshal(pendingLine, &pending); err != nil {
		return fmt.Errorf("the demo chain's pending block: %w", err)
	}
	if err := w.SetPending(pending.Block); err != nil {
		return spec.errorf("-store %s: the demo chain's pending block: %w", spec.name, err)
	}
	return nil
}

// importDump imports a dump of size bytes (0 when unknown) into the store,
// logging its progress; what is the dump's name in the log. It returns
// errInterrupted as soon as ctx is done: a read may block for long (a dump
// on a pipe), so the import is waited for a moment only, and what it
// wrote stays in the store.
func importDump(ctx context.Context, log *slog.Logger, spec storeSpec, what string, r io.Reader, size int64, w writableStore) error {
	p := newImportProgress(log, spec, what, size)
	if size > 0 {
		log.Info("store: importing", append(p.attrs, "bytes", size)...)
	} else {
		log.Info("store: importing", p.attrs...)
	}
	stop := p.every(importProgressInterval)
	in := countingReader{r: ctxReader{ctx, r}, n: &p.read}
	done := make(chan error, 1)
	go func() {
		switch s := w.(type) {
		case *pgstore.Writer:
			// COPY, a batch of blocks a transaction, blocks already
			// stored checked a batch at a time and skipped.
			done <- s.ImportDump(ctx, in, &pgstore.ImportOptions{
				Logger:   log,
				Progress: func(ip pgstore.ImportProgress) { p.blocks.Store(int64(ip.Blocks)) },
			})
		case *pebblestore.Store:
			// Blocks already stored skipped, a block of another chain
			// refused before it is written.
			done <- s.ImportDump(ctx, in, &pebblestore.ImportOptions{
				Logger:   log,
				Progress: func(blocks int) { p.blocks.Store(int64(blocks)) },
			})
		default:
			done <- fmt.Errorf("no import into a store of type %T", s)
		}
	}()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		select {
		case err = <-done:
		case <-time.After(2 * time.Second):
		}
	}
	stop()
	switch {
	case ctx.Err() != nil:
		return errInterrupted
	case errors.Is(err, pebblestore.ErrOtherChain), errors.Is(err, pgstore.ErrOtherChain):
		return spec.errorf("%s is a dump of another chain than the store %s holds: refused: %w", what, spec.name, err)
	case err != nil:
		return spec.errorf("%s: importing into %s: %w", what, spec.name, err)
	}
	p.finished(time.Now())
	return nil
}

// importProgress counts what an import has read and written, and logs it.
type importProgress struct {
	log   *slog.Logger
	attrs []any // the dump and the store
	size  int64 // of the dump, 0 when unknown
	start time.Time

	read   atomic.Int64 // bytes of the dump read
	blocks atomic.Int64 // blocks written, or found stored already

	// The previous line's, touched by the goroutine that logs only.
	lastAt             time.Time
	lastRead, lastSeen int64
}

func newImportProgress(log *slog.Logger, spec storeSpec, what string, size int64) *importProgress {
	now := time.Now()
	return &importProgress{log: log, attrs: append([]any{"chain", what}, spec.attrs()...), size: size, start: now, lastAt: now}
}

// every logs a progress line every interval, until stop is called.
func (p *importProgress) every(interval time.Duration) (stop func()) {
	quit, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case now := <-t.C:
				p.report(now)
			}
		}
	}()
	return func() {
		close(quit)
		<-finished
	}
}

// report logs a progress line: the blocks so far, the rates since the
// previous line, the share of the dump read and, from the rate since the
// start, the time left.
func (p *importProgress) report(now time.Time) {
	read, blocks := p.read.Load(), p.blocks.Load()
	secs := now.Sub(p.lastAt).Seconds()
	if secs <= 0 {
		return
	}
	attrs := []any{"blocks", blocks,
		"blocks_per_s", math.Round(float64(blocks-p.lastSeen) / secs),
		"mb_per_s", math.Round(float64(read-p.lastRead)/secs/1e5) / 10,
	}
	if p.size > 0 {
		attrs = append(attrs, "done", fmt.Sprintf("%.1f%%", 100*float64(min(read, p.size))/float64(p.size)))
		if elapsed := now.Sub(p.start); read > 0 {
			left := time.Duration(float64(max(p.size-read, 0)) / float64(read) * float64(elapsed))
			attrs = append(attrs, "eta", left.Round(time.Second))
		}
	}
	p.log.Info("store: importing", append(attrs, p.attrs...)...)
	p.lastAt, p.lastRead, p.lastSeen = now, read, blocks
}

// finished logs the summary of an import that ended well.
func (p *importProgress) finished(now time.Time) {
	took := now.Sub(p.start)
	read, blocks := p.read.Load(), p.blocks.Load()
	secs := max(took.Seconds(), 1e-9)
	p.log.Info("store: dump imported", append([]any{"blocks", blocks,
		"mb", math.Round(float64(read)/1e5) / 10,
		"took", took.Round(time.Millisecond),
		"blocks_per_s", math.Round(float64(blocks) / secs),
		"mb_per_s", math.Round(float64(read)/secs/1e5) / 10,
	}, p.attrs...)...)
}

// countingReader counts the bytes read through it, and the lines when
// lines is not nil.
type countingReader struct {
	r     io.Reader
	n     *atomic.Int64
	lines *atomic.Int64
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	if c.lines != nil {
		c.lines.Add(int64(bytes.Count(p[:n], []byte{'\n'})))
	}
	return n, err
}

// The passwords of connection strings in a text: a URL's
// (scheme://user:password@) and a key=value string's or a URL query's.
var (
	urlPassword     = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://[^:/@\s"]*:)[^@\s"]*@`)
	settingPassword = regexp.MustCompile(`(password=)[^\s&"]*`)
)

// maskSecrets masks the passwords of the connection strings in s.
func maskSecrets(s string) string {
	s = urlPassword.ReplaceAllString(s, "${1}xxxxx@")
	return settingPassword.ReplaceAllString(s, "${1}xxxxx")
}

// secretMasker writes what it is given with the passwords of connection
// strings masked.
type secretMasker struct{ w io.Writer }

func (m secretMasker) Write(p []byte) (int, error) {
	if _, err := io.WriteString(m.w, maskSecrets(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}
