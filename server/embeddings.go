package server

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"

	"github.com/ingot-llm/ingot"
	"github.com/ingot-llm/ingot/model"
	"github.com/ingot-llm/ingot/tokenize"
)

// embeddingRequest is the body of POST /v1/embeddings. Fields not listed
// are ignored (user).
type embeddingRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format"` // "float" (""), "base64"
	Dimensions     *int            `json:"dimensions"`
	// Pooling is an ingot extension: "last" ("", the last token's state,
	// llama-server's default for a causal LM) or "mean" (the mean over the
	// input's tokens).
	Pooling string `json:"pooling"`
}

// maxEmbeddingInputs is the most inputs one request may hold (OpenAI's limit).
const maxEmbeddingInputs = 2048

// embedding is one entry of the response's data; Embedding is []float32 or,
// with encoding_format base64, a string.
type embedding struct {
	Object    string `json:"object"` // "embedding"
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"`
}

type embeddingUsage struct {
	PromptTokens int `json:"prompt_tokens"`
	TotalTokens  int `json:"total_tokens"`
}

type embeddingList struct {
	Object string         `json:"object"` // "list"
	Data   []embedding    `json:"data"`
	Model  string         `json:"model"`
	Usage  embeddingUsage `json:"usage"`
}

// An embedder is a slot that computes embeddings (a pool's slots are).
type embedder interface {
	// embed returns each input's pooled final-norm state (D), L2-normalized.
	embed(ctx context.Context, inputs [][]int32, mean bool, adapter *ingot.Adapter) ([][]float32, error)
}

// parseInputs reads input as a string, a list of strings, a list of token
// ids or a list of id lists, as completions' prompt.
func parseInputs(raw json.RawMessage, tok *tokenize.Tokenizer, vocab, ctxSize int) ([][]int32, error) {
	var out [][]int32
	var one string
	var strs []string
	var ids []int64
	var lists [][]int64
	switch {
	case isNull(raw):
		return nil, badRequest("input", "is required")
	case json.Unmarshal(raw, &one) == nil:
		if one == "" {
			return nil, badRequest("input", "must not be empty")
		}
		out = [][]int32{tok.Encode(one, true)}
	case json.Unmarshal(raw, &strs) == nil && len(strs) > 0:
		for i, s := range strs {
			if s == "" {
				return nil, badRequest(fmt.Sprintf("input[%d]", i), "must not be empty")
			}
			out = append(out, tok.Encode(s, true))
		}
	case json.Unmarshal(raw, &ids) == nil && len(ids) > 0:
		p, err := idPrompt("input", ids, tok, vocab)
		if err != nil {
			return nil, err
		}
		out = [][]int32{p.ids}
	case json.Unmarshal(raw, &lists) == nil && len(lists) > 0:
		for i, l := range lists {
			field := fmt.Sprintf("input[%d]", i)
			if len(l) == 0 {
				return nil, badRequest(field, "must not be empty")
			}
			p, err := idPrompt(field, l, tok, vocab)
			if err != nil {
				return nil, err
			}
			out = append(out, p.ids)
		}
	default:
		return nil, badRequest("input", "must be a string, a non-empty list of strings, of token ids, or of lists of token ids")
	}
	if len(out) > maxEmbeddingInputs {
		return nil, badRequest("input", "has %d inputs, at most %d", len(out), maxEmbeddingInputs)
	}
	for i, ids := range out {
		if len(ids) > ctxSize {
			field := "input"
			if len(out) > 1 {
				field = fmt.Sprintf("input[%d]", i)
			}
			return nil, badRequest(field, "has %d tokens; the context window holds %d (the server's -ctx)", len(ids), ctxSize)
		}
	}
	return out, nil
}

