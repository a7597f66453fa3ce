# The README's two commands:
#   make demo   install dependencies, build the CLI, run the main job
#   make test   install dependencies, build, run every test and the cross-build check
# Other targets: build, package, package-check, bench, bench-fastest, bench-dist, bench-gpt, bench-precision, bench-python, bench-serve, bench-zoo, contract, contract-torch, contract-python, crosscheck, onnx-table, onnx-roundtrip,
# soak, pip-check, sanitize, sanitize-ci, tsan, fuzz, accuracy, clean.
SHELL := /bin/bash
BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: deps configure build demo test package package-check crosscheck sanitize sanitize-ci tsan fuzz bench bench-fastest bench-dist bench-dist-hosts bench-gpt bench-precision bench-python bench-serve bench-zoo contract contract-torch contract-python soak pip-check onnx-table onnx-roundtrip accuracy clean

deps:
	@bash scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null

build: configure
	@ninja -C $(BUILD) -j $(JOBS)

# the demo needs the CLI alone (scripts/demo.sh runs bin/bitgrad), not the tests and tools
demo: configure
	@ninja -C $(BUILD) -j $(JOBS) bitgrad_cli
	@bash scripts/demo.sh $(BUILD)

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	@bash scripts/crosscheck.sh $(BUILD)

crosscheck: build
	@bash scripts/crosscheck.sh $(BUILD)

# The Debian package bitgrad_<version>_<arch>.deb in $(BUILD), packed by CPack from the build
# tree (docs/install.md); package-check installs it, checks it from /usr and removes it (root).
package: build
	@cd $(BUILD) && cpack -G DEB
package-check: package
	@bash scripts/package-check.sh $(BUILD)

# The contract fuzzer's long run (docs/contract.md): N cases from SEED, every failure kept.
N ?= 10000
SEED ?= 20261122
contract: build
	@$(BUILD)/bin/contract_fuzz --cases $(N) --seed $(SEED) --keep-going --out $(BUILD)/contract-failures
# The same with torch's exported idioms among the cases (needs Debian's python3-torch).
contract-torch: build
	@PYTHONPATH=$(BUILD)/python /usr/bin/python3 tests/python/sample_axis_models.py --export $(BUILD)/torch-idioms
	@$(BUILD)/bin/contract_fuzz --torch $(BUILD)/torch-idioms --cases $(N) --seed $(SEED) --keep-going --out $(BUILD)/contract-failures

# The Python side's draws of shared parameters (tests/python/test_contract_sharing.py): N_PY
# Hypothesis examples (the suite runs 40).
N_PY ?= 2000
contract-python: build
	@cd $(BUILD) && BITGRAD_SHARING_EXAMPLES=$(N_PY) PYTHONPATH=python BITGRAD_SOURCE_DIR=$(CURDIR) /usr/bin/python3 -m pytest -q -p no:cacheprovider ../tests/python/test_contract_sharing.py

# The server's soak (tests/serve/soak_test.cpp, docs/serving.md "Limits"): SOAK_SECONDS of
# honest clients comparing bytes beside dripping, half-closing, vanishing and random ones. The
# suite runs it for 6 seconds.
SOAK_SECONDS ?= 300
soak: build
	@BITGRAD_SOAK_SECONDS=$(SOAK_SECONDS) $(BUILD)/bin/bitgrad_tests --gtest_filter='ServeSoak.*'

# `pip install .` from a fresh virtual environment and a fresh build of the module, offline
# (scripts/pip-check.sh; the suite's Python.test_pip_install reuses the build tree instead).
pip-check: deps
	@bash scripts/pip-check.sh $(BUILD)

# The ranks that mpirun starts leak OpenMPI's own memory (MPI_Init, MPI_Finalize, its progress
# thread): tests/lsan.supp suppresses leaks with those libraries on the allocation stack. The
# stacks reach them only with the slow unwinder (the system libraries have no frame pointers, so
# the fast one stops at the first of their frames); OpenMPI's mca_base_env_list gives it to the
# ranks alone, as `mpirun -x` would, since it slows other tests (MPFR's) several times.
# print_suppressions=0 keeps the table of used suppressions out of the ranks' stderr, which the
# Dist tests read. A caller's LSAN_OPTIONS / ASAN_OPTIONS are appended and win.
sanitize: deps
	@cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Release -DBITGRAD_SANITIZE=address,undefined -DBITGRAD_CONTRACT_SECONDS=30 \
	  -DBITGRAD_BUILD_BENCH=OFF -DBITGRAD_BUILD_TOOLS=OFF >/dev/null
	@ninja -C build-asan -j $(JOBS)
	@cd build-asan && LSAN_OPTIONS="suppressions=$(CURDIR)/tests/lsan.supp:print_suppressions=0$${LSAN_OPTIONS:+:$$LSAN_OPTIONS}" \
	  OMPI_MCA_mca_base_env_list="ASAN_OPTIONS=fast_unwind_on_malloc=0$${ASAN_OPTIONS:+:$$ASAN_OPTIONS}" ctest --output-on-failure -j $(JOBS) \
	  $(if $(SANITIZE_EXCLUDE),-E '$(SANITIZE_EXCLUDE)')

