# tq - build, test, demo, bench.  `make` builds tq, libtq.a and libtq.so (libtq: lib/ alone,
# the codec library tq.h declares); formats/ build into build/libtqformats.a, private to tq and
# the tests.  CUDA sources in kernels/ are built when nvcc is on PATH (CUDA=0 disables).

# every core unless a -j is given (make -j1: one at a time): the build is most of a first
# `make demo` and the first part of `make test`
ifeq (,$(filter -j%,$(MAKEFLAGS)))
MAKEFLAGS += -j$(shell nproc 2>/dev/null || echo 2)
endif

CC      ?= cc
NVCC    ?= nvcc
PREFIX  ?= /usr/local
B       := build

# -ffp-contract=off: the codecs must round exactly like the fork's reference
# (separate multiply and add); a fused multiply-add would change bytes.
CFLAGS  ?= -O2 -g
# -fvisibility=hidden: libtq.so exports tq.h's functions alone (TQ_API)
CFLAGS  += -std=gnu11 -Wall -Wextra -fPIC -fopenmp -ffp-contract=off -fvisibility=hidden
# include paths: lib/ sees lib/ alone (libtq knows numbers, not files); the rest sees all
INC_ALL := -Ilib -Iformats/tqkv -Iformats/gguf -Iformats/state -Iformats/npy -Iformats/io \
           -Iformats/model -Iformats/snapshot -Iformats/store -Iformats/weights -Iformats/bench \
           -Iformats/proxy -Iformats/seal
INC     := $(INC_ALL)
# every object records the headers it includes (build/**/*.d)
DEPFLAGS := -MMD -MP
# the link libraries, once: CPU builds (sanitizers, fuzzers) use BASE_LIBS; libtq itself
# needs only LIB_LIBS (and OpenMP, and the CUDA runtime in a CUDA build)
LIB_LIBS  := -lm -lpthread
BASE_LIBS := -lzstd -lxxhash -larchive -lcurl -lexpat -ljansson -lmicrohttpd -lcrypto \
             $(LIB_LIBS)
LDLIBS  += $(BASE_LIBS)

AVX2_FLAGS   := -O3 -mavx2
AVX512_FLAGS := -O3 -mavx512f -mavx512bw -mavx512dq -mavx512vl -mprefer-vector-width=512

