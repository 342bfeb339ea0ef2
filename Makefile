# SPDX-License-Identifier: GPL-2.0
# Thin entry points; the work is in scripts/. The kernel tree and all build products live in
# $(RSIW_CACHE) (default ~/.cache/rsiw), outside the clone.

.PHONY: all setup kernel modules image test demo bench fuzz host-test clean-cache

all: kernel image

setup:
	scripts/setup.sh

kernel modules:
	scripts/build-kernel.sh

image: kernel
	scripts/build-image.sh

test:
	scripts/test.sh

demo:
	scripts/demo.sh

host-test:
	cargo test --manifest-path host/Cargo.toml --workspace

fuzz:
	scripts/fuzz.sh

bench:
	scripts/bench.sh

clean-cache:
	. scripts/env.sh && rm -rf "$$RSIW_CACHE"
