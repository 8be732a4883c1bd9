package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// chatModel is tinycode-llama with a chat template added: the demo has none.
func chatModel(t *testing.T) string {
	t.Helper()
	src := filepath.Join(refDir, "tinycode-llama")
	dir := t.TempDir()
	for _, f := range []string{"config.json", "generation_config.json", "model.safetensors", "tokenizer.json"} {
		abs, err := filepath.Abs(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(abs, filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := json.Marshal(map[string]any{
		"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>",
		"chat_template": "{{ bos_token }}{% for m in messages %}# {{ m.role }}:\n{{ m.content }}\n{% endfor %}{% if add_generation_prompt %}# assistant:\n{% endif %}",
	})
	if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// syncBuffer is a bytes.Buffer safe for a writer and a poller.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor polls b until it contains want n times.
func waitFor(t *testing.T, b interface{ String() string }, want string, n int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if strings.Count(b.String(), want) >= n {
			return
		}
	}
	t.Fatalf("timed out waiting for %d× %q in %q", n, want, b.String())
}

// chatRun runs `run -chat` with flags on stdin; done receives its exit status.
func chatRun(t *testing.T, stdin io.Reader, intr chan os.Signal, flags ...string) (stdout, stderr *syncBuffer, done chan int) {
	stdout, stderr, done = &syncBuffer{}, &syncBuffer{}, make(chan int, 1)
	args := append([]string{"-model", chatModel(t), "-chat", "-threads", "1"}, flags...)
	go func() { done <- run(args, stdin, stdout, stderr, intr) }()
	return stdout, stderr, done
}

// TestChatInterruptReply: Ctrl-C during a reply stops the reply and returns
// to the prompt; the next turn runs; end of input exits with status 0.
func TestChatInterruptReply(t *testing.T) {
	in, feed := io.Pipe()
	intr := make(chan os.Signal, 1)
	stdout, stderr, done := chatRun(t, in, intr, "-n", "0", "-ignore-eos", "-ctx", "4096")
	replyBegun := func(n int) { // the n-th reply has printed some text
		waitFor(t, stdout, "> ", n)
		for {
			out := stdout.String()
			if i := nthIndex(out, "> ", n); i >= 0 && len(out) >= i+len("> ")+8 {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	io.WriteString(feed, "def add(a, b):\n")
	replyBegun(1)
	intr <- os.Interrupt
	waitFor(t, stderr, "[reply stopped]", 1)
	io.WriteString(feed, "class Stack:\n")
	replyBegun(2)
	intr <- os.Interrupt // stops the second reply too
	waitFor(t, stderr, "[reply stopped]", 2)
	feed.Close()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	if n := strings.Count(stderr.String(), "stop: cancelled"); n != 2 {
		t.Errorf("%d cancelled replies, want 2:\n%s", n, stderr.String())
	}
}

// TestChatInterruptPrompt: Ctrl-C at the prompt asks for a second one, which
// exits with status 0.
func TestChatInterruptPrompt(t *testing.T) {
	in, _ := io.Pipe() // no input ever comes
	intr := make(chan os.Signal, 1)
	stdout, stderr, done := chatRun(t, in, intr)
	waitFor(t, stdout, "> ", 1)
	intr <- os.Interrupt
	waitFor(t, stderr, "Ctrl-C again", 1)
	select {
	case code := <-done:
		t.Fatalf("exited (%d) on the first Ctrl-C at the prompt", code)
	default:
	}
	intr <- os.Interrupt
	if code := <-done; code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
}

// TestChatOutgrowsContext: a conversation longer than the context window
// drops its oldest turns, says so and goes on; a message that cannot fit at
// all is refused without ending the chat.
func TestChatOutgrowsContext(t *testing.T) {
	long := strings.Repeat("x = 1; ", 40) + "\n" // alone more than the window leaves
	turns := strings.Repeat("def add(a, b):\n", 6) + long + "class Stack:\n"
	stdout, stderr, done := chatRun(t, strings.NewReader(turns), nil, "-n", "8", "-temp", "0", "-ctx", "64")
	if code := <-done; code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	se := stderr.String()
	if !strings.Contains(se, "dropped its") {
		t.Errorf("no note about dropped turns:\n%s", se)
	}
	if !strings.Contains(se, "raise -ctx") {
		t.Errorf("the overlong message was not refused:\n%s", se)
	}
	if n := strings.Count(se, "[prompt: "); n != 7 {
		t.Errorf("%d replies, want 7\nstderr:\n%s\nstdout:\n%s", n, se, stdout.String())
	}
}

// nthIndex returns the index of the n-th (from 1) s in text, or -1.
func nthIndex(text, s string, n int) int {
	at := -len(s)
	for range n {
		i := strings.Index(text[at+len(s):], s)
		if i < 0 {
			return -1
		}
		at += len(s) + i
	}
	return at
}
