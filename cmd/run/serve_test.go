package main

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
)

func TestServeFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		flag string // named in the message
	}{
		{[]string{"-parallel", "0"}, "-parallel"},
		{[]string{"-ctx", "-1"}, "-ctx"},
		{[]string{"-kv", "q4"}, "-kv"},
		{[]string{"-max-queue", "-3"}, "-max-queue"},
		{[]string{"-timeout", "0s"}, "-timeout"},
		{[]string{"-backend", "tpu"}, "-backend"},
		{[]string{"-threads", "-1"}, "-threads"},
		{[]string{"-addr", "nocolon"}, "-addr"},
		{[]string{"-lookup", "-1"}, "-lookup"},
		{[]string{"-draft-max", "-2"}, "-draft-max"},
		{[]string{"-lookup", "2", "-draft", "x"}, "-draft or -lookup"},
		{[]string{"-bogus"}, "-bogus"},
		{[]string{"extra"}, "extra"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(append([]string{"serve"}, tc.args...), strings.NewReader(""), &out, &errb, nil)
			if code != exitUsage || !strings.Contains(errb.String(), tc.flag) {
				t.Errorf("exit %d, want %d with a message naming %s: %q", code, exitUsage, tc.flag, errb.String())
			}
		})
	}
}

// TestServe runs `run serve` on the demo model, asks it for a completion and
// stops it with SIGTERM: exit 0.
func TestServe(t *testing.T) {
	pr, pw := io.Pipe()
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default: // the test reads only the first lines
			}
		}
	}()
	intr := make(chan os.Signal, 1)
	code := make(chan int, 1)
	go func() {
		code <- run([]string{"serve", "-addr", "127.0.0.1:0", "-parallel", "1", "-ctx", "128", "-v"}, strings.NewReader(""), io.Discard, pw, intr)
		pw.Close()
	}()
	var url string // printed before the model loads, then "server ready"
	for l := <-lines; !strings.Contains(l, "server ready"); l = <-lines {
		if _, rest, ok := strings.Cut(l, "listening on "); ok {
			url, _, _ = strings.Cut(rest, " ")
		}
	}
	resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"def f():","max_tokens":4}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"text_completion"`) {
		t.Errorf("completion: %d %s", resp.StatusCode, b)
	}
	intr <- syscall.SIGTERM
	if c := <-code; c != 0 {
		t.Errorf("exit %d after SIGTERM, want 0", c)
	}
}
