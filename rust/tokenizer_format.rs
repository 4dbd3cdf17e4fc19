//! The shape of the tokenizer `data_io train-tokenizer` makes (formats.md §2): its split regex
//! and its special tokens. Both trainers (`train`) build it, and the encoder's tests check that
//! it is a shape the fast encoder serves; kept below both, so neither names the other for it.

/// The pre-tokenizer's split regex (formats.md §2).
pub const SPLIT_REGEX: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Registered first, as special, in this order (formats.md §2).
pub const DEFAULT_SPECIAL_TOKENS: [&str; 31] = [
    "<|PAD|>",
    "<|direct|>",
    "<|cot|>",
    "<|noisy|>",
    "<|synth|>",
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
];
