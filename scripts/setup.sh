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

command -v cargo >/dev/null || { echo "setup: cargo is not on PATH (install Rust with rustup)" >&2; exit 1; }
echo "setup: system packages ready" >&2
