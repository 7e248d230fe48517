# tokentap build.
#
#   make            tokentap and tokentap-sim (release, -O2)
#   make test       unit + integration tests, then again under ASan/UBSan
#   make demo       the proxy in front of the simulator, real traffic, report
#   make install    PREFIX=/usr/local DESTDIR=
#   make clean
#
# Missing build dependencies are installed by scripts/deps.sh (apt-get as
# root on Debian/Ubuntu; elsewhere it prints the command to run).  It runs
# before anything else: $(BUILD)/config.mk is an included makefile whose
# rule runs the script, and GNU make re-reads the whole Makefile after
# remaking an included file, so the pkg-config and /usr/share/llhttp checks
# below always see the installed packages, on the very first run too.

PREFIX  ?= /usr/local
DESTDIR ?=
BUILD   ?= build
CC      ?= cc
SAN     ?=

ifeq ($(SAN),1)
BUILD   := build-san
OPT     := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
LDSAN   := -fsanitize=address,undefined
else
OPT     ?= -O2 -g
LDSAN   :=
endif

WARN    := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes
STD     := -std=c11 -D_GNU_SOURCE
VERSION := $(shell cat VERSION 2>/dev/null || echo 0.0.0)

# every goal but `make clean` first makes sure the dependencies are there
ifneq ($(or $(filter-out clean,$(MAKECMDGOALS)),$(if $(MAKECMDGOALS),,all)),)
include $(BUILD)/config.mk
endif

# llhttp: a packaged release when the system has one, else Debian 12's
# node-llhttp sources compiled in strict mode (see SPEC section 2).
LLHTTP_PKG := $(shell pkg-config --exists libllhttp 2>/dev/null && echo yes)
ifeq ($(LLHTTP_PKG),yes)
LLHTTP_CFLAGS := $(shell pkg-config --cflags libllhttp)
LLHTTP_LIBS   := $(shell pkg-config --libs libllhttp)
LLHTTP_OBJ    :=
else
LLHTTP_SRCDIR := /usr/share/llhttp
LLHTTP_CFLAGS := -I/usr/share/include/llhttp -DLLHTTP_STRICT_MODE=1
LLHTTP_LIBS   :=
LLHTTP_OBJ    := $(BUILD)/llhttp/api.o $(BUILD)/llhttp/http.o $(BUILD)/llhttp/llhttp.o
endif

# libsystemd: sd_notify (readiness, watchdog, status) and sd_listen_fds
SYSTEMD_CFLAGS := $(shell pkg-config --cflags libsystemd 2>/dev/null)
SYSTEMD_LIBS   := $(shell pkg-config --libs libsystemd 2>/dev/null || echo -lsystemd)

CFLAGS_ALL := $(STD) $(OPT) $(WARN) -I. $(LLHTTP_CFLAGS) $(SYSTEMD_CFLAGS) -DTT_VERSION=\"$(VERSION)\" $(CFLAGS)
LIBS := -levent_openssl -levent -levent_pthreads -lssl -lcrypto -lcjson -linih -lpthread -lm \
        $(LLHTTP_LIBS) $(SYSTEMD_LIBS)

