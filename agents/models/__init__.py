"""Tiny causal language models and tokenizers built from the world's own vocabulary.

Everything is built from a transformers config and saved with ``save_pretrained``, so the code
that loads a tiny CPU model also loads any local Hugging Face checkpoint (a Qwen or Llama model
on a GPU machine). Nothing is downloaded.
"""
