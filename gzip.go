package blockrpc

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// gzipThreshold is the smallest answer worth compressing: below it the
// gzip header and the CPU cost more than the bytes saved.
const gzipThreshold = 1024

// acceptsGzip reports whether the client accepts gzip: named with a
// weight above zero ("gzip", "gzip;q=0.5"), or covered by "*", and not
// refused with q=0.
func acceptsGzip(r *http.Request) bool {
	gzip, star := -1.0, -1.0 // the weights given; -1: not named
	for _, v := range r.Header.Values("Accept-Encoding") {
		for part := range strings.SplitSeq(v, ",") {
			coding, params, _ := strings.Cut(part, ";")
			switch strings.ToLower(strings.TrimSpace(coding)) {
			case "gzip":
				gzip = weight(params)
			case "*":
				star = weight(params)
			}
		}
	}
	if gzip >= 0 {
		return gzip > 0
	}
	return star > 0 // "*" stands for any coding not named
}

// weight returns the q parameter of an Accept-Encoding entry: 1 when it is
// absent, 0 when it does not parse or is not a weight (0 to 1), so that a
// coding named with a bad weight is refused, not taken as not named.
func weight(params string) float64 {
	for param := range strings.SplitSeq(params, ";") {
		name, value, _ := strings.Cut(strings.TrimSpace(param), "=")
		if strings.EqualFold(strings.TrimSpace(name), "q") {
			q, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
			if err != nil || !(q >= 0 && q <= 1) {
				return 0
			}
			return q
		}
	}
	return 1
}

var gzipWriters = sync.Pool{New: func() any {
	// Answers are mostly hex, which every level compresses to about
	// half; the fastest level gets there at a fraction of the cost.
	w, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	return w
}}

// gzipBytes appends to dst the gzip stream of the parts, one after the
// other.
func gzipBytes(dst []byte, parts ...[]byte) []byte {
	buf := bytes.NewBuffer(dst)
	zw := gzipWriters.Get().(*gzip.Writer)
	zw.Reset(buf)
	for _, p := range parts {
		zw.Write(p) // writes to a bytes.Buffer cannot fail
	}
	zw.Close()
	gzipWriters.Put(zw)
	return buf.Bytes()
}
