# Two commands for a newcomer: `make demo` and `make test`. Both install into .venv first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test test-fast lint docs docs-build hero support support-quantized bench clean ipex-env litert-env

$(BIN)/python:
	$(PY) -m venv $(VENV)

# torch first, pinned: a CPU wheel of exactly this version is available; an unpinned torch pulls a CUDA build.
# Then every backend, the test tools and the docs tools at the exact versions in constraints.txt (pyproject.toml has
# ranges).
$(STAMP): $(BIN)/python pyproject.toml constraints.txt
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -c constraints.txt -e '.[all,test,docs]'
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/fpdiff check example:tinycnn --json fpdiff-out/demo.json

# everything, real backends included: what CI runs. Two workers (pytest-xdist): a serial run keeps about one core
# busy, so both cores of a 2-core machine halve it; each file runs whole on one worker, the Ray files together
# (tests/conftest.py)
test: install
	$(BIN)/python -m pytest -q --durations=20 -n 2 --dist loadfile tests

# pure logic only (verdict rules, metrics, casts, mixed graphs, registry, CLI bad input): run it constantly
test-fast: install
	$(BIN)/python -m pytest -q tests -m "not slow"

# style everywhere, types where the seam between fpdiff and a backend is (mypy's settings: pyproject.toml)
lint: install
	$(BIN)/ruff check src tests bench docs/examples
	$(BIN)/mypy src/fpdiff/core src/fpdiff/backends

# the documentation site (mkdocs.yml, docs/): served at http://127.0.0.1:8000 while you edit; docs-build builds it
# into site/ as CI does (--strict: a broken link, anchor or snippet fails), and tests/test_docs.py runs its examples.
# NO_MKDOCS_2_WARNING: Material's banner about MkDocs 2.0, printed on every build
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

docs-build: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

# the quantized rows (support/quantized/): ONNX's quantized ops and every ONNX op wrapped in QDQ by ONNX Runtime's
# quantizer, judged against their exact emulation at their own format (docs/ops.md, "Quantized ops")
QUANT_SWEEP := --catalog onnx --variants quantized,qdq --variants-only --backends ort,openvino,iree
# torch ops quantized by the PT2E backends' own quantizers (LiteRT's in its interpreter: `make litert-env`; without it
# its cells say so)
QUANT_TORCH_OPS := nn.functional.conv1d,nn.functional.conv2d,nn.functional.conv_transpose2d,nn.functional.linear,matmul,bmm,add,mul,nn.functional.relu,nn.functional.gelu,nn.functional.silu,sigmoid,tanh,nn.functional.hardtanh,softmax,nn.functional.layer_norm,nn.functional.batch_norm,nn.functional.max_pool2d,nn.functional.adaptive_avg_pool2d,cat,mean,nn.functional.embedding
QUANT_TORCH_SWEEP := --catalog torch --ops '$(QUANT_TORCH_OPS)' --variants quantize --variants-only \
	--backends executorch,inductor,litert --backend-python litert=.venv-litert/bin/python
support-quantized: install
	$(BIN)/fpdiff ops $(QUANT_SWEEP) --no-repro --no-store -q --json support/quantized/sweep.json || test $$? = 1
	$(BIN)/fpdiff publish support/quantized/sweep.json --out support/quantized --findings findings \
		--title "Quantized op support on this stack: ONNX Runtime, OpenVINO, IREE (CPU)"
	$(BIN)/fpdiff ops $(QUANT_TORCH_SWEEP) --no-repro --no-store -q --json support/quantized-torch/sweep.json || test $$? = 1
	$(BIN)/fpdiff publish support/quantized-torch/sweep.json --out support/quantized-torch --findings findings \
		--title "Torch ops quantized by each backend's own quantizer: ExecuTorch, inductor, LiteRT (CPU, int8)"

# the README's image: the docs build draws it anew each time (docs/hooks/build.py); this writes the repository's copy
hero: install
	$(BIN)/python -c "import runpy; open('docs/img/hero.svg', 'w').write(runpy.run_path('docs/hooks/build.py')['hero_svg']())"

# the published op support table (support/: index.html, SUPPORT.md, support.json, which the docs build reads), made
# again from the code of the day: the op sweep within SUPPORT_TIME (the cases not started are rows saying so; run
# it again and it resumes from support/sweep.json), then publish with the rows linked to findings/
SUPPORT_TIME ?= 60m
SUPPORT_SWEEP := --catalog torch,onnx --variants sample --backends torch,inductor,ort,openvino,iree --precisions fp32,fp16,bf16
support: install
	$(BIN)/fpdiff ops $(SUPPORT_SWEEP) --time $(SUPPORT_TIME) --no-repro --no-store -q --json support/sweep.json \
		$(if $(wildcard support/sweep.json),--resume support/sweep.json) || test $$? = 1
	$(BIN)/fpdiff publish support/sweep.json --out support --findings findings \
		--title "Op support on this stack: torch, ONNX Runtime, OpenVINO, IREE (CPU)"

# benchmarks compare against Polygraphy and onnxconverter-common: installed here only, never dependencies of fpdiff
bench: install
	$(BIN)/pip install -q polygraphy==0.53.6 onnxconverter-common==1.16.0
	$(BIN)/python bench/bench_check.py
	$(BIN)/python bench/bench_locate.py
	$(BIN)/python bench/bench_vs_polygraphy.py
	$(BIN)/python bench/bench_plan.py

clean:
	rm -rf $(VENV) .fpdiff-cache fpdiff-out site

# IPEX pins its own torch (2.8), so it gets its own interpreter; fpdiff's worker goes in beside it. PyPI's torch 2.8
# is the CUDA build (about 7 GB with its nvidia libraries); IPEX's CPU build runs on it. Then:
#   fpdiff check MODEL --backends torch,ipex --backend-python ipex=.venv-ipex/bin/python
ipex-env: .venv-ipex/.installed

.venv-ipex/.installed: pyproject.toml
	$(PY) -m venv .venv-ipex
	.venv-ipex/bin/pip install -q torch==2.8.0 intel-extension-for-pytorch==2.8.0 onnx==1.23.2 ml_dtypes rich cloudpickle==3.1.2
	.venv-ipex/bin/pip install -q -e . --no-deps
	touch $@

# LiteRT's converter, litert-torch, pins typing-extensions below what fpdiff's other packages need, so it gets its own
# interpreter; its runtime (ai-edge-litert) goes beside it, and fpdiff's worker with what the worker imports. torch
# first, pinned: the CPU wheel (an unpinned torch pulls a CUDA build); onnxscript for the QDQ graph a quantized cell is
# emulated from. Then:
#   fpdiff check MODEL --backends torch,litert --backend-python litert=.venv-litert/bin/python
litert-env: .venv-litert/.installed

.venv-litert/.installed: pyproject.toml
	$(PY) -m venv .venv-litert
	.venv-litert/bin/pip install -q torch==2.13.0
	.venv-litert/bin/pip install -q torch==2.13.0 litert-torch==0.10.0 ai-edge-litert==2.3.0 ai-edge-quantizer==0.10.0 onnx==1.23.2 onnxscript==0.7.2 ml_dtypes rich expecttest==0.3.0 cloudpickle==3.1.2
	.venv-litert/bin/pip install -q -e . --no-deps
	touch $@