LIB_SRC := $(filter-out lib/cuda_stub.c,$(wildcard lib/*.c))
CMD_SRC := $(wildcard cmd/*.c)
# formats/, a folder a format or stage (formats/README.md): tqkv/, gguf/, state/ (llama.cpp
# states, NumPy dumps, the KV view), io/ (files, pipes, S3, llama-server), model/, snapshot/,
# store/, weights/
FMT_SRC := $(wildcard formats/*/*.c)

ifeq ($(CUDA),)
  CUDA := $(if $(shell command -v $(NVCC) 2>/dev/null),1,0)
endif
ifeq ($(CUDA),1)
  CUDA_HOME ?= $(patsubst %/bin/,%,$(dir $(shell command -v $(NVCC))))
  NVCCFLAGS ?= -O2 -std=c++17 -fmad=false -Xcompiler -fPIC -Xcompiler -fvisibility=hidden -Ilib \
    -gencode arch=compute_75,code=compute_75 -gencode arch=compute_90,code=sm_90
  CU_OBJ    := $(patsubst kernels/%.cu,$(B)/kernels/%.o,$(wildcard kernels/*.cu))
  # lib64 in the CUDA toolkit, lib in PyPI's nvidia-cuda-runtime
  CUDA_LIBS := -L$(CUDA_HOME)/lib64 -L$(CUDA_HOME)/lib -lcudart_static -ldl -lrt -lstdc++
  LDLIBS    += $(CUDA_LIBS)
else
  CU_OBJ    := $(B)/lib/cuda_stub.o
endif

# The default build puts tq and the libraries in the root; another build
# folder (make B=build/cuda ...: the CUDA build make test checks) keeps them
# inside it.
ifeq ($(B),build)
  BIN := .
else
  BIN := $(B)
endif
TQ_EXE := $(BIN)/tq
LIBTQ_A := $(BIN)/libtq.a
LIBTQ_SO := $(BIN)/libtq.so
# formats/, io, store: linked into tq and the tests, never installed
LIBTQF_A := $(B)/libtqformats.a

LIB_OBJ := $(patsubst %.c,$(B)/%.o,$(LIB_SRC)) $(CU_OBJ)
FMT_OBJ := $(patsubst %.c,$(B)/%.o,$(FMT_SRC))
CMD_OBJ := $(patsubst %.c,$(B)/%.o,$(CMD_SRC))

.PHONY: all deps test test-full demo bench clean install fuzz sanitize device-bundle
all: deps $(TQ_EXE) $(LIBTQ_A) $(LIBTQ_SO)

# ---- dependencies: libraries later subcommands link (checked now so a fresh
# machine learns the exact command once).
DEB_PKGS := libzstd-dev libarchive-dev libxxhash-dev libcurl4-openssl-dev libexpat1-dev \
            libjansson-dev libmicrohttpd-dev libssl-dev
DEB_HDRS := zstd.h archive.h xxhash.h curl/curl.h expat.h jansson.h microhttpd.h openssl/evp.h
deps:
	@missing=""; set -- $(DEB_PKGS); for h in $(DEB_HDRS); do \
	  printf '#include <%s>\n' $$h | $(CC) -E -x c - >/dev/null 2>&1 || missing="$$missing $$1"; shift; done; \
	if [ -n "$$missing" ]; then \
	  echo "tq needs:$$missing  ->  apt-get install -y$$missing"; \
	  if [ "$$(id -u)" = 0 ]; then apt-get install -y $$missing || \
	    { apt-get update && apt-get install -y $$missing; } || exit 1; \
	  else echo "run the line above as root, then make again"; exit 1; fi; \
	fi

# `| deps`: with -j, no object is compiled before the -dev packages are checked
$(B)/%.o: %.c | deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(INC) $(DEPFLAGS) -c $< -o $@
$(B)/lib/%.o: INC := -Ilib

$(B)/lib/kernels_avx2.o: CFLAGS += $(AVX2_FLAGS)
# the transform coder's products: explicit FMA intrinsics (klt.c's scalar
# path computes the same chains with fmaf)
$(B)/lib/klt_avx2.o $(B)/san/lib/klt_avx2.o: CFLAGS += -O3 -mavx2 -mfma
$(B)/lib/transform.o: CFLAGS += -O3
# RoPE's pair loops (the same double products, vectorized)
$(B)/lib/rope.o: CFLAGS += -O3
$(B)/lib/rans.o $(B)/lib/klt.o $(B)/lib/klt_rate.o $(B)/lib/innerq.o: CFLAGS += -O3
# index bytes to and from zig-zag: long loops GCC vectorizes at -O3
$(B)/formats/snapshot/kv_klt.o: CFLAGS += -O3
# the rotation butterflies are long independent loops: let GCC vectorize them
$(B)/lib/rotation.o: CFLAGS += -O3
$(B)/lib/half_f16c.o $(B)/san/lib/half_f16c.o: CFLAGS += -mf16c -mavx
# statistics are reports, not codec output: fused multiply-adds are welcome there
$(B)/lib/stats.o: CFLAGS += -O3 -ffp-contract=fast
$(B)/lib/kernels_avx512.o $(B)/lib/rans_avx512.o: CFLAGS += $(AVX512_FLAGS)

$(B)/kernels/%.o: kernels/%.cu $(wildcard lib/*.h) lib/kernels_lanes.inc
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

# Rebuild the libraries when CUDA is switched on or off.
$(B)/cuda-$(CUDA).stamp:
	@mkdir -p $(B)
	@rm -f $(B)/cuda-*.stamp
	@touch $@

$(LIBTQ_A): $(LIB_OBJ) $(B)/cuda-$(CUDA).stamp
	rm -f $@
	ar rcs $@ $(LIB_OBJ)

$(LIBTQ_SO): $(LIB_OBJ) $(B)/cuda-$(CUDA).stamp
	$(CC) -shared -fopenmp -o $@ $(LIB_OBJ) $(LIB_LIBS) $(CUDA_LIBS)

$(LIBTQF_A): $(FMT_OBJ)
	rm -f $@
	ar rcs $@ $(FMT_OBJ)

$(TQ_EXE): $(CMD_OBJ) $(LIBTQF_A) $(LIBTQ_A)
	$(CC) -fopenmp -o $@ $(CMD_OBJ) $(LIBTQF_A) $(LIBTQ_A) $(LDLIBS)

# ---- tests: unit runner + CLI and oracle scripts; last line "N passed, N failed"
TEST_SRC := $(wildcard tests/unit/*.c)
TEST_OBJ := $(patsubst %.c,$(B)/%.o,$(TEST_SRC))

$(B)/tests/unit/%.o: CFLAGS += -Itests
$(B)/tests/unit-runner: $(TEST_OBJ) $(LIBTQF_A) $(LIBTQ_A)
	$(CC) -fopenmp -o $@ $(TEST_OBJ) $(LIBTQF_A) $(LIBTQ_A) $(LDLIBS)

# A build with one more fork revision (the row under TQ_FORK_TEST_ROW in lib/fork_revisions.c,
# the only object that differs): tests/cli/fork_rows.sh shows a row is all a revision needs.
ROW_LIB := $(filter-out $(B)/lib/fork_revisions.o,$(LIB_OBJ)) $(B)/testrow/fork_revisions.o
$(B)/testrow/fork_revisions.o: lib/fork_revisions.c | deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Ilib -DTQ_FORK_TEST_ROW $(DEPFLAGS) -c $< -o $@
$(B)/testrow/tq: $(CMD_OBJ) $(LIBTQF_A) $(ROW_LIB)
	$(CC) -fopenmp -o $@ $(CMD_OBJ) $(LIBTQF_A) $(ROW_LIB) $(LDLIBS)
$(B)/testrow/unit-runner: $(TEST_OBJ) $(LIBTQF_A) $(ROW_LIB)
	$(CC) -fopenmp -o $@ $(TEST_OBJ) $(LIBTQF_A) $(ROW_LIB) $(LDLIBS)

# The same unit tests under AddressSanitizer and UndefinedBehaviorSanitizer
# (CPU build: the sanitizers do not see into CUDA kernels).
SAN_FLAGS := -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
SAN_SRC   := $(LIB_SRC) lib/cuda_stub.c $(FMT_SRC) $(TEST_SRC)
SAN_OBJ   := $(patsubst %.c,$(B)/san/%.o,$(SAN_SRC))
$(B)/san/%.o: %.c | deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN_FLAGS) $(INC) $(DEPFLAGS) $(SAN_INC) -c $< -o $@
SAN_INC := -Itests
$(B)/san/lib/%.o: INC := -Ilib
$(B)/san/lib/%.o: SAN_INC :=
$(B)/san/lib/kernels_avx2.o: CFLAGS += $(AVX2_FLAGS)
$(B)/san/lib/kernels_avx512.o $(B)/san/lib/rans_avx512.o: CFLAGS += $(AVX512_FLAGS)
$(B)/tests/unit-runner-san: $(SAN_OBJ)
	@mkdir -p $(dir $@)
	$(CC) -fopenmp $(SAN_FLAGS) -o $@ $^ $(BASE_LIBS)

# Small programs the test scripts drive (tests/tools/NAME.c -> build/tests/NAME).
TOOLS := $(patsubst tests/tools/%.c,$(B)/tests/%,$(wildcard tests/tools/*.c))
$(B)/tests/%: tests/tools/%.c $(LIBTQF_A) $(LIBTQ_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(INC) -o $@ $< $(LIBTQF_A) $(LIBTQ_A) $(LDLIBS)

# The GPU checks' program as tests/device/gpu_check.sh carries it to the device
# machine, whose image may lack this project's -dev packages: it needs only
# libc, libm, libgomp and libstdc++ there (the codecs pull in no file formats).
$(B)/device/cuda-equal: tests/tools/cuda-equal.c $(LIBTQ_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Ilib -o $@ $< $(LIBTQ_A) $(LIB_LIBS) $(CUDA_LIBS)

# What tests/device/gpu_check.sh carries to a lent GPU machine, built here
# (its image may lack nvcc and this project's -dev packages): tq and the
# unit tests with CUDA (the nvcc on PATH or PyPI's, tests/setup_cuda.sh),
# cuda-equal, and the shared libraries tq needs beyond the C library's.
device-bundle:
	@nvcc=$$(sh tests/setup_cuda.sh) && [ -n "$$nvcc" ] || { echo "no CUDA compiler"; exit 1; }; \
	$(MAKE) B=$(B)/cuda CUDA=1 NVCC="$$nvcc" $(B)/cuda/tq $(B)/cuda/tests/unit-runner \
	  $(B)/cuda/device/cuda-equal
	@mkdir -p $(B)/device/lib
	cp $(B)/cuda/tq $(B)/cuda/tests/unit-runner $(B)/cuda/device/cuda-equal $(B)/device/
	ldd $(B)/device/tq | awk '/=> \// {print $$3}' | \
	  grep -v '/lib\(c\|m\|dl\|rt\|pthread\|gcc_s\|stdc++\)\.so' | xargs -r -I{} cp -L {} $(B)/device/lib/

# tq again with slices of 100 values, so tests can check that slicing a tensor
# never changes the output (tests/cli/slices.sh).
$(B)/tests/tq-slice100: $(CMD_SRC) $(wildcard cmd/*.h formats/*/*.h lib/tq.h) \
                       $(LIBTQF_A) $(LIBTQ_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(INC) -DSLICE_VALUES=100 -o $@ $(CMD_SRC) formats/weights/quant_model.c \
	  $(LIBTQF_A) $(LIBTQ_A) $(LDLIBS)

# tq itself under ASan/UBSan, for tests/cli/sanitized.sh.
SAN_CMD_OBJ := $(patsubst %.c,$(B)/san/%.o,$(CMD_SRC))
$(B)/tests/tq-san: $(SAN_CMD_OBJ) $(filter-out $(B)/san/tests/%,$(SAN_OBJ))
	@mkdir -p $(dir $@)
	$(CC) -fopenmp $(SAN_FLAGS) -o $@ $^ $(BASE_LIBS)

TEST_BUILDS := all $(B)/tests/unit-runner $(B)/tests/unit-runner-san $(TOOLS) \
	$(B)/tests/tq-slice100 $(B)/tests/tq-san
test: $(TEST_BUILDS)
	@sh tests/run.sh

# Every variant of each scenario and the long-context guards (what CI runs; tests/run.sh)
test-full: $(TEST_BUILDS)
	@TQ_TEST_FULL=1 sh tests/run.sh

# Just the unit tests under ASan/UBSan.
sanitize: $(B)/tests/unit-runner-san
	ASAN_OPTIONS=detect_leaks=1 ./$(B)/tests/unit-runner-san

# The main job at a realistic size: a generated Llama-8B-shaped session (nothing downloaded),
# then SmolLM2's real 7,168-token session where tests/bench/long_sessions.py has cached it.
DEMO_LONG := $(HOME)/.cache/tq/long/smollm2-135m-cpp-7168.ggsn
DEMO_SMOL := $(HOME)/.cache/tq/models/SmolLM2-135M-Instruct.Q4_1.gguf
# seconds a command takes, printed after it (dash has no `time`)
demo_time = t0=$$(date +%s.%N); $(1); t1=$$(date +%s.%N); \
	awk -v a=$$t0 -v b=$$t1 'BEGIN { printf "  (%.2f s)\n", b - a }'
demo: all $(B)/tests/kv-state $(B)/tests/kv-error
	./tq bench --quick
	@echo; echo "== a Llama-8B-shaped session (32 layers, 8 KV heads of 128, 2048 cells; generated) =="
	./$(B)/tests/kv-state $(B)/demo-8b.ggsn 2048
	@$(call demo_time,./tq encode-kvdump $(B)/demo-8b.ggsn -o $(B)/demo-8b.tqkv --head-dim 128)
	@if command -v zstd >/dev/null; then echo "zstd -3 -T2, what one would use instead:"; \
	  $(call demo_time,zstd -q -f -3 -T2 $(B)/demo-8b.ggsn -o $(B)/demo-8b.zst); \
	  ls -l $(B)/demo-8b.ggsn $(B)/demo-8b.zst $(B)/demo-8b.tqkv | awk '{print "  " $$5, $$9}'; \
	else echo "(zstd not installed: apt-get install zstd to compare)"; fi
	@$(call demo_time,./tq decode-kvdump $(B)/demo-8b.tqkv -o $(B)/demo-8b-back.ggsn -q)
	./$(B)/tests/kv-error $(B)/demo-8b.ggsn $(B)/demo-8b-back.ggsn
	@if [ -f $(DEMO_LONG) ] && [ -f $(DEMO_SMOL) ]; then \
	  echo; echo "== SmolLM2-135M's real session (7,168 tokens of C++ source, cached by tests/bench/long_sessions.py) =="; \
	  ./tq encode-kvdump $(DEMO_LONG) -o $(B)/demo-smol.tqkv --model $(DEMO_SMOL) && \
	  ./tq decode-kvdump $(B)/demo-smol.tqkv -o $(B)/demo-smol.ggsn -q && \
	  ./$(B)/tests/kv-error $(DEMO_LONG) $(B)/demo-smol.ggsn; \
	else echo; echo "(SmolLM2's session not cached: python3 tests/bench/long_sessions.py --model smollm2)"; fi
	@echo; echo "== a llama.cpp slot file (stories260K, 16 tokens) to a .tqkv snapshot and back =="
	./tq encode-kvdump tests/fuzz/seeds/fuzz_state_read/stories16.ggsq -o $(B)/demo.tqkv --head-dim 8
	./tq decode-kvdump $(B)/demo.tqkv -o $(B)/demo.ggsq
	./tq inspect $(B)/demo.tqkv
	@if [ -f ../shared/models/stories260K.gguf ]; then \
	  echo; echo "== stories260K: rotations folded in, then the fork's Config I in TQ4_1S =="; \
	  ./tq rotate-weights ../shared/models/stories260K.gguf $(B)/demo-rot.gguf && \
	  ./tq quantize-tq4 -q $(B)/demo-rot.gguf $(B)/demo-tq4.gguf && ./tq inspect $(B)/demo-tq4.gguf | head -12; \
	else echo "(../shared/models/stories260K.gguf not found: the model demo is skipped)"; fi

bench: all $(TOOLS)
	./tq bench --plot $(B)/bench.svg
	./tq bench weights
	python3 tests/bench/inspect_large.py
	python3 tests/bench/kv_snapshot.py
	python3 tests/bench/kv_vs_zstd.py
	python3 tests/bench/kv_s3.py --large
	python3 tests/bench/slot_store.py --reps=3
	python3 tests/bench/kv_scale.py
	python3 tests/bench/quantize_model.py

# libFuzzer targets (clang): `make fuzz FUZZ_SECONDS=60`.  clang lacks GCC's
# __builtin_shuffle, so these builds carry the scalar kernels only.
FUZZ_SECONDS ?= 30
FUZZ_CC      ?= clang
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_FLAGS   := -O1 -g $(FUZZ_SAN) -ffp-contract=off -fopenmp=libgomp $(INC_ALL)
# libtq and formats/ compiled once for every target (instrumented, no fuzzer main), each target
# its own file linked to them
FUZZ_LIB_OBJ := $(patsubst %.c,$(B)/fuzzobj/%.o,$(LIB_SRC) $(FMT_SRC) lib/cuda_stub.c)
$(B)/fuzzobj/%.o: %.c | deps
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link $(DEPFLAGS) -c $< -o $@
$(B)/fuzz/%: tests/fuzz/%.c $(FUZZ_LIB_OBJ)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer $(DEPFLAGS) -o $@ tests/fuzz/$*.c $(FUZZ_LIB_OBJ) \
	  $(BASE_LIBS)
FUZZERS := $(patsubst tests/fuzz/%.c,$(B)/fuzz/%,$(wildcard tests/fuzz/*.c))
fuzz: $(FUZZERS)
	@for f in $(FUZZERS); do echo "fuzzing $$f for $(FUZZ_SECONDS)s"; \
	  n=$$(basename $$f); mkdir -p $(B)/corpus/$$n; \
	  $$f -max_total_time=$(FUZZ_SECONDS) -max_len=16384 $(B)/corpus/$$n \
	    $$( [ -d tests/fuzz/seeds/$$n ] && echo tests/fuzz/seeds/$$n ) || exit 1; done

-include $(shell find $(B) -name '*.d' 2>/dev/null)

clean:
	rm -rf $(B) tq libtq.a libtq.so

# make install [PREFIX=/usr/local] [DESTDIR=...]: tq, libtq.a/.so, tq.h, the
# man pages and a pkg-config file (pkg-config --cflags --libs tq).
install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include \
	  $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 755 tq $(DESTDIR)$(PREFIX)/bin/
	install -m 644 libtq.a libtq.so $(DESTDIR)$(PREFIX)/lib/
	install -m 644 lib/tq.h $(DESTDIR)$(PREFIX)/include/
	install -m 644 man/*.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|'"$$(sed -n 's/^#define TQ_VERSION_STRING "\(.*\)"/\1/p' lib/tq.h)"'|' \
	  -e 's|@LIBS@|$(strip $(filter-out -l%,$(CUDA_LIBS)) -lgomp $(LIB_LIBS) $(filter -l%,$(CUDA_LIBS)))|' \
	  tq.pc.in >$(DESTDIR)$(PREFIX)/lib/pkgconfig/tq.pc