# What CI runs of it (.ci/run): every test but the long suites below, which `make sanitize` runs
# (their code is also under ASan in the suites CI keeps; docs/ci.md lists what each costs).
SANITIZE_CI_EXCLUDE := ^(DistHosts\..*|Faults\.KilledRunsResumeToTheBytesOfAStraightRun|Audit\.TheAdderExperimentGivesSevenBySevenZeroMatrices|Sensitivity\.DivergenceOfTheFashionMlpGrows|Report\.RendersInHeadlessChromiumWithEveryPlotDrawn|DistTrain\.FashionMnistMlpAndCnnOnOneToFourRanks|Dist\.Combine\.P[4-8]|ResnetLstmExamples\..*|MixedPrecision\.Bf16AndFp16GptKeepTheContract|GoldenTraining\.Gpt(Bf16|Fp16)?StepsArePinned|DistTrain\.(ASignalStopsEveryRankAfterTheSameStep|MixedPrecisionOnRanksGivesTheBitsOfOneProcess|ABatchNormModelOnRanksGivesTheBitsOfOneProcess))$$
sanitize-ci:
	@$(MAKE) --no-print-directory sanitize SANITIZE_EXCLUDE='$(SANITIZE_CI_EXCLUDE)'

# ThreadSanitizer on the threaded code: the pool, the kernels, the selftest (only the test binary,
# of the files that hold these suites, and what it runs are built)
TSAN_SUITES := AutogradThreads|NodePool|ThreadPool|ExecContext|ConcurrentSessions|ThreadState|Gemm|Reduce|TensorOps|GoldenFingerprint|BatchInvariance|Loader|Train|TrainInstruments|Diff|StepTracer|GroupHasher|DistPlan|Serve|ServeCli|ServeDecoder|ServeRequest|HttpHead|HttpFront|ServeSoak
TSAN_TEST_FILES := autograd/(autograd|node_pool)_test[.]cpp|data/loader_test[.]cpp|dist/plan_test[.]cpp|instruments/(diff|golden_fingerprint|group_hasher|step_tracer|trainer_instruments)_test[.]cpp|kernels/(exec_context|gemm|reduce|tensor_ops|thread_pool)_test[.]cpp|ops/batch_invariance_test[.]cpp|platform/thread_state_test[.]cpp|serve/(serve|http|soak)_test[.]cpp|train/(concurrent_sessions|train)_test[.]cpp
tsan: deps
	@cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=Release -DBITGRAD_SANITIZE=thread \
	  -DBITGRAD_BUILD_BENCH=OFF -DBITGRAD_BUILD_TOOLS=OFF -DBITGRAD_TEST_FILES='$(TSAN_TEST_FILES)' >/dev/null
	@ninja -C build-tsan -j $(JOBS) bitgrad_tests
	@cd build-tsan && for s in $$(echo '$(TSAN_SUITES)' | tr '|' ' '); do \
	  ctest -N -R "^$$s\\." | grep -q 'Total Tests: [1-9]' || { echo "tsan: no test of suite $$s: TSAN_TEST_FILES misses its file"; exit 1; }; done
	@cd build-tsan && TSAN_OPTIONS="suppressions=$(CURDIR)/tests/tsan.supp$${TSAN_OPTIONS:+ $$TSAN_OPTIONS}" ctest --output-on-failure -j $(JOBS) -R '^($(TSAN_SUITES))\.'

# libFuzzer on the readers (tests/fuzz, docs/fuzzing.md): FUZZ_RUNS executions per target, or
# FUZZ_SECONDS each when set (CI: 10), FUZZ_TARGETS="idx config" for some; inputs that crash
# land in build-fuzz/findings/.
FUZZ_RUNS ?= 1000000
FUZZ_SECONDS ?= 0
fuzz: deps
	@cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=clang++ -DBITGRAD_FUZZ=ON \
	  -DBITGRAD_BUILD_TESTS=OFF -DBITGRAD_BUILD_BENCH=OFF -DBITGRAD_BUILD_TOOLS=OFF >/dev/null
	@ninja -C build-fuzz -j $(JOBS) fuzz_safetensors fuzz_idx fuzz_config fuzz_csv fuzz_records fuzz_onnx fuzz_serve_request fuzz_http_head fuzz_onnx_model
	@bash scripts/fuzz.sh build-fuzz $(FUZZ_RUNS) $(FUZZ_SECONDS)

bench: build
	@bash bench/run.sh $(BUILD)

# bitgrad against PyTorch's fastest set-up (docs/benchmarks.md "Speed, round three") on
# the MLP, the CNN and the fortunes GPT at 1 and 2 threads, 5 interleaved rounds, every ratio
# with its median, best and spread and a verdict; an estimated 10 minutes on a quiet 2-core machine.
# FASTEST_LARGE=1 adds nanoGPT's shakespeare-char size (an estimated 25 minutes more); results in
# $(BUILD)/bench-fastest.
bench-fastest: build
	@bash bench/fastest_peer.sh $(BUILD) $(BUILD)/bench-fastest

