// Package server serves a model over HTTP with OpenAI's and Anthropic's APIs:
// /v1/chat/completions, /v1/completions (with echo and prompt logprobs, for
// scoring), /v1/messages, /v1/responses, /v1/embeddings (the final norm's
// output, pooled: see docs/server.md), /v1/models, /health and Prometheus
// /metrics.
//
// A [Server] loads one model (package ingot) and runs requests on a pool of
// sessions: a request takes a free session, runs its sequences on it one
// after another and gives it back. Requests that find no free session wait in a bounded queue;
// beyond it they get 429. A session keeps its cache after its request (the
// prefix cache): a request takes the free session whose cache shares the
// longest prefix with its prompt and prefills only the rest (usage reports
// prompt_tokens_details.cached_tokens); Config.NoPrefixCache prefills every
// request from an empty cache. The sessions' sequences decode together
// (continuous batching: one forward a step for all of them, each weight
// read once), and on the CPU a request's tokens and logprobs are the same
// to the bit whatever runs beside it; Config.NoBatch decodes each on its
// own.
//
// response_format json_object and json_schema are honoured by constrained
// decoding (package server/constrain): each step samples only from the
// tokens that keep the output a prefix of a valid document. With tools, the
// chat template renders them and replies are parsed for calls in the Llama
// 3.x, Hermes (Qwen), Mistral and Phi-4 formats; a required or named
// tool_choice forces a call by constrained decoding.
//
// Its prefix cache is a session's own, not blocks shared between sessions:
// see docs/server.md for what is supported and what is rejected with 400.
package server
