package kernels

import "github.com/ingot-llm/ingot/metal"

// NewMetalNV is NewMetal running the NVIDIA-shaped kernels whatever the
// device is, so the model tests run them end to end on the interpreter.
func NewMetalNV(dev metal.Device) (*Metal, error) {
	m, err := NewMetal(dev)
	if err == nil {
		m.shape = shapeNVIDIA
	}
	return m, err
}

// NVIntAlways makes m run the integer-dot mat-vecs (matvec_*_nvi) wherever
// the NVIDIA-shaped float ones would run, as INGOT_NV_INT=1 does.
func NVIntAlways(m *Metal) { m.nvInt = nvIntAlways }
