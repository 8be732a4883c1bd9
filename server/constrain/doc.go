// Package constrain makes a language model's output follow a JSON schema:
// it compiles a schema (or "any JSON object") into a byte-level grammar, and
// a [Matcher] walks that grammar as tokens are generated and gives, before
// each step, the set of token ids that keep the output a prefix of a valid
// document (a mask the caller applies to the logits before sampling).
//
// The grammar is a set of rules whose alternatives are sequences of byte
// sets, rule references and a native JSON-string element (the body of a
// string after its opening quote, escapes and UTF-8 validated). A matcher
// state is a set of stacks over that grammar, as in llama.cpp's grammar
// engine, kept in an arena so that computing a mask allocates nothing: the
// vocabulary is a byte trie ([Vocab]) walked depth first against the state,
// a subtree abandoned at its first byte the grammar rejects. Inside a free
// string, the tokens made only of complete string characters (that fit a
// maxLength) are allowed as a precomputed set and only the others are
// walked; masks are cached by the state's structure, which repeats (every
// value of a field, every string body at one depth). Equal rules are built
// once and a reference that ends its alternative is a tail call, so stacks
// through equal subschemas merge.
//
// Output shape: no whitespace but one optional space after ':' and ',', so
// the model cannot loop on whitespace; object properties in the schema's
// order (optional ones may be left out); numbers with at most 16 integer and
// 16 fraction digits and a 3-digit exponent; no \u escape of a surrogate.
// Strings without maxLength and arrays without maxItems are unbounded: a
// generation cut by its token limit is an unfinished document.
//
// The supported schema subset and what is rejected are listed at
// [CompileSchema]. Package constrain knows nothing of models, tokenizers or
// HTTP: package server joins them.
package constrain
