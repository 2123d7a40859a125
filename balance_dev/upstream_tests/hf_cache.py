"""The offline Hugging Face cache that vLLM's scheduler tests resolve their model names in.

vLLM's ``create_scheduler()`` builds ``ModelConfig(model="facebook/opt-125m")`` (and a LLaVA one for the
multimodal tests): vLLM reads the model's ``config.json`` from the hub, and the structured-output manager
loads its tokenizer. With ``HF_HUB_OFFLINE=1`` both come from a hub cache laid out as the hub writes one
(``models--ORG--NAME/refs/main`` naming a snapshot folder). The configs are written by transformers' own
config classes (whose defaults are those models' sizes, see the docstrings of ``OPTConfig`` and
``LlavaConfig``) with the fields where the published config differs; the tokenizer is a stand-in of the
published vocabulary's size with its special tokens at their published ids (every other entry a filler:
no scheduler test tokenizes text), written by transformers' ``PreTrainedTokenizerFast``; a multimodal
model also gets its processor (``LlavaProcessor``, ``CLIPImageProcessor``), written by those classes.
No weights: the scheduler never loads a model.

Which models: the hub ids the test files pass as ``model=`` (or default a ``model`` parameter to), read
from their source, so a release whose tests name another model stops here with its name, never on a
download. Run with the test interpreter (the transformers it writes with is the one that reads):

    python -m balance_dev.upstream_tests.hf_cache --hub-cache DIR MODEL...
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import shutil
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Vocabulary:
    """The stand-in tokenizer: the published vocabulary's size and its special tokens at their published ids.

    Every other id is a filler token (no scheduler test tokenizes text). The ids matter where vLLM looks a
    token up by the id the model's config names: LLaVA's processor expands ``<image>`` and vLLM finds the
    placeholders by ``image_token_index`` (32000).
    """

    size: int  # the base vocabulary; ``added`` tokens get the ids from here on, as the published ones do
    ids: Mapping[str, int]  # special tokens inside the base vocabulary
    roles: Mapping[str, str]  # bos_token/eos_token/pad_token/unk_token -> token
    added: tuple[str, ...] = ()


@dataclass(frozen=True)
class Processor:
    processor_class: str  # transformers class, saved with the tokenizer and the image processor
    image_processor_class: str
    image_processor_fields: Mapping[str, Any]  # where the published preprocessor config differs
    fields: Mapping[str, Any]  # the processor's own (processor_config.json)


@dataclass(frozen=True)
class Model:
    config_class: str  # a transformers class name
    fields: Mapping[str, Any]  # where the published config.json differs from the class's defaults
    vocabulary: Vocabulary
    # Sub-configs given as dicts of their own fields (the class builds them with its defaults + these).
    sub_configs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # Multimodal models: vLLM builds the HF processor (and runs it on a dummy prompt at start-up).
    processor: Processor | None = None


# Qwen's byte-level vocabulary (151,643 entries) with its special tokens after it, at their published ids.
_QWEN_VOCABULARY = Vocabulary(
    151643,
    {},
    {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "unk_token": "<|endoftext|>"},
    added=("<|endoftext|>", "<|im_start|>", "<|im_end|>"),
)

# The models vLLM's scheduler tests name, as published (class defaults + these fields).
MODELS: dict[str, Model] = {
    "facebook/opt-125m": Model(
        "OPTConfig",
        {"architectures": ["OPTForCausalLM"], "torch_dtype": "float16", "prefix": "</s>"},
        Vocabulary(
            50265,
            {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3},
            {"bos_token": "</s>", "eos_token": "</s>", "pad_token": "<pad>", "unk_token": "</s>"},
        ),
    ),
    "llava-hf/llava-1.5-7b-hf": Model(
        "LlavaConfig",
        {
            "architectures": ["LlavaForConditionalGeneration"],
            "image_token_index": 32000,
            "pad_token_id": 32001,
            "vocab_size": 32064,
            "tie_word_embeddings": False,
            "torch_dtype": "float16",
        },
        Vocabulary(
            32000,
            {"<unk>": 0, "<s>": 1, "</s>": 2},
            {"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>", "unk_token": "<unk>"},
            added=("<image>", "<pad>"),
        ),
        sub_configs={
            "text_config": {
                "model_type": "llama",
                "architectures": ["LlamaForCausalLM"],
                "max_position_embeddings": 4096,
                "rms_norm_eps": 1e-05,
                "torch_dtype": "float16",
                "vocab_size": 32064,
            },
            "vision_config": {
                "model_type": "clip_vision_model",
                "hidden_size": 1024,
                "image_size": 336,
                "intermediate_size": 4096,
                "num_attention_heads": 16,
                "num_hidden_layers": 24,
                "patch_size": 14,
                "projection_dim": 768,
                "vocab_size": 32000,
            },
        },
        processor=Processor(
            "LlavaProcessor",
            "CLIPImageProcessor",
            {"size": {"shortest_edge": 336}, "crop_size": {"height": 336, "width": 336}},
            {"patch_size": 14, "vision_feature_select_strategy": "default", "num_additional_image_tokens": 1},
        ),
    ),
    # From v0.34.0: the mamba checkpoint tests build a Qwen3 model config (Qwen3Config's defaults are an
    # 8B's; these are the 0.6B's published sizes), the streaming lookahead test a Qwen3-Next one with MTP.
    "Qwen/Qwen3-0.6B": Model(
        "Qwen3Config",
        {
            "architectures": ["Qwen3ForCausalLM"],
            "hidden_size": 1024,
            "intermediate_size": 3072,
            "num_hidden_layers": 28,
            "num_attention_heads": 16,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "max_position_embeddings": 40960,
            "max_window_layers": 28,
            "rope_theta": 1000000,
            "tie_word_embeddings": True,
            "torch_dtype": "bfloat16",
            "bos_token_id": 151643,
            "eos_token_id": 151645,
        },
        _QWEN_VOCABULARY,
    ),
    "Qwen/Qwen3-Next-80B-A3B-Instruct": Model(
        "Qwen3NextConfig",
        {
            "architectures": ["Qwen3NextForCausalLM"],
            "intermediate_size": 5120,
            "max_position_embeddings": 262144,
            "rope_theta": 10000000,
            "mtp_num_hidden_layers": 1,
            "mtp_use_dedicated_embeddings": False,
            "torch_dtype": "bfloat16",
            "bos_token_id": 151643,
            "eos_token_id": 151645,
        },
        _QWEN_VOCABULARY,
    ),
}


class UnknownModel(Exception):
    pass


def models_named(sources: Mapping[str, str]) -> list[str]:
    """Hub ids (``org/name``) the sources pass as ``model=`` or give a ``model`` parameter as default."""
    found: set[str] = set()
    for path, text in sources.items():
        for node in ast.walk(ast.parse(text, filename=path)):
            values: list[ast.expr] = []
            if isinstance(node, ast.Call):
                values += [k.value for k in node.keywords if k.arg == "model"]
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                args = [*node.args.posonlyargs, *node.args.args]
                with_default = args[len(args) - len(node.args.defaults) :]
                defaults = {a.arg: d for a, d in zip(with_default, node.args.defaults, strict=True)}
                kw_only = zip(node.args.kwonlyargs, node.args.kw_defaults, strict=True)
                defaults |= {a.arg: d for a, d in kw_only if d is not None}
                values += [v for name, v in defaults.items() if name == "model"]
            found.update(v.value for v in values if isinstance(v, ast.Constant) and isinstance(v.value, str))
    return sorted(name for name in found if name.count("/") == 1)


def check_known(names: Iterable[str]) -> None:
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        raise UnknownModel(
            f"the tests name model(s) {', '.join(unknown)}, which the offline hub cache does not know: "
            "add each to balance_dev/upstream_tests/hf_cache.py MODELS (its config class and published fields)"
        )


def write_config(snapshot: Path, spec: Model) -> None:
    """The model's config.json, written by transformers' config class (``save_pretrained``)."""
    import transformers

    getattr(transformers, spec.config_class)(**spec.sub_configs, **spec.fields).save_pretrained(str(snapshot))


def vocabulary_ids(vocabulary: Vocabulary) -> dict[str, int]:
    """Token -> id of the base vocabulary: the special tokens at their ids, filler tokens elsewhere."""
    by_id = {i: token for token, i in vocabulary.ids.items()}
    if len(by_id) != len(vocabulary.ids) or any(not 0 <= i < vocabulary.size for i in by_id):
        raise ValueError(f"special token ids {dict(vocabulary.ids)} do not fit a vocabulary of {vocabulary.size}")
    return {by_id.get(i, f"<filler_{i}>"): i for i in range(vocabulary.size)}


def stand_in_tokenizer(vocabulary: Vocabulary) -> Any:
    """A word-level tokenizer of the published size; the added tokens follow the base vocabulary."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(WordLevel(vocabulary_ids(vocabulary), unk_token=vocabulary.roles["unk_token"]))
    backend.pre_tokenizer = Whitespace()
    # Special tokens match anywhere in a text, as in the published tokenizers: "<image><image>" is two.
    backend.add_special_tokens([*vocabulary.ids, *vocabulary.added])
    return PreTrainedTokenizerFast(tokenizer_object=backend, **vocabulary.roles)


