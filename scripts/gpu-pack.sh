# The build machine's half of scripts/gpu-check.sh, sourced by it (its header says what each
# command does): pack and pack-bench (a build -> what travels to the GPU machine), pack-llama
# (llama.cpp's CUDA binaries), slim and unslim (a tree small enough to travel with them).
# Uses gpu-check.sh's die and SRC.
pack() {  # BUILD [bench]
  local build=${1:-build} kind=${2:-full}
  build=$(cd "$build" && pwd) || die "no build folder $1"
  # The bench pack (steps 7-9 only: pith, its libraries, the inferlets and the native tier's
  # tools, ~13 MB) is staged apart and unpacks to the same gpu-pack folder, so it fits beside
  # llama.cpp's tarball where what travels to the GPU machine is capped.
  local stage=$build tarball=gpu-pack.tar.xz
  if [[ $kind == bench ]]; then
    stage=$build/gpu-pack-bench.d
    tarball=gpu-pack-bench.tar.xz
  elif [[ $kind != full ]]; then
    die "pack: unknown kind $kind (full or bench)"
  fi
  local pack=$stage/gpu-pack
  [[ -x $build/bin/pith ]] || die "$build/bin/pith is missing: build the project first"
  [[ -x $build/tests/gpu/cuda_backend_test ]] ||
    die "$build/tests/gpu/cuda_backend_test is missing: configure with CUDA (PITH_CUDA=ON) and build"
  rm -rf "$pack"
  mkdir -p "$pack/lib"
  local bins=(bin/pith)
  if [[ $kind == full ]]; then
    # ctest files and gtest's discovered-test lists, at their relative paths.
    (cd "$build" && find . \( -path ./gpu-pack -o -path ./gpu-pack-bench.d \) -prune -o \
        \( -name CTestTestfile.cmake -o -name '*_include.cmake' -o -name '*_tests.cmake' \) -print) |
      while read -r f; do mkdir -p "$pack/$(dirname "$f")"; cp "$build/$f" "$pack/$f"; done
    bins+=(tests/gpu/cuda_backend_test tests/gpu/cuda_hybrid_test tests/gpu/cuda_kernels_test
           tests/gpu/paged_attention_gpu_test tests/gpu/delta_rule_gpu_test
           tests/gpu/gemm_gpu_test tests/gpu/cuda_step_timing)
  fi
  for b in "${bins[@]}"; do
    mkdir -p "$pack/$(dirname "$b")"
    strip --strip-debug -o "$pack/$b" "$build/$b"
  done
  if [[ -d $build/inferlets ]]; then
    (cd "$build" && find inferlets -name '*.wasm') |
      while read -r f; do mkdir -p "$pack/$(dirname "$f")"; cp "$build/$f" "$pack/$f"; done
  fi
  # Shared libraries, minus glibc's, the C++ runtime (the GPU machine's are newer), the CUDA
  # driver and cuBLAS (installed there).
  local skip='^(libc|libm|libdl|librt|libpthread|libresolv|libgcc_s|libstdc\+\+|ld-linux[^ ]*|linux-vdso|libcuda|libcublas|libcublasLt)\.so'
  for b in "${bins[@]}"; do
    ldd "$build/$b" | awk '$3 ~ /^\// {print $1, $3}' | while read -r name path; do
      [[ $name =~ $skip ]] || cp -L "$path" "$pack/lib/$name"
    done
  done
  # The native tier's tools as the build found them (a server compiles each inferlet with wasm2c
  # and the C compiler): Debian's wasm2c and the wasm-rt.h its C includes, which the GPU
  # machine's image lacks; run() points pith at them (PITH_WASM2C, CPATH) where it has none.
  local wasm2c cc
  wasm2c=$(sed -n 's/^PITH_WASM2C:FILEPATH=//p' "$build/CMakeCache.txt")
  cc=$(sed -n 's/^CMAKE_C_COMPILER:FILEPATH=//p' "$build/CMakeCache.txt")
  if [[ -x $wasm2c && -f /usr/include/wasm-rt.h ]]; then
    mkdir -p "$pack/toolchain/bin" "$pack/toolchain/include"
    cp -L "$wasm2c" "$pack/toolchain/bin/wasm2c"
    cp /usr/include/wasm-rt.h "$pack/toolchain/include/"
  fi
  # The OpenAI SDK test's Python packages (e2e_openai_sdk: openai, pydantic, pytest and what they
  # need, at scripts/setup-python.sh's pins) as wheels for the GPU machine's python3, which has
  # neither openai nor pydantic and no network; run() installs them beside the pack. (Not the
  # router e2e_scale_out puts in front of replicas: 30 MB, and that test is the CPU's.)
  local venv
  venv=$(sed -n 's/^add_test(\[=\[e2e_openai_sdk\]=\] "\(.*\)\/bin\/python" .*/\1/p' \
           "$build/tests/CTestTestfile.cmake")
  if [[ $kind == bench ]]; then
    venv=  # the e2e suite is not in it
  elif [[ -n $venv ]]; then
    local pins
    mapfile -t pins < <(sdk_pins)
    python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
      --python-version "${GPU_PYTHON_VERSION:-3.12}" --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
      --platform manylinux1_x86_64 -d "$pack/wheels" "${pins[@]}" ||
      die "cannot download the SDK test's wheels (${pins[*]})"
  else
    echo "gpu-check: this build has no OpenAI SDK venv (scripts/setup-python.sh): e2e_openai_sdk" \
         "will fail on the GPU machine" >&2
  fi
  printf 'BUILD=%s\nSRC=%s\nVENV=%s\nWASM2C=%s\nCC=%s\n' "$build" "$SRC" "$venv" "$wasm2c" "$cc" \
    > "$pack/ORIGIN"
  # One xz stream with a 64 MiB dictionary: every test binary carries the same device code
  # (FlashInfer's instantiations), which a window that spans binaries stores once. Measured at
  # 121741f: 45.5 MB at -3 (4 MiB window), 21.0 MB at -9 single-threaded, 2.5 minutes here;
  # what a call carries is capped at 64 MiB.
  (cd "$stage" && XZ_OPT='-T1 -9' tar -cJf "$build/$tarball" gpu-pack)
  echo "gpu-check: packed $(du -sh "$pack" | cut -f1) into $pack," \
       "$(du -sh "$build/$tarball" | cut -f1) as $build/$tarball"
}

