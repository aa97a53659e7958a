package pgstore

// Copied returns how many blocks an Importer wrote with COPY.
func Copied(im *Importer) int { return im.copied }

// HeadVersion returns the version of the head row r serves: for a Reader,
// what its last poll read; for a Writer's Reader, what its last write
// left.
func HeadVersion(r *Reader) int64 { return r.head.Load().version }

// MaxConns returns the size of r's connection pool.
func MaxConns(r *Reader) int32 { return r.pool.Config().MaxConns }
