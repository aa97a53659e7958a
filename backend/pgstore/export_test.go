package pgstore

// Copied returns how many blocks an Importer wrote with COPY.
func Copied(im *Importer) int { return im.copied }

// HeadVersion returns the version of the head row r serves: for a Reader,
// what its last poll read; for a Writer's Reader, what its last write
// left.
func HeadVersion(r *Reader) int64 { return r.head.Load().version }

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
	w.unsure = true
	return nil
}