# ---------------------------------------------------------------------------------------------
# A smaller tree to travel: a detached commit without the test data the GPU steps need only a
# part of, that part in .gpu/data.tar.xz.
slim() {
  local set=${1:?usage: $0 slim checks|bench}
  cd "$SRC" || die "no $SRC"
  [[ -z $(git status --porcelain --untracked-files=no) ]] || die "slim: commit or stash first"
  [[ -e .gpu/branch ]] && die "slim: already slim (run $0 unslim first)"
  local drop keep=()
  case $set in
    checks) drop=tests/data/tokenizer; keep=(tests/data/tokenizer) ;;
    bench) drop=tests/data; keep=(tests/data/tokenizer/ggml-vocab-llama-bpe.gguf) ;;
    *) die "slim: checks or bench, not $set" ;;
  esac
  mkdir -p .gpu
  XZ_OPT='-T0 -9' tar -cJf .gpu/data.tar.xz "${keep[@]}" || die "slim: cannot pack ${keep[*]}"
  git symbolic-ref -q --short HEAD > .gpu/branch || git rev-parse HEAD > .gpu/branch
  git checkout -q --detach &&
    git rm -r -q "$drop" &&
    git -c user.name=gpu-check -c user.email=gpu-check@localhost commit -q \
      -m "gpu-check slim $set: $drop travels as .gpu/data.tar.xz" ||
    die "slim: could not make the slim commit (unslim returns to $(cat .gpu/branch))"
  echo "gpu-check: slim ($set): tracked tree $(git ls-files -z | du -cb --files0-from=- |
    tail -1 | cut -f1) bytes, .gpu/data.tar.xz $(stat -c %s .gpu/data.tar.xz) bytes;" \
    "$0 unslim returns to $(cat .gpu/branch)"
}

unslim() {
  cd "$SRC" || die "no $SRC"
  [[ -f .gpu/branch ]] || die "unslim: not slim"
  # What run unpacked here (untracked in the slim commit) comes back with the branch.
  tar -tJf .gpu/data.tar.xz | while read -r f; do [[ -f $f ]] && rm -f "$f"; done
  git checkout -q "$(cat .gpu/branch)" || die "unslim: cannot check out $(cat .gpu/branch)"
  rm -f .gpu/branch .gpu/data.tar.xz
  echo "gpu-check: back on $(git symbolic-ref -q --short HEAD || git rev-parse HEAD)"
}

# scripts/setup-python.sh's pins of the OpenAI SDK test's packages and everything they import.
sdk_pins() {
  local wanted=" openai pydantic pydantic_core pytest anyio httpx2 httpcore2 h11 idna truststore "
  wanted+="jiter annotated-types typing-inspection typing_extensions sniffio iniconfig packaging "
  wanted+="pluggy Pygments "
  sed -n '/^PINS=(/,/^)/p' "$SRC/scripts/setup-python.sh" | tr -s ' \t' '\n' |
    while read -r pin; do
      [[ $pin == *==* && $wanted == *" ${pin%%==*} "* ]] && echo "$pin"
    done
}

# llama.cpp's CUDA binaries for step 8: what llama-bench and llama-server load from their own
# folder (BUILD_SHARED_LIBS), symlinks resolved.
pack_llama() {
  local bin=${1:?usage: $0 pack-llama BIN [OUT.tar.xz]}
  bin=$(cd "$bin" && pwd) || die "no folder $1"
  local out
  out=$(realpath -m "${2:-$(dirname "$bin")/llama-cuda.tar.xz}")
  [[ -x $bin/llama-bench && -x $bin/llama-server ]] || die "$bin lacks llama-bench or llama-server"
  local tmp
  tmp=$(mktemp -d)
  mkdir "$tmp/llama-cuda"
  cp "$bin/llama-bench" "$bin/llama-server" "$tmp/llama-cuda/"
  # The libraries of the build folder the binaries need, and theirs (by their NEEDED names).
  local todo=(llama-bench llama-server) f lib
  while ((${#todo[@]})); do
    f=${todo[0]}
    todo=("${todo[@]:1}")
    for lib in $(readelf -d "$bin/$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
      if [[ -e $bin/$lib && ! -e $tmp/llama-cuda/$lib ]]; then
        cp -L "$bin/$lib" "$tmp/llama-cuda/$lib"
        todo+=("$lib")
      fi
    done
  done
  strip --strip-unneeded "$tmp/llama-cuda/"* 2> /dev/null
  (cd "$tmp" && XZ_OPT='-T0 -6' tar -cJf "$out" llama-cuda) || die "cannot write $out"
  rm -rf "$tmp"
  echo "gpu-check: packed llama.cpp's CUDA binaries into $out ($(du -sh "$out" | cut -f1))"
}