# ONNX's backend node tests through the Python module (tests/onnx): the table of docs/onnx.md
# regenerated, the results in $(BUILD)/onnx-node-tests.json (the ctest entry Onnx.NodeTests checks them)
onnx-table: configure
	@ninja -C $(BUILD) -j $(JOBS) bitgrad_python
	@PYTHONPATH=$(BUILD)/python /usr/bin/python3 tests/onnx/run_node_tests.py --markdown docs/onnx.md --json $(BUILD)/onnx-node-tests.json

# The ONNX round trips at full length: ResNet-18's 50 training steps too (ctest runs 5 of them;
# docs/onnx.md "Bring your PyTorch model")
onnx-roundtrip: configure
	@ninja -C $(BUILD) -j $(JOBS) bitgrad_python bitgrad_cli
	@cd tests/python && BITGRAD_ONNX_STEPS=50 PYTHONPATH=$(CURDIR)/$(BUILD)/python BITGRAD_BIN=$(CURDIR)/$(BUILD)/bin/bitgrad /usr/bin/python3 -m pytest -q -s test_onnx_roundtrip.py

# The Python module's per-call overhead of small ops against PyTorch's (docs/benchmarks.md).
bench-python: build
	@PYTHONPATH=$(BUILD)/python /usr/bin/python3 bench/python_overhead.py

# Serving (docs/benchmarks.md, docs/serving.md): 64 clients, 2000 requests against `bitgrad serve`
# and a PyTorch eager server of the same weights; SERVE_RUN=RUN serves a trained run (default:
# train examples/fortunes_gpt.toml for SERVE_STEPS=300 steps first).
bench-serve: build
	@bash bench/serve_bench.sh $(BUILD) $(BUILD)/bench-serve

# The zoo (docs/benchmarks.md): training steps of the models users bring (recurrent
# layers and classifiers in Python, torchvision CNNs through ONNX) against PyTorch eager at 1
# and 2 threads, interleaved rounds; ZOO_ARGS passes options (--models, --rounds, --steps).
bench-zoo: build
	@PYTHONPATH=$(BUILD)/python /usr/bin/python3 bench/zoo.py --json $(BUILD)/zoo.json $(ZOO_ARGS)

# Data parallel (docs/distributed_bench.md): tree_allreduce against MPI_Allreduce, and the MLP's
# training step under mpirun against one process; DIST_RANKS="2 4", DIST_ONLY=combine|train.
bench-dist: build
	@bash bench/dist.sh $(BUILD)
# the same combine on 2 ranks over TCP between two network-namespace hosts, then over shared
# memory (tests/dist/hosts_netns.sh --bench; root; docs/distributed.md "Across hosts")
bench-dist-hosts: build
	@bash tests/dist/hosts_netns.sh $(BUILD)/bin/bitgrad $$(command -v mpirun) $(BUILD)/dist-hosts-bench --bench $(BUILD)/bin/dist_combine_bench

# The character-level GPT against the same model in PyTorch (docs/benchmarks.md): the same
# initial parameters, batches and learning rates; the validation curves side by side, then step
# times at 1 and 2 threads. GPT_STEPS (2000), GPT_TIME_STEPS (200), GPT_REPS (5),
# GPT_TORCH_SETUPS ("torch-openblas torch-blis-skx"), GPT_ONLY=curve|timing; results in
# $(BUILD)/bench-results-gpt, or GPT_OUT.
GPT_OUT ?= $(BUILD)/bench-results-gpt
bench-gpt: build
	@bash bench/gpt_peer.sh $(BUILD) $(GPT_OUT)

# Mixed precision against f32 (docs/benchmarks.md): step times of the GPT and the MLP in fp32,
# bf16, bf16 stochastic and fp16 (PREC_REPS rounds, PREC_THREADS), then the full example trainings
# in each (PREC_QUALITY=0 skips them); results in $(BUILD)/bench-results-precision.
bench-precision: build
	@bash bench/precision.sh $(BUILD)

# the elementary functions against MPFR, then f32 GEMM and row sums against f64 beside PyTorch
# and NumPy, then training steps against their f64 twins (docs/numerics.md, §5's tables)
accuracy: build
	@$(BUILD)/bin/mathfn_accuracy --n 10000000
	@$(BUILD)/bin/mathfn_accuracy --f32-all
	@$(BUILD)/bin/fast_f32_check
	@PYTHONPATH=$(BUILD)/python /usr/bin/python3 bench/accuracy.py
	@PYTHONPATH=$(BUILD)/python /usr/bin/python3 bench/f32_functions_accuracy.py
	@/usr/bin/python3 bench/step_accuracy.py --bitgrad $(BUILD)/bin/bitgrad

clean:
	@rm -rf $(BUILD) build-asan build-tsan build-clang-O0 build-fuzz
