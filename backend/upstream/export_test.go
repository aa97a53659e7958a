package upstream

import "time"

// SetAnswersInFlight sets the bound of the answers read at once for the
// Backends and Followers made after, and returns what sets it back.
func SetAnswersInFlight(n int64) (restore func()) {
	old := answersInFlight
	answersInFlight = n
	return func() { answersInFlight = old }
}

// Usable reports whether the Backend's endpoint i is worth asking now:
// not waiting out a failure, nor lagging.
func (b *Backend) Usable(i int) bool {
	return b.eps[i].usable(time.Now(), b.view.Load().best, b.cfg.MaxLag)
}
