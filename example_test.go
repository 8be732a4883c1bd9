package ingot_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/ingot-llm/ingot"
	"github.com/ingot-llm/ingot/internal/demo"
	"github.com/ingot-llm/ingot/model"
)

// Greedy decoding with the built-in tinycode-llama model, streaming text and
// stopping at a stop string.
func ExampleLLM_Generate() {
	dir, err := demo.Dir() // or any Hugging Face / mlx-community model directory
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	llm, err := ingot.Load(ctx, dir, ingot.Options{})
	if err != nil {
		panic(err)
	}
	defer llm.Close()

	var streamed strings.Builder
	res, err := llm.Generate(ctx, "def __init__(self", ingot.GenerateOptions{
		GenerateOptions: model.GenerateOptions{MaxTokens: 32}, // Temperature 0: greedy
		Stop:            []string{"\n    self.activation"},
	}, func(text string) error {
		streamed.WriteString(text) // arrives token by token
		return nil
	})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%q\n", res.Text)
	fmt.Println(res.Stop, streamed.String() == res.Text)
	// Output:
	// ", config):\n    super().__init__()\n    self.config = config"
	// stop true
}
