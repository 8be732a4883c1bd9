// Package tokenize is ingot's own exact implementation of the Hugging Face
// tokenizer.json pipeline for the BPE models of the Llama family, and of the
// chat templates in tokenizer_config.json.
//
// It covers byte-level BPE (Llama 3, Qwen2/2.5/3, GPT-2) and
// SentencePiece-style BPE with byte fallback (Llama 2, Mistral, Phi-3,
// Gemma): added and special tokens matched in the text, normalizers (NFC,
// NFD, NFKC, NFKD, Prepend, Replace, Lowercase, Strip, Sequence),
// pre-tokenizers (Split, ByteLevel, Metaspace, Sequence), the BPE model
// (ignore_merges, byte_fallback, unk and fuse_unk), post-processors
// (TemplateProcessing, RobertaProcessing, BertProcessing, ByteLevel, Sequence)
// and decoders (ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace,
// Sequence). [Tokenizer.Encode] gives the ids that tokenizers'
// Tokenizer.encode gives; where transformers' AutoTokenizer differs (the
// leading space of Llama 2 and Phi-3), it follows tokenizers, as mlx-lm and
// llama.cpp do. Unigram and WordPiece models are not supported.
//
// [Stream] detokenizes one id at a time without splitting a UTF-8 character.
// [ChatTemplate] renders a model's Jinja chat template as transformers'
// apply_chat_template does.
//
// The package knows nothing of models: package model works on the ids.
package tokenize
