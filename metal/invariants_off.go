//go:build !ingot_invariants

package metal

// invariants is false in normal builds: releasing an object twice is a no-op.
const invariants = false

// releaseCheck records whether an owned object was released.
type releaseCheck struct{ released bool }

// release marks the object released and reports whether it already was.
func (c *releaseCheck) release(what string) (already bool) {
	already, c.released = c.released, true
	return already
}
