"""Tiny random-weight Hugging Face models (built from a config, nothing downloaded) and their export to ONNX
by PyTorch's TorchScript exporter and its dynamo exporter, with dynamic batch and sequence axes.

Each exported graph has one output, the logits (a key/value cache the model keeps is no output), to compare.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

BATCH, SEQ = 2, 8          # the example inputs' sizes; tests bind other sizes to check the axes stay symbolic
VOCAB = 100


@dataclass(frozen=True)
class Exported:
    path: Path
    inputs: dict[str, np.ndarray]    # the example inputs, keyed by graph input name
    sequence_inputs: tuple[str, ...]  # inputs whose dimension 1 is the (dynamic) sequence


def _tokens(rng, batch=BATCH, seq=SEQ):
    return rng.integers(0, VOCAB, size=(batch, seq)).astype(np.int64)


def gpt2(torch, transformers, rng):
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=VOCAB, n_positions=64)
    model = transformers.GPT2LMHeadModel(config)
    return model, {"input_ids": _tokens(rng)}, ("input_ids",)


def bert(torch, transformers, rng):
    config = transformers.BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=64, vocab_size=VOCAB, max_position_embeddings=64)
    model = transformers.BertForMaskedLM(config)
    mask = np.ones((BATCH, SEQ), dtype=np.int64)
    mask[1, SEQ - 3:] = 0      # padding: the mask must reach the scores
    return model, {"input_ids": _tokens(rng), "attention_mask": mask}, ("input_ids", "attention_mask")


def vit(torch, transformers, rng):
    config = transformers.ViTConfig(image_size=32, patch_size=8, num_channels=3, hidden_size=32,
                                    num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                                    num_labels=10)
    model = transformers.ViTForImageClassification(config)
    return model, {"pixel_values": rng.standard_normal((BATCH, 3, 32, 32)).astype(np.float32)}, ()


def llama(torch, transformers, rng):
    config = transformers.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=2, num_key_value_heads=1, vocab_size=VOCAB,
                                      max_position_embeddings=64)
    model = transformers.LlamaForCausalLM(config)
    return model, {"input_ids": _tokens(rng)}, ("input_ids",)


def t5(torch, transformers, rng):
    config = transformers.T5Config(vocab_size=VOCAB, d_model=32, d_kv=16, d_ff=64, num_layers=2, num_heads=2,
                                   decoder_start_token_id=0)
    model = transformers.T5ForConditionalGeneration(config)
    return model, {"input_ids": _tokens(rng), "decoder_input_ids": _tokens(rng, seq=4)}, \
        ("input_ids", "decoder_input_ids")


def whisper(torch, transformers, rng):
    config = transformers.WhisperConfig(vocab_size=VOCAB, num_mel_bins=16, encoder_layers=2, decoder_layers=2,
                                        d_model=32, encoder_attention_heads=2, decoder_attention_heads=2,
                                        encoder_ffn_dim=64, decoder_ffn_dim=64, max_source_positions=16,
                                        max_target_positions=16, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                                        decoder_start_token_id=1)
    model = transformers.WhisperForConditionalGeneration(config)
    features = rng.standard_normal((BATCH, 16, 32)).astype(np.float32)   # frames = 2 x max_source_positions
    return model, {"input_features": features, "decoder_input_ids": _tokens(rng, seq=4)}, ("decoder_input_ids",)


MODELS = {"gpt2": gpt2, "bert": bert, "vit": vit, "llama": llama, "t5": t5, "whisper": whisper}
EXPORTERS = ("torchscript", "dynamo")


def export(name: str, exporter: str, folder: Path, seed: int = 0) -> Exported:
    """`name` from MODELS, random weights drawn from `seed`, exported to `folder`/<name>_<exporter>.onnx."""
    import torch
    import transformers

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model, inputs, sequence = MODELS[name](torch, transformers, rng)
    if exporter == "torchscript" and name == "llama":
        # The TorchScript exporter cannot convert grouped-query SDPA (enable_gqa); Llama's eager attention
        # repeats the key/value heads instead, which it can.
        model.set_attn_implementation("eager")
    # The model keeps its own cache default: without a cache or an attention mask, transformers looks for packed
    # sequences with torch.diff, which the TorchScript exporter cannot convert. The cache is no graph output.
    model.eval()
    wrapped = _logits(model, list(inputs))
    args = tuple(torch.from_numpy(value) for value in inputs.values())
    path = Path(folder) / f"{name}_{exporter}.onnx"
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")      # the exporters' and tracer's advice about the models' Python code
        if exporter == "torchscript":
            axes = {key: {0: "batch", **({1: _sequence_name(key)} if key in sequence else {})} for key in inputs}
            torch.onnx.export(wrapped, args, str(path), input_names=list(inputs), output_names=["logits"],
                              dynamic_axes={**axes, "logits": {0: "batch"}}, dynamo=False, opset_version=17)
        else:
            batch = torch.export.Dim("batch", min=1, max=64)
            lengths = {key: torch.export.Dim(_sequence_name(key), min=2, max=32) for key in sequence}
            shapes = tuple({0: batch, **({1: lengths[key]} if key in lengths else {})} for key in inputs)
            torch.onnx.export(wrapped, args, str(path), input_names=list(inputs), output_names=["logits"],
                              dynamic_shapes=(shapes,), dynamo=True, external_data=False, optimize=True)
    return Exported(path, inputs, sequence)


def _sequence_name(key: str) -> str:
    """The symbolic name of an input's sequence axis: a decoder's differs from the encoder's."""
    return "decoder_sequence" if key.startswith("decoder") else "sequence"


def _logits(model, names: list[str]):
    """A torch.nn.Module calling `model` with keyword inputs `names` and returning only its logits."""
    import torch

    class Logits(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, *args):
            return self.model(**dict(zip(names, args)), return_dict=True).logits

    return Logits().eval()
