package pgstore

import (
	"context"
	"io/fs"
	"testing/fstest"
)

// Copied returns how many blocks an Importer wrote with COPY.
func Copied(im *Importer) int { return im.copied }

// HeadVersion returns the version of the head row r serves: for a Reader,
// what its last poll read; for a Writer's Reader, what its last write
// left.
func HeadVersion(r *Reader) int64 { return r.head.Load().version }

// PolledAhead makes r's last poll one of a server ahead of the one it
// reads (the next head version, its latest block the one given, after a
// reorganisation when reorged), as when one address leads to several
// standbys and the one polled is further on.
func PolledAhead(r *Reader, latest uint64, latestHash [32]byte, reorged bool) {
	st := *r.head.Load()
	st.version++
	st.latest, st.latestHash = latest, latestHash
	if reorged {
		st.reorgVersion++
	}
	r.head.Store(&st)
}

// MaxConns returns the size of r's connection pool.
func MaxConns(r *Reader) int32 { return r.pool.Config().MaxConns }

// CommitLost runs write, a write of w's that succeeds, and then makes w
// forget it, as when the answer to its COMMIT is lost with the
// connection: the database has the write, w does not know it.
func CommitLost(w *Writer, write func() error) error {
	old := w.head.Load()
	if err := write(); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.head.Store(old)
	w.unsure.Store(true)
	return nil
}

// OpenWriterMigrating is OpenWriter for a pgstore of a newer version: its
// migrations are this package's and one more, name holding sql.
func OpenWriterMigrating(ctx context.Context, url string, opts *Options, name, sql string) (*Writer, error) {
	files := fstest.MapFS{"migrations/" + name: {Data: []byte(sql)}}
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		b, err := fs.ReadFile(migrationFiles, "migrations/"+e.Name())
		if err != nil {
			return nil, err
		}
		files["migrations/"+e.Name()] = &fstest.MapFile{Data: b}
	}
	set := migrations
	set.Files = files
	return openWriter(ctx, url, opts, set)
}

// OpenReaderOfVersion is OpenReader for a pgstore of a newer version,
// reading tables at version.
func OpenReaderOfVersion(ctx context.Context, url string, opts *Options, version int) (*Reader, error) {
	o := opts.withDefaults()
	pool, conns, err := openPool(ctx, url, &o, readerPool)
	if err != nil {
		return nil, err
	}
	r := &Reader{}
	r.init(pool, conns, o, version)
	if err := r.Refresh(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	r.startPolling()
	return r, nil
}
