# flowgen — build, test, install.  `make help` lists the targets.

CC       ?= cc
NVCC     ?= nvcc
PYTHON   ?= python3
PREFIX   ?= /usr/local
DESTDIR  ?=
BUILD    ?= build
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(shell command -v $(NVCC) 2>/dev/null))

VERSION  := $(shell sed -n 's/^\#define FLOWGEN_VERSION "\(.*\)"/\1/p' include/flowgen.h)
SONAME   := libflowgen.so.$(firstword $(subst ., ,$(VERSION)))

WARN     := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
            -Wno-missing-field-initializers
CFLAGS   ?= -O2 -g
BASE_CFLAGS := -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE $(WARN) \
            -fPIC -Iinclude \
            -I$(CUDA_HOME)/include $(shell pkg-config --cflags lua5.4) \
            $(CFLAGS) $(SANITIZE)
# Layers: the generator (gen/), the runtime on it (runtime/), the command
# line on both (cli/).  Each layer sees only its own headers and those
# below it, so that an include upward does not compile (`make
# check-layers` also keeps gen/ off the runtime's public header).  Tests
# and bench programs see every layer.
LAYER_INCLUDES_gen     := -Igen
LAYER_INCLUDES_runtime := -Igen -Iruntime
LAYER_INCLUDES_cli     := -Igen -Iruntime -Icli
ALL_CFLAGS := $(BASE_CFLAGS) -Igen -Iruntime -Icli
# Lua and jansson are linked statically: the binaries run where neither is
# installed.  The CUDA driver and NVRTC are opened at run time (dlopen).
# libpng and zlib serve the CLI's pictures only: the library does not link
# them.
STATIC_LIBS := -Wl,-Bstatic -llua5.4 -ljansson -Wl,-Bdynamic
LDLIBS   := $(STATIC_LIBS) -ldl -lm -lpthread
CLI_LDLIBS := -Wl,-Bstatic -lpng16 -lz -Wl,-Bdynamic
LDFLAGS  ?=
ALL_LDFLAGS := $(LDFLAGS) $(SANITIZE)

