package blockrpc

import (
	"net/http"
	"slices"
)

// cors sets the CORS headers for an allowed origin and answers preflight
// requests; it reports whether the request has been answered.
func (h *Handler) cors(w http.ResponseWriter, r *http.Request) bool {
	if len(h.cfg.corsOrigins) == 0 {
		return false
	}
	w.Header().Add("Vary", "Origin")
	origin := r.Header.Get("Origin")
	if origin == "" {
		return false
	}
	switch {
	case slices.Contains(h.cfg.corsOrigins, "*"):
		w.Header().Set("Access-Control-Allow-Origin", "*")
	case slices.Contains(h.cfg.corsOrigins, origin):
		w.Header().Set("Access-Control-Allow-Origin", origin)
	default:
		return false
	}
	if r.Method != http.MethodOptions || r.Header.Get("Access-Control-Request-Method") == "" {
		// A page may read how long a rate limit asks it to wait.
		w.Header()["Access-Control-Expose-Headers"] = exposedHeaders
		return false
	}
	w.Header().Set("Access-Control-Allow-Methods", "POST")
	w.Header().Set("Access-Control-Allow-Headers", "Content-Type")
	w.Header().Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
	return true
}

// exposedHeaders are the headers of an answer, beyond those a browser
// shows any page, that a page of an allowed origin may read.
var exposedHeaders = []string{"Retry-After"}
