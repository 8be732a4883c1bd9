package server

import (
	"encoding/json"
	"errors"
	"math"
	"sync"

	"github.com/ingot-llm/ingot/server/constrain"
	"github.com/ingot-llm/ingot/tokenize"
)

// responseFormat is OpenAI's response_format.
type responseFormat struct {
	Type       string `json:"type"`
	JSONSchema *struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Strict *bool           `json:"strict"`
	} `json:"json_schema"`
}

// parseResponseFormat returns the grammar response_format asks for: nil for
// none or text, any JSON object for json_object, the schema's for
// json_schema. A schema outside the supported subset is a 400 naming the
// keyword's path.
func parseResponseFormat(raw json.RawMessage) (*constrain.Grammar, error) {
	if isNull(raw) {
		return nil, nil
	}
	var rf responseFormat
	if json.Unmarshal(raw, &rf) != nil {
		return nil, badRequest("response_format", "must be an object with a type")
	}
	switch rf.Type {
	case "text":
		return nil, nil
	case "json_object":
		return constrain.AnyObject(), nil
	case "json_schema":
	default:
		return nil, badRequest("response_format.type", "must be text, json_object or json_schema, got %q", rf.Type)
	}
	if rf.JSONSchema == nil {
		return nil, badRequest("response_format.json_schema", "is required with type json_schema")
	}
	if isNull(rf.JSONSchema.Schema) {
		return nil, badRequest("response_format.json_schema.schema", "is required")
	}
	g, err := constrain.CompileSchema(rf.JSONSchema.Schema)
	var se *constrain.SchemaError
	if errors.As(err, &se) {
		field := "response_format.json_schema.schema"
		if se.Path != "" {
			field += "." + se.Path
		}
		return nil, badRequest(field, "%s", se.Message)
	}
	return g, err
}

// vocab is the model's vocabulary for constrained decoding, built at the
// first request that needs it.
type vocab struct {
	once sync.Once
	v    *constrain.Vocab
}

// get returns the vocabulary of n ids (the model's logits), with tok's
// token bytes and special tokens never allowed but the EOS ids.
func (vc *vocab) get(tok *tokenize.Tokenizer, n int, eos []int32) *constrain.Vocab {
	vc.once.Do(func() {
		toks := make([][]byte, min(n, tok.VocabSize()))
		for id := range toks {
			if !tok.IsSpecial(int32(id)) {
				toks[id] = tok.TokenBytes(int32(id))
			}
		}
		vc.v = constrain.NewVocab(n, toks, eos)
	})
	return vc.v
}

// maskLogits copies logits to dst with the tokens mask leaves out set to
// -Inf, and reports whether mask allows any token.
func maskLogits(dst, logits []float32, mask []uint64) ([]float32, bool) {
	dst = append(dst[:0], logits...)
	inf := float32(math.Inf(-1))
	any := false
	for i := range dst {
		if mask[i>>6]&(1<<(i&63)) == 0 {
			dst[i] = inf
		} else {
			any = true
		}
	}
	return dst, any
}

// argmaxAllowed returns the allowed token with the largest logit (the lowest
// id on ties).
func argmaxAllowed(logits []float32, mask []uint64) int32 {
	best := int32(-1)
	for i, l := range logits {
		if mask[i>>6]&(1<<(i&63)) != 0 && (best < 0 || l > logits[best]) {
			best = int32(i)
		}
	}
	return best
}