// embeddings serves POST /v1/embeddings: each input's final-norm hidden
// state (the input of the model's head), pooled over the tokens (the last
// one's, or the mean) and L2-normalized, as OpenAI's embeddings are.
func (s *Server) embeddings(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	rq := reqOf(ctx)
	var req embeddingRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	if err := rq.l.pick(r, req.Model); err != nil {
		return err
	}
	D := rq.l.model.Raw().Config.HiddenSize
	switch req.EncodingFormat {
	case "", "float", "base64":
	default:
		return badRequest("encoding_format", "must be float or base64, got %q", req.EncodingFormat)
	}
	if req.Dimensions != nil && *req.Dimensions != D {
		return badRequest("dimensions", "must be %d (the model's hidden size; embeddings are not truncated), got %d", D, *req.Dimensions)
	}
	var mean bool
	switch req.Pooling {
	case "", "last":
	case "mean":
		mean = true
	default:
		return badRequest("pooling", "must be last or mean, got %q", req.Pooling)
	}
	inputs, err := parseInputs(req.Input, rq.l.tok, rq.l.model.Raw().Config.VocabSize, rq.l.ctxSize)
	if err != nil {
		return err
	}
	for _, in := range inputs {
		rq.prompt += len(in)
	}
	sl, err := rq.l.sched.acquire(ctx, nil, rq.adapter)
	if err != nil {
		return err
	}
	defer sl.release()
	e, ok := sl.(embedder)
	if !ok {
		return errors.New("server: this scheduler computes no embeddings")
	}
	vecs, err := e.embed(ctx, inputs, mean, rq.adapter)
	if err != nil {
		return err
	}
	out := embeddingList{Object: "list", Data: make([]embedding, len(vecs)), Model: rq.model,
		Usage: embeddingUsage{PromptTokens: rq.prompt, TotalTokens: rq.prompt}}
	for i, v := range vecs {
		out.Data[i] = embedding{Object: "embedding", Index: i, Embedding: v}
		if req.EncodingFormat == "base64" {
			out.Data[i].Embedding = base64Floats(v)
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// base64Floats is v as little-endian float32s in standard base64, as
// OpenAI's encoding_format base64 (the SDKs decode it to a Float32Array).
func base64Floats(v []float32) string {
	b := make([]byte, 0, 4*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return base64.StdEncoding.EncodeToString(b)
}

// embed runs each input from an empty cache through ForwardTaps and pools
// the final norm's output: the last row, or with mean the mean of the rows
// (in float64); then it L2-normalizes the result (a zero vector stays zero).
func (sl *poolSlot) embed(ctx context.Context, inputs [][]int32, mean bool, adapter *ingot.Adapter) ([][]float32, error) {
	raw := sl.s.Raw()
	if err := sl.s.SetAdapter(adapter); err != nil {
		raw.Truncate(0)
		return nil, err
	}
	sl.adapter = adapter
	defer func() { sl.setUsed(len(raw.Cached())) }()
	out := make([][]float32, len(inputs))
	for i, ids := range inputs {
		raw.Truncate(0)
		sl.setUsed(len(ids))
		t, err := raw.ForwardTaps(ctx, ids, model.TapOptions{Norm: true, All: mean})
		if err != nil {
			return nil, err
		}
		out[i] = poolEmbedding(t.Norm, len(ids), mean)
	}
	return out, nil
}

// poolEmbedding pools states, (L, D) with mean else (D), and L2-normalizes.
func poolEmbedding(states []float32, L int, mean bool) []float32 {
	D := len(states)
	if mean {
		D /= L
	}
	acc := make([]float64, D)
	for r := 0; r*D < len(states); r++ {
		for j, x := range states[r*D : (r+1)*D] {
			acc[j] += float64(x)
		}
	}
	var ss float64
	for _, x := range acc {
		ss += x * x
	}
	out := make([]float32, D)
	if ss == 0 {
		return out
	}
	inv := 1 / math.Sqrt(ss) // the mean's 1/L cancels in the normalization
	for j, x := range acc {
		out[j] = float32(x * inv)
	}
	return out
}
