# vcpkg overlay port for rungs: header-only, so only include/ and share/ are installed.
# Use from a checkout:  vcpkg install rungs --overlay-ports=<rungs>/ports
# The sources are this repository (no download); a registry port would use
# vcpkg_from_github with a release tag and SHA512 instead.
get_filename_component(SOURCE_PATH "${CMAKE_CURRENT_LIST_DIR}/../.." ABSOLUTE)

vcpkg_cmake_configure(
  SOURCE_PATH "${SOURCE_PATH}"
  OPTIONS -DRUNGS_BUILD_TESTS=OFF -DRUNGS_BUILD_EXAMPLES=OFF -DRUNGS_BUILD_BENCHMARKS=OFF -DRUNGS_BUILD_TOOLS=OFF -DRUNGS_INSTALL=ON -DRUNGS_ENABLE_CUDA=OFF -DRUNGS_INSTALL_CMAKEDIR=share/rungs
)
vcpkg_cmake_install()
vcpkg_cmake_config_fixup(CONFIG_PATH share/rungs)

file(REMOVE_RECURSE "${CURRENT_PACKAGES_DIR}/debug" "${CURRENT_PACKAGES_DIR}/lib" "${CURRENT_PACKAGES_DIR}/share/doc")
file(INSTALL "${CMAKE_CURRENT_LIST_DIR}/usage" DESTINATION "${CURRENT_PACKAGES_DIR}/share/${PORT}")
vcpkg_install_copyright(FILE_LIST "${SOURCE_PATH}/LICENSE")
set(VCPKG_POLICY_EMPTY_PACKAGE disabled)
