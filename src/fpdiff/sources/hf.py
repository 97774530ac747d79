"""Hugging Face checkpoints (`hf:DIR` or `hf:ORG/NAME` from the local cache): the model class from the config (or
--task), example inputs from the saved tokenizer, image processor or feature extractor (else from the config), the
output's tensors judged and named. The checkpoint is written as a spec file (its class, its call, its inputs), so
workers, repro bundles and the commands a result suggests load it as they load any spec."""
from __future__ import annotations

import inspect
import io
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from fpdiff.core.errors import UsageError
from fpdiff.sources.base import Source, digest
from fpdiff.sources.module import write_spec
from fpdiff.sources.spec import load_spec, quiet_imports

PREFIX = "hf:"
HF_DIR = "fpdiff-out/hf"  # beside the module specs: what a run writes for the user to run again
# --task names and the Auto class each picks; an Auto class or model class name is taken as it is
TASKS = {"base": "AutoModel", "feature-extraction": "AutoModel", "causal-lm": "AutoModelForCausalLM",
         "masked-lm": "AutoModelForMaskedLM", "seq2seq-lm": "AutoModelForSeq2SeqLM",
         "sequence-classification": "AutoModelForSequenceClassification",
         "token-classification": "AutoModelForTokenClassification",
         "question-answering": "AutoModelForQuestionAnswering",
         "image-classification": "AutoModelForImageClassification",
         "audio-classification": "AutoModelForAudioClassification", "ctc": "AutoModelForCTC",
         "speech-seq2seq": "AutoModelForSpeechSeq2Seq"}
# Text the tokenizer encodes: two sentences of different lengths, so the batch has a padded sequence (right padding:
# every query still sees a real token) and the attention mask is exercised.
SENTENCES = ("Every precision of this model should compute the same numbers as float64 does, within its rounding.",
             "A padded second sentence.")
BATCH, TOKENS, DECODER_TOKENS, SECONDS = 2, 16, 4, 1.0

_SPEC = '''"""Written by fpdiff for the Hugging Face checkpoint {where}: {cls}, called with {names}; the tensors of
its output returned in the output's order. Inputs: {how}. fpdiff takes this file as any spec."""
from pathlib import Path

import torch

from fpdiff.sources import hf

CHECKPOINT = {path!r}
CLASS = {cls!r}


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.model = hf.pretrained(CHECKPOINT, CLASS)

    def forward(self, {names}):
        return hf.tensors(self.model({call}))


def model():
    return Model()


def inputs():
    return tuple(torch.load(Path(__file__).parent / "inputs.pt"))
'''


def is_hf(model: str) -> bool:
    return model.startswith(PREFIX)


def load(model: str, task: str | None, seed: int, inputs: str | None) -> Source:
    """Checkpoint `model` (hf:...) as a torch source: its spec written, then loaded as any spec is; the notes say
    which class, which inputs and which outputs."""
    with quiet_imports():
        spec, made = spec_of(model, task, seed, inputs)
    source = load_spec(Path(spec), label=model, seed=seed)
    with torch.inference_mode():  # one float32 forward, for the names of the output's tensors
        made["outputs"] = output_names(source.module.model(**dict(zip(source.input_names, source.inputs)),
                                                           **_call(source.module.model)))
    new = getattr(source.module.model, NEW_WEIGHTS, [])
    if new:  # outputs computed from weights the checkpoint lacks: said where the class is, not hidden
        made["newly_initialized"] = new
        made["chosen"] += f"; {_said_new(new)}"
    source.notes["hf"] = made
    return source


def _said_new(new: list[str]) -> str:
    """The weights of the class that the checkpoint does not hold, in one clause."""
    shown = ", ".join(new[:4]) + (f" and {len(new) - 4} more" if len(new) > 4 else "")
    return f"{len(new)} of its weights are not in the checkpoint, drawn at random (seeded): {shown}"


