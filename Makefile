# ShadowSync - one non-recursive Makefile.
#
#   make            install missing packages, build bin/ and the library
#   make test       build, run unit tests (plain, ASan+UBSan, TSan) and integration tests
#   make check      the quick tier (under 3 minutes): release build, unit tests 2 at a
#                   time, the integration tests tagged quick (docs/testing.md)
#   make run        set up and run a local job on planted data, print the results
#                   (TRAIN=... EVAL=...: your files, relative to where you call make)
#   make bench      run the benchmarks (JSON on stdout)
#   make bench-quality  eval NE/AUC/EPS of the default job vs a PyTorch DLRM and a
#                   logistic regression over seeds (installs python3-torch, -sklearn)
#   make fuzz       build the libFuzzer harnesses of test/fuzz/ (clang) and run each for
#                   FUZZ_SECONDS (60) seconds; FUZZ_TARGETS=... picks some (docs/fuzzing.md)
#   make lib        also the shared scoring library build/rel/libshadowscore.so
#   make install PREFIX=/usr/local, make clean (installs conf/local.yaml, which names
#                   no data; conf/avazu.yaml points into the checkout's neighbourhood;
#                   and the scorer: bin/shadow-score, lib/libshadowscore.a and .so,
#                   include/ss_model.h: see docs/model-file.md)
#
# Options: DEBUG=1 (-O0 -g), SANITIZE=address,undefined | thread (builds into build/<san>/).

PREFIX   ?= /usr/local
CC       ?= cc
SANITIZE ?=
DEBUG    ?=

comma    := ,
PKGS     := libzmq libprotobuf-c yaml-0.1 openblas cmocka libmicrohttpd jansson
ifeq ($(SANITIZE),)
  BUILD  := build/rel
  PKGS   += jemalloc
  SANFLAGS :=
else
  BUILD  := build/$(subst $(comma),-,$(SANITIZE))
  SANFLAGS := -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=undefined
endif

PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   = $(shell pkg-config --libs $(PKGS) 2>/dev/null)

OPT      := $(if $(DEBUG),-O0 -g,-O2 -g)
ifneq ($(SANITIZE),)
  OPT    := -O1 -g
endif
CFLAGS   += -std=c11 -D_GNU_SOURCE $(OPT) -Wall -Wextra -Werror -Wno-unused-parameter -Wno-format-truncation \
            -fno-strict-aliasing -pthread -MMD -MP $(SANFLAGS) \
            -Icommon -Iserver -Itrainer -Iscore -I$(BUILD)/proto $(PKG_CFLAGS)
LDFLAGS  += -pthread $(SANFLAGS)
# link only the libraries a binary uses (shadow-ctl: no OpenBLAS, oneDNN or OpenMP)
LDFLAGS  += -Wl,--as-needed
LDLIBS   += $(PKG_LIBS) -ldnnl -lgomp -lm

# Version and git revision built into every binary (--version): only
# common/ss_version.o gets them, and it is rebuilt when either changes.
SS_VERSION_REV := $(shell scripts/version.sh)
SS_VERSION := $(or $(word 1,$(SS_VERSION_REV)),unknown)
SS_GIT_REV := $(or $(word 2,$(SS_VERSION_REV)),unknown)
VERSION_STAMP := $(BUILD)/version.stamp
$(shell mkdir -p $(BUILD) && echo '$(SS_VERSION) $(SS_GIT_REV)' | cmp -s - $(VERSION_STAMP) \
        || echo '$(SS_VERSION) $(SS_GIT_REV)' >$(VERSION_STAMP))
$(BUILD)/common/ss_version.o: \
    CFLAGS += -DSS_VERSION='"$(SS_VERSION)"' -DSS_GIT_REV='"$(SS_GIT_REV)"'
$(BUILD)/common/ss_version.o: $(VERSION_STAMP)

