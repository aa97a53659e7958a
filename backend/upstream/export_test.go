package upstream

// SetAnswersInFlight sets the bound of the answers read at once for the
// Backends and Followers made after, and returns what sets it back.
func SetAnswersInFlight(n int64) (restore func()) {
	old := answersInFlight
	answersInFlight = n
	return func() { answersInFlight = old }
}