def spec_of(model: str, task: str | None, seed: int, inputs: str | None) -> tuple[str, dict]:
    """The spec file of checkpoint `model` (hf:...), and what was made: the class, why, the inputs."""
    tf = _transformers()
    where = checkpoint(model.removeprefix(PREFIX))
    try:
        config = tf.AutoConfig.from_pretrained(where)
    except Exception as e:  # noqa: BLE001 - the checkpoint's own files: one line
        raise UsageError(f"{model}: cannot read its config ({type(e).__name__}: {str(e).splitlines()[0]})") from None
    cls, chosen = model_class(config, task)
    params = inspect.signature(concrete(cls, config).forward).parameters
    made, how = (_given(Path(inputs), params) if inputs else make_inputs(where, config, params, seed))
    names = ", ".join(made)
    call = ", ".join(f"{n}={n}" for n in made) + ", **hf.CALL" * ("use_cache" in params)
    text = _SPEC.format(where=model, path=str(where), cls=cls, names=names, call=call, how=how)
    data = io.BytesIO()
    torch.save(tuple(made.values()), data)
    folder = Path(HF_DIR) / f"{where.name}-{digest(text, data.getvalue())[:12]}"
    spec = write_spec(folder, text, {"inputs.pt": data.getvalue()})
    return spec, {"checkpoint": str(where), "class": cls, "chosen": chosen, "inputs": how}


def concrete(cls: str, config) -> type:
    """The model class `cls` (an Auto class or a model class) gives for `config`, found on the meta device."""
    tf = _transformers()
    try:
        klass = getattr(tf, cls)
        with torch.device("meta"):  # an Auto class picks by the config; a model class is built from it
            return type(klass.from_config(config) if hasattr(klass, "from_config") else klass(config))
    except Exception as e:  # noqa: BLE001 - the config does not fit the class: one line
        first = (str(e).strip().splitlines() or [""])[0]
        raise UsageError(f"{cls} does not take this checkpoint's config ({type(e).__name__}: {first}); --task "
                         "chooses another class") from None


def _transformers():
    """transformers, or one line saying how to get it."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # fpdiff downloads nothing: a hub id is read from the local cache
    try:
        import transformers
    except ImportError:
        raise UsageError("hf: models need transformers: pip install 'fpdiff[hf]'") from None
    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    return transformers


def checkpoint(name: str) -> Path:
    """A save_pretrained directory, or a hub id's snapshot in the local cache (never downloaded)."""
    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / "config.json").exists():
            raise UsageError(f"hf:{name} is a directory without config.json: give a save_pretrained directory")
        return path.resolve()
    if not name or path.suffix or name.count("/") > 1 or name.startswith((".", "/")):
        raise UsageError(f"hf:{name}: no such directory (give a save_pretrained directory or a hub id ORG/NAME)")
    try:
        from huggingface_hub import snapshot_download
        return Path(snapshot_download(name, local_files_only=True))
    except Exception:  # noqa: BLE001 - not in the cache, or not a valid id: the same one line
        raise UsageError(f"hf:{name} is not a directory and not in the local Hugging Face cache; fpdiff downloads "
                         f"nothing: fetch it first (huggingface-cli download {name}) or give its save_pretrained "
                         "directory") from None


def model_class(config, task: str | None) -> tuple[str, str]:
    """The class to load (a transformers name) and why: --task, else the config's architecture, else the base
    model."""
    tf = _transformers()
    if task:
        name = TASKS.get(task, task)
        if not isinstance(getattr(tf, name, None), type):
            raise UsageError(f"--task {task}: not a task ({', '.join(TASKS)}) nor a transformers model class "
                             "(AutoModelForCausalLM, BertForMaskedLM, ...)")
        return name, f"--task {task}"
    arch = (getattr(config, "architectures", None) or [None])[0]
    if arch and isinstance(getattr(tf, arch, None), type):
        return arch, "the config's architecture"
    return "AutoModel", "the base model: the config names no architecture (--task chooses a head)"


def pretrained(where: str | Path, cls: str) -> torch.nn.Module:
    """The checkpoint's weights in `cls`, in float32 (fpdiff casts per precision; a 16-bit checkpoint widens
    exactly), in eval mode; the weights it lacks named on the model (NEW_WEIGHTS)."""
    tf = _transformers()
    try:
        with quiet_imports():
            model, info = getattr(tf, cls).from_pretrained(str(where), dtype=torch.float32, output_loading_info=True)
    except Exception as e:  # noqa: BLE001 - the checkpoint does not fit the class: one line
        first = (str(e).strip().splitlines() or [""])[0]
        raise UsageError(f"hf:{where}: {cls} cannot load it ({type(e).__name__}: {first}); --task chooses another "
                         "class") from None
    # transformers initializes what the checkpoint lacks (a pooler, a head) and its warning is silenced here: kept
    setattr(model, NEW_WEIGHTS, sorted(info.get("missing_keys") or []))
    return model.eval()


