#!/usr/bin/env bash
# Installs the Debian 12 system packages dualscope builds, tests and runs with.
# Idempotent: packages already present are not touched. Needs root (or sudo).
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

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "setup: need root or sudo to install packages" >&2; exit 1; }
    SUDO=sudo
  fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# shaderc: Debian's libshaderc.so leaves glslang symbols undefined and its
# libshaderc_combined.a holds only shaderc itself, so neither links. Merge the
# static archives into one real combined archive, in a folder with no .so;
# .cargo/config.toml points SHADERC_LIB_DIR here (see docs / GPU.md).
SHADERC_DIR=/opt/shaderc-combined
if [ ! -s "$SHADERC_DIR/libshaderc_combined.a" ]; then
  echo "setup: merging shaderc static archives into $SHADERC_DIR" >&2
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "setup: need root or sudo to write $SHADERC_DIR" >&2; exit 1; }
    SUDO=sudo
  fi
  L=/usr/lib/x86_64-linux-gnu
  $SUDO mkdir -p "$SHADERC_DIR"
  { echo "CREATE $SHADERC_DIR/libshaderc_combined.a"
    for a in shaderc_combined glslang MachineIndependent GenericCodeGen OSDependent OGLCompiler \
             HLSL SPIRV glslang-default-resource-limits SPIRV-Tools-opt SPIRV-Tools; do
      echo "ADDLIB $L/lib$a.a"; done; echo SAVE; echo END; } | $SUDO ar -M
fi

command -v cargo >/dev/null || { echo "setup: cargo is not on PATH (install Rust with rustup)" >&2; exit 1; }
echo "setup: system packages ready" >&2
