package tokenize

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// benchText returns at least n bytes of Go source ("code") or of English
// prose ("prose": the doc comments of the same files and the tok_cases
// strings), made from this repository's files, so the benchmark needs no
// network and gives the same text on every run.
func benchText(tb testing.TB, kind string, n int) string {
	tb.Helper()
	var files []string
	for _, pattern := range []string{"*.go", "../*/*.go", "../*/*/*.go"} {
		m, _ := filepath.Glob(pattern)
		files = append(files, m...)
	}
	var src, prose strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		src.Write(data)
		for _, line := range strings.Split(string(data), "\n") {
			if c, ok := strings.CutPrefix(strings.TrimSpace(line), "// "); ok {
				prose.WriteString(c)
				prose.WriteByte(' ')
				if strings.HasSuffix(c, ".") {
					prose.WriteString("\n\n")
				}
			}
		}
	}
	if kind == "prose" {
		var f struct {
			Cases []struct {
				Text string `json:"text"`
			} `json:"cases"`
		}
		readJSON(tb, "testdata/tok-spm/tok_cases.json", &f)
		for _, c := range f.Cases {
			prose.WriteString(c.Text)
			prose.WriteString("\n")
		}
		src = prose
	}
	s := src.String()
	if len(s) == 0 {
		tb.Fatal("no benchmark text")
	}
	return strings.Repeat(s, n/len(s)+1)
}

// benchDirs are the tokenizers benchmarked, by name.
func benchDirs() [][2]string {
	dirs := [][2]string{{"tinycode-llama", "testdata/tinycode-llama"}, {"tok-spm", "testdata/tok-spm"}}
	for _, fam := range families {
		dirs = append(dirs, [2]string{fam, filepath.Join(shared, "tokenizers", fam)})
	}
	return dirs
}

// BenchmarkEncode measures encode throughput on 1 MiB of code and of prose.
func BenchmarkEncode(b *testing.B) {
	const size = 1 << 20
	for _, kind := range []string{"code", "prose"} {
		text := benchText(b, kind, size)[:size]
		for _, d := range benchDirs() {
			b.Run("tok="+d[0]+"/text="+kind, func(b *testing.B) {
				tk := loadDir(b, d[1])
				tk.Encode(text, false) // the word cache warms up as it does in a server
				b.SetBytes(int64(len(text)))
				b.ReportAllocs()
				for b.Loop() {
					tk.Encode(text, false)
				}
			})
		}
	}
}

// BenchmarkDecode measures decode throughput (bytes of text per second).
func BenchmarkDecode(b *testing.B) {
	text := benchText(b, "prose", 1<<20)[:1<<20]
	for _, d := range benchDirs() {
		b.Run("tok="+d[0], func(b *testing.B) {
			tk := loadDir(b, d[1])
			ids := tk.Encode(text, false)
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				tk.Decode(ids, false)
			}
		})
	}
}

// TestLongPrompt encodes 64 KiB prompts, including single words that long
// (one run of letters, spaces or digits), with a cold cache: BPE must stay
// O(n log n) per word.
func TestLongPrompt(t *testing.T) {
	const size = 64 << 10
	texts := map[string]string{
		"code":    benchText(t, "code", size)[:size],
		"letters": strings.Repeat("abcdefghij", size/10),
		"spaces":  strings.Repeat(" ", size),
		"digits":  strings.Repeat("0123456789", size/10),
		"emoji":   strings.Repeat("🦙", size/4),
	}
	for _, d := range benchDirs() {
		for name, text := range texts {
			t.Run(d[0]+"/"+name, func(t *testing.T) {
				tk := loadDir(t, d[1])
				tk.model.cacheMu.Lock()
				clear(tk.model.cache) // nothing cached
				tk.model.cacheMu.Unlock()
				start := time.Now()
				ids := tk.Encode(text, false)
				took := time.Since(start)
				if took > time.Second {
					t.Errorf("encoding %d bytes took %v", len(text), took)
				}
				t.Logf("%d bytes in %v", len(text), took)
				if got := tk.Decode(ids, false); d[0] != "llama2" && d[0] != "phi3" && d[0] != "tok-spm" && got != text {
					t.Errorf("decode(encode(text)) differs")
				}
			})
		}
	}
}