# the attribute of a loaded model naming the weights transformers drew at random (the checkpoint lacks them)
NEW_WEIGHTS = "fpdiff_newly_initialized"
# how the spec calls the model: a ModelOutput (named fields), no key/value cache (its tensors are not the answer)
CALL = {"use_cache": False}


def _call(model: torch.nn.Module) -> dict:
    return dict(CALL) if "use_cache" in inspect.signature(model.forward).parameters else {}


def tensors(out) -> tuple:
    """A model output's tensors, in its order (nested tuples flattened; None and caches left out)."""
    return tuple(t for _, t in _leaves(out))


def output_names(out) -> list[str]:
    """The names of tensors(out): the output's keys, an index added inside a tuple (hidden_states.0)."""
    return [n for n, _ in _leaves(out)]


def _leaves(out, prefix: str = "") -> list[tuple[str, torch.Tensor]]:
    if isinstance(out, torch.Tensor):
        return [(prefix or "output", out)]
    if hasattr(out, "keys") and hasattr(out, "__getitem__"):
        return [x for k in out.keys() for x in _leaves(out[k], f"{prefix}.{k}" if prefix else str(k))]
    if isinstance(out, (tuple, list)):
        return [x for i, v in enumerate(out) for x in _leaves(v, f"{prefix}.{i}" if prefix else str(i))]
    return []


def make_inputs(where: Path, config, params, seed: int) -> tuple[dict[str, torch.Tensor], str]:
    """The forward's inputs by name, and how they were made: from the saved preprocessors where present, else from
    the config, with a seeded generator."""
    g = torch.Generator().manual_seed(seed)
    made: dict[str, torch.Tensor] = {}
    how: list[str] = []
    for wanted, maker in _MAKERS:
        if wanted & set(params) and not wanted & set(made):
            got, said = maker(where, config, g)
            made.update({k: v for k, v in got.items() if k in params})
            how.append(said)
    if getattr(config, "is_encoder_decoder", False) and "decoder_input_ids" in params and made:
        made["decoder_input_ids"], said = _decoder_ids(config, g, len(next(iter(made.values()))))
        how.append(said)
    if not made:
        raise UsageError(f"hf:{where}: fpdiff makes inputs for text, image and audio models and this forward takes "
                         f"{', '.join(list(params)[:6])}: give --inputs NPZ with an array per input")
    return made, "; ".join(how)


