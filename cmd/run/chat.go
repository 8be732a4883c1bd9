package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"github.com/ingot-llm/ingot"
	"github.com/ingot-llm/ingot/tokenize"
)

// chat runs an interactive conversation: each line of stdin is a user turn.
// The session's KV cache keeps the conversation, so only the new turn is
// prefilled. Ctrl-C (SIGINT) during a reply stops the reply and returns to
// the prompt; at the prompt it asks for a second Ctrl-C, which exits, as do
// end of input (Ctrl-D) and SIGTERM. A conversation that outgrows the context
// window loses its oldest turns (the system message stays), with a note on
// stderr.
func chat(m *ingot.Model, s *ingot.Session, f *genFlags, stdin io.Reader, stdout, stderr io.Writer, intr <-chan os.Signal) error {
	tok := m.Tokenizer()
	if tok == nil {
		return errors.New("-chat needs a tokenizer.json in the model directory")
	}
	if _, err := tok.ChatTemplate(); err != nil {
		return fmt.Errorf("-chat: the model has no chat template (%v): it completes text; use -prompt", err)
	}
	lines, done := readLines(stdin)
	// Room kept for the reply: -n tokens, or a quarter of the window, and at
	// most half of it.
	room := s.ContextSize() / 4
	if f.n > 0 {
		room = f.n
	}
	room = min(room, s.ContextSize()/2)
	var msgs []ingot.Message
	armed := false // a Ctrl-C at the prompt asked to confirm
	for {
		fmt.Fprint(stdout, "> ")
		var line string
		select {
		case l, ok := <-lines:
			if !ok {
				fmt.Fprintln(stdout)
				return <-done
			}
			line, armed = strings.TrimSpace(l), false
		case sig := <-intr:
			fmt.Fprintln(stdout)
			if sig == syscall.SIGTERM || armed {
				return nil
			}
			armed = true
			fmt.Fprintln(stderr, "(Ctrl-C again or Ctrl-D to exit)")
			continue
		}
		if line == "" {
			continue
		}
		msgs = append(msgs, ingot.Message{Role: "user", Content: line})
		var dropped int
		var err error
		if msgs, dropped, err = fitTurns(tok, msgs, s.ContextSize()-room); err != nil {
			fmt.Fprintln(stderr, "run:", err)
			msgs = msgs[:len(msgs)-1]
			continue
		}
		if dropped > 0 {
			fmt.Fprintf(stderr, "[the conversation outgrew the context window of %d tokens: dropped its %d oldest messages]\n", s.ContextSize(), dropped)
		}
		ctx, stop, term := replyContext(intr)
		var reply strings.Builder
		var genErr error
		for t, err := range s.Chat(ctx, msgs, f.sampling()) {
			if err != nil {
				genErr = err
				break
			}
			reply.WriteString(t.Text)
			if _, err := io.WriteString(stdout, t.Text); err != nil {
				stop()
				return err
			}
		}
		stop()
		fmt.Fprintln(stdout)
		res := s.Last()
		if genErr != nil && res.Stop != ingot.StopCancelled {
			return genErr
		}
		fmt.Fprintf(stderr, "[%s]\n", res)
		switch {
		case *term:
			return nil
		case res.Stop == ingot.StopCancelled:
			fmt.Fprintln(stderr, "[reply stopped]")
		case res.Stop == ingot.StopContext:
			fmt.Fprintln(stderr, "[the context window is full: the next turn drops the oldest turns]")
		}
		msgs = append(msgs, ingot.Message{Role: "assistant", Content: reply.String()})
	}
}

// readLines delivers stdin's lines; done has the read error (nil at EOF)
// once lines is closed.
func readLines(r io.Reader) (lines <-chan string, done <-chan error) {
	l, d := make(chan string), make(chan error, 1)
	go func() {
		in := bufio.NewScanner(r)
		in.Buffer(make([]byte, 1<<20), 1<<20)
		for in.Scan() {
			l <- in.Text()
		}
		d <- in.Err()
		close(l)
	}()
	return l, d
}

// replyContext returns a context cancelled by the next signal on intr; term
// reports whether it was SIGTERM. stop ends the watch.
func replyContext(intr <-chan os.Signal) (ctx context.Context, stop context.CancelFunc, term *bool) {
	ctx, cancel := context.WithCancel(context.Background())
	term = new(bool)
	quit := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		select {
		case sig := <-intr:
			*term = sig == syscall.SIGTERM
			cancel()
		case <-quit:
		}
	}()
	return ctx, func() { close(quit); <-ended; cancel() }, term
}

// fitTurns drops the oldest messages after any leading system message, a
// user turn and its reply at a time, until msgs rendered with the generation
// prompt take at most limit tokens. It fails when the last message alone
// does not fit.
func fitTurns(tok *tokenize.Tokenizer, msgs []ingot.Message, limit int) ([]ingot.Message, int, error) {
	first := 0
	for first < len(msgs) && msgs[first].Role == "system" {
		first++
	}
	dropped := 0
	for {
		text, err := tok.ApplyChatTemplate(msgs, tokenize.ChatOptions{AddGenerationPrompt: true})
		if err != nil {
			return msgs, dropped, err
		}
		n := len(tok.Encode(text, false))
		if n <= limit {
			return msgs, dropped, nil
		}
		if first >= len(msgs)-1 {
			return msgs, dropped, fmt.Errorf("this message needs %d tokens with the chat template, more than the %d the context window leaves (raise -ctx)", n, limit)
		}
		k := 1
		if first+1 < len(msgs)-1 && msgs[first+1].Role == "assistant" {
			k = 2
		}
		msgs = append(msgs[:first], msgs[first+k:]...)
		dropped += k
	}
}
