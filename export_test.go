package blockrpc

// BacklogHeld returns the bytes that the backlog of h counts, all requests
// together: 0 without a backlog limit.
func BacklogHeld(h *Handler) int64 {
	if h.backlog == nil {
		return 0
	}
	return h.backlog.total.Load()
}
