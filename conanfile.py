"""Conan 2 recipe for rungs: a header-only library packaged through its own CMake install.

The sources are exported from this repository (no download). Consumers get rungs' own
CMake package config (rungsConfig.cmake with the optional 'cuda' component) rather than
a generated one, so find_package(rungs) behaves the same with and without Conan.
"""
import os

from conan import ConanFile
from conan.tools.cmake import CMake, CMakeToolchain, cmake_layout
from conan.tools.files import copy, load
import re


class RungsConan(ConanFile):
    name = "rungs"
    description = ("Header-only C++20/CUDA policies for CUDA-graph bucket ladders, "
                   "graph capture and paged KV-cache blocks")
    license = "Apache-2.0"
    homepage = "https://github.com/rungs-dev/rungs"
    url = homepage
    topics = ("cuda", "llm", "inference", "cuda-graphs", "paged-attention", "header-only")
    package_type = "header-library"
    settings = "os", "arch", "compiler", "build_type"
    no_copy_source = True
    exports_sources = ("CMakeLists.txt", "LICENSE", "cmake/*", "include/*", "kernels/*", "cuda/*", "mpi/*")

    def set_version(self):
        text = load(self, os.path.join(self.recipe_folder, "CMakeLists.txt"))
        self.version = re.search(r"project\(rungs VERSION (\d+\.\d+\.\d+)", text).group(1)

    def layout(self):
        cmake_layout(self)

    def package_id(self):
        self.info.clear()

    def generate(self):
        tc = CMakeToolchain(self)
        tc.cache_variables.update({
            "RUNGS_BUILD_TESTS": False, "RUNGS_BUILD_EXAMPLES": False,
            "RUNGS_BUILD_BENCHMARKS": False, "RUNGS_BUILD_TOOLS": False,
            "RUNGS_INSTALL": True, "RUNGS_ENABLE_CUDA": "OFF",
        })
        tc.generate()

    def build(self):
        pass  # header-only: nothing to build

    def package(self):
        cmake = CMake(self)
        cmake.configure()
        cmake.install()
        copy(self, "LICENSE", self.source_folder, os.path.join(self.package_folder, "licenses"))

    def package_info(self):
        self.cpp_info.bindirs = []
        self.cpp_info.libdirs = []
        # Use rungs' own installed config (share/cmake/rungs), not a CMakeDeps-generated one.
        self.cpp_info.set_property("cmake_find_mode", "none")
        self.cpp_info.builddirs = [os.path.join("share", "cmake", "rungs")]
