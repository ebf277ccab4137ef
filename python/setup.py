"""Builds the kiln package's C extension (kiln._kiln) against an installed libkiln.

libkiln is found with pkg-config (kiln.pc, installed by `cmake --install`):
  KILN_PREFIX=/opt/kiln  the install prefix to use (its lib*/pkgconfig is searched
                         first); without it, pkg-config's default search path
  KILN_LINK=static       (default) link libkiln.a into the extension, so that the
                         installed package needs no libkiln.so at run time (only
                         Debian's libprotobuf-c, libxxhash and libcjson)
  KILN_LINK=shared       link libkiln.so instead, with an rpath to the prefix's libdir
docs/PYTHON.md has the install commands.
"""
import glob
import os
import shlex
import subprocess
import sys

import numpy
from setuptools import Extension, setup


def pkg_config(*args):
    env = dict(os.environ)
    prefix = os.environ.get("KILN_PREFIX")
    if prefix:
        dirs = glob.glob(os.path.join(prefix, "lib*", "pkgconfig")) + glob.glob(
            os.path.join(prefix, "lib", "*", "pkgconfig"))
        env["PKG_CONFIG_PATH"] = os.pathsep.join(dirs + [env.get("PKG_CONFIG_PATH", "")])
    try:
        out = subprocess.run(["pkg-config", *args, "kiln"], env=env, check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit("kiln setup.py: pkg-config cannot find kiln (%s); install kiln "
                 "(cmake --install build --prefix P) and set KILN_PREFIX=P" % e)
    return shlex.split(out)


def kiln_build_args():
    libdir = pkg_config("--variable=libdir")[0]
    cflags = pkg_config("--cflags")
    include_dirs = [f[2:] for f in cflags if f.startswith("-I")]
    link = os.environ.get("KILN_LINK", "static")
    if link == "static":
        archive = os.path.join(libdir, "libkiln.a")
        if not os.path.exists(archive):
            sys.exit("kiln setup.py: %s is missing (KILN_LINK=shared links libkiln.so)" % archive)
        libs = [f for f in pkg_config("--static", "--libs") if f != "-lkiln"]
        # libkiln's symbols stay inside the extension
        return dict(include_dirs=include_dirs, extra_objects=[archive],
                    extra_link_args=libs + ["-Wl,--exclude-libs,ALL"])
    if link == "shared":
        return dict(include_dirs=include_dirs, library_dirs=[libdir], libraries=["kiln"],
                    runtime_library_dirs=[libdir])
    sys.exit("kiln setup.py: KILN_LINK is static or shared, got %r" % link)


ext = Extension(
    "kiln._kiln",
    sources=["kiln/_kiln.c"],
    extra_compile_args=["-std=c11", "-Wall", "-Wextra", "-Wno-missing-field-initializers"],
    **{k: v + ([numpy.get_include()] if k == "include_dirs" else [])
       for k, v in kiln_build_args().items()},
)

setup(
    name="kiln",
    version="0.1.0",
    description="kiln: ONNX models in, fast CPU inference out (Python binding)",
    packages=["kiln"],
    package_data={"kiln": ["py.typed", "*.pyi"]},
    ext_modules=[ext],
    python_requires=">=3.9",
    install_requires=["numpy"],
)
