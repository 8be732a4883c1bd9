//go:build ingot_invariants

package metal

import "fmt"

// invariants is true in builds with -tags=ingot_invariants, which check
// ownership: releasing an object twice panics instead of being ignored.
const invariants = true

// releaseCheck records whether an owned object was released. In invariant
// builds a second release panics, naming the object (pebble's CloseChecker).
type releaseCheck struct{ released bool }

// release marks the object released and reports whether it already was.
func (c *releaseCheck) release(what string) (already bool) {
	if c.released {
		panic(fmt.Sprintf("metal: %s released twice", what))
	}
	c.released = true
	return false
}
