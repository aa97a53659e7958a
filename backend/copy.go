package backend

// The Copy methods of the types return deep copies: nothing of the result
// is shared with the original, so either can be changed without affecting
// the other. A store copies what it is given and what it gives out to
// callers that may write to it.

// copyPtr returns a pointer to a copy of *p, or nil.
func copyPtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
