//go:build amd64 && !noasm

package cpu

//go:noescape
func widenPanelF16(p *float32, w *uint16, n int, off *int32)

//go:noescape
func widenPanelBF16(p *float32, w *uint16, n int, off *int32)

//go:noescape
func widenPanelF32(p *float32, w *float32, n int, off *int32)

// fPanelAVX512 widens a prefill panel of an f32, f16 or bf16 weight (see
// Weight.widenPanel) sixteen rows at a time: f16 and bf16 in pairs of
// elements, an odd last element in Go.
func fPanelAVX512(p []float32, w *Weight, n0, k0, kn int) {
	K := w.K
	_ = p[panelN*kn-1]
	var off [16]int32
	if w.Format == FormatF32 {
		_ = w.F32[(n0+panelN-1)*K+k0+kn-1]
		for r := range off {
			off[r] = int32(4 * r * K)
		}
		for h := 0; h < panelN; h += 16 {
			widenPanelF32(&p[h], &w.F32[(n0+h)*K+k0], kn, &off[0])
		}
		return
	}
	_ = w.U16[(n0+panelN-1)*K+k0+kn-1]
	for r := range off {
		off[r] = int32(2 * r * K)
	}
	if m := kn / 2; m > 0 {
		for h := 0; h < panelN; h += 16 {
			u := &w.U16[(n0+h)*K+k0]
			// direct calls: through a func value the offsets would escape
			if w.Format == FormatF16 {
				widenPanelF16(&p[h], u, m, &off[0])
			} else {
				widenPanelBF16(&p[h], u, m, &off[0])
			}
		}
	}
	if kn%2 != 0 {
		last := p[(kn-1)*panelN : kn*panelN]
		for r := range last {
			v := w.U16[(n0+r)*K+k0+kn-1]
			if w.Format == FormatF16 {
				last[r] = F16ToF32(v)
			} else {
				last[r] = BF16ToF32(v)
			}
		}
	}
}