def write_tokenizer(snapshot: Path, spec: Model) -> None:
    """The tokenizer files, and for a multimodal model the processor's (written by transformers' classes)."""
    import transformers

    tokenizer = stand_in_tokenizer(spec.vocabulary)
    if spec.processor is None:
        tokenizer.save_pretrained(str(snapshot))
        return
    image_processor = getattr(transformers, spec.processor.image_processor_class)(
        **spec.processor.image_processor_fields
    )
    processor_class = getattr(transformers, spec.processor.processor_class)
    processor = processor_class(image_processor=image_processor, tokenizer=tokenizer, **spec.processor.fields)
    processor.save_pretrained(str(snapshot))


def write_model(hub_cache: Path, name: str) -> Path:
    """``models--ORG--NAME`` with one snapshot named by the hash of what it holds, and refs/main naming it."""
    spec = MODELS[name]
    repo = hub_cache / f"models--{name.replace('/', '--')}"
    staging = repo / "snapshots" / "staging"
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    write_config(staging, spec)
    write_tokenizer(staging, spec)
    digest = hashlib.sha1(name.encode())
    for path in sorted(staging.iterdir()):  # the snapshot is named by what it holds
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    snapshot = staging.with_name(digest.hexdigest())
    if snapshot.exists():
        shutil.rmtree(snapshot)
    staging.rename(snapshot)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(snapshot.name, encoding="utf-8")
    return snapshot


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m balance_dev.upstream_tests.hf_cache")
    parser.add_argument("--hub-cache", type=Path, required=True)
    parser.add_argument("models", nargs="+")
    args = parser.parse_args(argv)
    try:
        check_known(args.models)
    except UnknownModel as exc:
        print(f"upstream-tests: error: {exc}", file=sys.stderr)
        return 2
    for name in args.models:
        print(f"upstream-tests: hub cache: {name} -> {write_model(args.hub_cache, name)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
