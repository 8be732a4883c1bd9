package server

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/ingot-llm/ingot/internal/demo"
)

// TestSpeculative: with -lookup 4, and with the demo model as its own
// -draft, greedy requests (completions, chat, streamed chat) give exactly
// the output of a server without speculation, and /metrics counts drafted
// and accepted tokens; a seeded sampling request decodes plainly (nothing
// drafted) and gives the plain server's output.
func TestSpeculative(t *testing.T) {
	code := strings.Repeat("def add(a, b):\n    return a + b\n\n", 3) + "def add("
	bodies := []struct{ path, body string }{
		{"/v1/completions", `{"prompt":` + quote(code) + `,"max_tokens":40,"temperature":0,"ignore_eos":true}`},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":` + quote(code) + `}],"max_tokens":24,"temperature":0}`},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":` + quote(code) + `}],"max_tokens":24,"temperature":0,"stream":true}`},
	}
	seeded := `{"prompt":` + quote(code) + `,"max_tokens":24,"temperature":0.8,"seed":5}`
	text := func(url, path, body string) string {
		t.Helper()
		resp, b := post(t, t.Context(), url+path, body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, b)
		}
		if strings.HasPrefix(string(b), "data:") {
			var sb strings.Builder
			for _, ev := range readSSE(t, b) {
				if ev.data == "[DONE]" {
					continue
				}
				for _, c := range decode[chatChunk](t, []byte(ev.data)).Choices {
					if c.Delta.Content != nil {
						sb.WriteString(*c.Delta.Content)
					}
				}
			}
			return sb.String()
		}
		return string(decodeChoices(t, b))
	}
	counters := func(url string) (drafted, accepted int) {
		t.Helper()
		resp, err := http.Get(url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		m, _ := io.ReadAll(resp.Body)
		for line := range strings.Lines(string(m)) {
			fmt.Sscanf(line, "ingot_speculative_drafted_tokens_total %d", &drafted)
			fmt.Sscanf(line, "ingot_speculative_accepted_tokens_total %d", &accepted)
		}
		return drafted, accepted
	}
	_, plain := testServer(t, Config{Parallel: 1})
	var want []string
	for _, b := range bodies {
		want = append(want, text(plain.URL, b.path, b.body))
	}
	wantSeeded := text(plain.URL, "/v1/completions", seeded)
	if d, _ := counters(plain.URL); d != 0 {
		t.Errorf("without speculation: %d tokens drafted", d)
	}

	dir, err := demo.Dir()
	if err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []Config{{Parallel: 1, Lookup: 4}, {Parallel: 1, DraftDir: dir, DraftTokens: 3}} {
		name := fmt.Sprintf("lookup %d", cfg.Lookup)
		if cfg.DraftDir != "" {
			name = "draft"
		}
		_, ts := testServer(t, cfg)
		for i, b := range bodies {
			if got := text(ts.URL, b.path, b.body); got != want[i] {
				t.Errorf("%s: %s %s:\n%s\nwithout speculation:\n%s", name, b.path, b.body, got, want[i])
			}
		}
		drafted, accepted := counters(ts.URL)
		if drafted == 0 || accepted == 0 || accepted > drafted {
			t.Errorf("%s: %d tokens drafted, %d accepted", name, drafted, accepted)
		}
		if got := text(ts.URL, "/v1/completions", seeded); got != wantSeeded {
			t.Errorf("%s: seeded sampling %s, without speculation %s", name, got, wantSeeded)
		}
		if d, _ := counters(ts.URL); d != drafted {
			t.Errorf("%s: a seeded sampling request drafted %d tokens", name, d-drafted)
		}
		text(ts.URL, "/v1/completions", strings.Replace(seeded, `,"seed":5`, "", 1)) // unseeded sampling: speculative
		if d, _ := counters(ts.URL); d == drafted {
			t.Errorf("%s: an unseeded sampling request drafted nothing", name)
		}
		t.Logf("%s: %d of %d drafted tokens accepted", name, accepted, drafted)
	}
}