def _text(where: Path, config, g: torch.Generator) -> tuple[dict, str]:
    """Token ids from the saved tokenizer on two sentences (one padded), else seeded ids inside the vocabulary."""
    tok = _preprocessor("AutoTokenizer", where)
    if tok is not None:
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token or tok.unk_token
        tok.padding_side = "right"
        enc = tok(list(SENTENCES), padding=True, truncation=True, max_length=_positions(config),
                  return_tensors="pt")
        return dict(enc), f"the saved tokenizer on {BATCH} sentences, right-padded to {enc['input_ids'].shape[1]}"
    vocab = _text_config(config).vocab_size
    n = min(TOKENS, _positions(config))
    ids = torch.randint(0, vocab, (BATCH, n), generator=g)
    mask = torch.ones(BATCH, n, dtype=torch.int64)
    mask[1, n * 3 // 4:] = 0  # one padded sequence, as a batch of sentences has
    return ({"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)},
            f"seeded token ids in [0, {vocab}) of {BATCH}x{n}, the second sequence padded (no tokenizer saved)")


def _image(where: Path, config, g: torch.Generator) -> tuple[dict, str]:
    """Pixel values from the saved image processor on two synthetic images, else seeded normal values at the
    config's image size."""
    proc = _preprocessor("AutoImageProcessor", where)
    if proc is not None:
        images = [_picture(g, 96, 128), _picture(g, 80, 80)]
        pixels = proc(images=images, return_tensors="pt")["pixel_values"]
        return ({"pixel_values": pixels},
                f"the saved image processor on {BATCH} synthetic images, pixel values {list(pixels.shape)}")
    vision = getattr(config, "vision_config", None) or config
    size, channels = getattr(vision, "image_size", 224), getattr(vision, "num_channels", 3)
    size = size if isinstance(size, int) else size[0]
    pixels = torch.randn(BATCH, channels, size, size, generator=g)
    return {"pixel_values": pixels}, f"seeded normal pixel values {list(pixels.shape)} (no image processor saved)"


def _audio(where: Path, config, g: torch.Generator) -> tuple[dict, str]:
    """Features from the saved feature extractor on two synthetic second-long sounds at its sampling rate, else
    seeded values of the config's shape."""
    fe = _preprocessor("AutoFeatureExtractor", where)
    if fe is not None:
        rate = int(getattr(fe, "sampling_rate", 16000))
        waves = [_sound(g, rate, f) for f in (220.0, 440.0)]
        got = dict(fe(waves, sampling_rate=rate, return_tensors="pt"))
        shapes = ", ".join(f"{k} {list(v.shape)}" for k, v in got.items())
        return got, f"the saved feature extractor on {BATCH} synthetic {SECONDS:g} s sounds at {rate} Hz: {shapes}"
    if hasattr(config, "num_mel_bins"):
        frames = 2 * getattr(config, "max_source_positions", 1500)
        feats = torch.randn(BATCH, config.num_mel_bins, frames, generator=g)
        return {"input_features": feats}, f"seeded normal input features {list(feats.shape)} (no feature extractor)"
    values = torch.randn(BATCH, int(16000 * SECONDS), generator=g)
    return {"input_values": values}, f"seeded normal input values {list(values.shape)} (no feature extractor)"


_MAKERS: list[tuple[set[str], Callable]] = [({"input_ids"}, _text), ({"pixel_values"}, _image),
                                            ({"input_features", "input_values"}, _audio)]


def _decoder_ids(config, g: torch.Generator, batch: int) -> tuple[torch.Tensor, str]:
    """The decoder's start token then seeded ids inside the vocabulary."""
    vocab = _text_config(config).vocab_size
    start = next((v for v in (getattr(config, "decoder_start_token_id", None), getattr(config, "pad_token_id", None))
                  if isinstance(v, int)), 0)
    ids = torch.randint(0, vocab, (batch, DECODER_TOKENS), generator=g)
    ids[:, 0] = start
    return ids, f"decoder ids: token {start} then {DECODER_TOKENS - 1} seeded ids"


def _preprocessor(auto: str, where: Path):
    """The checkpoint's saved tokenizer / image processor / feature extractor, or None when it has none."""
    files = {"AutoTokenizer": ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "tokenizer.model"),
             "AutoImageProcessor": ("preprocessor_config.json",),
             "AutoFeatureExtractor": ("preprocessor_config.json",)}[auto]
    if not any((where / f).exists() for f in files):
        return None
    tf = _transformers()
    try:
        return getattr(tf, auto).from_pretrained(str(where))
    except Exception:  # noqa: BLE001 - a preprocessor of another kind, or unreadable: inputs come from the config
        return None


def _text_config(config):
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def _positions(config) -> int:
    c = _text_config(config)
    return int(next((v for v in (getattr(c, "max_position_embeddings", None), getattr(c, "n_positions", None))
                     if isinstance(v, int) and v > 0), TOKENS))


def _picture(g: torch.Generator, h: int, w: int) -> np.ndarray:
    """An RGB image with structure (gradients) and texture (seeded noise), as uint8."""
    y, x = np.mgrid[0:h, 0:w]
    noise = torch.rand(h, w, 3, generator=g).numpy()
    base = np.stack([x / w, y / h, (x + y) / (w + h)], axis=-1)
    return np.clip((0.7 * base + 0.3 * noise) * 255, 0, 255).astype(np.uint8)


def _sound(g: torch.Generator, rate: int, freq: float) -> np.ndarray:
    """A second of a tone with two harmonics and a little seeded noise, float32 in [-1, 1]."""
    t = np.arange(int(rate * SECONDS)) / rate
    noise = torch.randn(len(t), generator=g).numpy()
    wave = 0.5 * np.sin(2 * np.pi * freq * t) + 0.2 * np.sin(4 * np.pi * freq * t) + 0.02 * noise
    return wave.astype(np.float32)


def _given(path: Path, params) -> tuple[dict[str, torch.Tensor], str]:
    """--inputs: the npz's arrays as the forward's inputs, each named after a parameter of it."""
    from fpdiff.sources.npz import read_npz
    arrays = read_npz(path)
    unknown = [n for n in arrays if n not in params]
    if unknown:
        raise UsageError(f"inputs file {path}: {', '.join(unknown)} is not an input of the model's forward "
                         f"({', '.join(n for n in params if n != 'kwargs')})")
    return {n: torch.from_numpy(np.ascontiguousarray(a)) for n, a in arrays.items()}, f"from {path}"
