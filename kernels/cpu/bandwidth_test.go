package cpu

import "testing"

func TestReadBandwidth(t *testing.T) {
	p := NewPool(2)
	defer p.Close()
	if gbs := ReadBandwidth(p, 8<<20); !(gbs > 0) {
		t.Fatalf("ReadBandwidth = %v", gbs)
	}
	b := make([]byte, 1<<12)
	for i := range b {
		b[i] = byte(i)
	}
	want := sumBytesGo(b)
	if got, ok := sumBytesAsm(b); ok && got != want {
		t.Errorf("sumBytesAsm = %d, sumBytesGo = %d", got, want)
	}
}

// BenchmarkReadBandwidth reports the 2-thread DRAM read bandwidth over 256 MB.
func BenchmarkReadBandwidth(b *testing.B) {
	p := NewPool(2)
	defer p.Close()
	var gbs float64
	for b.Loop() {
		gbs = ReadBandwidth(p, 256<<20)
	}
	b.ReportMetric(gbs, "GB/s")
}
