package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingot-llm/ingot"
	"github.com/ingot-llm/ingot/model"
)

// TestBatchSameAsAlone sends 8 different greedy requests (chat and
// completions; with and without logprobs, streamed, n = 2, a JSON object,
// prompts of different lengths) one at a time and then all at once to a
// server that batches their decode steps, and wants each response's tokens
// and logprobs to the bit as alone; and that they did decode in batches.
func TestBatchSameAsAlone(t *testing.T) {
	s, ts := testServer(t, Config{Parallel: 8, NoPrefixCache: true})
	type req struct{ path, body string }
	long := strings.Repeat(`x = x + 1\n`, 30)
	reqs := []req{
		{"/v1/completions", `{"prompt":"def fib(n):","max_tokens":40,"temperature":0,"logprobs":3}`},
		{"/v1/completions", `{"prompt":"import os\n` + long + `","max_tokens":24,"temperature":0,"logprobs":1}`},
		{"/v1/completions", `{"prompt":[[4094,755,923]],"max_tokens":32,"temperature":0,"ignore_eos":true}`},
		{"/v1/completions", `{"prompt":"class A:","max_tokens":16,"temperature":0,"n":2,"logprobs":0}`},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"def add(a, b):"}],"max_tokens":30,"temperature":0,"logprobs":true,"top_logprobs":2}`},
		{"/v1/chat/completions", `{"messages":[{"role":"system","content":"python"},{"role":"user","content":"sort a list"}],"max_tokens":28,"temperature":0}`},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"json"}],"max_tokens":20,"temperature":0,"logprobs":true,"response_format":{"type":"json_object"}}`},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"for i in range(10):"}],"max_tokens":36,"temperature":0,"stream":true,"logprobs":true}`},
	}
	run := func(r req) string {
		resp, out := post(t, t.Context(), ts.URL+r.path, r.body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s %s: %d %s", r.path, r.body, resp.StatusCode, out)
		}
		return stripVolatile(t, out, strings.Contains(r.body, `"stream":true`))
	}
	alone := make([]string, len(reqs))
	for i, r := range reqs {
		alone[i] = run(r)
	}
	bt := s.ready.Load().sched.(*pool).batch
	if bt == nil {
		t.Fatal("the server does not batch the demo model")
	}
	if w := bt.widest.Load(); w != 1 {
		t.Fatalf("requests one at a time decoded %d in a step", w)
	}
	together := make([]string, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Go(func() { together[i] = run(r) })
	}
	wg.Wait()
	for i := range reqs {
		if alone[i] != together[i] {
			t.Errorf("request %d alone:\n%s\ntogether:\n%s", i, alone[i], together[i])
		}
	}
	if w := bt.widest.Load(); w < 4 {
		t.Errorf("8 requests at once decoded at most %d in a step", w)
	}
	t.Logf("%d steps decoded %d tokens; at most %d in a step", bt.steps.Load(), bt.rows.Load(), bt.widest.Load())
}

// stripVolatile returns a response's choices (a stream's chunks' choices in
// order) without the ids and timestamps that differ between responses.
func stripVolatile(t *testing.T, b []byte, stream bool) string {
	t.Helper()
	var out []string
	parts := []string{string(b)}
	if stream {
		parts = nil
		for _, ev := range readSSE(t, b) {
			if ev.data != "[DONE]" {
				parts = append(parts, ev.data)
			}
		}
	}
	for _, p := range parts {
		var v struct {
			Choices json.RawMessage `json:"choices"`
			Usage   json.RawMessage `json:"usage"`
		}
		if err := json.Unmarshal([]byte(p), &v); err != nil {
			t.Fatalf("%v in %s", err, p)
		}
		out = append(out, fmt.Sprintf("%s %s", v.Choices, v.Usage))
	}
	return strings.Join(out, "\n")
}

// TestBatchCancelLeavesOthers: a streamed request whose client goes away
// after a few tokens leaves the batch; the requests decoding beside it get
// what they get alone, and every session is free afterwards.
func TestBatchCancelLeavesOthers(t *testing.T) {
	s, ts := testServer(t, Config{Parallel: 4, NoPrefixCache: true})
	bodies := []string{
		`{"prompt":"def f(x):","max_tokens":48,"temperature":0,"logprobs":1,"ignore_eos":true}`,
		`{"prompt":"import sys","max_tokens":40,"temperature":0.7,"seed":3,"ignore_eos":true}`,
		`{"prompt":"while True:","max_tokens":44,"temperature":0,"ignore_eos":true}`,
	}
	alone := make([]string, len(bodies))
	for i, b := range bodies {
		_, out := post(t, t.Context(), ts.URL+"/v1/completions", b)
		alone[i] = stripVolatile(t, out, false)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/v1/completions",
		strings.NewReader(`{"prompt":"x = 1","stream":true,"max_tokens":200,"ignore_eos":true}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	together := make([]string, len(bodies))
	var wg sync.WaitGroup
	for i, b := range bodies {
		wg.Go(func() {
			_, out := post(t, t.Context(), ts.URL+"/v1/completions", b)
			together[i] = stripVolatile(t, out, false)
		})
	}
	sc := bufio.NewScanner(resp.Body)
	for n := 0; n < 3 && sc.Scan(); {
		if strings.HasPrefix(sc.Text(), "data: ") {
			n++
		}
	}
	cancel() // the client goes away mid-stream
	resp.Body.Close()
	wg.Wait()
	for i := range bodies {
		if alone[i] != together[i] {
			t.Errorf("request %d alone:\n%s\nbeside a cancelled one:\n%s", i, alone[i], together[i])
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := s.ready.Load().sched.stats()
		bt := s.ready.Load().sched.(*pool).batch
		bt.mu.Lock()
		decoders, queued := bt.decoders, len(bt.ready)+len(bt.prefills)
		bt.mu.Unlock()
		if st.running == 0 && decoders == 0 && queued == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the requests: %d sessions running, %d sequences decoding, %d queued", st.running, decoders, queued)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// testBatcher starts a batcher of n CPU sessions of the demo model, each
// prefilling its prompts in chunks of chunk tokens. Set its hooks before
// the first sequence joins.
func testBatcher(t *testing.T, n, chunk int) (*batcher, []*model.Session) {
	t.Helper()
	m, err := ingot.Load(t.Context(), "", ingot.Options{Backend: "cpu", Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	bt, err := newBatcher(m.Raw(), n)
	if err != nil {
		m.Close()
		t.Fatal(err)
	}
	ss := make([]*model.Session, n)
	t.Cleanup(func() {
		if err := bt.close(); err != nil {
			t.Error(err)
		}
		for _, s := range ss {
			if s != nil {
				s.Close()
			}
		}
		m.Close()
	})
	for i := range ss {
		if ss[i], err = m.Raw().NewSession(model.SessionOptions{Context: 256, Batch: chunk}); err != nil {
			t.Fatal(err)
		}
	}
	return bt, ss
}

// runSequence prefills prompt on s through bt, then decodes n greedy tokens
// one step each, and leaves; or leaves when ctx is cancelled.
func runSequence(t *testing.T, ctx context.Context, bt *batcher, s *model.Session, prompt []int32, n int) {
	m := bt.join(s)
	defer m.leave()
	logits, err := m.prefill(ctx, prompt)
	for range n {
		if err != nil {
			break
		}
		logits, err = m.decode(ctx, int32(slices.Index(logits, slices.Max(logits))))
	}
	if err != nil && ctx.Err() == nil {
		t.Error(err)
	}
}

// tokenRange returns n token ids starting at first.
func tokenRange(first, n int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(first + i)
	}
	return p
}

// TestBatcherPrefillsAllWhenNoneDecode: four prompts of three chunks each,
// queued while nothing decodes, are all prefilled (twelve chunks) before
// the first step, so the four sequences decode together from their first
// token on, rather than the first decoding while the others wait.
func TestBatcherPrefillsAllWhenNoneDecode(t *testing.T) {
	const n, chunk, chunks = 4, 4, 3
	bt, ss := testBatcher(t, n, chunk)
	var (
		mu      sync.Mutex
		events  []bool // prefill chunk (true) or step, in order
		gaps    []gapStats
		release = make(chan struct{})
	)
	bt.beforeForward = func(prefill bool) {
		mu.Lock()
		events = append(events, prefill)
		first := len(events) == 1
		mu.Unlock()
		if first {
			<-release // hold the first chunk until every prompt is queued
		}
		time.Sleep(5 * time.Millisecond) // time for a finished prompt's first token to queue
	}
	bt.afterGap = func(g gapStats) {
		mu.Lock()
		gaps = append(gaps, g)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for i, s := range ss {
		wg.Go(func() { runSequence(t, t.Context(), bt, s, tokenRange(10+20*i, chunk*chunks), 3) })
	}
	for queued := 0; queued < n; time.Sleep(time.Millisecond) {
		bt.mu.Lock()
		queued = len(bt.prefills)
		bt.mu.Unlock()
	}
	close(release)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	firstStep := slices.Index(events, false)
	if firstStep != n*chunks {
		t.Errorf("the first step ran after %d prefill chunks, want all %d (events, true = chunk: %v)", firstStep, n*chunks, events)
	}
	if len(gaps) == 0 || !gaps[0].open || gaps[0].chunks != n*chunks {
		t.Errorf("gaps %+v: want the first open, with all %d chunks", gaps, n*chunks)
	}
}

// TestBatcherGapBudget: prompts that arrive while sequences decode are
// prefilled in gaps that start no chunk after their budget (gapSteps
// times the last step) is spent, so a gap runs for at most its budget plus
// one chunk; and with chunks shorter than the budget, a gap runs more than
// one.
func TestBatcherGapBudget(t *testing.T) {
	const chunk = 4
	bt, ss := testBatcher(t, 5, chunk)
	var (
		mu   sync.Mutex
		gaps []gapStats
	)
	bt.beforeForward = func(prefill bool) {
		if prefill {
			time.Sleep(8 * time.Millisecond)
		} else {
			time.Sleep(10 * time.Millisecond)
		}
	}
	bt.afterGap = func(g gapStats) {
		mu.Lock()
		gaps = append(gaps, g)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() { runSequence(t, t.Context(), bt, ss[i], tokenRange(10+20*i, chunk), 60) })
	}
	for bt.steps.Load() < 3 {
		time.Sleep(time.Millisecond)
	}
	for i := 2; i < len(ss); i++ {
		wg.Go(func() { runSequence(t, t.Context(), bt, ss[i], tokenRange(10+20*i, 4*chunk), 5) })
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	budgeted, most := 0, 0
	for _, g := range gaps {
		if g.open {
			continue
		}
		budgeted++
		most = max(most, g.chunks)
		if g.took >= g.budget+g.longest && g.chunks > 1 {
			t.Errorf("gap %+v: ran past its budget plus one chunk", g)
		}
	}
	if budgeted == 0 {
		t.Fatalf("no gap ran while sequences decoded: %+v", gaps)
	}
	if most < 2 {
		t.Errorf("no gap used its budget for a second chunk: %+v", gaps)
	}
	t.Logf("gaps: %+v", gaps)
}

// TestBatcherGapOpensWhenStreamsLeave: a gap that begins while a sequence
// decodes is held to its budget only while one does: when the last leaves
// during its first chunk, the gap goes on to prefill every waiting prompt,
// as a gap that began with none would.
func TestBatcherGapOpensWhenStreamsLeave(t *testing.T) {
	const chunk, chunks = 4, 3
	bt, ss := testBatcher(t, 4, chunk)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var (
		mu     sync.Mutex
		armed  bool   // the next chunk waits for the prompts, then the stream leaves
		events []bool // prefill chunk (true) or step, from the armed chunk on
		gaps   []gapStats
	)
	bt.beforeForward = func(prefill bool) {
		mu.Lock()
		a := armed && prefill
		if a {
			armed, events = false, []bool{}
		}
		if events != nil {
			events = append(events, prefill)
		}
		mu.Unlock()
		if !a {
			return
		}
		for queued := 0; queued < len(ss)-1; time.Sleep(time.Millisecond) {
			bt.mu.Lock()
			queued = len(bt.prefills)
			bt.mu.Unlock()
		}
		cancel() // the stream's client goes away: it leaves its place in the queue
		for streams := 1; streams > 0; time.Sleep(time.Millisecond) {
			bt.mu.Lock()
			streams = bt.streams
			bt.mu.Unlock()
		}
		time.Sleep(50 * time.Millisecond) // past the budget of a step of the demo model
	}
	bt.afterGap = func(g gapStats) {
		mu.Lock()
		if events != nil {
			gaps = append(gaps, g)
		}
		mu.Unlock()
	}
	var wg sync.WaitGroup
	wg.Go(func() { runSequence(t, ctx, bt, ss[0], tokenRange(10, chunk), 1000) })
	for bt.steps.Load() < 3 {
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	armed = true
	mu.Unlock()
	for i := 1; i < len(ss); i++ {
		wg.Go(func() { runSequence(t, t.Context(), bt, ss[i], tokenRange(10+20*i, chunk*chunks), 2) })
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	want := (len(ss) - 1) * chunks
	if len(events) < want || slices.Contains(events[:want], false) {
		t.Errorf("events from the stream's last gap on (true = chunk): %v; want all %d chunks first", events, want)
	}
	if len(gaps) == 0 || gaps[0].chunks != want || !gaps[0].open {
		t.Errorf("gaps from the stream's last on: %+v; want the first open, with all %d chunks", gaps, want)
	}
}
