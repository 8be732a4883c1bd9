package ingot_test

import (
	"context"
	"fmt"
	"log"
	"math"

	"github.com/ingot-llm/ingot"
)

// Greedy decoding with the built-in demo model (Load's dir "": tinycode-llama,
// 4M parameters trained on Python), streaming tokens' text and stopping at a
// stop string. Pass a Hugging Face or mlx-community directory to run a real
// model.
func Example() {
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

	sp := ingot.Sampling{MaxTokens: 32, Stop: []string{"\n    self.activation"}} // Temperature 0: greedy
	for tok, err := range s.Generate(ctx, "def __init__(self", sp) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Print(tok.Text) // arrives token by token
	}
	fmt.Println()
	fmt.Println(s.Last().Stop)
	// Output:
	// , config):
	//     super().__init__()
	//     self.config = config
	// stop
}

// Score completions: Σ ln p(completion | prompt), as evaluation harnesses
// compare candidate answers.
func ExampleModel_Score() {
	ctx := context.Background()
	m, err := ingot.Load(ctx, "", ingot.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	prompt := "def fib(n):\n    if n < 2:\n        return n\n   "
	var best string
	bestLP := math.Inf(-1)
	for _, c := range []string{" print('hello')", " return fib(n-1) + fib(n-2)"} {
		lp, err := m.Score(ctx, prompt, c)
		if err != nil {
			log.Fatal(err)
		}
		if lp > bestLP {
			best, bestLP = c, lp
		}
	}
	fmt.Printf("most likely: %q\n", best)
	// Output: most likely: " return fib(n-1) + fib(n-2)"
}

// Two sessions of one model run at the same time, each with its own cache.
func ExampleModel_NewSession() {
	ctx := context.Background()
	m, err := ingot.Load(ctx, "", ingot.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	out := make(chan string)
	for _, prompt := range []string{"def add(a, b):", "class Stack:"} {
		go func() {
			s, err := m.NewSession(ingot.SessionOptions{Context: 256, KV: "f16"})
			if err != nil {
				log.Fatal(err)
			}
			defer s.Close()
			text := ""
			for tok, err := range s.Generate(ctx, prompt, ingot.Sampling{MaxTokens: 8}) {
				if err != nil {
					log.Fatal(err)
				}
				text += tok.Text
			}
			out <- prompt + text
		}()
	}
	a, b := <-out, <-out
	fmt.Println(len(a) > 0 && len(b) > 0)
	// Output: true
}
