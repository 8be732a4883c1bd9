package ingot_test

import (
	"context"
	"fmt"
	"log"

	"github.com/ingot-llm/ingot"
)

// The next token's distribution: the most likely tokens after a prompt, with
// their log-probabilities.
func ExampleSession_TopK() {
	ctx := context.Background()
	m, err := ingot.Load(ctx, "", ingot.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	s, err := m.NewSession(ingot.SessionOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	top, err := s.TopK(ctx, "for i in range(", 3)
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range top {
		fmt.Printf("%q\n", t.Text)
	}
	// Output:
	// "10"
	// "2"
	// "100"
}

// Speculative decoding by prompt lookup: drafts are copied from earlier in the
// text and verified in one batched forward; the output is greedy decoding's.
func ExampleSession_Speculate() {
	ctx := context.Background()
	m, err := ingot.Load(ctx, "", ingot.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	s, err := m.NewSession(ingot.SessionOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	if err := s.Speculate(&ingot.Speculation{}); err != nil { // Draft nil: prompt lookup
		log.Fatal(err)
	}
	for tok, err := range s.Generate(ctx, "def fibonacci(n):", ingot.Sampling{MaxTokens: 16}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Print(tok.Text)
	}
	fmt.Println()
	r := s.Last()
	fmt.Println(r.Accepted > 0)
	// Output:
	// return 1/n + 1/n + 1/n +
	// true
}