PROTO_C  := $(BUILD)/proto/shadow.pb-c.c
COMMON_SRC := $(wildcard common/*.c)
SERVER_SRC := $(filter-out server/ps_main.c,$(wildcard server/*.c))
TRAINER_SRC := $(filter-out trainer/tr_main.c,$(wildcard trainer/*.c))

SCORE_SRC := $(filter-out score/score_main.c,$(wildcard score/*.c))

COMMON_OBJ  := $(BUILD)/proto/shadow.pb-c.o $(COMMON_SRC:%.c=$(BUILD)/%.o)
SCORE_OBJ   := $(SCORE_SRC:%.c=$(BUILD)/%.o)
SERVER_OBJ  := $(SERVER_SRC:%.c=$(BUILD)/%.o)
TRAINER_OBJ := $(TRAINER_SRC:%.c=$(BUILD)/%.o)

LIBSHADOW  := $(BUILD)/libshadow.a
LIBSERVER  := $(BUILD)/libserver.a
LIBTRAINER := $(BUILD)/libtrainer.a
LIBSCORE   := $(BUILD)/libscore.a
# the scoring library for users: libscore with what it needs of libtrainer and
# libshadow in one archive (score/ss_model.h, docs/model-file.md)
LIBSHADOWSCORE := $(BUILD)/libshadowscore.a
LIBSHADOWSCORE_SO := $(BUILD)/libshadowscore.so

BINS := bin/shadow-ps bin/shadow-ctl $(if $(wildcard trainer/tr_main.c),bin/shadow-trainer) \
        $(if $(wildcard tools/datagen_main.c),bin/shadow-datagen) bin/shadow-score
BINS += bin/shadow-super
ifneq ($(SANITIZE),)
  BINS := $(BINS:bin/%=$(BUILD)/bin/%)
endif
UNIT_SRC   := $(wildcard test/unit/test_*.c)
UNIT_BINS  := $(UNIT_SRC:test/unit/%.c=$(BUILD)/test/%)
BENCH_SRC  := $(wildcard bench/*_bench.c)
BENCH_BINS := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)

.PHONY: all deps deps-test deps-cluster build lib unit test check test-unit test-integration run bench \
        bench-quality install clean fuzz fuzz-build fuzz-seeds
.DEFAULT_GOAL := all

all: deps
	@$(MAKE) --no-print-directory build

build: $(BINS) $(LIBSHADOW) $(LIBSHADOWSCORE)

# the shared scoring library (its own position-independent build of the objects:
# made by make install, or by make lib, not by every build)
lib: $(LIBSHADOWSCORE) $(LIBSHADOWSCORE_SO)

# deps: building and a local job; deps-test: make test's tools too (clang for the
# fuzzers, ssh, slurm, munge for the cluster tests); deps-cluster: those cluster
# packages alone (servers that systemd may start: make run never installs them)
deps:
	@scripts/install-deps.sh

deps-test:
	@scripts/install-deps.sh --test

deps-cluster:
	@scripts/install-deps.sh --cluster

$(PROTO_C): proto/shadow.proto
	@mkdir -p $(BUILD)/proto
	protoc-c --c_out=$(BUILD)/proto --proto_path=proto proto/shadow.proto

$(BUILD)/proto/shadow.pb-c.o: $(PROTO_C)
	$(CC) $(filter-out -Werror,$(CFLAGS)) -c $< -o $@

# every object depends on the generated header
$(COMMON_OBJ) $(SERVER_OBJ) $(TRAINER_OBJ) $(SCORE_OBJ): | $(PROTO_C)

$(BUILD)/%.o: %.c | $(PROTO_C)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(LIBSHADOW): $(COMMON_OBJ)
	@rm -f $@; ar rcs $@ $^
$(LIBSERVER): $(SERVER_OBJ)
	@rm -f $@; ar rcs $@ $^ $(if $(SERVER_OBJ),,$(BUILD)/proto/shadow.pb-c.o)
$(LIBTRAINER): $(TRAINER_OBJ)
	@rm -f $@; ar rcs $@ $^ $(if $(TRAINER_OBJ),,$(BUILD)/proto/shadow.pb-c.o)

$(LIBSCORE): $(SCORE_OBJ)
	@rm -f $@; ar rcs $@ $^
$(LIBSHADOWSCORE): $(SCORE_OBJ) $(TRAINER_OBJ) $(COMMON_OBJ)
	@rm -f $@; ar rcs $@ $^
# the same as a shared object, from position-independent copies of the objects
PIC_OBJ := $(BUILD)/pic/proto/shadow.pb-c.o \
           $(patsubst %.c,$(BUILD)/pic/%.o,$(SCORE_SRC) $(TRAINER_SRC) \
               $(filter-out common/ss_json.c,$(COMMON_SRC)))  # (scoring reads no JSON)
$(BUILD)/pic/proto/shadow.pb-c.o: $(PROTO_C)
	@mkdir -p $(dir $@)
	$(CC) $(filter-out -Werror,$(CFLAGS)) -fPIC -c $< -o $@
$(BUILD)/pic/%.o: %.c | $(PROTO_C)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fPIC -c $< -o $@
# (without jemalloc: a library takes its host's malloc, and jemalloc's static TLS fails
# a dlopen, e.g. from Python's ctypes)
$(LIBSHADOWSCORE_SO): $(PIC_OBJ)
	$(CC) -shared $(LDFLAGS) -Wl,-soname,libshadowscore.so -Wl,--as-needed -o $@ $^ \
	    $(filter-out -ljemalloc -lcmocka,$(LDLIBS))

LIBS_ALL := $(LIBSCORE) $(LIBSERVER) $(LIBTRAINER) $(LIBSHADOW)

ifeq ($(SANITIZE),)
bin/shadow-ps: $(BUILD)/server/ps_main.o $(LIBSERVER) $(LIBSHADOW)
bin/shadow-trainer: $(BUILD)/trainer/tr_main.o $(LIBTRAINER) $(LIBSHADOW)
bin/shadow-ctl: $(BUILD)/tools/ctl_main.o $(BUILD)/tools/ctl_launch.o $(BUILD)/tools/ctl_export.o \
    $(BUILD)/tools/ctl_plan.o $(BUILD)/tools/ctl_slurm.o $(LIBSERVER) $(LIBTRAINER) $(LIBSHADOW)
bin/shadow-datagen: $(BUILD)/tools/datagen_main.o $(LIBTRAINER) $(LIBSHADOW)
bin/shadow-score: $(BUILD)/score/score_main.o $(LIBSCORE) $(LIBTRAINER) $(LIBSHADOW)
bin/shadow-super: $(BUILD)/tools/super_main.o $(LIBSHADOW)
bin/%:
	@mkdir -p bin
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
else
$(BUILD)/bin/shadow-ps: $(BUILD)/server/ps_main.o $(LIBSERVER) $(LIBSHADOW)
$(BUILD)/bin/shadow-trainer: $(BUILD)/trainer/tr_main.o $(LIBTRAINER) $(LIBSHADOW)
$(BUILD)/bin/shadow-ctl: $(BUILD)/tools/ctl_main.o $(BUILD)/tools/ctl_launch.o \
    $(BUILD)/tools/ctl_export.o $(BUILD)/tools/ctl_plan.o $(BUILD)/tools/ctl_slurm.o \
    $(LIBSERVER) $(LIBTRAINER) $(LIBSHADOW)
$(BUILD)/bin/shadow-datagen: $(BUILD)/tools/datagen_main.o $(LIBTRAINER) $(LIBSHADOW)
$(BUILD)/bin/shadow-score: $(BUILD)/score/score_main.o $(LIBSCORE) $(LIBTRAINER) $(LIBSHADOW)
$(BUILD)/bin/shadow-super: $(BUILD)/tools/super_main.o $(LIBSHADOW)
$(BUILD)/bin/%:
	@mkdir -p $(BUILD)/bin
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
endif

$(BUILD)/test/%: $(BUILD)/test/unit/%.o $(LIBS_ALL)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(LIBS_ALL) $(LDLIBS)

# test_tr_sync injects allreduce failures through a link-time wrapper.
$(BUILD)/test/test_tr_sync: LDFLAGS += -Wl,--wrap=tr_allreduce_sum

$(BUILD)/test/ps_probe: $(BUILD)/test/tools/ps_probe.o $(LIBS_ALL)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(LIBS_ALL) $(LDLIBS)

$(BUILD)/bench/%: $(BUILD)/bench/%.o $(LIBS_ALL)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(LIBS_ALL) $(LDLIBS)

unit: $(UNIT_BINS) $(BINS) $(BUILD)/test/ps_probe

test: deps-test
	@scripts/run-tests.sh

check: deps
	@scripts/run-tests.sh --tag quick

run: deps
	@$(MAKE) --no-print-directory build
	@SS_CALLER_DIR="$(or $(PWD),$(CURDIR))" scripts/make-run.sh "$(TRAIN)" "$(EVAL)"

bench: deps
	@$(MAKE) --no-print-directory build $(BENCH_BINS)
	@bench/run-bench.sh $(BUILD)

# Python peers (bench/peers/): their packages only here, never for make test.
bench-quality: deps
	@scripts/install-deps.sh python3-torch python3-sklearn
	@$(MAKE) --no-print-directory build
	@bench/quality.sh

# Fuzzing (test/fuzz/, docs/fuzzing.md): libFuzzer harnesses built by clang with ASan and
# UBSan into build/fuzz/, from their own objects of common/, server/, tr_parse and
# tr_reader.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_BUILD   := build/fuzz
FUZZ_ALL     := $(patsubst test/fuzz/fuzz_%.c,%,$(wildcard test/fuzz/fuzz_*.c))
FUZZ_TARGETS ?= $(FUZZ_ALL)
FUZZ_PKGS    := libzmq libprotobuf-c yaml-0.1 libmicrohttpd
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined \
                -fno-omit-frame-pointer
FUZZ_CFLAGS  := -std=c11 -D_GNU_SOURCE -O1 -gline-tables-only -Wall -Wextra \
                -Wno-unused-parameter -fno-strict-aliasing -pthread -MMD -MP $(FUZZ_SAN) \
                -Icommon -Iserver -Itrainer -Itest/fuzz -I$(FUZZ_BUILD)/proto
FUZZ_PROTO   := $(FUZZ_BUILD)/proto/shadow.pb-c.c
FUZZ_OBJ     := $(FUZZ_BUILD)/proto/shadow.pb-c.o \
                $(patsubst %.c,$(FUZZ_BUILD)/%.o,$(COMMON_SRC) $(SERVER_SRC) trainer/tr_parse.c \
                    trainer/tr_reader.c trainer/tr_split.c trainer/tr_mfile.c \
                    trainer/tr_valid_cache.c)
FUZZ_BINS    := $(FUZZ_ALL:%=$(FUZZ_BUILD)/fuzz_%)

$(FUZZ_PROTO): proto/shadow.proto
	@mkdir -p $(dir $@)
	protoc-c --c_out=$(dir $@) --proto_path=proto proto/shadow.proto

$(FUZZ_BUILD)/proto/shadow.pb-c.o: $(FUZZ_PROTO)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link $(shell pkg-config --cflags \
	    $(FUZZ_PKGS)) -c $< -o $@

$(FUZZ_BUILD)/%.o: %.c | $(FUZZ_PROTO)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link $(shell pkg-config --cflags \
	    $(FUZZ_PKGS)) -c $< -o $@

$(FUZZ_BUILD)/libfuzzed.a: $(FUZZ_OBJ)
	@rm -f $@; ar rcs $@ $^

$(FUZZ_BUILD)/fuzz_%: $(FUZZ_BUILD)/test/fuzz/fuzz_%.o $(FUZZ_BUILD)/libfuzzed.a
	$(FUZZ_CC) $(FUZZ_SAN) -fsanitize=fuzzer -pthread -o $@ $^ \
	    $(shell pkg-config --libs $(FUZZ_PKGS)) -lm

.SECONDARY: $(FUZZ_ALL:%=$(FUZZ_BUILD)/test/fuzz/fuzz_%.o)

fuzz-build: $(FUZZ_BINS)

fuzz: deps-test
	@$(MAKE) --no-print-directory fuzz-build
	@test/fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# Rewrite the committed seed corpora from the harnesses' seed writers.
fuzz-seeds: fuzz-build
	@for t in $(FUZZ_ALL); do rm -rf test/fuzz/corpus/$$t/seed-*; mkdir -p test/fuzz/corpus/$$t; \
	    SS_FUZZ_SEEDS=test/fuzz/corpus/$$t $(FUZZ_BUILD)/fuzz_$$t || exit 1; done

install: all
	@$(MAKE) --no-print-directory lib
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/shadowsync/conf
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include
	install -m 755 bin/shadow-ps bin/shadow-ctl bin/shadow-trainer bin/shadow-datagen \
	    bin/shadow-score $(DESTDIR)$(PREFIX)/bin
	install -m 755 bin/shadow-super $(DESTDIR)$(PREFIX)/bin
	install -m 644 $(LIBSHADOWSCORE) $(DESTDIR)$(PREFIX)/lib
	install -m 755 $(LIBSHADOWSCORE_SO) $(DESTDIR)$(PREFIX)/lib
	install -m 644 score/ss_model.h $(DESTDIR)$(PREFIX)/include
	for f in $(wildcard scripts/shadow-launch scripts/shadow-slurm scripts/shadow-plot); do \
	    sed -e 's/^SS_VERSION_REV=""/SS_VERSION_REV="$(SS_VERSION) $(SS_GIT_REV)"/' "$$f" \
	        >"$(DESTDIR)$(PREFIX)/bin/$${f##*/}" && chmod 755 "$(DESTDIR)$(PREFIX)/bin/$${f##*/}"; \
	done
	install -m 644 conf/local.yaml $(DESTDIR)$(PREFIX)/share/shadowsync/conf

clean:
	rm -rf build bin

-include $(shell find build -name '*.d' 2>/dev/null)
