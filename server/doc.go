// Package server serves a model over HTTP with OpenAI's and Anthropic's APIs:
// /v1/chat/completions, /v1/completions (with echo and prompt logprobs, for
// scoring), /v1/messages, /v1/models, /health and Prometheus /metrics.
//
// A [Server] loads one model (package ingot) and runs requests on a pool of
// sessions: a request takes a free session, runs its sequences on it one
// after another and gives it back, so a request's output never depends on
// what else runs. Requests that find no free session wait in a bounded queue;
// beyond it they get 429. Every request is prefilled from an empty cache.
//
// It is not a continuous-batching scheduler (one forward for every active
// sequence), has no prefix cache, tool calls or constrained decoding: see
// docs/server.md for what is supported and what is rejected with 400.
package server