GEN_SRC  := $(wildcard gen/*.c)
RT_SRC   := $(wildcard runtime/*.c)
CLI_SRC  := $(wildcard cli/*.c)
LIB_OBJ  := $(patsubst %.c,$(BUILD)/obj/%.o,$(GEN_SRC) $(RT_SRC)) \
            $(BUILD)/obj/templates.o $(BUILD)/obj/models.o
# The CLI's objects but main, for the tests and fuzz targets that call the
# CLI's code (an archive internal to the build, never installed).
CLI_LIB  := $(BUILD)/libflowgen-cli.a
CLI_LIB_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(filter-out cli/main.c,$(CLI_SRC)))
MODELS   := examples/digits/digits_d64_h256.safetensors
TEMPLATES := $(sort $(wildcard templates/*.lua templates/*.cut))
ENGINE   := gen/engine.lua

TEST_SRC := $(wildcard tests/test_*.c)
# The slowest first: tests/run.sh starts them in this order, two or more at
# a time, and `make test` takes as long as the busiest of its workers.
SLOW_TESTS := test_nvrtc test_faults test_alloc_faults test_cache_load test_examples
TESTS    := $(patsubst %,$(BUILD)/tests/%,$(SLOW_TESTS)) \
            $(filter-out $(patsubst %,$(BUILD)/tests/%,$(SLOW_TESTS)), \
              $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRC)))
TEST_SUPPORT := $(BUILD)/obj/tests/support.o

.PHONY: all lib cli tests test test-gpu test-python pyext check-layers bench probe launcher-bench demo demo-cond deps asan valgrind fuzz fuzz-build \
        fuzz-targets clean install uninstall help
all: cli lib $(BUILD)/bench $(BUILD)/sanitize

# Debian packages the build needs; `make deps` installs the missing ones
# (as root) or prints the command that would.
DEB_PACKAGES := make gcc pkg-config liblua5.4-dev libjansson-dev libxxhash-dev libcmocka-dev \
                libpng-dev
deps:
	@missing=$$(for p in $(DEB_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -z "$$missing" ]; then echo "deps: all present"; \
	elif [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq $$missing; \
	else echo "deps: missing:" $$missing; echo "run: sudo apt-get install -y" $$missing; exit 1; fi
	@command -v $(NVCC) >/dev/null || { echo "deps: the CUDA toolkit (nvcc, NVRTC) is not on PATH; install it from NVIDIA"; exit 1; }

# The main job: a kernel for the default shape and its launch
# configuration, then 64 digits drawn by the shipped digits model (on the
# GPU where there is one, else with the fp64 CPU reference) as a picture.
demo: cli
	@mkdir -p $(BUILD)/demo
	$(BUILD)/flowgen --dim 64 --steps 32 -o $(BUILD)/demo/flow_d64_h256_s32_fp32.cu
	$(BUILD)/flowgen --dim 64 --steps 32 --describe
	$(BUILD)/flowgen sample --steps 32 --batch 64 --seed 1 \
	  --png $(BUILD)/demo/digits.png -o $(BUILD)/demo/digits.npy -v
	@echo "wrote $(BUILD)/demo/flow_d64_h256_s32_fp32.cu, $(BUILD)/demo/digits.png and $(BUILD)/demo/digits.npy"

# The conditional digits model (examples/digits/train_cond.py: the class as
# a one-hot c, C=10) drawn with classifier-free guidance w = 2: --class all
# draws --batch samples of each class, 0 to 9, a row of the picture each.
COND_MODEL := examples/digits/digits_cond_d64_h256.safetensors
demo-cond: cli
	@mkdir -p $(BUILD)/demo
	$(BUILD)/flowgen sample --weights $(COND_MODEL) --class all --guidance 2 \
	  --steps 32 --batch 10 --seed 1 --png $(BUILD)/demo/digits_cond.png \
	  -o $(BUILD)/demo/digits_cond.npy -v
	@echo "wrote $(BUILD)/demo/digits_cond.png and $(BUILD)/demo/digits_cond.npy"

help:
	@echo "make deps       install the Debian packages the build needs"
	@echo "make            build the libraries (.a, .so) and build/flowgen"
	@echo "make demo       write the default kernel and sample the demo model"
	@echo "make demo-cond  the conditional digits model, a row per class (guidance 2)"
	@echo "make test       CPU tests (GPU tests skip themselves without a GPU)"
	@echo "make test-gpu   the tests with a GPU required (no skipping)"
	@echo "make test-python  pip install . into $(PYVENV), then pytest python/tests"
	@echo "make pyext      the package's optional extension in python/flowgen (for PYTHONPATH=python)"
	@echo "                (PYTHON_TORCH=1: torch too, ~5 GB, for the torch tests)"
	@echo "                (FLOWGEN_TEST_JOBS=N: test programs at a time; default the CPUs)"
	@echo "make bench      build/bench on the GPU: device time, TFLOP/s, error, start-up;"
	@echo "                then every precision from B=1 to 1048576"
	@echo "make asan       the tests under ASan + UBSan (separate build dir)"
	@echo "make valgrind   the tests under valgrind memcheck (make -j2: two at a time)"
	@echo "make fuzz       each libFuzzer target for FUZZ_SECONDS=$(FUZZ_SECONDS) (clang, build-fuzz/)"
	@echo "make install    PREFIX=$(PREFIX) DESTDIR=: binary, headers, libraries, pkg-config"
	@echo "make clean"

lib: $(BUILD)/libflowgen.a $(BUILD)/libflowgen.so
cli: $(BUILD)/flowgen

HEADERS := $(wildcard include/*.h gen/*.h runtime/*.h cli/*.h)

define layer_rule
$$(BUILD)/obj/$(1)/%.o: $(1)/%.c $$(HEADERS)
	@mkdir -p $$(dir $$@)
	$$(CC) $$(BASE_CFLAGS) $$(LAYER_INCLUDES_$(1)) -c $$< -o $$@
endef
$(foreach layer,gen runtime cli,$(eval $(call layer_rule,$(layer))))

$(BUILD)/obj/%.o: %.c $(HEADERS) $(wildcard tests/*.h tests/fuzz/*.h bench/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

# gen/ must not include the runtime's public header either (include/ is
# every layer's).
check-layers:
	@! grep -n '#include *"flowrt.h"' gen/*.c gen/*.h || \
	  { echo "check-layers: gen/ includes the runtime's header" >&2; exit 1; }

# Templates are compiled into the library; --template-dir overrides them.
$(BUILD)/embed: tools/embed.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(WARN) -O1 $< -o $@

# fg_builtin_digest names everything that decides a generated source (the
# templates, the engine, the generator's C): a part's cache key holds it in
# place of the source (flowgen_source_key).
DIGESTED := $(TEMPLATES) $(ENGINE) $(sort $(GEN_SRC) $(wildcard gen/*.h)) include/flowgen.h
$(BUILD)/templates.c: $(BUILD)/embed $(DIGESTED)
	$(BUILD)/embed fg_builtin_templates $(TEMPLATES) > $@.tmp
	$(BUILD)/embed fg_builtin_engine $(ENGINE) >> $@.tmp
	$(BUILD)/embed --digest fg_builtin_digest $(DIGESTED) >> $@.tmp
	mv $@.tmp $@

# The shipped digits model, for `flowgen sample` without --weights.
$(BUILD)/models.c: $(BUILD)/embed $(MODELS)
	$(BUILD)/embed fg_builtin_models $(MODELS) > $@.tmp
	mv $@.tmp $@

$(BUILD)/obj/models.o: $(BUILD)/models.c gen/internal.h
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(LAYER_INCLUDES_gen) -c $< -o $@

$(BUILD)/obj/templates.o: $(BUILD)/templates.c gen/internal.h
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(LAYER_INCLUDES_gen) -c $< -o $@

$(BUILD)/libflowgen.a: $(LIB_OBJ)
	rm -f $@
	ar rcs $@ $^

# The shared library names Lua and jansson as NEEDED: Debian's archives of
# them cannot go into a shared object (built as PIE: their references to
# stdin/stdout/stderr are R_X86_64_PC32, refused by ld), so `cc prog.c
# -lflowgen` needs nothing else at link time and the runtime packages
# (liblua5.4-0, libjansson4) at run time.  It exports
# only the API of include/ (libflowgen.map): the library's internals stay
# local.  -z defs: nothing left unresolved (not with the sanitizers, whose
# runtime the program brings).
SHARED_LIBS := -Wl,--as-needed -llua5.4 -ljansson -ldl -lm -lpthread -Wl,--no-as-needed
$(BUILD)/libflowgen.so.$(VERSION): $(LIB_OBJ) libflowgen.map
	$(CC) -shared -Wl,-soname,$(SONAME) -Wl,--version-script=libflowgen.map \
	  $(if $(SANITIZE),,-Wl,-z,defs) $(ALL_LDFLAGS) $(LIB_OBJ) $(SHARED_LIBS) -o $@

$(BUILD)/libflowgen.so: $(BUILD)/libflowgen.so.$(VERSION)
	ln -sf libflowgen.so.$(VERSION) $(BUILD)/$(SONAME)
	ln -sf $(SONAME) $@

$(CLI_LIB): $(CLI_LIB_OBJ)
	rm -f $@
	ar rcs $@ $^

$(BUILD)/flowgen: $(BUILD)/obj/cli/main.o $(CLI_LIB) $(BUILD)/libflowgen.a
	$(CC) $(ALL_LDFLAGS) $^ $(CLI_LDLIBS) $(LDLIBS) -o $@

$(BUILD)/bench: $(BUILD)/obj/bench/bench.o $(BUILD)/libflowgen.a
	$(CC) $(ALL_LDFLAGS) $^ $(LDLIBS) -o $@

# Every shape of the default list (fp32, start-up costs), then every
# precision at the default shape from B=1 to 1,048,576.
BENCH_BATCHES := 1,2,4,8,16,32,64,128,256,512,1000,1024,2048,4096,8192,16384,32768,65536,100000,131072,262144,524288,1048576
bench: $(BUILD)/bench
	$(BUILD)/bench --json $(BUILD)/bench.json
	$(BUILD)/bench --no-startup --precisions fp32,tf32,bf16,fp16 --shapes 64,256,32 \
	  --batches $(BENCH_BATCHES) --json $(BUILD)/bench-precisions.json

# On-chip latencies (mma.sync, barriers, movmatrix, tanh, shared loads,
# shuffles), tf32 wgmma's rate by shape, the SM clock while small kernels
# run, the cluster kernel's exchange alone and its blocks' loads of their
# weights: `make probe` then build/probe on an H100/H200.
probe: $(BUILD)/probe
$(BUILD)/probe: bench/probe.cu
	@mkdir -p $(BUILD)
	$(NVCC) -O3 -gencode=arch=compute_90a,code=sm_90a -std=c++17 -o $@ $<

# A `flowgen --host-launcher` file (or a hand-edited copy, or one that
# bench/stamps.py instrumented: STAMPS=1) timed launch by launch:
# `make launcher-bench LAUNCHER=k.cu` then build/launcher-bench [--nvrtc]
# [batch...] (nvcc's kernels, or NVRTC's build of the same file: the text
# is embedded, compiled at run time by the library's flowrt_compile).
# LAUNCHER_OUT names the program (several variants side by side).
LAUNCHER_NAME = $(if $(LAUNCHER),$(shell sed -n 's/^extern "C" cudaError_t \(flow_[a-z0-9_]*\)_launch.$$/\1/p' $(LAUNCHER)))
LAUNCHER_OUT ?= $(BUILD)/launcher-bench
launcher-bench: $(BUILD)/libflowgen.a
	@test -n "$(LAUNCHER)" || { echo 'make launcher-bench: name the file: LAUNCHER=k.cu' >&2; exit 2; }
	@test -n "$(LAUNCHER_NAME)" || { echo 'make launcher-bench: $(LAUNCHER) has no host launcher (flowgen --host-launcher)' >&2; exit 2; }
	@mkdir -p $(dir $(LAUNCHER_OUT))
	@{ printf 'R"flowgen_source('; cat $(LAUNCHER); printf ')flowgen_source"\n'; } > $(LAUNCHER_OUT).source
	$(NVCC) -O3 -gencode=arch=compute_90a,code=sm_90a -std=c++17 -Iinclude -I$(dir $(abspath $(LAUNCHER))) \
	  -DFLOWGEN_FILE='"$(notdir $(LAUNCHER))"' -DFLOWGEN_NAME=$(LAUNCHER_NAME) \
	  -DFLOWGEN_SOURCE='"$(abspath $(LAUNCHER_OUT).source)"' \
	  $(if $(STAMPS),-DFLOWGEN_STAMPS) -o $(LAUNCHER_OUT) bench/launcher_bench.cu $(BUILD)/libflowgen.a \
	  -Xlinker -Bstatic -llua5.4 -ljansson -Xlinker -Bdynamic -ldl -lm -lpthread

# Every strategy once, small, for compute-sanitizer (bench/device_round.sh).
$(BUILD)/sanitize: $(BUILD)/obj/bench/sanitize.o $(BUILD)/libflowgen.a
	$(CC) $(ALL_LDFLAGS) $^ $(LDLIBS) -o $@

# Keep the object files of the tests (make would delete them as
# intermediates and rebuild them next time).
.SECONDARY:

# ---- tests ------------------------------------------------------------------
# cmocka is linked dynamically; its library is copied next to the tests so the
# build folder runs on a machine without it ($ORIGIN rpath).
CMOCKA_SO := $(shell $(CC) -print-file-name=libcmocka.so.0)

$(BUILD)/tests/libcmocka.so.0:
	@mkdir -p $(dir $@)
	@test -f "$(CMOCKA_SO)" || { echo "cmocka not found: apt-get install -y libcmocka-dev" >&2; exit 1; }
	cp -L $(CMOCKA_SO) $@

# A test can ask for -Wl,--wrap mocks by listing symbols in tests/<name>.wrap.
# The tests of the CLI's own code (.npy, pictures, output files, sample)
# link its archive too.
CLI_TESTS := test_alloc_faults test_cli_runtime test_digits test_npy test_output
$(foreach t,$(CLI_TESTS),$(eval $(BUILD)/tests/$(t): $(CLI_LIB)))
$(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(TEST_SUPPORT) $(BUILD)/libflowgen.a | $(BUILD)/tests/libcmocka.so.0
	$(CC) $(ALL_LDFLAGS) $(foreach s,$(shell cat tests/$*.wrap 2>/dev/null),-Wl,--wrap=$(s)) \
	  $(filter %.o,$^) $(filter $(CLI_LIB),$^) $(BUILD)/libflowgen.a \
	  -L$(BUILD)/tests -l:libcmocka.so.0 -Wl,-rpath,'$$ORIGIN' \
	  $(if $(filter $(CLI_LIB),$^),$(CLI_LDLIBS)) $(LDLIBS) -o $@

tests: check-layers $(TESTS) $(BUILD)/flowgen

# The fuzz targets' inputs that once failed, replayed through the targets'
# own entry points (compiled without libFuzzer, each under its own name).
# The targets get the CLI's archive (fuzz_cli, fuzz_sample, fuzz_npy and
# fuzz_png call its code).
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_REPLAY_OBJ := $(patsubst tests/fuzz/%.c,$(BUILD)/obj/tests/fuzz-replay/%.o,$(FUZZ_SRC))

$(BUILD)/obj/tests/fuzz-replay/%.o: tests/fuzz/%.c tests/fuzz/fuzz.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -DLLVMFuzzerTestOneInput=$*_one_input -c $< -o $@

$(BUILD)/tests/test_fuzz_regressions: $(BUILD)/obj/tests/test_fuzz_regressions.o \
    $(FUZZ_REPLAY_OBJ) $(TEST_SUPPORT) $(CLI_LIB) $(BUILD)/libflowgen.a | $(BUILD)/tests/libcmocka.so.0
	$(CC) $(ALL_LDFLAGS) $^ -L$(BUILD)/tests -l:libcmocka.so.0 -Wl,-rpath,'$$ORIGIN' \
	  $(CLI_LDLIBS) $(LDLIBS) -o $@

test: tests
	@FLOWGEN_BIN=$(abspath $(BUILD)/flowgen) FLOWGEN_SOURCE_DIR=$(CURDIR) \
	  sh tests/run.sh $(TESTS)

test-gpu: tests
	@FLOWGEN_REQUIRE_GPU=1 FLOWGEN_BIN=$(abspath $(BUILD)/flowgen) \
	  FLOWGEN_SOURCE_DIR=$(CURDIR) sh tests/run.sh $(TESTS)

# The Python package (python/, pyproject.toml): a virtual environment of its
# own, `pip install .` (which runs `make lib cli` and bundles the library
# and the binary), then pytest python/tests.  The torch tests skip unless
# torch is in that environment (PYTHON_TORCH=1 installs it from PyPI: about
# 5 GB; .ci/run does where the disk allows), the GPU ones without a GPU.
PYVENV ?= $(BUILD)/venv
# The optional extension flowgen._fast (python/flowgen/_fast.c) built in the
# source tree, for the package used from it (python/ on PYTHONPATH, as
# bench/device_round.sh does); pip install . builds its own.  The stable
# ABI: this build serves every Python from 3.10.
PY_INCLUDE = $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
pyext: python/flowgen/_fast.abi3.so
python/flowgen/_fast.abi3.so: python/flowgen/_fast.c
	$(CC) -O2 -shared -fPIC -Wall -Wextra -I$(PY_INCLUDE) $< -o $@
test-python: cli lib
	@test -x $(PYVENV)/bin/pip || $(PYTHON) -m venv $(PYVENV)
	FLOWGEN_BUILD_DIR=$(BUILD) $(PYVENV)/bin/pip install -q --upgrade ".[test]"
	$(if $(PYTHON_TORCH),$(PYVENV)/bin/pip install -q torch safetensors)
	$(PYVENV)/bin/python -m pytest -q -rs python/tests

# LSAN_OPTIONS: see tests/lsan.supp.  verify_asan_link_order=0: tests/run.sh
# line-buffers the tests with stdbuf, whose LD_PRELOAD comes before ASan's
# runtime.
asan:
	ASAN_OPTIONS="verify_asan_link_order=0" \
	LSAN_OPTIONS="use_tls=0:print_suppressions=0:suppressions=$(CURDIR)/tests/lsan.supp" \
	$(MAKE) BUILD=build-asan CFLAGS="-O1 -g -fno-omit-frame-pointer" \
	  SANITIZE="-fsanitize=address,undefined -fno-sanitize-recover=undefined" test

# Each test program under memcheck, a target each so that make -j runs them
# side by side; valgrind's report and the test's output go to
# $(BUILD)/valgrind/.  Under valgrind the tests shrink their NVRTC work
# (fg_test_under_valgrind); the flowgen binary they run is not traced.
VALGRIND ?= valgrind
VALGRIND_FLAGS ?= --leak-check=full --error-exitcode=9 \
                  --errors-for-leak-kinds=definite,indirect --show-possibly-lost=no

valgrind: $(patsubst $(BUILD)/tests/%,valgrind-%,$(TESTS))
	@echo "valgrind: $(words $^) test programs, no errors"

valgrind-%: tests
	@mkdir -p $(BUILD)/valgrind
	@FLOWGEN_BIN=$(abspath $(BUILD)/flowgen) FLOWGEN_SOURCE_DIR=$(CURDIR) \
	  $(VALGRIND) $(VALGRIND_FLAGS) --log-file=$(BUILD)/valgrind/$*.log \
	  $(BUILD)/tests/$* >$(BUILD)/valgrind/$*.out 2>&1 && echo "valgrind: $* clean" || \
	  { echo "valgrind: $* failed:"; tail -n 20 $(BUILD)/valgrind/$*.out; \
	    grep -A 12 -E "ERROR SUMMARY: [1-9]|(definitely|indirectly) lost in|Invalid|uninitialised" \
	      $(BUILD)/valgrind/$*.log | head -n 60; exit 1; }

# ---- fuzzing ----------------------------------------------------------------
# libFuzzer targets (tests/fuzz/fuzz_<name>.c), built with clang in
# build-fuzz/ (the library too: coverage, ASan, UBSan).  `make fuzz` runs
# each for FUZZ_SECONDS from its seeds (tests/fuzz/corpus/<name>/, plus the
# dictionary tests/fuzz/<name>.dict); new inputs go to build-fuzz/corpus/,
# a failing input to build-fuzz/crashes/<name>/ (keep it as a regression:
# tests/fuzz/regressions/<name>/).  CI smoke: make fuzz FUZZ_SECONDS=10.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_FLAGS   ?= -timeout=30
FUZZ_BUILD   := build-fuzz
FUZZ_NAMES   := $(patsubst tests/fuzz/fuzz_%.c,%,$(FUZZ_SRC))
# The CLI targets print each usage error: libFuzzer closes their stderr.
FUZZ_FLAGS_cli := -close_fd_mask=2
FUZZ_FLAGS_sample := -close_fd_mask=2

fuzz-build:
	$(MAKE) BUILD=$(FUZZ_BUILD) CC=$(FUZZ_CC) CFLAGS="-O1 -g -fno-omit-frame-pointer" \
	  SANITIZE="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined" \
	  fuzz-targets

fuzz-targets: $(patsubst %,$(BUILD)/fuzz/fuzz_%,$(FUZZ_NAMES))

$(BUILD)/fuzz/fuzz_%: $(BUILD)/obj/tests/fuzz/fuzz_%.o $(CLI_LIB) $(BUILD)/libflowgen.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -fsanitize=fuzzer $^ $(CLI_LDLIBS) $(LDLIBS) -o $@

fuzz_run = mkdir -p $(FUZZ_BUILD)/corpus/$(1) $(FUZZ_BUILD)/crashes/$(1) && \
  echo "fuzz: $(1), $(FUZZ_SECONDS) s" && \
  $(FUZZ_BUILD)/fuzz/fuzz_$(1) -max_total_time=$(FUZZ_SECONDS) $(FUZZ_FLAGS) \
    $(FUZZ_FLAGS_$(1)) $(if $(wildcard tests/fuzz/$(1).dict),-dict=tests/fuzz/$(1).dict) \
    -artifact_prefix=$(FUZZ_BUILD)/crashes/$(1)/ \
    $(FUZZ_BUILD)/corpus/$(1) tests/fuzz/corpus/$(1) 2>&1 | tail -n 4 && \
  test -z "$$(ls -A $(FUZZ_BUILD)/crashes/$(1))"

fuzz: fuzz-build
	@$(foreach n,$(FUZZ_NAMES),$(call fuzz_run,$(n)) && ) echo "fuzz: no failures"

# ---- install ----------------------------------------------------------------
# The shared library as libflowgen.so.X.Y.Z with the links libflowgen.so.X
# (its soname) and libflowgen.so; the static one for `pkg-config --static`.
install: cli lib
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/include \
	  $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 755 $(BUILD)/flowgen $(DESTDIR)$(PREFIX)/bin/flowgen
	install -m 644 include/*.h $(DESTDIR)$(PREFIX)/include/
	install -m 644 $(BUILD)/libflowgen.a $(DESTDIR)$(PREFIX)/lib/libflowgen.a
	install -m 755 $(BUILD)/libflowgen.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/
	ln -sf libflowgen.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(PREFIX)/lib/libflowgen.so
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' flowgen.pc.in \
	  > $(DESTDIR)$(PREFIX)/lib/pkgconfig/flowgen.pc

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/flowgen $(DESTDIR)$(PREFIX)/lib/libflowgen.a \
	  $(DESTDIR)$(PREFIX)/lib/libflowgen.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/$(SONAME) \
	  $(DESTDIR)$(PREFIX)/lib/libflowgen.so $(DESTDIR)$(PREFIX)/lib/pkgconfig/flowgen.pc \
	  $(addprefix $(DESTDIR)$(PREFIX)/include/,$(notdir $(wildcard include/*.h)))

clean:
	rm -rf $(BUILD) build-asan build-fuzz python/flowgen/_fast.abi3.so
