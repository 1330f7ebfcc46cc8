#!/usr/bin/env python3
"""Unpacks tests/gpu/carry/prefix.tar.xz (made by prepare_carry.sh) into a
prefix on a GPU machine that lacks boost's Debian libraries, and makes it
usable from there:

    tests/gpu/carry_unpack.py TARBALL PREFIX

- absolute symlinks (Debian's /usr/... targets) are pointed into PREFIX;
- pkg-config files name PREFIX/usr instead of /usr (Criterion's lists only
  what configure reads: its tests are not built on the GPU machine);
- libraries that need a newer glibc than this machine has are reported, and
  where this machine has its own copy of such a library, the carried one is
  removed so the machine's is used (Debian 12's libevent needs glibc 2.36);
- general libraries this machine already has (curl, TLS, Kerberos, zlib,
  ...: what HDF5 and Open MPI load in turn) are taken from the machine, so
  the library path set for boost's programs (and for CMake, which loads
  some of them itself) holds only what the machine lacks; the libraries
  boost was compiled against (Open MPI, HDF5, OpenBLAS and its Fortran
  runtime, zstd, cJSON, inih, xxhash, hwloc, libevent, szip) stay;
- PREFIX/env.sh sets what boost's programs need at run time (library path,
  Open MPI's relocation and a single-process start without mpirun) and
  PREFIX/cmake.args the CMake hints that point the configure at PREFIX.
Exit 0, or 1 with a one-line reason. Python 3.6+, standard library only."""
import os
import re
import subprocess
import sys
import tarfile

ARCH = "x86_64-linux-gnu"


def glibc_version():
    try:
        v = os.confstr("CS_GNU_LIBC_VERSION").split()[1]
        return tuple(int(x) for x in v.split(".")[:2])
    except (ValueError, OSError, IndexError, AttributeError):
        return (0, 0)


def needed_glibc(path):
    """Highest GLIBC_x.y symbol version an ELF file asks for, from its bytes."""
    try:
        data = open(path, "rb").read()
    except OSError:
        return (0, 0)
    vs = [tuple(int(x) for x in m.group(1).split(b".")[:2]) for m in re.finditer(rb"GLIBC_(2\.[0-9]+)", data)]
    return max(vs) if vs else (0, 0)


def system_has(soname):
    try:
        out = subprocess.run(["/sbin/ldconfig", "-p"], stdout=subprocess.PIPE, universal_newlines=True).stdout
    except OSError:
        return False
    return any(line.strip().startswith(soname + " ") for line in out.splitlines())


# what boost and its Open MPI / HDF5 / OpenBLAS were built against: always the carried copy
KEEP = re.compile(r"^lib(mpi|open-pal|open-rte|mca_|ompitrace|hdf5|openblas|blas|lapack|gfortran|quadmath|zstd|cjson|"
                  r"inih|xxhash|criterion|pkgconf|hwloc|event|sz|aec|pmix|munge)")


def prefer_system(prefix):
    """Removes carried general libraries this machine provides itself."""
    for d in (f"{prefix}/usr/lib/{ARCH}", f"{prefix}/lib/{ARCH}"):
        if not os.path.isdir(d):
            continue
        for f in sorted(os.listdir(d)):
            p = os.path.join(d, f)
            if ".so." not in f or os.path.islink(p) or KEEP.match(f):
                continue
            soname = re.sub(r"(\.so\.[0-9]+).*", r"\1", f)
            if system_has(soname):
                os.unlink(p)
        for f in os.listdir(d):  # links left dangling
            p = os.path.join(d, f)
            if os.path.islink(p) and not os.path.exists(p):
                os.unlink(p)