CORE_SRC := $(filter-out proxy/main.c,$(wildcard proxy/*.c metrics/*.c tls/*.c))
CORE_OBJ := $(CORE_SRC:%.c=$(BUILD)/%.o)
SIM_SRC  := $(wildcard sim/*.c)
SIM_OBJ  := $(SIM_SRC:%.c=$(BUILD)/%.o)
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)

BINS := $(BUILD)/tokentap $(BUILD)/tokentap-sim

.PHONY: all deps test check unit demo install clean bench fuzz fuzz-run
.DEFAULT_GOAL := all

all: $(BINS)

# the dependency check (see the top); `make deps` runs it on its own
deps: $(BUILD)/config.mk
$(BUILD)/config.mk: scripts/deps.sh
	@sh scripts/deps.sh
	@mkdir -p $(BUILD) && echo "# dependencies checked by scripts/deps.sh" >$@

$(BUILD)/libtt.a: $(CORE_OBJ) $(LLHTTP_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/tokentap: $(BUILD)/proxy/main.o $(BUILD)/libtt.a
	$(CC) $(LDSAN) -o $@ $^ $(LIBS) $(LDFLAGS)

$(BUILD)/tokentap-sim: $(SIM_OBJ) $(BUILD)/libtt.a
	$(CC) $(LDSAN) -o $@ $^ $(LIBS) $(LDFLAGS)

$(BUILD)/%.o: %.c $(BUILD)/config.mk
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -MMD -MP -c -o $@ $<

# llhttp's generated sources are not ours to warn about; compile them plainly.
$(BUILD)/llhttp/%.o: $(LLHTTP_SRCDIR)/%.c $(BUILD)/config.mk
	@mkdir -p $(dir $@)
	$(CC) $(STD) $(OPT) $(LLHTTP_CFLAGS) -c -o $@ $<

$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libtt.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -o $@ $< $(BUILD)/libtt.a $(LIBS) -lcmocka $(LDSAN) $(LDFLAGS)

unit: all $(UNIT_BIN)

# Full suite: release build, then the same suite under ASan/UBSan.
test: deps
	@sh tests/run.sh

# Release build only, no sanitizers (quicker while developing).
check: all $(UNIT_BIN)
	@TT_SAN=0 sh tests/run.sh

demo: all
	@sh scripts/demo.sh $(BUILD)

bench: all
	@sh bench/run.sh $(BUILD)

# libFuzzer harnesses (clang): make fuzz; make fuzz-run FUZZ_SECONDS=60
FUZZ_SRC := $(wildcard fuzz/fuzz_*.c)
FUZZ_BIN := $(FUZZ_SRC:fuzz/%.c=build-fuzz/%)
FUZZ_SECONDS ?= 30
FUZZ_CFLAGS := $(STD) -g -O1 -fsanitize=fuzzer,address,undefined -I. $(LLHTTP_CFLAGS) -DTT_VERSION=\"$(VERSION)\"

build-fuzz/llhttp.a: $(BUILD)/config.mk
	@mkdir -p build-fuzz/llhttp
	@if [ -n "$(LLHTTP_OBJ)" ]; then for f in api http llhttp; do \
	    clang $(STD) -O1 -g -fsanitize=address $(LLHTTP_CFLAGS) -c -o build-fuzz/llhttp/$$f.o $(LLHTTP_SRCDIR)/$$f.c || exit 1; done; \
	    ar rcs $@ build-fuzz/llhttp/*.o; else ar rcs $@; fi

build-fuzz/%: fuzz/%.c $(CORE_SRC) build-fuzz/llhttp.a
	clang $(FUZZ_CFLAGS) $(WARN) -o $@ $< $(CORE_SRC) build-fuzz/llhttp.a $(LIBS)

fuzz: $(FUZZ_BIN)

fuzz-run: fuzz
	@for f in $(FUZZ_BIN); do n=$$(basename $$f); mkdir -p build-fuzz/corpus-$$n; \
	    seeds=""; [ -d fuzz/corpus/$${n#fuzz_} ] && seeds=fuzz/corpus/$${n#fuzz_}; \
	    echo "== $$n ($(FUZZ_SECONDS) s)"; \
	    $$f -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 build-fuzz/corpus-$$n $$seeds 2>&1 | tail -n 3 || exit 1; done

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/doc/tokentap $(DESTDIR)$(PREFIX)/share/tokentap
	install -m 0755 $(BUILD)/tokentap $(BUILD)/tokentap-sim $(DESTDIR)$(PREFIX)/bin/
	install -m 0644 conf/tokentap.conf $(DESTDIR)$(PREFIX)/share/tokentap/tokentap.conf
	install -m 0644 systemd/tokentap.service systemd/tokentap.socket $(DESTDIR)$(PREFIX)/share/tokentap/
	install -d $(DESTDIR)$(PREFIX)/share/tokentap/prometheus
	install -m 0644 conf/prometheus/*.yml $(DESTDIR)$(PREFIX)/share/tokentap/prometheus/
	install -m 0644 README.md docs/*.md $(DESTDIR)$(PREFIX)/share/doc/tokentap/

clean:
	rm -rf build build-san build-fuzz

-include $(CORE_OBJ:.o=.d) $(SIM_OBJ:.o=.d) $(BUILD)/proxy/main.d
