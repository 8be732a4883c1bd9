//go:build darwin

package metal

import (
	"log/slog"
	"os"

	"github.com/ebitengine/purego/objc"
)

// MTLResidencySet selectors (macOS 15+), MTLResidencySetDescriptor's and
// MTLCommandQueue's.
var (
	selNewResidencySet      = objc.RegisterName("newResidencySetWithDescriptor:error:")
	selSetInitialCapacity   = objc.RegisterName("setInitialCapacity:")
	selAddAllocation        = objc.RegisterName("addAllocation:")
	selRemoveAllocation     = objc.RegisterName("removeAllocation:")
	selRequestResidency     = objc.RegisterName("requestResidency")
	selEndResidency         = objc.RegisterName("endResidency")
	selAddResidencySet      = objc.RegisterName("addResidencySet:")
	selRemoveResidencySet   = objc.RegisterName("removeResidencySet:")
	selResidencyCommit      = selCommit // - (void)commit, as MTLCommandBuffer's
	classResidencySetDescID objc.ID     // MTLResidencySetDescriptor; 0 before macOS 15
)

// residencySet is one MTLResidencySet attached to the device's command
// queue: Metal makes it resident at the start of each command buffer, and
// requestResidency keeps it wired between them (see [Residency], which
// counts its Objective-C calls in the device's tally).
type residencySet struct {
	d  *device
	id objc.ID // owned
}

// newResidencySet returns the device's residency set, or nil where Metal
// has none (before macOS 15: the class or the selectors are missing) or
// INGOT_METAL_NO_RESIDENCY=1 asks for none (to compare; as llama.cpp's
// GGML_METAL_NO_RESIDENCY). It runs inside an autorelease pool, after the
// queue is made.
func (d *device) newResidencySet() ResidencySet {
	if os.Getenv("INGOT_METAL_NO_RESIDENCY") == "1" {
		slog.Debug("metal residency set off (INGOT_METAL_NO_RESIDENCY=1)")
		return nil
	}
	if classResidencySetDescID == 0 {
		classResidencySetDescID = objc.ID(objc.GetClass("MTLResidencySetDescriptor"))
	}
	if classResidencySetDescID == 0 || !msgRespond(d.id, selRespondsToSelector, selNewResidencySet) ||
		!msgRespond(d.queue, selRespondsToSelector, selAddResidencySet) {
		slog.Debug("metal residency sets unavailable (macOS 15+)")
		return nil
	}
	desc := msgID(msgID(classResidencySetDescID, selAlloc), selInit) // owned
	if desc == 0 {
		return nil
	}
	defer release(desc)
	msgSetUint(desc, selSetInitialCapacity, 256)
	var nserr objc.ID
	// newResidencySetWithDescriptor:error: has the shape of
	// newComputePipelineStateWithFunction:error: (id, id, NSError **) → id.
	id := msgNewPipeline(d.id, selNewResidencySet, desc, &nserr) // owned
	if id == 0 {
		slog.Warn("metal: newResidencySetWithDescriptor failed; weights may be unwired when idle", "err", nsErrorText(nserr))
		return nil
	}
	msgSetID(d.queue, selAddResidencySet, id)
	d.tally.Add(5) // alloc, init, setInitialCapacity:, newResidencySetWithDescriptor:error:, addResidencySet:
	return &residencySet{d: d, id: id}
}

// Add is addAllocation: (an MTLBuffer is an MTLAllocation).
func (s *residencySet) Add(b Buffer) {
	if mb, ok := b.(*buffer); ok && mb.id != 0 {
		withPool(func() { msgSetID(s.id, selAddAllocation, mb.id) })
	}
}

// Remove is removeAllocation:.
func (s *residencySet) Remove(b Buffer) {
	if mb, ok := b.(*buffer); ok && mb.id != 0 {
		withPool(func() { msgSetID(s.id, selRemoveAllocation, mb.id) })
	}
}

// Commit is commit.
func (s *residencySet) Commit() { s.send(selResidencyCommit) }

// RequestResidency is requestResidency.
func (s *residencySet) RequestResidency() { s.send(selRequestResidency) }

// EndResidency is endResidency.
func (s *residencySet) EndResidency() { s.send(selEndResidency) }

// Release detaches the set from the queue and releases it.
func (s *residencySet) Release() {
	withPool(func() {
		if s.d.queue != 0 {
			msgSetID(s.d.queue, selRemoveResidencySet, s.id)
		}
		release(s.id)
	})
	s.id = 0
}

// send sends a - (void)m message to the set, in a pool of its own (the
// keep-alive calls it from its own goroutine).
func (s *residencySet) send(sel objc.SEL) {
	withPool(func() { msgVoid(s.id, sel) }) // push, the message, pop
}