def main():
    if len(sys.argv) != 3:
        print("usage: carry_unpack.py TARBALL PREFIX", file=sys.stderr)
        return 2
    tarball, prefix = sys.argv[1], os.path.abspath(sys.argv[2])
    if not os.path.isfile(tarball):
        print(f"carry_unpack: {tarball} is missing: run tests/gpu/prepare_carry.sh on a Debian machine and carry "
              "tests/gpu/carry", file=sys.stderr)
        return 1
    os.makedirs(prefix, exist_ok=True)
    try:
        with tarfile.open(tarball, "r:xz") as t:
            t.extractall(prefix)
    except tarfile.CompressionError:  # a Python without lzma: the tar program
        if subprocess.run(["tar", "-C", prefix, "-xJf", tarball]).returncode != 0:
            print(f"carry_unpack: cannot unpack {tarball} (no lzma in Python, tar -xJ failed)", file=sys.stderr)
            return 1
    usr = os.path.join(prefix, "usr")
    for d, _, files in os.walk(prefix):
        for f in files:
            p = os.path.join(d, f)
            if os.path.islink(p) and os.readlink(p).startswith("/"):
                target = prefix + os.readlink(p)
                os.unlink(p)
                os.symlink(os.path.relpath(target, d), p)
            elif f.endswith(".pc"):
                text = re.sub(r"(^|[=\s'\"])/usr(?=/|\s|$)", lambda m: m.group(1) + usr, open(p).read(), flags=re.M)
                if f == "criterion.pc":
                    text = "\n".join(l for l in text.splitlines() if not l.startswith(("Requires", "Libs.private")))
                open(p, "w").write(text + "\n")
    # libraries this machine's glibc cannot load
    have = glibc_version()
    for d, _, files in os.walk(prefix):
        for f in files:
            p = os.path.join(d, f)
            if ".so" not in f or os.path.islink(p):
                continue
            need = needed_glibc(p)
            if need <= have:
                continue
            soname = re.sub(r"(\.so\.[0-9]+).*", r"\1", f)
            if system_has(soname):
                os.unlink(p)
                for l in os.listdir(d):
                    lp = os.path.join(d, l)
                    if os.path.islink(lp) and not os.path.exists(lp):
                        os.unlink(lp)
                print(f"carry_unpack: {f} needs glibc {need[0]}.{need[1]} (this machine: {have[0]}.{have[1]}): "
                      f"using the machine's {soname}")
            else:
                print(f"carry_unpack: {f} needs glibc {need[0]}.{need[1]} and this machine has {have[0]}.{have[1]} "
                      f"without its own {soname}: install it (libevent 2.1) or use a newer image", file=sys.stderr)
                return 1
    prefer_system(prefix)
    lib = f"{usr}/lib/{ARCH}"
    libpath = ":".join([lib, f"{lib}/openblas-openmp", f"{lib}/openmpi/lib", f"{lib}/hdf5/openmpi",
                        f"{prefix}/lib/{ARCH}"])
    with open(os.path.join(prefix, "env.sh"), "w") as e:
        e.write(f"""# boost's run-time environment from the carried prefix (source it in a subshell)
export LD_LIBRARY_PATH="{libpath}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}"
export OPAL_PREFIX="{usr}"
export PATH="{usr}/bin:$PATH"
export OMPI_MCA_ess_singleton_isolated=1   # one process, no mpirun, no orted
export OMPI_MCA_plm=isolated   # mpirun starts its ranks on this node itself: no ssh/rsh agent here
export OMPI_MCA_mca_base_component_show_load_errors=0   # components for absent hardware
export OMPI_MCA_btl=self,vader
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
""")
    with open(os.path.join(prefix, "pkg-config"), "w") as w:  # for machines without one
        w.write(f'#!/bin/sh\nLD_LIBRARY_PATH="{lib}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}" exec "{usr}/bin/pkgconf" "$@"\n')
    os.chmod(os.path.join(prefix, "pkg-config"), 0o755)
    args = [
        f"-DMPI_SKIP_COMPILER_WRAPPER=ON", f"-DMPI_C_HEADER_DIR={lib}/openmpi/include",
        f"-DMPI_C_ADDITIONAL_INCLUDE_DIRS={lib}/openmpi/include/openmpi", "-DMPI_C_LIB_NAMES=mpi",
        f"-DMPI_mpi_LIBRARY={lib}/openmpi/lib/libmpi.so",
        "-DHDF5_C_COMPILER_EXECUTABLE=/bin/false", f"-DHDF5_C_INCLUDE_DIR={usr}/include/hdf5/openmpi",
        f"-DHDF5_hdf5_LIBRARY_RELEASE={lib}/hdf5/openmpi/libhdf5.so",
        f"-DBLAS_openblas_LIBRARY={lib}/openblas-openmp/libopenblas.so",
        f"-DLAPACK_openblas_LIBRARY={lib}/openblas-openmp/libopenblas.so",
        f"-DOPENBLAS_OPENMP_LIBRARY={lib}/openblas-openmp/libopenblas.so",
        f"-DCBLAS_INCLUDE_DIR={usr}/include/{ARCH}/openblas-openmp",
        f"-DCMAKE_PREFIX_PATH={usr}", f"-DCMAKE_LIBRARY_PATH={lib}/openblas-openmp;{lib}",
    ]
    with open(os.path.join(prefix, "cmake.args"), "w") as a:
        a.write("\n".join(args) + "\n")
    print(f"carry_unpack: {prefix} ready (glibc here {have[0]}.{have[1]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
