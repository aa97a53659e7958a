package pgstore

// Copied returns how many blocks an Importer wrote with COPY.
func Copied(im *Importer) int { return im.copied }
